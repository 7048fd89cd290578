"""Which bounding boxes hold which points, on whole columns, through a uniform grid.

Mode ``geo`` first finds, for each query point, the assets whose bounding box holds it,
then tests those few geometries exactly. A spatial tree of a million parcels takes about a
second to build for an import that places tens of thousands of points; binning the boxes
into one grid of cells answers the same question with searches over arrays, from the boxes
saved with the index, without making a geometry. The grid depends on the boxes only, so it
is built once per index (``BoxGrid.of``) and kept with it: every part of an import and
every lookup then only bins its points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toolkit.matching.sorted_search import equal_ranges, stable_order

# A box spanning more cells than this is compared with every point directly.
_MAX_CELLS = 16
# At most this many cells along an axis (the keys stay well inside int64).
_MAX_AXIS = 1 << 20
# Direct comparisons of large boxes with points, beyond which the caller uses its tree.
_MAX_DIRECT = 50_000_000
_CHUNK = 10_000_000


@dataclass(frozen=True, eq=False)
class BoxGrid:
    """The boxes of ``bounds`` (xmin, ymin, xmax, ymax; a NaN box holds nothing) binned
    into square cells: each small box listed once per cell it spans, sorted by cell; the
    few large ones kept aside to be compared with every point."""

    bounds: np.ndarray  # as given (not copied)
    x0: float  # the grid's corner and far edges: the extent of the boxes
    y0: float
    x1: float
    y1: float
    size: float  # a cell's side
    columns: int  # cells per column: a cell's key is ix * columns + iy
    cells: np.ndarray  # int64, sorted: the cells the small boxes span
    cell_box: np.ndarray  # int64: the box (row of ``bounds``) of each entry of ``cells``
    large: np.ndarray  # int64: the rows of the large boxes

    @classmethod
    def of(cls, bounds: np.ndarray) -> BoxGrid:
        """The grid of ``bounds`` (an (n, 4) float array)."""
        empty = np.empty(0, dtype=np.int64)
        real = np.flatnonzero(~np.isnan(bounds).any(axis=1))
        if not len(real):
            return cls(bounds, 0.0, 0.0, -1.0, -1.0, 1.0, 1, empty, empty, empty)
        xmin, ymin, xmax, ymax = (bounds[real, i] for i in range(4))
        x0, y0, x1, y1 = (float(v) for v in (xmin.min(), ymin.min(), xmax.max(), ymax.max()))
        extent = max(x1 - x0, y1 - y0)
        # Cells about the size of most boxes, so that most span one or two along each axis.
        size = float(np.quantile(np.maximum(xmax - xmin, ymax - ymin), 0.9))
        size = max(size, extent / _MAX_AXIS, np.finfo(np.float64).tiny)
        columns = int(extent / size) + 2
        ix0, iy0 = _cell(xmin, x0, size), _cell(ymin, y0, size)
        nx, ny = _cell(xmax, x0, size) - ix0 + 1, _cell(ymax, y0, size) - iy0 + 1
        spans = nx * ny
        large = spans > _MAX_CELLS
        # Each small box once per cell it spans.
        small = np.flatnonzero(~large)
        spans = spans[small]
        box = np.repeat(small, spans)
        step = np.arange(len(box)) - np.repeat(np.cumsum(spans) - spans, spans)
        box_cell = (ix0[box] + step // ny[box]) * columns + iy0[box] + step % ny[box]
        order, cells = stable_order(box_cell)
        return cls(
            bounds,
            x0,
            y0,
            x1,
            y1,
            size,
            columns,
            cells,
            real[box[order]],
            real[large],
        )

    def holding(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Every (point, box) pair where box ``bounds[j]`` holds point ``(x[i], y[i])``,
        boundary included, as a bounding-box query of a spatial tree answers; sorted by
        point, then box. None when too many boxes are too large for the grid (the caller
        then asks its tree)."""
        empty = np.empty(0, dtype=np.int64)
        # Only a point within the boxes' extent can be in one (POINT (NaN NaN) is nowhere);
        # the others would fall outside the grid's cells.
        kept = np.flatnonzero((x >= self.x0) & (x <= self.x1) & (y >= self.y0) & (y <= self.y1))
        if not len(kept):
            return empty, empty
        if len(self.large) * len(kept) > _MAX_DIRECT:
            return None
        x, y = x[kept], y[kept]
        point_cell = _cell(x, self.x0, self.size) * self.columns + _cell(y, self.y0, self.size)
        first, count = equal_ranges(self.cells, point_cell)
        pair_point = np.repeat(np.arange(len(x), dtype=np.int64), count)
        offset = np.arange(len(pair_point)) - np.repeat(np.cumsum(count) - count, count)
        points, boxes = [pair_point], [self.cell_box[np.repeat(first, count) + offset]]

        # The few large boxes against every point.
        bounds = self.bounds
        per_chunk = max(1, _CHUNK // len(x))
        for start in range(0, len(self.large), per_chunk):
            chosen = self.large[start : start + per_chunk]
            hit_box, hit_point = np.nonzero(
                (x[None, :] >= bounds[chosen, 0, None])
                & (x[None, :] <= bounds[chosen, 2, None])
                & (y[None, :] >= bounds[chosen, 1, None])
                & (y[None, :] <= bounds[chosen, 3, None])
            )
            points.append(hit_point.astype(np.int64))
            boxes.append(chosen[hit_box])

        point, box = np.concatenate(points), np.concatenate(boxes)
        inside = (
            (x[point] >= bounds[box, 0])
            & (x[point] <= bounds[box, 2])
            & (y[point] >= bounds[box, 1])
            & (y[point] <= bounds[box, 3])
        )
        point, box = point[inside], box[inside]
        by_point = np.lexsort((box, point))
        return kept[point[by_point]], box[by_point]


def boxes_holding(
    bounds: np.ndarray, x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """``BoxGrid.of(bounds).holding(x, y)``: for a single question (an index keeps its
    grid instead)."""
    return BoxGrid.of(bounds).holding(x, y)


def _cell(v: np.ndarray, origin: float, size: float) -> np.ndarray:
    index: np.ndarray = np.floor((v - origin) / size).astype(np.int64)
    return index
