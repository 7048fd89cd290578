"""Binary searches of many values at once in a sorted array, with the values sorted first;
and the sort order of many 64-bit keys (:func:`stable_order`).

numpy's ``searchsorted`` starts each value's search from the last one's answer. With the
values in random order, as an import's keys are, every search starts over from the whole
array and touches a new cache line at each of its ~20 steps; sorted, neighbouring searches
share their steps and walk the array once in order. Sorting 125,000 uint64 keys and
searching them in a million distinct keys took a quarter of the time of searching them
unsorted (0.020-0.035 s against 0.087-0.132 s, numpy 2, alternating). Below
``SORT_FROM`` values the sort is not worth its cost.
"""

from __future__ import annotations

import numpy as np

SORT_FROM = 4096


# Below this many places where the values step down (runs of ascending values, less one),
# numpy's stable argsort merges the runs faster than one packed sort sorts them all: at a
# million uint64 values, 0.013 s against 0.050 s in 2 runs, 0.041 against 0.051 in 32,
# 0.058 against 0.048 in 128.
FEW_RUNS = 64


def stable_order(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.argsort(values, kind="stable")`` and the values in that order.

    Non-negative integers in random order (uint64 hashes, say) are ordered by one sort of
    plain integers, each value packed above its position: numpy's sort of integers is
    vectorised where its argsort is not (a million hashes: 0.05 s against 0.11 s by
    quicksort and 0.15 s by the stable argsort). A value too wide to share 64 bits with
    its position keeps its top bits only; two that share those but differ below them
    would come out of order, which the check finds, and the argsort decides (a million
    random hashes: about once in seventy by the birthday bound, once in 300 trials here).
    Values sorted already, or in a few ascending runs, are left to the argsort, which
    merely merges the runs."""
    n = len(values)
    bits = max((n - 1).bit_length(), 1)
    if n < 2 or values.dtype.kind not in "iu" or bits >= 64:
        order = np.argsort(values, kind="stable")
        return order, values[order]
    descents = int(np.count_nonzero(values[1:] < values[:-1]))
    if descents < FEW_RUNS or int(values.min()) < 0:
        order = np.argsort(values, kind="stable")
        return order, values[order]
    # The low bits of each value dropped to make room for its position (none if it fits).
    dropped = max(int(values.max()).bit_length() + bits - 64, 0)
    packed = values.astype(np.uint64) >> np.uint64(dropped)
    packed <<= np.uint64(bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    order = (packed & np.uint64((1 << bits) - 1)).view(np.int64)
    if not dropped:  # the values, whole, are the packed ones' top bits: no gather
        packed >>= np.uint64(bits)
        return order, packed.astype(values.dtype, copy=False)
    ordered = values[order]
    if bool((ordered[1:] < ordered[:-1]).any()):
        order = np.argsort(values, kind="stable")
        return order, values[order]
    return order, ordered


def equal_ranges(haystack: np.ndarray, needles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, count) of each needle's run of equal values in ``haystack``: the left and
    right searches, with one sort of the needles for both."""
    if len(needles) < SORT_FROM:
        first = np.searchsorted(haystack, needles, side="left")
        return first, np.searchsorted(haystack, needles, side="right") - first
    order, ordered = stable_order(needles)
    first = np.searchsorted(haystack, ordered, side="left")
    count = np.searchsorted(haystack, ordered, side="right") - first
    first_out = np.empty(len(needles), dtype=np.intp)
    count_out = np.empty(len(needles), dtype=np.intp)
    first_out[order], count_out[order] = first, count
    return first_out, count_out


def sorted_positions(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Position of each query among ``keys`` (sorted, distinct), -1 where absent: a binary
    search, with no hash table to build or hold."""
    if not len(keys):
        return np.full(len(queries), -1, dtype=np.int64)
    if len(queries) < SORT_FROM:
        at = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
        return np.where(keys[at] == queries, at, -1)
    order, ordered = stable_order(queries)
    # The check against the key found reads ``keys`` in order too.
    at = np.minimum(np.searchsorted(keys, ordered), len(keys) - 1)
    positions = np.empty(len(queries), dtype=np.int64)
    positions[order] = np.where(keys[at] == ordered, at, -1)
    return positions
