"""The asset index passed to workers by reference: a saved folder and a stamp.

Hashing or pickling the index into every task is slow (Dask tokenises the whole
object) and broadcasting it does not last (the Active Memory Manager drops extra
copies, and later tasks get fresh ones with empty caches). So a task carries only
``IndexRef``; each worker process loads the folder once and keeps it, with its
caches, in :data:`_LOADED` until another stamp is asked for.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.matching import AssetIndex


@dataclass(frozen=True)
class IndexRef:
    """Where a saved index is (a folder every worker can read) and which version."""

    path: str
    stamp: str

    def __dask_tokenize__(self) -> tuple[str, str, str]:
        # Cheap and exact: the folder and its stamp name the index.
        return ("toolkit.IndexRef", self.path, self.stamp)

    @classmethod
    def publish(cls, index: AssetIndex, folder: Path) -> IndexRef:
        """Save ``index`` under ``folder`` for the workers to load, stamped by its content
        (so a worker that loaded the same assets for an earlier command keeps them)."""
        stamp = fingerprint(index)
        target = folder / f"index-{stamp}"
        if not (target / "index.json").exists():
            index.save(target)
        # The process that published it already has it loaded.
        with _LOCK:
            _LOADED.clear()
            _LOADED[stamp] = index
        return cls(path=str(target), stamp=stamp)


def fingerprint(index: AssetIndex) -> str:
    """A digest of the assets an index was built from: their fields and codes (the
    ``assets`` and ``extra`` tables) and their geometry as WKB; the match keys and the
    code table are derived from these, so they are not digested again. Nothing is built
    for it: the geometry is digested as the index keeps it (an index loaded from the site
    file keeps WKB), not decoded and encoded again, and the code table is not made. That
    cost the client 4 to 6 s of CPU per job at a million assets, for structures only the
    workers use. Their Arrow form is digested as bytes: pandas' hash of arrow-backed text
    took 4 s at 200,000 (20 s at a million)."""
    digest = hashlib.blake2b(digest_size=16)
    for table in (index.assets, index.extra):
        _digest_table(digest, table)
    _digest_table(digest, pa.table({"geometry": index.wkb()}))
    return digest.hexdigest()


def _digest_table(digest: Any, table: pd.DataFrame | pa.Table) -> None:
    """Add ``table``'s columns and values to ``digest`` (the Arrow IPC stream of them)."""
    try:
        arrow = (
            table
            if isinstance(table, pa.Table)
            else pa.Table.from_pandas(table, preserve_index=False)
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # A column of mixed kinds Arrow cannot type: pandas' (slower) hash of it.
        assert isinstance(table, pd.DataFrame)
        digest.update(",".join(map(str, table.columns)).encode())
        digest.update(pd.util.hash_pandas_object(table, index=False).to_numpy().tobytes())
        return
    # Equal contents, equal bytes: one chunk per column, one string type, no pandas
    # metadata (an index loaded from the site file and one just built differ in those).
    arrow = pa.table(
        [
            pc.cast(column, pa.large_string()) if pa.types.is_string(column.type) else column
            for column in arrow.combine_chunks().columns
        ],
        names=[str(name) for name in arrow.column_names],
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, arrow.schema) as writer:
        writer.write_table(arrow)
    digest.update(memoryview(sink.getvalue()))


# One index per process, by stamp: the last one asked for (a worker serves one job at a
# time; the folder may differ between commands, the stamp names the content).
_LOADED: dict[str, AssetIndex] = {}
_LOCK = threading.Lock()


def loaded_index(ref: IndexRef) -> AssetIndex:
    """The index ``ref`` names, loaded once per process (threads of a worker share it)."""
    with _LOCK:
        index = _LOADED.get(ref.stamp)
        if index is None:
            index = AssetIndex.load(ref.path)
            _LOADED.clear()
            _LOADED[ref.stamp] = index
        return index
