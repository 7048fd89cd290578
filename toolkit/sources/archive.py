"""Safe extraction of a zip archive into a temporary directory.

Every entry is checked against the central directory before anything is written:
no absolute paths or ``..`` (zip-slip), a bounded entry count, total size and
compression ratio (zip bombs). Extraction then counts the bytes it really writes,
because the sizes in a zip's headers can lie.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from toolkit.errors import SourceError
from toolkit.scratch import scratch_folder
from toolkit.sources.report import MIB, ReadLimits

_CHUNK = 1 * MIB
# Entries of a zip extracted at once (a Shapefile's .shp and .dbf are the two big ones).
EXTRACT_THREADS = 2
_DRIVE = re.compile(r"^[A-Za-z]:")
# Ratios are only meaningful for entries big enough to matter; tiny files compress oddly.
_RATIO_FLOOR_BYTES = 1 * MIB


def _is_unsafe(name: str) -> bool:
    normal = name.replace("\\", "/")
    return (
        normal.startswith("/")
        or bool(_DRIVE.match(normal))
        or ".." in PurePosixPath(normal).parts
        or "\x00" in normal
    )


def _is_clutter(name: str) -> bool:
    # macOS resource forks travel inside zips made on a Mac; they are not data.
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return bool(parts) and (parts[0] == "__MACOSX" or parts[-1].startswith("._"))


def _checked_members(
    archive: zipfile.ZipFile, path: Path, suffixes: frozenset[str], limits: ReadLimits
) -> list[zipfile.ZipInfo]:
    infos = archive.infolist()
    if len(infos) > limits.max_zip_entries:
        raise SourceError(
            f"{path}: the zip holds {len(infos)} entries, more than the limit of "
            f"{limits.max_zip_entries}"
        )
    unsafe = [info.filename for info in infos if _is_unsafe(info.filename)]
    if unsafe:
        raise SourceError(
            f"{path}: refusing a zip with entries outside its own folder (absolute paths or "
            f"'..'): {', '.join(unsafe[:5])}; nothing was extracted"
        )
    wanted = [
        info
        for info in infos
        if not info.is_dir()
        and not _is_clutter(info.filename)
        and PurePosixPath(info.filename.replace("\\", "/")).suffix.lower() in suffixes
    ]
    total = sum(info.file_size for info in wanted)
    if total > limits.max_uncompressed_bytes:
        raise SourceError(
            f"{path}: the zip would expand to {total} bytes, more than the limit of "
            f"{limits.max_uncompressed_bytes}; nothing was extracted"
        )
    for info in wanted:
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > _RATIO_FLOOR_BYTES and ratio > limits.max_compression_ratio:
            raise SourceError(
                f"{path}: entry {info.filename} is compressed {ratio:.0f}:1, more than the "
                f"limit of {limits.max_compression_ratio:.0f}:1 (a zip bomb?); nothing was "
                "extracted"
            )
    return wanted


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, root: Path, path: Path) -> None:
    """Write one entry under ``root``, stopping where it outgrows its declared size (the
    declared sizes together are within the limit, so the entries together are too)."""
    relative = PurePosixPath(info.filename.replace("\\", "/"))
    target = root.joinpath(*relative.parts).resolve()
    if not target.is_relative_to(root):  # belt and braces after _is_unsafe
        raise SourceError(f"{path}: entry {info.filename} would be written outside the folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with archive.open(info) as source, target.open("wb") as sink:
        while chunk := source.read(_CHUNK):
            written += len(chunk)
            if written > info.file_size:
                raise SourceError(
                    f"{path}: entry {info.filename} expands beyond its declared size or the "
                    "size limit (a zip bomb?)"
                )
            sink.write(chunk)


@contextmanager
def extracted_zip(path: Path, suffixes: frozenset[str], limits: ReadLimits) -> Iterator[Path]:
    """Extract the entries of ``path`` whose suffix is in ``suffixes`` into a temporary folder.

    Yields the folder; it and everything in it is removed on exit, error or not.
    """
    if not zipfile.is_zipfile(path):
        raise SourceError(f"{path}: not a zip archive, although its name says so")
    with scratch_folder("toolkit-zip-") as tmp:
        root = Path(tmp).resolve()
        extract_zip(path, suffixes, limits, root)
        yield root


def extract_zip(path: Path, suffixes: frozenset[str], limits: ReadLimits, root: Path) -> None:
    """Extract the entries of ``path`` whose suffix is in ``suffixes`` into ``root`` (an
    existing folder the caller removes), with the checks :func:`extracted_zip` makes."""
    if not zipfile.is_zipfile(path):
        raise SourceError(f"{path}: not a zip archive, although its name says so")
    root = root.resolve()
    try:
        with zipfile.ZipFile(path) as archive:
            members = _checked_members(archive, path, suffixes, limits)

        def extract(info: zipfile.ZipInfo) -> None:
            # An archive of its own per thread: a ZipFile is not shared between threads.
            with zipfile.ZipFile(path) as archive:
                _extract(archive, info, root, path)

        # The entries are inflated side by side, largest first (zlib lets go of the GIL):
        # a million parcels' .shp and .dbf, 138 and 145 MB, in 0.4 s instead of 0.7-1.8.
        # An archive naming a file twice is extracted in its order, the last one kept, as
        # one after another would: never two threads writing one file.
        names = [info.filename.replace("\\", "/").casefold() for info in members]
        threads = EXTRACT_THREADS if len(set(names)) == len(names) else 1
        largest_first = sorted(members, key=lambda info: -info.file_size)
        with ThreadPoolExecutor(threads, thread_name_prefix="toolkit-unzip") as pool:
            list(pool.map(extract, largest_first if threads > 1 else members))
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        NotImplementedError,
        OSError,
        zlib.error,  # a corrupt deflate stream
        EOFError,  # an entry cut short
    ) as exc:
        raise SourceError(f"{path}: cannot extract the zip: {exc}") from exc
    except RuntimeError as exc:  # zipfile raises it for encrypted entries
        raise SourceError(f"{path}: cannot extract the zip: {exc}") from exc
