"""Searches of many values with the values sorted first give numpy's plain answers."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.matching import sorted_search
from toolkit.matching.sorted_search import equal_ranges, sorted_positions, stable_order

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


# Integers of every width, many sharing their top bits (2**63 + a few) so that the packed
# sort drops bits that tell them apart, and repeats.
wide = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1),
    st.integers(min_value=2**63, max_value=2**63 + 7),
    st.integers(min_value=0, max_value=5),
)


@pytest.mark.parametrize("few_runs", [0, sorted_search.FEW_RUNS], ids=["packed", "runs"])
@settings(max_examples=300, deadline=None)
@given(numbers=st.lists(wide, max_size=60), dtype=st.sampled_from(["uint64", "int64", "uint8"]))
def test_stable_order_is_numpys_stable_argsort(
    few_runs: int, numbers: list[int], dtype: str
) -> None:
    limit = np.iinfo(dtype).max
    values = np.array([n % (limit + 1) if n > limit else n for n in numbers], dtype=dtype)
    with mock.patch.object(sorted_search, "FEW_RUNS", few_runs):
        order, ordered = stable_order(values)
    expected = np.argsort(values, kind="stable")
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(ordered, values[expected])
    assert ordered.dtype == values.dtype


def test_stable_order_of_hashes_is_one_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random 64-bit hashes are ordered by the packed sort alone; values it would put out
    of order (the same top bits, the low bits descending) go numpy's way, rightly."""
    hashes = np.random.default_rng(7).integers(0, 2**64 - 1, 10_000, dtype=np.uint64)
    hashes[:100] = hashes[5_000:5_100]  # repeated keys keep their positions' order
    expected = np.argsort(hashes, kind="stable")
    calls: list[int] = []
    argsort = np.argsort

    def counted(values: np.ndarray, kind: str) -> np.ndarray:
        calls.append(len(values))
        return argsort(values, kind=kind)  # type: ignore[arg-type]

    monkeypatch.setattr(np, "argsort", counted)
    np.testing.assert_array_equal(stable_order(hashes)[0], expected)
    assert calls == []
    monkeypatch.setattr(sorted_search, "FEW_RUNS", 0)
    clash = np.array([2**63 + 3, 2**63 + 1, 2**63 + 2, 5], dtype=np.uint64)
    assert stable_order(clash)[0].tolist() == [3, 1, 2, 0]
    assert calls == [4]


def test_stable_order_of_few_runs_merges_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values in a few ascending runs (keys gathered kind by kind) are merged by numpy's
    stable argsort, which is the faster there; in many runs, packed and sorted."""
    rng = np.random.default_rng(11)
    runs = np.concatenate([np.sort(rng.integers(0, 1000, 500)) for _ in range(3)])
    kinds: list[str] = []
    argsort = np.argsort

    def recorded(values: np.ndarray, kind: str) -> np.ndarray:
        kinds.append(kind)
        return argsort(values, kind=kind)  # type: ignore[arg-type]

    monkeypatch.setattr(np, "argsort", recorded)
    order, ordered = stable_order(runs)
    assert kinds == ["stable"]
    np.testing.assert_array_equal(order, argsort(runs, kind="stable"))
    np.testing.assert_array_equal(ordered, np.sort(runs))
    shuffled = rng.permutation(runs)
    order, _ = stable_order(shuffled)
    assert kinds == ["stable"]  # no argsort: the packed sort
    np.testing.assert_array_equal(order, argsort(shuffled, kind="stable"))


def test_stable_order_of_signed_values_goes_numpys_way() -> None:
    values = np.array([3, -1, 3, 0, -7], dtype=np.int64)
    order, ordered = stable_order(values)
    assert order.tolist() == [4, 1, 3, 0, 2]
    assert ordered.tolist() == [-7, -1, 0, 3, 3]
