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
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

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

    def _spill(self) -> None:
        if self._held is None:
            return
        if self.folder is None:
            raise RuntimeError("an import read in several parts needs a folder to stage them")
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"prepared-{len(self._paths) - 1:05d}.pickle"
        with path.open("wb") as handle:
            pickle.dump(self._held, handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._paths[-1] = path
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
