"""What an import read in parts keeps of each part until its one write: on disk.

The prepared payload of a part (its rows' values, JSON and record columns) is what the
write needs and what takes the memory; it is pickled to the job's folder as the part is
done, except the last part, kept in memory (so a file of one part never touches the
disk). The write then takes the parts back one at a time, in row order: memory follows
the part, not the file. Pickle, not Parquet: the payload's columns keep their exact
dtypes (nullable integers, dates, lists of choices) with no conversion either way.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd

from toolkit.allocator import trim_heap

T = TypeVar("T")


class StagedParts(Generic[T]):
    """Consecutive parts of an import's kept rows, each held on disk or (the last one)
    in memory; positions are of the kept rows of every part together."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._paths: list[Path | None] = []
        self._held: T | None = None
        self.starts: list[int] = []
        self.rows = 0

    def add(self, part: T, rows: int, *, keep: bool = True) -> None:
        """Keep ``part`` (of ``rows`` kept rows) after the parts kept so far: in memory
        until the next part comes, or (not ``keep``: more parts will come) on disk now."""
        self._spill()
        self._held = part
        self._paths.append(None)
        self.starts.append(self.rows)
        self.rows += rows
        if not keep:
            self._spill()

    def add_pickled(self, data: bytes, rows: int) -> None:
        """Keep a part that was pickled elsewhere (by a worker, as :meth:`add` pickles
        one) after the parts kept so far: its bytes go to disk as they are, never
        unpickled here until the write loads the part."""
        self._spill()
        self._paths.append(None)
        self.starts.append(self.rows)
        self.rows += rows
        with self._next_path().open("wb") as handle:
            handle.write(data)

    def _next_path(self) -> Path:
        """The file of the part added last, which it is now given."""
        if self.folder is None:
            raise RuntimeError("an import read in several parts needs a folder to stage them")
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"prepared-{len(self._paths) - 1:05d}.pickle"
        self._paths[-1] = path
        return path

    def _spill(self) -> None:
        if self._held is None:
            return
        with self._next_path().open("wb") as handle:
            pickle.dump(self._held, handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._held = None

    def __len__(self) -> int:
        return len(self._paths)

    def load(self, i: int) -> T:
        """Part ``i``."""
        path = self._paths[i]
        if path is None:
            assert self._held is not None
            return self._held
        with path.open("rb") as handle:
            part: T = pickle.load(handle)  # written by this process, for this job
        return part

    def only(self) -> T:
        """The one part of an import that is not read in parts."""
        if len(self) != 1:
            raise RuntimeError(f"expected one part, found {len(self)}")
        return self.load(0)

    def select(
        self, positions: np.ndarray, *aligned: np.ndarray
    ) -> Iterator[tuple[T, np.ndarray, tuple[np.ndarray, ...]]]:
        """For each part holding some of ``positions`` (ascending): the part, those
        positions within it, and the matching entries of each of ``aligned``."""
        ends = [*self.starts[1:], self.rows]
        for i, (start, end) in enumerate(zip(self.starts, ends, strict=True)):
            lo, hi = np.searchsorted(positions, [start, end])
            if hi > lo:
                yield (
                    self.load(i),
                    positions[lo:hi] - start,
                    tuple(a[lo:hi] for a in aligned),
                )


@dataclass(frozen=True)
class PackedPart:
    """A part's kept rows as a worker leaves them for the client: the payload cut to
    those rows and pickled there (the bytes :class:`StagedParts` stages), with what the
    plan needs of it, the kept rows' numbers and keys. The client stages the bytes as
    they are: it no longer unpickles a payload, cuts it and pickles it again."""

    data: bytes
    rows: np.ndarray
    # The matching column of the kept rows, compact (None: the rule has no such column).
    keys: Any


class RowNumbers:
    """Ascending row numbers held compactly: a part's rows are its records' numbers, a run
    with a few gaps (rows the reader or a rule set aside), so the run's ends and its gaps
    are kept, not 8 bytes a row; any other sequence is kept as it is."""

    def __init__(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        self._array: np.ndarray | None = None
        self.start = int(rows[0]) if len(rows) else 0
        self.stop = int(rows[-1]) + 1 if len(rows) else 0
        self.size = len(rows)
        self._gaps = np.empty(0, dtype=np.int64)
        if len(rows) > 1 and not bool((rows[1:] > rows[:-1]).all()):
            self._array = rows.copy()
        elif self.stop - self.start != self.size:
            run = np.arange(self.start, self.stop, dtype=np.int64)
            self._gaps = run[~np.isin(run, rows, assume_unique=True)]

    def array(self) -> np.ndarray:
        """The row numbers."""
        if self._array is not None:
            return self._array
        run = np.arange(self.start, self.stop, dtype=np.int64)
        if not len(self._gaps):
            return run
        return run[~np.isin(run, self._gaps, assume_unique=True)]


class StagedFrames:
    """Frames of an import that grow with its file (rows set aside, and why), on disk from
    the part that made them until they are all wanted together; empty ones are dropped."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        self._paths: list[Path] = []

    def add(self, frame: pd.DataFrame) -> None:
        if frame.empty:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.name}-{len(self._paths):05d}.pickle"
        with path.open("wb") as handle:
            pickle.dump(frame, handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._paths.append(path)

    def frames(self) -> list[pd.DataFrame]:
        """Every non-empty frame added, in order."""
        frames = []
        for path in self._paths:
            with path.open("rb") as handle:
                frames.append(pickle.load(handle))  # written by this process, for this job
        return frames


def release_unused() -> None:
    """Hand the memory a finished part freed back to the system: Arrow's pool (mimalloc)
    and glibc's heap both keep freed pages for reuse."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim_heap()
