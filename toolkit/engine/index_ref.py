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

import pandas as pd
import shapely

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
    """A digest of the assets an index was built from: their fields, codes and geometry
    (the match keys are derived from these). Seconds at a million assets, against the
    tens of seconds a worker takes to load and warm an index."""
    digest = hashlib.blake2b(digest_size=16)
    for table in (index.assets, index.extra, index.codes):
        digest.update(pd.util.hash_pandas_object(table, index=False).to_numpy().tobytes())
    wkb = shapely.to_wkb(index.geometry)
    digest.update(pd.util.hash_array(wkb.astype(object)).tobytes())
    return digest.hexdigest()


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
