"""Files on the command line: ``-`` for stdin and stdout, and how a source is read.

``-`` as an input is stdin, spooled to a temporary file (readers need to seek, and a
zip or workbook cannot be read as a stream); as an output it is stdout. ``--format``
says what a file is when its name does not; ``--encoding``, ``--delimiter`` and
``--quotechar`` replace the CSV reader's detection.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import click

from toolkit.names import DATA_TYPES
from toolkit.scratch import scratch_folder

F = TypeVar("F", bound=Callable[..., Any])

STDIO = "-"
# What stdin is read as when --format does not say (as csvkit does).
STDIN_FORMAT = "csv"
STDIN_NAME = "stdin"
# Stdin is spooled at most this much past the readers' own file limit, which then
# refuses it with its usual message (the limit is ReadLimits.max_file_bytes).
_SPOOL_CHUNK = 1 << 20


def is_stdio(path: Path | str | None) -> bool:
    """Whether ``path`` is ``-``: stdin as an input, stdout as an output."""
    return path is not None and str(path) == STDIO


def _check_delimiter(_ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from toolkit.errors import OptionError
    from toolkit.sources.csv import csv_dialect

    if value is None:
        return None
    try:
        if param.name == "delimiter":
            csv_dialect(delimiter=value)
        else:
            csv_dialect(quotechar=value)
    except OptionError as exc:
        # Click names the option itself: the message goes on from the value.
        raise click.BadParameter(str(exc).removeprefix(f"--{param.name} ")) from None
    return value


def source_options(func: F) -> F:
    """``--format``, ``--encoding``, ``--delimiter`` and ``--quotechar``: what a file is and
    how its text is split, when the name and detection are not to be trusted."""
    options = [
        click.option(
            "--format",
            "file_format",
            type=click.Choice(DATA_TYPES),
            help="What the file is, whatever its name says (zip: a zipped Shapefile); "
            f"stdin (-) is read as {STDIN_FORMAT} unless given.",
        ),
        click.option("--encoding", help="Text encoding of the file, when detection gets it wrong."),
        click.option(
            "--delimiter",
            callback=_check_delimiter,
            help="CSV: the delimiter, instead of detecting it: one character, or tab, "
            "comma, semicolon, pipe, space.",
        ),
        click.option(
            "--quotechar",
            callback=_check_delimiter,
            help='CSV: the quote character (default "), or none when quotes are plain text.',
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@contextmanager
def input_file(path: Path, file_format: str | None) -> Iterator[tuple[Path, str | None]]:
    """``path`` as it is, or for ``-`` stdin spooled to a temporary file named for its
    format; yields the file and the name messages give it (None: its own)."""
    if not is_stdio(path):
        yield path, None
        return
    stdin = sys.stdin.buffer
    if stdin.isatty():
        raise click.UsageError("- reads the file from stdin, but nothing is piped in")
    from toolkit.sources import ReadLimits

    limit = ReadLimits().max_file_bytes
    with scratch_folder("toolkit-stdin-") as folder:
        spool = Path(folder) / f"{STDIN_NAME}.{file_format or STDIN_FORMAT}"
        with spool.open("wb") as out:
            copied = 0
            while copied <= limit and (block := stdin.read(_SPOOL_CHUNK)):
                out.write(block)
                copied += len(block)
        yield spool, STDIN_NAME


@contextmanager
def output_file(path: Path) -> Iterator[BinaryIO]:
    """A binary stream to write a command's file to: stdout for ``-``; otherwise
    ``path``, written beside it first and moved into place only when complete, so a
    failure never leaves half a file."""
    if is_stdio(path):
        sys.stdout.flush()  # what was printed as text goes first
        stdout = sys.stdout.buffer
        yield stdout
        stdout.flush()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("wb") as out:
            yield out
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def refuse_binary_on_a_terminal(what: str) -> None:
    """Binary output (an XLSX) is never written to a terminal, as curl refuses it."""
    if sys.stdout.isatty():
        raise click.UsageError(f"{what} is binary; write it with -o FILE or redirect stdout")
