"""Which bounding boxes hold which points, on whole columns, through a uniform grid.

Mode ``geo`` first finds, for each query point, the assets whose bounding box holds it,
then tests those few geometries exactly. A spatial tree of a million parcels takes about a
second to build for an import that places tens of thousands of points; binning the boxes
and the points into one grid of cells answers the same question with sorts and searches
over arrays, from the boxes saved with the index, without making a geometry.
"""

from __future__ import annotations

import numpy as np

# A box spanning more cells than this is compared with every point directly.
_MAX_CELLS = 16
# At most this many cells along an axis (the keys stay well inside int64).
_MAX_AXIS = 1 << 20
# Direct comparisons of large boxes with points, beyond which the caller uses its tree.
_MAX_DIRECT = 50_000_000
_CHUNK = 10_000_000


def boxes_holding(
    bounds: np.ndarray, x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Every (point, box) pair where box ``bounds[j]`` (xmin, ymin, xmax, ymax; a NaN box
    holds nothing) holds point ``(x[i], y[i])``, boundary included, as a bounding-box
    query of a spatial tree answers; sorted by point, then box. None when too many boxes
    are too large for the grid (the caller then asks its tree)."""
    empty = np.empty(0, dtype=np.int64)
    finite = np.isfinite(x) & np.isfinite(y)
    if not finite.all():
        # POINT (NaN NaN) is not empty but is nowhere: it holds in no box, and must not
        # set the grid's origin or extent.
        kept = np.flatnonzero(finite)
        found = boxes_holding(bounds, x[kept], y[kept])
        return None if found is None else (kept[found[0]], found[1])
    real = np.flatnonzero(~np.isnan(bounds).any(axis=1))
    if not len(real) or not len(x):
        return empty, empty
    xmin, ymin, xmax, ymax = (bounds[real, i] for i in range(4))
    x0, y0 = min(xmin.min(), x.min()), min(ymin.min(), y.min())
    extent = max(max(xmax.max(), x.max()) - x0, max(ymax.max(), y.max()) - y0)
    # Cells about the size of most boxes, so that most span one or two along each axis.
    size = float(np.quantile(np.maximum(xmax - xmin, ymax - ymin), 0.9))
    size = max(size, extent / _MAX_AXIS, np.finfo(np.float64).tiny)
    columns = int(extent / size) + 2

    def cell(v: np.ndarray, origin: float) -> np.ndarray:
        index: np.ndarray = np.floor((v - origin) / size).astype(np.int64)
        return index

    ix0, iy0, ix1, iy1 = cell(xmin, x0), cell(ymin, y0), cell(xmax, x0), cell(ymax, y0)
    nx, ny = ix1 - ix0 + 1, iy1 - iy0 + 1
    large = nx * ny > _MAX_CELLS
    if large.sum() * len(x) > _MAX_DIRECT:
        return None
    point_cell = cell(x, x0) * columns + cell(y, y0)
    order = np.argsort(point_cell, kind="stable")
    sorted_cells = point_cell[order]

    # Each small box once per cell it spans.
    small = np.flatnonzero(~large)
    spans = (nx * ny)[small]
    box = np.repeat(small, spans)
    step = np.arange(len(box)) - np.repeat(np.cumsum(spans) - spans, spans)
    box_cell = (ix0[box] + step // ny[box]) * columns + iy0[box] + step % ny[box]
    first = np.searchsorted(sorted_cells, box_cell, side="left")
    count = np.searchsorted(sorted_cells, box_cell, side="right") - first
    pair_box = np.repeat(box, count)
    offset = np.arange(len(pair_box)) - np.repeat(np.cumsum(count) - count, count)
    pair_point = order[np.repeat(first, count) + offset]
    points, boxes = [pair_point], [pair_box]

    # The few large boxes against every point.
    large_boxes = np.flatnonzero(large)
    per_chunk = max(1, _CHUNK // len(x))
    for start in range(0, len(large_boxes), per_chunk):
        chosen = large_boxes[start : start + per_chunk]
        hit_box, hit_point = np.nonzero(
            (x[None, :] >= xmin[chosen, None])
            & (x[None, :] <= xmax[chosen, None])
            & (y[None, :] >= ymin[chosen, None])
            & (y[None, :] <= ymax[chosen, None])
        )
        points.append(hit_point.astype(np.int64))
        boxes.append(chosen[hit_box])

    point, box = np.concatenate(points), np.concatenate(boxes)
    inside = (
        (x[point] >= xmin[box])
        & (x[point] <= xmax[box])
        & (y[point] >= ymin[box])
        & (y[point] <= ymax[box])
    )
    point, box = point[inside], real[box[inside]]
    by_point = np.lexsort((box, point))
    return point[by_point], box[by_point]
