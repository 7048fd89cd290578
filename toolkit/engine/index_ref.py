"""The asset index passed to workers by reference: a saved folder and a stamp.

Hashing or pickling the index into every task is slow (Dask tokenises the whole
object) and broadcasting it does not last (the Active Memory Manager drops extra
copies, and later tasks get fresh ones with empty caches). So a task carries only
``IndexRef``; each worker process loads the folder once and keeps it, with its
caches, in :data:`_LOADED` until another stamp is asked for.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

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
        """Save ``index`` under ``folder`` (a new subfolder) for the workers to load."""
        stamp = uuid.uuid4().hex
        target = index.save(folder / f"index-{stamp}")
        # The process that published it already has it loaded.
        ref = cls(path=str(target), stamp=stamp)
        with _LOCK:
            _LOADED.clear()
            _LOADED[ref] = index
        return ref


# One index per process: the last one asked for (a worker serves one job at a time).
_LOADED: dict[IndexRef, AssetIndex] = {}
_LOCK = threading.Lock()


def loaded_index(ref: IndexRef) -> AssetIndex:
    """The index ``ref`` names, loaded once per process (threads of a worker share it)."""
    with _LOCK:
        index = _LOADED.get(ref)
        if index is None:
            index = AssetIndex.load(ref.path)
            _LOADED.clear()
            _LOADED[ref] = index
        return index
