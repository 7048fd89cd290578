"""The grid that finds which bounding boxes hold which points answers as a spatial tree's
bounding-box query does."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from toolkit.matching import boxes
from toolkit.matching.boxes import boxes_holding


def _tree_pairs(bounds: np.ndarray, x: np.ndarray, y: np.ndarray) -> set[tuple[int, int]]:
    shapes = np.full(len(bounds), None, dtype=object)
    real = ~np.isnan(bounds).any(axis=1)
    shapes[real] = shapely.box(*bounds[real].T)
    point, box = shapely.STRtree(shapes).query(shapely.points(x, y))
    return set(zip(point.tolist(), box.tolist(), strict=True))


def _random_boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    corner = rng.uniform(0, 100, (n, 2)).round(1)
    size = rng.exponential(0.5, (n, 2)).round(1)  # some zero-sized (a point asset)
    bounds = np.column_stack([corner, corner + size])
    bounds[rng.choice(n, 30, replace=False)] = np.nan  # empty or missing geometries
    bounds[:20, 2:] = bounds[:20, :2] + rng.uniform(10, 60, (20, 2))  # a few large ones
    return bounds


def test_the_grid_finds_the_pairs_a_tree_finds_boundaries_included() -> None:
    rng = np.random.default_rng(7)
    bounds = _random_boxes(rng, 5_000)
    # Random points, and points exactly on box corners and edges.
    x = np.concatenate([rng.uniform(-5, 105, 3_000), bounds[:500, 0], bounds[500:900, 2]])
    y = np.concatenate([rng.uniform(-5, 105, 3_000), bounds[:500, 1], bounds[500:900, 1]])
    keep = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[keep], y[keep]
    found = boxes_holding(bounds, x, y)
    assert found is not None
    point, box = found
    assert set(zip(point.tolist(), box.tolist(), strict=True)) == _tree_pairs(bounds, x, y)
    assert len(point) > 3_000  # corners and edges are held, and large boxes hold many
    order = np.lexsort((box, point))
    assert (order == np.arange(len(point))).all()  # by point, then box


def test_too_many_large_boxes_leave_it_to_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    bounds = _random_boxes(rng, 1_000)
    x, y = rng.uniform(0, 100, 50), rng.uniform(0, 100, 50)
    monkeypatch.setattr(boxes, "_MAX_DIRECT", 10)
    assert boxes_holding(bounds, x, y) is None
    monkeypatch.setattr(boxes, "_CHUNK", 7)  # large boxes compared a few at a time
    monkeypatch.setattr(boxes, "_MAX_DIRECT", 10**9)
    found = boxes_holding(bounds, x, y)
    assert found is not None
    assert set(zip(*(f.tolist() for f in found), strict=True)) == _tree_pairs(bounds, x, y)


def test_no_boxes_or_no_points_hold_nothing() -> None:
    nothing = np.full((3, 4), np.nan)
    found = boxes_holding(nothing, np.array([1.0]), np.array([2.0]))
    assert found is not None and [len(f) for f in found] == [0, 0]
    found = boxes_holding(np.array([[0.0, 0.0, 1.0, 1.0]]), np.empty(0), np.empty(0))
    assert found is not None and [len(f) for f in found] == [0, 0]


def test_a_point_at_nan_is_in_no_box_and_leaves_the_others_answers_alone() -> None:
    bounds = np.array([[0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]])
    x, y = np.array([np.nan, 0.5, 2.5]), np.array([np.nan, 0.5, 2.5])
    found = boxes_holding(bounds, x, y)
    assert found is not None
    assert list(zip(found[0].tolist(), found[1].tolist(), strict=True)) == [(1, 0), (2, 1)]
    assert _tree_pairs(bounds, x, y) == {(1, 0), (2, 1)}
