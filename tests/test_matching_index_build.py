"""The whole-column helpers of the asset index build, against plain reference forms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolkit.matching.address import Words, _per_row_cumsum, _row_sums, mix64
from toolkit.matching.parsed import (
    _ROW_BITS,
    _SORTED_RUN,
    KEY_BITS,
    _Collected,
    _sort_in_runs,
    sorted_keys,
)


def _rows(counts: list[int]) -> np.ndarray:
    """The flat row of each word of rows with these word counts (sorted by row)."""
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


# Rows without words first, between others and last: each changes where a row starts.
COUNTS = [[0, 3, 0, 0, 2, 5, 1, 0], [4], [0, 0], [1, 1, 1], []]


@pytest.mark.parametrize("counts", COUNTS)
def test_per_row_cumsum_counts_within_each_row(counts: list[int]) -> None:
    row = _rows(counts)
    flag = np.random.default_rng(len(counts)).random(len(row)) < 0.5
    expected = pd.Series(flag.astype(np.int64)).groupby(row).cumsum().to_numpy()
    unused = np.zeros(len(row), dtype=np.int64)  # positions and word codes: not read
    words = Words(row, unused, unused, np.array([], dtype=object), len(counts))
    got = _per_row_cumsum(flag, words)
    assert got.dtype == np.int64
    assert got.tolist() == expected.tolist()
    # The rows' runs are counted once per set of words, for every sum over them.
    assert _per_row_cumsum(~flag, words).tolist() == (
        pd.Series((~flag).astype(np.int64)).groupby(row).cumsum().tolist()
    )
    assert "row_runs" in words.__dict__


@pytest.mark.parametrize("counts", COUNTS)
def test_row_sums_wrap_like_uint64_and_give_empty_rows_zero(counts: list[int]) -> None:
    row = _rows(counts)
    values = np.random.default_rng(7).integers(0, 2**64 - 1, len(row), dtype=np.uint64)
    expected = [sum(int(v) for v in values[row == r]) % 2**64 for r in range(len(counts))]
    got = _row_sums(values, row, len(counts))
    assert got.dtype == np.uint64
    assert got.tolist() == expected


def test_mix64_in_place_only_when_asked() -> None:
    values = np.arange(1, 1000, dtype=np.uint64)
    kept = values.copy()
    mixed = mix64(values)
    assert values.tolist() == kept.tolist()  # the default leaves its input alone
    assert len(set(mixed.tolist())) == len(mixed)
    in_place = mix64(values, copy=False)
    assert in_place is values
    assert in_place.tolist() == mixed.tolist()


def _reference_pairs(rows: np.ndarray, keys: np.ndarray) -> list[tuple[int, int]]:
    """Distinct (key's top KEY_BITS bits, row) pairs sorted by key, then row."""
    top = (keys >> np.uint64(64 - KEY_BITS)).tolist()
    return sorted(set(zip(top, rows.tolist(), strict=True)))


@pytest.mark.parametrize("repeats", [True, False])
def test_collected_keys_are_the_distinct_pairs_sorted_by_key(repeats: bool) -> None:
    generator = np.random.default_rng(3)
    n_rows, parts = 500, []
    for size in (300, 0, 1200, 40):
        rows = generator.integers(0, n_rows, size)
        keys = generator.integers(0, 2**64 - 1, size, dtype=np.uint64)
        if repeats and size:  # the same key of the same row twice, and one key many rows
            rows[: size // 4], keys[: size // 4] = rows[size // 4 : size // 2], keys[-1]
        parts.append((rows, keys))
    expected = _reference_pairs(
        np.concatenate([r for r, _ in parts]), np.concatenate([k for _, k in parts])
    )
    collected = _Collected(n_rows)
    for rows, keys in parts:
        collected.add(rows, keys.copy())
    got_rows, got_keys = collected.sorted()
    assert got_rows.dtype == np.int32 and got_keys.dtype == np.uint64
    assert list(zip(got_keys.tolist(), got_rows.tolist(), strict=True)) == expected
    # The same as the pairs given at once.
    rows, keys = sorted_keys(
        np.concatenate([r for r, _ in parts]), np.concatenate([k for _, k in parts]), n_rows
    )
    assert rows.tolist() == got_rows.tolist() and keys.tolist() == got_keys.tolist()


def test_collected_rows_use_all_the_row_bits() -> None:
    """Rows up to the packing's limit come back whole (the low bits kept by a cast)."""
    top_row = (1 << int(_ROW_BITS)) - 1
    rows = np.array([top_row, 0, top_row, 1 << 23], dtype=np.int64)
    keys = np.array([2**64 - 1, 2**64 - 1, 5 << 40, 5 << 40], dtype=np.uint64)
    collected = _Collected(top_row + 1)
    collected.add(rows, keys.copy())
    got_rows, got_keys = collected.sorted()
    assert list(zip(got_keys.tolist(), got_rows.tolist(), strict=True)) == _reference_pairs(
        rows, keys
    )


@pytest.mark.parametrize(
    "size", [0, 1, _SORTED_RUN - 1, _SORTED_RUN, _SORTED_RUN + 1, 5 * _SORTED_RUN + 17]
)
def test_sorting_in_runs_sorts_in_place(size: int) -> None:
    values = np.random.default_rng(size).integers(0, 2**64 - 1, size, dtype=np.uint64)
    if size:
        values[: size // 3] = values[-1]  # repeats across runs
    expected = sorted(values.tolist())
    _sort_in_runs(values)
    assert values.tolist() == expected
    # A strided view is sorted where it lies too.
    wide = np.random.default_rng(1).integers(0, 1000, 2 * size, dtype=np.uint64)
    view = wide[::2]
    expected = sorted(view.tolist())
    _sort_in_runs(view)
    assert wide[::2].tolist() == expected
