"""Candidate pairs for fuzzy matching: queries and assets that share a blocking key.

The asset side's keys are grouped once (``KeyGroups``, cached with the index); a batch of
queries then finds its candidates with one binary search per query key, and ranks them
with sorts of packed integers (no hashing of pair tables, no per-row Python).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toolkit.matching.parsed import Parsed
from toolkit.matching.sorted_search import sorted_positions, stable_order

# A key shared by more assets than this says too little to be worth the pairs.
MAX_KEY_ASSETS = 100
# At most this many candidates per query reach scoring (those sharing the rarest keys).
MAX_CANDIDATES = 30
# A shared key's weight, log2(assets / assets holding it), in steps of 1/WEIGHT_STEPS bit.
WEIGHT_STEPS = 16


@dataclass(frozen=True)
class KeyGroups:
    """The blocking keys held by at most ``MAX_KEY_ASSETS`` assets, each with its assets."""

    keys: np.ndarray  # uint64, sorted, distinct
    start: np.ndarray  # int64, len(keys) + 1 offsets into ``rows``
    rows: np.ndarray  # int32 asset rows (distinct strings), grouped by key

    @classmethod
    def of(
        cls, key_rows: np.ndarray, keys: np.ndarray, allowed: np.ndarray | None = None
    ) -> KeyGroups:
        """Group a (row, key) table sorted by key; ``allowed`` (a mask of rows) keeps only
        the rows that may be returned, and a key's size counts only those."""
        if allowed is not None:
            keep = allowed[key_rows]
            key_rows, keys = key_rows[keep], keys[keep]
        n = len(keys)
        first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])[:n])
        count = np.diff(np.append(first, n))
        small = count <= MAX_KEY_ASSETS
        rows = key_rows[np.repeat(small, count)].astype(np.int32)
        kept = count[small]
        start = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
        return cls(keys[first[small]], start, rows)

    def __len__(self) -> int:
        return len(self.keys)


def candidate_pairs(
    queries: Parsed, groups: KeyGroups, n_assets: int, rows: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(query row, asset row) of every pair sharing a blocking key, at most
    ``MAX_CANDIDATES`` per query: those whose shared keys weigh most, a key weighing
    log2(``n_assets`` / assets holding it). Sorted by query row; rows are distinct strings;
    ``rows`` (first, end): only the queries of those rows."""
    empty = np.zeros(0, dtype=np.int64)
    q_rows, q_keys = queries.key_rows, queries.keys
    if rows is not None:
        inside = (q_rows >= rows[0]) & (q_rows < rows[1])
        q_rows, q_keys = q_rows[inside], q_keys[inside]
    if not len(groups) or not len(q_keys):
        return empty, empty
    slot = sorted_positions(groups.keys, q_keys)
    hit = slot >= 0
    if not hit.any():  # no query shares a key with any asset: no pair at all
        return empty, empty
    q_rows, slot = q_rows[hit].astype(np.int64), slot[hit]
    # The keys by query, so that a range of queries is a range of keys: the pairs are
    # made and ranked range by range, each range's arrays small enough to stay in the
    # CPU's caches (one pass over the 20,000,000 pairs of 200,000 queries took twice as
    # long). Each query's candidates are its own: the ranges give what one pass gives.
    order, q_rows = stable_order(q_rows)
    slot = slot[order]
    size = groups.start[slot + 1] - groups.start[slot]
    ends = _range_ends(q_rows, np.cumsum(size))
    out_q, out_a, begin = [], [], 0
    for end in ends.tolist():
        q, a = _pairs(queries, groups, n_assets, q_rows[begin:end], slot[begin:end])
        out_q.append(q)
        out_a.append(a)
        begin = end
    return np.concatenate(out_q), np.concatenate(out_a)


# Pairs of query keys and assets made and ranked at once by ``candidate_pairs``.
RANGE_PAIRS = 1_000_000


def _range_ends(q_rows: np.ndarray, pairs_so_far: np.ndarray) -> np.ndarray:
    """Ends of consecutive ranges of keys (sorted by query) of about ``RANGE_PAIRS`` pairs
    each, never splitting a query's keys; the last end is ``len(q_rows)``."""
    n = len(q_rows)
    wanted = np.arange(RANGE_PAIRS, int(pairs_so_far[-1]), RANGE_PAIRS)
    cut = np.searchsorted(pairs_so_far, wanted, side="right")
    # Move each cut to the start of the query it falls in (a query's keys stay together).
    first_of_query = np.searchsorted(q_rows, q_rows[np.minimum(cut, n - 1)], side="left")
    cut = np.where(cut < n, first_of_query, n)
    return np.unique(np.append(cut[cut > 0], n))


def _pairs(
    queries: Parsed, groups: KeyGroups, n_assets: int, q_rows: np.ndarray, slot: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``candidate_pairs`` of the query keys found in ``groups`` at ``slot``, for queries
    ``q_rows`` (a range of them, every key of each)."""
    first = groups.start[slot]
    size = groups.start[slot + 1] - first
    steps = np.rint(WEIGHT_STEPS * np.log2((n_assets + 1) / size)).astype(np.int64)
    total = int(size.sum())
    # Slot in ``groups.rows`` of every (query key, asset) pair: one repeat, one add.
    slots = np.arange(total, dtype=np.int64) + np.repeat(first - (np.cumsum(size) - size), size)
    pair_a = groups.rows[slots].astype(np.int64)
    a_bits = max(int(n_assets).bit_length(), 1)
    w_bits = max(int(steps.max(initial=0)).bit_length(), 1)
    q_bits = max(len(queries).bit_length(), 1)
    if q_bits + a_bits + w_bits > 63:
        return _candidate_pairs_wide(np.repeat(q_rows, size), pair_a, np.repeat(steps, size))
    # (query, asset, weight) packed in one int64: one sort groups each pair's keys. The
    # pairs come as sorted runs (by query, and each key's assets in order): numpy's stable
    # sort merges runs, 5-8x faster here than its default quicksort; integers sort alike.
    query_weight = np.repeat((q_rows << (a_bits + w_bits)) | steps, size)
    packed = np.sort(query_weight | (pair_a << w_bits), kind="stable")
    pair = packed >> w_bits
    starts = np.flatnonzero(np.concatenate([[True], pair[1:] != pair[:-1]]))
    shared = np.add.reduceat(packed & ((1 << w_bits) - 1), starts) if len(packed) else packed
    pair = pair[starts]
    pair_q, pair_a = pair >> a_bits, pair & ((1 << a_bits) - 1)
    # Ranked with the range's queries numbered from 0 (its arrays per query stay small).
    low = int(q_rows[0]) if len(q_rows) else 0
    high = int(q_rows[-1]) + 1 if len(q_rows) else 0
    top_q, top_a = _top(pair_q - low, pair_a, shared, high - low, a_bits)
    return top_q + low, top_a


def _top(
    pair_q: np.ndarray, pair_a: np.ndarray, shared: np.ndarray, n_queries: int, a_bits: int
) -> tuple[np.ndarray, np.ndarray]:
    """Of pairs sorted by (query, asset), the ``MAX_CANDIDATES`` of each query sharing most
    (ties: the lower asset row), still grouped by query."""
    counts = np.bincount(pair_q, minlength=n_queries)
    crowded = (counts > MAX_CANDIDATES)[pair_q]
    if not crowded.any():
        return pair_q, pair_a
    # Only queries with too many candidates are ranked: one sort of packed integers.
    s_bits = max(int(shared.max(initial=0)).bit_length(), 1)
    q, a, s = pair_q[crowded], pair_a[crowded], shared[crowded]
    if int(q.max()).bit_length() + s_bits + a_bits <= 63:
        inverse = (1 << s_bits) - 1 - s
        # Already sorted by query (runs by asset): the stable sort is the faster here too.
        ranked = np.sort((q << (s_bits + a_bits)) | (inverse << a_bits) | a, kind="stable")
        q, a = ranked >> (s_bits + a_bits), ranked & ((1 << a_bits) - 1)
    else:
        order = np.lexsort((a, -s, q))
        q, a = q[order], a[order]
    per_query = np.bincount(q, minlength=n_queries)
    rank = np.arange(len(q)) - (np.cumsum(per_query) - per_query)[q]
    keep = rank < MAX_CANDIDATES
    starts = np.cumsum(counts) - counts
    # Each query's block in the answer: its candidates, then the next query's; the kept
    # ones are written straight into place (no sort to merge the two kinds of query).
    kept = np.minimum(counts, MAX_CANDIDATES)
    block = np.cumsum(kept) - kept
    out_q = np.empty(int(kept.sum()), dtype=np.int64)
    out_a = np.empty_like(out_q)
    calm = ~crowded
    calm_rank = np.flatnonzero(calm) - starts[pair_q[calm]]
    out_q[block[pair_q[calm]] + calm_rank] = pair_q[calm]
    out_a[block[pair_q[calm]] + calm_rank] = pair_a[calm]
    out_q[block[q[keep]] + rank[keep]] = q[keep]
    out_a[block[q[keep]] + rank[keep]] = a[keep]
    return out_q, out_a


def _candidate_pairs_wide(
    pair_q: np.ndarray, pair_a: np.ndarray, steps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``candidate_pairs`` for tables too large to pack a pair and its weight in 63 bits."""
    order = np.lexsort((pair_a, pair_q))
    pair_q, pair_a, steps = pair_q[order], pair_a[order], steps[order]
    new = np.concatenate([[True], (pair_q[1:] != pair_q[:-1]) | (pair_a[1:] != pair_a[:-1])])
    starts = np.flatnonzero(new)
    shared = np.add.reduceat(steps, starts)
    pair_q, pair_a = pair_q[starts], pair_a[starts]
    order = np.lexsort((pair_a, -shared, pair_q))
    pair_q, pair_a = pair_q[order], pair_a[order]
    counts = np.bincount(pair_q)
    rank = np.arange(len(pair_q)) - (np.cumsum(counts) - counts)[pair_q]
    keep = rank < MAX_CANDIDATES
    return pair_q[keep], pair_a[keep]
