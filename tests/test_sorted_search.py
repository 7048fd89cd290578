"""Searches of many values with the values sorted first give numpy's plain answers."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.matching import sorted_search
from toolkit.matching.sorted_search import equal_ranges, sorted_positions

values = st.lists(st.integers(min_value=0, max_value=40), max_size=300)


@pytest.fixture(params=[0, sorted_search.SORT_FROM], ids=["sorted", "plain"])
def sort_from(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Both paths: needles sorted from the first (0) and the plain search."""
    monkeypatch.setattr(sorted_search, "SORT_FROM", request.param)
    return int(request.param)


@pytest.mark.parametrize("threshold", [0, sorted_search.SORT_FROM], ids=["sorted", "plain"])
@settings(max_examples=150, deadline=None)
@given(haystack=values, needles=values)
def test_ranges_and_positions_equal_numpys(
    threshold: int, haystack: list[int], needles: list[int]
) -> None:
    # Repeated values in both, needles below, inside and beyond the haystack's values.
    with mock.patch.object(sorted_search, "SORT_FROM", threshold):
        hay = np.sort(np.array(haystack, dtype=np.uint64))
        need = np.array(needles, dtype=np.uint64)
        first, count = equal_ranges(hay, need)
        np.testing.assert_array_equal(first, np.searchsorted(hay, need, side="left"))
        np.testing.assert_array_equal(count, np.searchsorted(hay, need, side="right") - first)
        distinct = np.unique(hay)
        positions = sorted_positions(distinct, need)
        lookup = {int(v): i for i, v in enumerate(distinct)}
        assert positions.tolist() == [lookup.get(int(v), -1) for v in need]


def test_positions_of_large_keys(sort_from: int) -> None:
    """uint64 keys above 2**63 (hashes) compare as unsigned, not wrapped to negative."""
    keys = np.array([3, 2**63, 2**64 - 2], dtype=np.uint64)
    queries = np.array([2**64 - 2, 5, 2**63, 3, 2**64 - 1, 0], dtype=np.uint64)
    assert sorted_positions(keys, queries).tolist() == [2, -1, 1, 0, -1, -1]
    assert sorted_positions(keys[:0], queries).tolist() == [-1] * 6
    assert sorted_positions(keys, queries[:0]).tolist() == []


def test_a_million_keys_give_numpys_answers() -> None:
    """At an import's size, where the sort is taken (its own threshold, not patched)."""
    rng = np.random.default_rng(7)
    keys = np.unique(rng.integers(1, 2**63, 200_000, dtype=np.int64).astype(np.uint64))
    queries = np.concatenate(
        [rng.choice(keys, 40_000), rng.integers(1, 2**63, 10_000, dtype=np.int64)]
    ).astype(np.uint64)
    rng.shuffle(queries)
    assert len(queries) >= sorted_search.SORT_FROM
    at = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    np.testing.assert_array_equal(
        sorted_positions(keys, queries), np.where(keys[at] == queries, at, -1)
    )
    cells = np.sort(rng.integers(0, 5_000, 100_000))
    points = rng.integers(-10, 5_010, 30_000)
    first, count = equal_ranges(cells, points)
    np.testing.assert_array_equal(first, np.searchsorted(cells, points))
    np.testing.assert_array_equal(count, np.searchsorted(cells, points, side="right") - first)
