"""Probabilistic address matching (Fellegi–Sunter), the engine of mode ``fuzzy``.

A query is compared with every asset that shares at least one blocking key with it; each pair
gets one comparison *level* per address component (number, street name, street type,
locality, postcode, unit, state); each level has an m probability (how often true matches
show it) and a u probability (how often non-matches do). Their ratio is the level's evidence;
the evidence of a pair is the sum over components of ``log2(m/u)``, and its match
probability follows from the prior share of matches among candidate pairs.

Nothing is tuned per file: u comes from random (query, asset) pairs, m and the prior from an
EM fit over the candidate pairs of the data at hand, and an exact street or locality weighs
more when that value is rare among the assets (term-frequency adjustment).

Everything is computed on whole columns over *distinct* address strings; the only Python
loops run over components, levels, keys and EM iterations, never over rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import OSA, JaroWinkler

from toolkit.matching.blocking import KeyGroups, candidate_pairs
from toolkit.matching.parsed import CODE_FIELDS, Parsed
from toolkit.matching.sorted_search import stable_order

# --- the model's fixed shape (never tuned per file) ------------------------------------------

COMPONENTS = ("number", "street", "type", "locality", "postcode", "unit", "state")
# Jaro–Winkler bands of the text components: level 0 is equal, then these floors.
TEXT_BANDS = (0.95, 0.88, 0.80)
LEVELS = {
    "number": ("exact", "one edit", "different"),
    "street": ("exact", "jw>=0.95", "jw>=0.88", "jw>=0.80", "different"),
    "type": ("exact", "different"),
    "locality": ("exact", "jw>=0.95", "jw>=0.88", "jw>=0.80", "different"),
    "postcode": ("exact", "one edit", "different"),
    "unit": ("exact", "different", "only one has a unit"),
    "state": ("exact", "different"),
}
MISSING = -1
# In choosing how to read a query (which words are street, which locality), a component
# left out counts as this similarity: above what unrelated words score, below a near match.
ABSENT_SIMILARITY = 0.7
RANDOM_PAIRS = 50_000
# m before any data: what the development sets' fits agree on. EM starts here and, for a
# small batch, stays near it: these count as PRIOR_QUERIES queries' worth of evidence, so
# one interactive lookup is judged by the defaults and a large import by its own fit.
DEFAULT_M = {
    "number": (0.85, 0.05, 0.10),
    "street": (0.80, 0.10, 0.05, 0.02, 0.03),
    "type": (0.97, 0.03),
    "locality": (0.76, 0.14, 0.05, 0.02, 0.03),
    "postcode": (0.90, 0.05, 0.05),
    "unit": (0.88, 0.07, 0.05),
    "state": (0.97, 0.03),
}
DEFAULT_SHARE = 0.9
PRIOR_QUERIES = 200.0
EM_ITERATIONS = 30
# The decision (one configuration for every data set).
LINK_PROBABILITY = 0.8  # link when the best candidate's match probability reaches this
REVIEW_PROBABILITY = 0.3  # between this and LINK_PROBABILITY: a candidate for review
MARGIN_BITS = 5.0  # and the runner-up's evidence is this many bits (32x) weaker


# --- comparisons ---------------------------------------------------------------------------


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, index of each value among them) of integers, from their
    ``stable_order``: one sort of plain integers, vectorised where pandas hashes every
    value (a million-row job's fuzzy answers: 13% less CPU in here, about 2% of fuzzy's,
    the same answers). The distinct values come sorted; callers index them by
    ``inverse`` only."""
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order, ordered = stable_order(values)
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first].astype(np.int64), inverse


class _Texts:
    """The two vocabularies a comparison draws its texts from (one when comparing a
    parsed table with itself), and the query codes of the code fields translated into
    asset codes (-1 where the asset vocabulary lacks the text)."""

    def __init__(self, queries: Parsed, assets: Parsed) -> None:
        self.left, self.right = queries.vocabulary, assets.vocabulary
        if queries is assets:
            self.translate = np.arange(len(self.left), dtype=np.int64)
            return
        used = np.unique(np.concatenate([queries.codes[f] for f in CODE_FIELDS]))
        self.translate = np.full(len(self.left), -1, dtype=np.int64)
        self.translate[used] = assets.vocabulary_index.get_indexer(self.left[used])

    def jaro_winkler(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Jaro–Winkler similarity of text codes pair by pair; NaN where either is empty."""
        sim = np.full(len(left), np.nan)
        present = np.flatnonzero((left != 0) & (right != 0))
        if len(present):
            # The object arrays go in as they are: copying them to lists first cost as much.
            left_texts, right_texts = self.left[left[present]], self.right[right[present]]
            sim[present] = process.cpdist(
                left_texts, right_texts, scorer=JaroWinkler.normalized_similarity, workers=-1
            )
            near_miss(left_texts, right_texts, sim, present)
        return sim

    def jaro_winkler_many(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """``jaro_winkler`` of several (left, right) code arrays at once: each distinct pair
        of texts among them is measured once (a query's readings repeat the same words,
        and its candidates the same streets)."""
        size = np.int64(len(self.right))
        left = np.concatenate([left for left, _ in pairs])
        right = np.concatenate([right for _, right in pairs])
        # Pairs with an empty side (a third of a large job's) have no similarity: only the
        # others are hashed.
        present = np.flatnonzero((left != 0) & (right != 0))
        distinct, inverse = _factorize(left[present].astype(np.int64) * size + right[present])
        values = np.full(len(left), np.nan)
        values[present] = self.jaro_winkler(distinct // size, distinct % size)[inverse]
        ends = np.cumsum([len(left) for left, _ in pairs])
        return list(np.split(values, ends[:-1]))

    def code_level(self, left: np.ndarray, right: np.ndarray, near: bool) -> np.ndarray:
        """Equal (0), one edit apart (1, when ``near``), different; MISSING where absent."""
        level = np.full(len(left), 2 if near else 1, dtype=np.int8)
        equal = self.translate[left] == right
        present = (left != 0) & (right != 0)
        differ = np.flatnonzero(present & ~equal)
        if near and len(differ):
            # Few distinct pairs of numbers: each is measured once.
            size = np.int64(len(self.right))
            distinct, inverse = _factorize(left[differ].astype(np.int64) * size + right[differ])
            distance = process.cpdist(
                self.left[distinct // size],
                self.right[distinct % size],
                scorer=OSA.distance,
                workers=-1,
            )
            level[differ[distance[inverse] <= 1]] = 1
        level[equal] = 0
        level[~present] = MISSING
        return level

    def unit_level(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Units equal (0), different (1), or only one side names a unit (2: a unit parcel
        and the whole lot are different assets); MISSING when neither does."""
        level = np.where(self.translate[left] == right, 0, 1).astype(np.int8)
        level[(left == 0) != (right == 0)] = 2
        level[(left == 0) & (right == 0)] = MISSING
        return level


# Words this long or longer one edit apart (a letter wrong, missing, extra, or two swapped:
# KGAN/KHAN, CZOK/COOK, GREN/GREEN) count as a near match even where Jaro–Winkler, weak on
# short words, scores them lower: random names are seldom one edit apart.
NEAR_MISS_MIN_LENGTH = 4
# Texts one edit apart, the longer of NEAR_MISS_MIN_LENGTH or more, score at least 0.738 in
# Jaro–Winkler (AABCBAB/BABCBAB; searched exhaustively over short texts of few letters, the
# worst case, in tests): only pairs scoring this or more can be near misses, so only they
# are measured (of the candidates' pairs below the first band, about one in six).
NEAR_MISS_MIN_SIMILARITY = 0.6


def near_miss(left: np.ndarray, right: np.ndarray, sim: np.ndarray, at: np.ndarray) -> None:
    """Raise ``sim[at]`` to the first band where the texts ``left``/``right`` (one pair per
    position of ``at``) are one edit apart and the longer at least NEAR_MISS_MIN_LENGTH long."""
    near_sim = sim[at]
    below = np.flatnonzero((near_sim < TEXT_BANDS[0]) & (near_sim >= NEAR_MISS_MIN_SIMILARITY))
    if not len(below):
        return
    distance = process.cpdist(
        left[below], right[below], scorer=OSA.distance, score_cutoff=1, workers=-1
    )
    # Lengths only of the few pairs one edit apart (counted per text, under the GIL).
    one_edit = below[distance <= 1]
    lengths = np.maximum(
        np.fromiter(map(len, left[one_edit]), np.int64, len(one_edit)),
        np.fromiter(map(len, right[one_edit]), np.int64, len(one_edit)),
    )
    sim[at[one_edit[lengths >= NEAR_MISS_MIN_LENGTH]]] = TEXT_BANDS[0]


def _text_level(sim: np.ndarray) -> np.ndarray:
    level = np.full(len(sim), len(TEXT_BANDS) + 1, dtype=np.int8)
    for band in reversed(range(len(TEXT_BANDS))):
        level[sim >= TEXT_BANDS[band]] = band + 1
    level[sim >= 1.0] = 0
    level[np.isnan(sim)] = MISSING
    return level


@dataclass
class Comparison:
    """Per candidate pair: the level of each component (``MISSING`` when not comparable),
    and the asset row (for the term frequencies of its street and locality)."""

    levels: np.ndarray  # int8, pairs x components
    a: np.ndarray  # asset row of each pair


def _readings(
    queries: Parsed, assets: Parsed, texts: _Texts, q: np.ndarray, shape: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Street and locality similarity, and the reading chosen, of query rows ``q`` with
    asset ``shape``s (see ``compare``)."""
    shapes, codes = assets.shapes, queries.codes
    street, locality = shapes.street[shape], shapes.locality[shape]
    k, j = shapes.street_words[shape], shapes.locality_words[shape]
    head = np.choose(k - 1, [codes[f"head{i}"][q] for i in (1, 2, 3)])
    tail = np.choose(k - 1, [codes[f"tail{i}"][q] for i in (1, 2, 3)])
    last = np.choose(j - 1, [codes[f"last{i}"][q] for i in (1, 2, 3)])
    alpha = codes["alpha"][q]
    absent = np.full(len(q), np.nan)
    (
        street_street,
        locality_locality,
        head_street,  # two readings share it
        tail_locality,
        last_locality,
        alpha_locality,
        alpha_street,
        before_locality,
        after_street,
    ) = texts.jaro_winkler_many(
        [
            (codes["street"][q], street),
            (codes["locality"][q], locality),
            (head, street),
            (tail, locality),
            (last, locality),
            (alpha, locality),
            (alpha, street),
            (codes["before"][q], locality),
            (codes["after"][q], street),
        ]
    )
    readings = [
        (street_street, locality_locality),
        (head_street, tail_locality),
        (head_street, last_locality),
        (absent, alpha_locality),
        (alpha_street, absent),
        (after_street, before_locality),
    ]
    totals = np.stack(
        [
            np.where(np.isnan(s), ABSENT_SIMILARITY, s)
            + np.where(np.isnan(lo), ABSENT_SIMILARITY, lo)
            for s, lo in readings
        ]
    )
    # Suburb first is a reading only of an address with letters before its number.
    totals[-1][codes["before"][q] == 0] = -np.inf
    best = np.argmax(totals, axis=0)
    return (
        np.choose(best, [r[0] for r in readings]),
        np.choose(best, [r[1] for r in readings]),
        best,
    )


def compare(queries: Parsed, assets: Parsed, q: np.ndarray, a: np.ndarray) -> Comparison:
    """Compare each (query row ``q``, asset row ``a``) pair, component by component.

    Which query words are the street and which the locality is read six ways, and the
    reading that agrees best with the asset is kept: as parsed; split where the asset's
    street name ends (a street type missing or unrecognised); the asset's number of street
    words first and of locality words last (garbled words between; in these two a street
    type that differs counts for nothing: it may be a locality word); all words the locality
    (the street missing); all words the street (the locality missing); the words before the
    house number the locality and those after it the street (the suburb typed first).

    The readings depend on the asset only through its street and locality (its *shape*), and
    a query's candidates share few shapes (one street, many numbers): they are read once
    per distinct (query, shape).
    """
    texts = _Texts(queries, assets)
    shapes = assets.shapes
    combos, inverse = _factorize(q.astype(np.int64) * len(shapes) + assets.shapes.of_row[a])
    street_sim, locality_sim, best = _readings(
        queries, assets, texts, combos // len(shapes), combos % len(shapes)
    )
    street_sim, locality_sim, best = street_sim[inverse], locality_sim[inverse], best[inverse]
    qc, ac = queries.codes, assets.codes
    street_type = texts.code_level(qc["street_type"][q], ac["street_type"][a], near=False)
    # Split by the asset's shape, the query's "type" may be a word of its locality: a type
    # that differs is then no evidence either way.
    street_type[((best == 1) | (best == 2)) & (street_type == 1)] = MISSING
    levels = np.stack(
        [
            texts.code_level(qc["number"][q], ac["number"][a], near=True),
            _text_level(street_sim),
            street_type,
            _text_level(locality_sim),
            texts.code_level(qc["postcode"][q], ac["postcode"][a], near=True),
            texts.unit_level(qc["unit"][q], ac["unit"][a]),
            texts.code_level(qc["state"][q], ac["state"][a], near=False),
        ],
        axis=1,
    )
    return Comparison(levels, a)


# Queries paired and compared at once: a range's arrays stay in the CPU's caches (200,000
# queries against a million assets: 4.2 s of CPU in ranges of 20,000 against 7.5 s at once;
# each pair's comparison is its own, so the ranges give what one pass gives).
RANGE_QUERIES = 20_000
# A batch of at least this many distinct queries has its ranges paired and compared on every
# core: numpy's sorts, gathers and hashing release the GIL, so threads share the work.
PARALLEL_MIN_QUERIES = 20_000


def compared_candidates(
    queries: Parsed,
    assets: Parsed,
    groups: KeyGroups,
    *,
    threads: int | None = None,
    range_queries: int | None = None,
) -> tuple[np.ndarray, Comparison]:
    """``candidate_pairs`` of every query and their ``compare``: query rows (sorted) and
    the comparison of each pair; in up to ``threads`` threads (None: one per core, at
    most 8), ``range_queries`` queries at a time (None: ``RANGE_QUERIES``)."""
    n = len(queries)
    size = RANGE_QUERIES if range_queries is None else range_queries
    bounds = np.append(np.arange(0, max(n, 1), size), n).tolist()

    def work(first: int, end: int) -> tuple[np.ndarray, Comparison]:
        q, a = candidate_pairs(queries, groups, len(assets), rows=(first, end))
        return q, compare(queries, assets, q, a)

    workers = min(os.cpu_count() or 1, 8) if threads is None else threads
    if n < PARALLEL_MIN_QUERIES or workers < 2:
        parts = [work(first, end) for first, end in pairwise(bounds)]
    else:
        with ThreadPoolExecutor(workers) as pool:
            parts = list(pool.map(work, bounds[:-1], bounds[1:]))
    if len(parts) == 1:
        return parts[0]
    q = np.concatenate([part[0] for part in parts])
    levels = np.concatenate([part[1].levels for part in parts])
    a = np.concatenate([part[1].a for part in parts])
    return q, Comparison(levels, a)


# --- the model: u from random pairs, m and the prior by EM ---------------------------------


@dataclass
class Model:
    """m and u per component and level, the prior share of matches among candidate pairs,
    and the term frequencies of street names and localities among the assets."""

    m: dict[str, np.ndarray]
    u: dict[str, np.ndarray]
    prior: float
    # Per asset row (distinct name): the share of asset names with its street, its locality.
    street_tf: np.ndarray
    locality_tf: np.ndarray

    def weights(self) -> dict[str, np.ndarray]:
        """log2(m/u) per component and level."""
        return {c: np.log2(self.m[c] / self.u[c]) for c in COMPONENTS}


def random_pairs(n_assets: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The random pairs of different asset rows ``estimate_u`` compares (left, right)."""
    rng = np.random.default_rng(seed)
    # Rare levels (an exact street) need some thousands of pairs to be seen at all.
    n = min(RANDOM_PAIRS, max(10_000, 10 * n_assets), n_assets * max(n_assets - 1, 0))
    left = rng.integers(0, max(n_assets, 1), n)
    right = rng.integers(0, max(n_assets, 1), n)
    keep = left != right
    return left[keep], right[keep]


def estimate_u(
    assets: Parsed, seed: int = 0, pairs: tuple[np.ndarray, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """u per level: level frequencies among random pairs of different assets (non-matches
    all, and independent of the size of the query batch); one pseudo-count per level so no
    level has u = 0. ``pairs``: ``random_pairs`` already drawn, as rows of ``assets`` (a
    parse of only the rows they name)."""
    left, right = random_pairs(len(assets), seed) if pairs is None else pairs
    levels = compare(assets, assets, left, right).levels
    return {c: _frequencies(levels[:, i], len(LEVELS[c])) for i, c in enumerate(COMPONENTS)}


def _frequencies(
    levels: np.ndarray,
    n_levels: int,
    weights: np.ndarray | None = None,
    prior: np.ndarray | None = None,
) -> np.ndarray:
    """Share of each level among the present ones (weighted), plus one pseudo-count per
    level, or ``prior`` counts when given."""
    present = levels != MISSING
    w = np.ones(len(levels)) if weights is None else weights
    counts = np.bincount(levels[present].astype(np.int64), weights=w[present], minlength=n_levels)
    extra = np.ones(n_levels) if prior is None else prior
    shares: np.ndarray = (counts + extra) / (counts.sum() + extra.sum())
    return shares


def posterior(
    log2_bf: np.ndarray,
    q: np.ndarray,
    n_queries: int,
    n_assets: int,
    share: float,
    multiplicity: np.ndarray | None = None,
) -> np.ndarray:
    """P(this candidate is the query's asset | every candidate's evidence).

    A query names at most one asset: a priori any given asset with chance ``share / n_assets``
    (``share``: how many queries have their asset in the table), none with ``1 - share``.
    Evidence ``2**log2_bf`` is measured against a random asset, so assets that are not
    candidates add next to nothing; two candidates with equal evidence share the probability,
    so neither reaches a link threshold above one half (a tie is never guessed).
    ``multiplicity``: how many assets hold each candidate's address (all equally likely).
    """
    scaled = np.exp2(np.clip(log2_bf - np.log2(max(n_assets, 1)), -300, 300))
    counted = scaled if multiplicity is None else scaled * multiplicity
    total = np.bincount(q, weights=counted, minlength=n_queries)
    probability: np.ndarray = share * scaled / (share * total[q] + (1.0 - share))
    return probability


def fit_em(
    levels: np.ndarray,
    q: np.ndarray,
    n_queries: int,
    n_assets: int,
    u: dict[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], float]:
    """m per level and the share of queries whose asset is in the table, by EM over the
    candidate pairs of ``n_queries`` queries with u held fixed (as Splink does), under
    ``posterior``'s one-asset model; ``DEFAULT_M`` is the starting point and a prior."""
    prior = {c: np.asarray(DEFAULT_M[c]) * PRIOR_QUERIES for c in COMPONENTS}
    m = {c: np.asarray(DEFAULT_M[c], dtype=np.float64) for c in COMPONENTS}
    share = DEFAULT_SHARE
    # Pairs share few distinct level patterns: evidence and m counts are computed per
    # pattern, only the posterior (normalised per query) per pair.
    code = np.zeros(len(levels), dtype=np.int64)
    for i in range(levels.shape[1]):
        code = code * 8 + (levels[:, i].astype(np.int64) + 1)
    distinct, pattern = np.unique(code, return_inverse=True)
    patterns = np.empty((len(distinct), levels.shape[1]), dtype=np.int8)
    rest = distinct.copy()
    for i in reversed(range(levels.shape[1])):
        patterns[:, i] = rest % 8 - 1
        rest //= 8
    for _ in range(EM_ITERATIONS):
        log_bf = _log2_bayes(patterns, m, u)[pattern]
        weight = posterior(log_bf, q, max(n_queries, 1), n_assets, share)
        share = float(
            np.clip(
                (weight.sum() + DEFAULT_SHARE * PRIOR_QUERIES) / (n_queries + PRIOR_QUERIES),
                1e-3,
                1 - 1e-3,
            )
        )
        per_pattern = np.bincount(pattern, weights=weight, minlength=len(distinct))
        m = {
            c: _frequencies(patterns[:, i], len(LEVELS[c]), per_pattern, prior[c])
            for i, c in enumerate(COMPONENTS)
        }
    return m, share


def _log2_bayes(
    levels: np.ndarray, m: dict[str, np.ndarray], u: dict[str, np.ndarray]
) -> np.ndarray:
    total = np.zeros(len(levels))
    for i, c in enumerate(COMPONENTS):
        lv = levels[:, i]
        present = lv != MISSING
        weight = np.log2(m[c] / u[c])
        total[present] += weight[lv[present]]
    return total


def term_frequencies(codes: np.ndarray) -> np.ndarray:
    """Per row, the share of rows holding its (non-empty) text code; 0 where empty."""
    counts = np.bincount(codes, minlength=1).astype(np.float64)
    counts[0] = 0.0
    share = counts / max(counts.sum(), 1.0)
    per_row: np.ndarray = share[codes]
    return per_row


def contributions(
    comparison: Comparison, model: Model, pairs: np.ndarray | None = None
) -> np.ndarray:
    """Evidence in bits, pairs x components (of ``pairs`` only, if given), with the
    term-frequency adjustment applied to exact streets and localities (0 for a missing
    component)."""
    levels = comparison.levels if pairs is None else comparison.levels[pairs]
    a = comparison.a if pairs is None else comparison.a[pairs]
    out = np.empty(levels.shape)
    for i, column in enumerate(_evidence_columns(levels, a, model)):
        out[:, i] = column
    return out


def evidence_total(comparison: Comparison, model: Model) -> np.ndarray:
    """Each pair's evidence in bits: the row sums of ``contributions``, added in the same
    order (the same figures), without making its pairs x components array (at 50,000
    queries of a million-row import, ~300 MB)."""
    total = np.zeros(len(comparison.levels))
    for column in _evidence_columns(comparison.levels, comparison.a, model):
        total += column
    return total


def _evidence_columns(levels: np.ndarray, a: np.ndarray, model: Model) -> Iterator[np.ndarray]:
    """Each component's evidence per pair, in ``COMPONENTS`` order."""
    weights = model.weights()
    adjusted = {"street": model.street_tf, "locality": model.locality_tf}
    for i, c in enumerate(COMPONENTS):
        # One gather per component: level MISSING (-1, the last index) takes the 0 appended.
        column: np.ndarray = np.append(weights[c], 0.0)[levels[:, i]]
        if c in adjusted:
            exact = np.flatnonzero(levels[:, i] == 0)
            if len(exact):
                freq = adjusted[c][a[exact]]
                column[exact] += np.log2(model.u[c][0] / np.maximum(freq, 1e-9))
        yield column


# --- deciding -------------------------------------------------------------------------------


@dataclass
class Scored:
    """Every candidate pair with its evidence and probability; per query the best."""

    q: np.ndarray  # query row of each pair
    a: np.ndarray  # asset row of each pair
    comparison: Comparison  # the pairs' levels (their evidence per component: ``bits``)
    probability: np.ndarray  # match probability of each pair
    best: np.ndarray  # per query: pair index of the best candidate, -1 when none
    second: np.ndarray  # per query: pair index of the runner-up, -1 when none
    model: Model

    def bits(self, pairs: np.ndarray) -> np.ndarray:
        """Evidence per component (log2 m/u, TF-adjusted) of ``pairs``: pairs x components."""
        return contributions(self.comparison, self.model, pairs)


FIT_QUERIES = 20_000


def _grouped(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For query rows of pairs sorted by query: (first pair of each query, the query's
    number among those present per pair)."""
    new = np.concatenate([[True], q[1:] != q[:-1]])[: len(q)]
    return np.flatnonzero(new), np.cumsum(new) - 1


def fit(
    assets: Parsed,
    q: np.ndarray,
    comparison: Comparison,
    u: dict[str, np.ndarray],
    tf: tuple[np.ndarray, np.ndarray],
    n_queries: int,
    seed: int = 0,
) -> Model:
    """The model for this data: m and the share of queries with an asset by EM on the
    ``comparison`` of the candidate pairs (query rows ``q``, sorted) of ``n_queries``
    queries (those without a candidate count too), at most ``FIT_QUERIES`` of them; u and
    the term frequencies ``tf`` (street, locality per asset row) come with the asset side."""
    levels = comparison.levels
    starts, number = _grouped(q)
    chosen = fit_chosen(len(starts), n_queries, seed)
    if chosen is not None:
        keep = chosen[number]
        levels, q, n_queries = levels[keep], q[keep], FIT_QUERIES
    return fit_levels(assets, levels, q, n_queries, u, tf)


def fit_chosen(n_present: int, n_queries: int, seed: int = 0) -> np.ndarray | None:
    """Which of the ``n_present`` queries with a candidate (in query order) ``fit`` fits on
    when ``n_queries`` queries were paired: a mask, or None for all of them."""
    if n_queries <= FIT_QUERIES:
        return None
    rng = np.random.default_rng(seed)
    chosen = np.zeros(n_present, dtype=bool)
    chosen[rng.choice(n_present, min(FIT_QUERIES, n_present), replace=False)] = True
    return chosen


def fit_levels(
    assets: Parsed,
    levels: np.ndarray,
    q: np.ndarray,
    n_queries: int,
    u: dict[str, np.ndarray],
    tf: tuple[np.ndarray, np.ndarray],
) -> Model:
    """``fit`` on the pairs chosen for it: their ``levels`` and query rows ``q`` (sorted)
    of ``n_queries`` queries (``FIT_QUERIES`` when they were chosen)."""
    _, number = _grouped(q)
    m, share = fit_em(levels, number, n_queries, len(assets), u)
    return Model(m, u, share, *tf)


def present_queries(q: np.ndarray) -> np.ndarray:
    """For query rows of pairs sorted by query: each pair's query numbered among the
    queries with a pair (what ``fit_chosen`` chooses among)."""
    return _grouped(q)[1]


def score(
    q: np.ndarray,
    comparison: Comparison,
    model: Model,
    n_queries: int,
    n_assets: int,
    multiplicity: np.ndarray | None = None,
) -> Scored:
    """Evidence and match probability of every pair (query rows ``q``, sorted; per asset,
    when ``multiplicity`` assets share an address; ``n_assets`` of them in all); the best
    and runner-up per query."""
    a = comparison.a
    total = evidence_total(comparison, model)
    probability = posterior(
        total,
        q,
        n_queries,
        n_assets,
        model.prior,
        None if multiplicity is None else multiplicity[a],
    )
    best = np.full(n_queries, -1, dtype=np.int64)
    second = np.full(n_queries, -1, dtype=np.int64)
    if len(q):
        first, second_pair = _top_two(total, q)
        best[q[first]] = first
        has = second_pair >= 0
        second[q[first[has]]] = second_pair[has]
    return Scored(q, a, comparison, probability, best, second, model)


def _top_two(total: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query (pairs sorted by query): the pair with the most evidence and the
    runner-up (-1 when none); of equals, the first pair."""
    starts, number = _grouped(q)
    index = np.arange(len(total))
    top = np.maximum.reduceat(total, starts)
    first = np.minimum.reduceat(np.where(total == top[number], index, len(total)), starts)
    rest = total.copy()
    rest[first] = -np.inf
    runner = np.maximum.reduceat(rest, starts)
    candidate = (rest == runner[number]) & np.isfinite(rest)
    second = np.minimum.reduceat(np.where(candidate, index, len(total)), starts)
    return first, np.where(second < len(total), second, -1)
