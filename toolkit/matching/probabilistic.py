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

from dataclasses import dataclass, field

import jellyfish
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from rapidfuzz import process
from rapidfuzz.distance import OSA, JaroWinkler

from toolkit.matching.address import (
    Analysis,
    Structure,
    Words,
    _join_words,
    _per_row_cumsum,
    mix64,
    string_hashes,
)

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
# Blocking: a key shared by more assets than this says too little to be worth the pairs.
MAX_KEY_ASSETS = 100
# At most this many candidates per query reach scoring (those sharing the rarest keys).
MAX_CANDIDATES = 30
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


@dataclass(frozen=True)
class Parsed:
    """The components of distinct address strings, as object arrays of str ("" = absent)."""

    number: np.ndarray
    unit: np.ndarray
    postcode: np.ndarray
    state: np.ndarray
    street_type: np.ndarray
    street: np.ndarray  # street name words, joined without spaces (split/joined words agree)
    locality: np.ndarray  # locality words, joined without spaces
    alpha: np.ndarray  # every name and locality word, in order, joined without spaces
    head: dict[int, np.ndarray]  # the first k name/locality words, joined
    tail: dict[int, np.ndarray]  # the words after the first k, joined
    last: dict[int, np.ndarray]  # the last k name/locality words, joined
    street_words: np.ndarray  # int64: number of words in the street name
    locality_words: np.ndarray  # int64: number of words in the locality
    key_rows: np.ndarray  # blocking keys: distinct-string row of each key
    keys: np.ndarray  # uint64 blocking key

    @classmethod
    def of(cls, analysis: Analysis, *, field_data: bool = False) -> Parsed:
        """Parse distinct address strings; ``field_data`` (queries, not an asset table)
        also takes a house number found anywhere (MOUNT CLEAR 31 MAGPIE ROAD: the suburb
        typed first), where clean asset names only allow one moved to the end."""
        words, parts = analysis.words, analysis.parts
        vocab = words.vocabulary
        is_alpha_word = np.array([w.isalpha() for w in vocab], dtype=bool)[words.word_code]
        has_digit = np.array([any(ch.isdigit() for ch in w) for w in vocab], dtype=bool)
        # Field data may put "UNIT 2 6" after the suburb: the unit keyword anywhere, and
        # the number after it is the unit.
        late_keyword = np.zeros(len(words.row), dtype=bool)
        late_unit = np.zeros(len(words.row), dtype=bool)
        if field_data:
            late_keyword = (vocab == "UNIT")[words.word_code] & ~parts.is_unit
            follows = np.zeros(len(words.row), dtype=bool)
            follows[1:] = late_keyword[:-1] & (words.row[1:] == words.row[:-1])
            late_unit = follows & has_digit[words.word_code]
            late_keyword[:-1] &= late_unit[1:]
        alpha = (parts.is_name | parts.is_locality) & is_alpha_word & ~late_keyword
        # For the readings split by the asset's shape, every word of letters counts, street
        # types included: GARDENS in LAKE GARDENS is a locality word, not the street type.
        lettered = alpha | (parts.is_type & is_alpha_word)
        rank = _per_row_cumsum(lettered, words.row, words.n_rows) - 1
        n_lettered = np.bincount(words.row[lettered], minlength=words.n_rows)
        from_end = n_lettered[words.row] - rank  # 1 for the last word of letters

        def joined(mask: np.ndarray) -> np.ndarray:
            text = pa.array(_join_words(words, mask), type=pa.large_string())
            return np.asarray(
                pc.replace_substring(text, " ", "").to_numpy(zero_copy_only=False), dtype=object
            )

        unit_number = (parts.is_unit & (words.position == 1)) | late_unit
        # The house number: the parsed one, else a number ending the address that is not
        # a postcode (SMITH STREET KEW 17: the number moved to the end).
        parsed_number = np.bincount(words.row[parts.is_number], minlength=words.n_rows) > 0
        row_length = np.bincount(words.row, minlength=words.n_rows)
        last_word = words.position == row_length[words.row] - 1
        stray = (
            has_digit[words.word_code]
            & (last_word | field_data)
            & ~parts.is_unit
            & ~late_unit
            & ~parts.is_postcode
            & ~parsed_number[words.row]
        )
        number_word = parts.is_number | stray
        number_rank = _per_row_cumsum(number_word, words.row, words.n_rows)
        street_words = np.bincount(
            words.row[parts.is_name & is_alpha_word], minlength=words.n_rows
        ).astype(np.int64)
        locality_words = np.bincount(
            words.row[parts.is_locality & is_alpha_word], minlength=words.n_rows
        ).astype(np.int64)
        parsed = {
            "locality_words": locality_words,
            "number": _join_words(words, number_word & (number_rank == 1)),
            "unit": _join_words(words, unit_number),
            "postcode": _join_words(words, parts.is_postcode),
            "state": _join_words(words, parts.is_state),
            "street_type": _join_words(words, parts.is_type),
            "street": joined(parts.is_name & is_alpha_word),
            "locality": joined(parts.is_locality & is_alpha_word),
            "alpha": joined(alpha),
            "head": {k: joined(lettered & (rank < k)) for k in (1, 2, 3)},
            "tail": {k: joined(lettered & (rank >= k)) for k in (1, 2, 3)},
            "last": {k: joined(lettered & (from_end <= k)) for k in (1, 2, 3)},
            "street_words": street_words,
        }
        key_rows, keys = _blocking_keys(
            words,
            parts,
            alpha,
            parsed["number"],
            parsed["postcode"],
            parsed["street"],
            parsed["locality"],
            joined(alpha | (parts.is_type & is_alpha_word)),
            parsed["street_type"],
        )
        # Sorted by key once here, so an asset side (cached with its index) is never
        # sorted again per batch of queries.
        order = np.argsort(keys, kind="stable")
        return cls(**parsed, key_rows=key_rows[order], keys=keys[order])

    def __len__(self) -> int:
        return len(self.number)


def _blocking_keys(
    words: Words,
    parts: Structure,
    alpha: np.ndarray,
    number: np.ndarray,
    postcode: np.ndarray,
    street: np.ndarray,
    locality: np.ndarray,
    letters: np.ndarray,
    street_type: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Blocking keys per distinct string, as a long (row, key) table.

    Each key survives an error in the components it leaves out, so a true pair shares at
    least one key unless two components are wrong at once:
    number + sounds-like word (any street or locality word: a typo elsewhere is harmless),
    number + a word's first or last three letters (soundex misses a wrong first letter
    and, in short words, a wrong last one),
    two sounds-like words in any order (the number missing or wrong),
    number + street type + the street name's first letter;
    postcode + number; a single word, spelt exactly or (five letters or more) sounding
    alike; the street, the locality or all the words with their spaces removed.
    """
    vocab = words.vocabulary
    sound = string_hashes(
        np.array([jellyfish.soundex(w) if w.isalpha() else w for w in vocab], dtype=object)
    )
    ending = string_hashes(np.array([w[-3:] if len(w) >= 4 else "" for w in vocab], dtype=object))
    beginning = string_hashes(np.array([w[:3] for w in vocab], dtype=object))
    long_word = np.array([len(w) >= 4 for w in vocab], dtype=bool)
    number_hash = np.where(number != "", string_hashes(number.astype(object)), 0).astype(np.uint64)
    type_hash = np.where(street_type != "", string_hashes(street_type.astype(object)), 0).astype(
        np.uint64
    )
    rank_in_name = _per_row_cumsum(alpha & parts.is_name, words.row, words.n_rows)
    postcode_hash = np.where(postcode != "", string_hashes(postcode.astype(object)), 0).astype(
        np.uint64
    )
    row = words.row[alpha]
    code = words.word_code[alpha]
    rows: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    has_number = number_hash[row] != 0
    rows.append(row[has_number])
    keys.append(mix64(number_hash[row[has_number]] ^ mix64(sound[code[has_number]])))
    with_ending = has_number & long_word[code]
    rows.append(row[with_ending])
    keys.append(mix64(number_hash[row[with_ending]] ^ mix64(ending[code[with_ending]] + 1)))
    rows.append(row[with_ending])
    keys.append(mix64(number_hash[row[with_ending]] ^ mix64(beginning[code[with_ending]] + 7)))
    # Unordered pairs of words of one address (up to 6 apart).
    for gap in range(1, 7):
        same = row[gap:] == row[:-gap]
        first, second = code[:-gap][same], code[gap:][same]
        rows.append(row[gap:][same])
        keys.append(mix64(mix64(sound[first] + 2) + mix64(sound[second] + 2)))
    # A single word spelt exactly (4 letters or more), without the number: the number and
    # every other word may be wrong; common words fall to MAX_KEY_ASSETS.
    exact = string_hashes(vocab)
    single = long_word[code]
    rows.append(row[single])
    keys.append(mix64(exact[code[single]] + 4))
    # ... or sounding alike, for words of five letters or more (rarer codes).
    longer = np.array([len(w) >= 5 for w in vocab], dtype=bool)[code]
    rows.append(row[longer])
    keys.append(mix64(sound[code[longer]] + 9))
    # The street, the locality, and all the words with the street type, each with their
    # words joined (VENUS BAY = VENUSBAY; HALLENC LOSE = HALLEN CLOSE).
    for text, salt in ((street, 5), (locality, 6), (letters, 8)):
        present = text != ""
        hashed = string_hashes(text[present].astype(object))
        rows.append(np.flatnonzero(present))
        keys.append(mix64(hashed + salt))
    # Number + street type + the street name's first letter: any later typo in the name.
    first_name = alpha & parts.is_name & (rank_in_name == 1)
    row_first = words.row[first_name]
    has_type = (number_hash[row_first] != 0) & (type_hash[row_first] != 0)
    initial = string_hashes(np.array([w[:1] for w in vocab], dtype=object))
    rows.append(row_first[has_type])
    keys.append(
        mix64(
            number_hash[row_first[has_type]]
            ^ mix64(type_hash[row_first[has_type]] + initial[words.word_code[first_name]][has_type])
        )
    )
    both = (number_hash != 0) & (postcode_hash != 0)
    rows.append(np.flatnonzero(both))
    keys.append(mix64(number_hash[both] ^ mix64(postcode_hash[both] + 3)))
    all_rows = np.concatenate(rows).astype(np.int64)
    all_keys = np.concatenate(keys).astype(np.uint64)
    # One row may give the same key twice (two words sounding alike).
    table = pd.DataFrame({"row": all_rows, "key": all_keys}).drop_duplicates()
    return table["row"].to_numpy(), table["key"].to_numpy(dtype=np.uint64)


def candidate_pairs(
    queries: Parsed,
    assets: Parsed,
    allowed: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(query row, asset row) of every pair sharing a blocking key, at most
    ``MAX_CANDIDATES`` per query (those sharing the rarest keys first); rows are distinct
    strings."""
    a_rows, a_keys = assets.key_rows, assets.keys
    if allowed is not None:
        keep = allowed[a_rows]
        a_rows, a_keys = a_rows[keep], a_keys[keep]
    if len(a_keys) > 1 and not bool(np.all(a_keys[:-1] <= a_keys[1:])):
        order = np.argsort(a_keys, kind="stable")
        a_rows, a_keys = a_rows[order], a_keys[order]
    q_rows, q_keys = queries.key_rows, queries.keys
    if rows is not None:
        wanted = np.zeros(len(queries), dtype=bool)
        wanted[rows] = True
        keep = wanted[q_rows]
        q_rows, q_keys = q_rows[keep], q_keys[keep]
    start = np.searchsorted(a_keys, q_keys, side="left")
    end = np.searchsorted(a_keys, q_keys, side="right")
    size = end - start
    useful = (size > 0) & (size <= MAX_KEY_ASSETS)
    q_rows, start, size = q_rows[useful], start[useful], size[useful]
    total = int(size.sum())
    pair_q = np.repeat(q_rows, size)
    offsets = np.arange(total) - np.repeat(np.cumsum(size) - size, size)
    pair_a = a_rows[np.repeat(start, size) + offsets]
    n_assets = np.int64(len(assets))
    combined = pair_q * n_assets + pair_a
    # A shared key says more the fewer assets hold it: rank by the sum of log2(N / size).
    key_weight = np.repeat(np.log2((len(assets) + 1) / size), size)
    unique, inverse = np.unique(combined, return_inverse=True)
    shared = np.bincount(inverse, weights=key_weight, minlength=len(unique))
    pair_q, pair_a = unique // n_assets, unique % n_assets
    # Keep the candidates sharing most keys, per query.
    order = np.lexsort((-shared, pair_q))
    pair_q, pair_a = pair_q[order], pair_a[order]
    counts = np.bincount(pair_q, minlength=len(queries))
    rank = np.arange(len(pair_q)) - (np.cumsum(counts) - counts)[pair_q]
    keep = rank < MAX_CANDIDATES
    return pair_q[keep], pair_a[keep]


# --- comparisons ---------------------------------------------------------------------------


def _jw(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Jaro–Winkler similarity pair by pair; NaN where either side is empty."""
    if not len(left):
        return np.zeros(0)
    # The object arrays go in as they are: copying them to lists first cost as much again.
    sim = process.cpdist(left, right, scorer=JaroWinkler.normalized_similarity, workers=-1).astype(
        np.float64
    )
    empty = (left == "") | (right == "")
    sim[empty] = np.nan
    return sim


def _text_level(sim: np.ndarray) -> np.ndarray:
    level = np.full(len(sim), len(TEXT_BANDS) + 1, dtype=np.int8)
    for band in reversed(range(len(TEXT_BANDS))):
        level[sim >= TEXT_BANDS[band]] = band + 1
    level[sim >= 1.0] = 0
    level[np.isnan(sim)] = MISSING
    return level


def _code_level(left: np.ndarray, right: np.ndarray, near: bool) -> np.ndarray:
    """Equal (0), one edit apart (1, when ``near``), different; MISSING where absent."""
    level = np.full(len(left), 2 if near else 1, dtype=np.int8)
    if near and len(left):
        distance = process.cpdist(left, right, scorer=OSA.distance, workers=-1)
        level[distance <= 1] = 1
    level[left == right] = 0
    level[(left == "") | (right == "")] = MISSING
    return level


def _unit_level(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Units equal (0), different (1), or only one side names a unit (2: a unit parcel and
    the whole lot are different assets); MISSING when neither does."""
    level = np.where(left == right, 0, 1).astype(np.int8)
    one_sided = (left == "") != (right == "")
    level[one_sided] = 2
    level[(left == "") & (right == "")] = MISSING
    return level


@dataclass
class Comparison:
    """Per candidate pair: the level of each component (``MISSING`` when not comparable)
    and the similarities used to choose the reading of the query."""

    levels: np.ndarray  # int8, pairs x components
    street_value: np.ndarray  # the asset's street (for term frequencies), per pair
    locality_value: np.ndarray


def compare(queries: Parsed, assets: Parsed, q: np.ndarray, a: np.ndarray) -> Comparison:
    """Compare each (query row ``q``, asset row ``a``) pair, component by component.

    Which query words are the street and which the locality is read five ways, and the
    reading that agrees best with the asset is kept: as parsed; split where the asset's
    street name ends (a street type missing or unrecognised); the asset's number of street
    words first and of locality words last (garbled words between; in these two a street
    type that differs counts for nothing: it may be a locality word); all words the locality (the
    street missing); all words the street (the locality missing).
    """
    a_street, a_locality = assets.street[a], assets.locality[a]
    k = np.clip(assets.street_words[a], 1, 3)
    head = np.select([k == 1, k == 2], [queries.head[1][q], queries.head[2][q]], queries.head[3][q])
    tail = np.select([k == 1, k == 2], [queries.tail[1][q], queries.tail[2][q]], queries.tail[3][q])
    j = np.clip(assets.locality_words[a], 1, 3)
    last = np.select([j == 1, j == 2], [queries.last[1][q], queries.last[2][q]], queries.last[3][q])
    head_street = _jw(head, a_street)  # two readings share it
    readings = [
        (_jw(queries.street[q], a_street), _jw(queries.locality[q], a_locality)),
        (head_street, _jw(tail, a_locality)),
        (head_street, _jw(last, a_locality)),
        (np.full(len(q), np.nan), _jw(queries.alpha[q], a_locality)),
        (_jw(queries.alpha[q], a_street), np.full(len(q), np.nan)),
    ]
    totals = np.stack(
        [
            np.nan_to_num(s, nan=ABSENT_SIMILARITY) + np.nan_to_num(lo, nan=ABSENT_SIMILARITY)
            for s, lo in readings
        ]
    )
    best = np.argmax(totals, axis=0)
    street_sim = np.choose(best, [r[0] for r in readings])
    locality_sim = np.choose(best, [r[1] for r in readings])
    street_type = _code_level(queries.street_type[q], assets.street_type[a], near=False)
    # Split by the asset's shape, the query's "type" may be a word of its locality: a type
    # that differs is then no evidence either way.
    street_type[np.isin(best, (1, 2)) & (street_type == 1)] = MISSING
    levels = np.stack(
        [
            _code_level(queries.number[q], assets.number[a], near=True),
            _text_level(street_sim),
            street_type,
            _text_level(locality_sim),
            _code_level(queries.postcode[q], assets.postcode[a], near=True),
            _unit_level(queries.unit[q], assets.unit[a]),
            _code_level(queries.state[q], assets.state[a], near=False),
        ],
        axis=1,
    )
    return Comparison(levels, a_street, a_locality)


# --- the model: u from random pairs, m and the prior by EM ---------------------------------


@dataclass
class Model:
    """m and u per component and level, the prior share of matches among candidate pairs,
    and the term frequencies of street names and localities among the assets."""

    m: dict[str, np.ndarray]
    u: dict[str, np.ndarray]
    prior: float
    street_tf: dict[str, float] = field(default_factory=dict)
    locality_tf: dict[str, float] = field(default_factory=dict)

    def weights(self) -> dict[str, np.ndarray]:
        """log2(m/u) per component and level."""
        return {c: np.log2(self.m[c] / self.u[c]) for c in COMPONENTS}


def estimate_u(assets: Parsed, seed: int = 0) -> dict[str, np.ndarray]:
    """u per level: level frequencies among random pairs of different assets (non-matches
    all, and independent of the size of the query batch); one pseudo-count per level so no
    level has u = 0."""
    rng = np.random.default_rng(seed)
    # Rare levels (an exact street) need some thousands of pairs to be seen at all.
    n = min(RANDOM_PAIRS, max(10_000, 10 * len(assets)), len(assets) * max(len(assets) - 1, 0))
    left = rng.integers(0, max(len(assets), 1), n)
    right = rng.integers(0, max(len(assets), 1), n)
    keep = left != right
    levels = compare(assets, assets, left[keep], right[keep]).levels
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
    return (counts + extra) / (counts.sum() + extra.sum())


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
    return share * scaled / (share * total[q] + (1.0 - share))


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


def term_frequencies(values: np.ndarray) -> dict[str, float]:
    """Share of assets holding each non-empty value."""
    present = values[values != ""]
    if not len(present):
        return {}
    counts = pd.Series(present).value_counts()
    return (counts / len(present)).to_dict()


def contributions(comparison: Comparison, model: Model) -> np.ndarray:
    """Evidence in bits, pairs x components, with the term-frequency adjustment applied to
    exact streets and localities (0 for a missing component)."""
    levels = comparison.levels
    out = np.zeros(levels.shape)
    weights = model.weights()
    for i, c in enumerate(COMPONENTS):
        lv = levels[:, i]
        present = lv != MISSING
        out[present, i] = weights[c][lv[present]]
    for column, values, tf in (
        (COMPONENTS.index("street"), comparison.street_value, model.street_tf),
        (COMPONENTS.index("locality"), comparison.locality_value, model.locality_tf),
    ):
        exact = levels[:, column] == 0
        if not exact.any() or not tf:
            continue
        freq = pd.Series(values[exact]).map(tf).fillna(min(tf.values())).to_numpy()
        u_exact = model.u[COMPONENTS[column]][0]
        out[exact, column] += np.log2(u_exact / np.maximum(freq, 1e-9))
    return out


# --- deciding -------------------------------------------------------------------------------


@dataclass
class Scored:
    """Every candidate pair with its evidence and probability; per query the best."""

    q: np.ndarray  # query row of each pair
    a: np.ndarray  # asset row of each pair
    bits: np.ndarray  # pairs x components: evidence per component (log2 m/u, TF-adjusted)
    probability: np.ndarray  # match probability of each pair
    best: np.ndarray  # per query: pair index of the best candidate, -1 when none
    second: np.ndarray  # per query: pair index of the runner-up, -1 when none
    model: Model


FIT_QUERIES = 20_000


def fit(
    queries: Parsed,
    assets: Parsed,
    q: np.ndarray,
    a: np.ndarray,
    u: dict[str, np.ndarray],
    n_queries: int,
    seed: int = 0,
    comparison: Comparison | None = None,
    frequencies: tuple[dict[str, float], dict[str, float]] | None = None,
) -> Model:
    """The model for this data: m and the share of queries with an asset by EM on the
    candidate pairs of the ``n_queries`` queries (at most ``FIT_QUERIES`` of them).
    ``comparison`` of the pairs and the assets' term ``frequencies`` (street, locality) are
    reused when given."""
    levels = (compare(queries, assets, q, a) if comparison is None else comparison).levels
    if n_queries > FIT_QUERIES:
        rng = np.random.default_rng(seed)
        distinct = np.unique(q)
        chosen = rng.choice(distinct, min(FIT_QUERIES, len(distinct)), replace=False)
        keep = np.isin(q, chosen)
        q, levels = q[keep], levels[keep]
        n_queries = FIT_QUERIES
    _, q_compact = np.unique(q, return_inverse=True)
    m, share = fit_em(levels, q_compact.astype(np.int64), n_queries, len(assets), u)
    if frequencies is None:
        frequencies = (term_frequencies(assets.street), term_frequencies(assets.locality))
    return Model(m, u, share, *frequencies)


def score(
    queries: Parsed,
    assets: Parsed,
    q: np.ndarray,
    a: np.ndarray,
    model: Model,
    multiplicity: np.ndarray | None = None,
    n_assets: int | None = None,
    comparison: Comparison | None = None,
) -> Scored:
    """Evidence and match probability of every pair (per asset, when ``multiplicity``
    assets share an address; ``n_assets`` of them in all); the best and runner-up per
    query. The pairs' ``comparison`` is reused when given."""
    if comparison is None:
        comparison = compare(queries, assets, q, a)
    bits = contributions(comparison, model)
    total = bits.sum(axis=1)
    probability = posterior(
        total,
        q,
        len(queries),
        len(assets) if n_assets is None else n_assets,
        model.prior,
        None if multiplicity is None else multiplicity[a],
    )
    order = np.lexsort((-total, q))
    sorted_q = q[order]
    first = np.ones(len(q), dtype=bool)
    first[1:] = sorted_q[1:] != sorted_q[:-1]
    best = np.full(len(queries), -1, dtype=np.int64)
    best[sorted_q[first]] = order[first]
    is_second = np.zeros(len(q), dtype=bool)
    is_second[1:] = first[:-1] & ~first[1:]
    second = np.full(len(queries), -1, dtype=np.int64)
    second[sorted_q[is_second]] = order[is_second]
    return Scored(q, a, bits, probability, best, second, model)


@dataclass(frozen=True)
class AssetSide:
    """What the matcher needs of an asset table, computed once per index: the parsed
    distinct names, each asset's row among them, and u from random pairs of them."""

    parsed: Parsed
    codes: np.ndarray  # int64: distinct-name row of each asset
    u: dict[str, np.ndarray]
    frequencies: tuple[dict[str, float], dict[str, float]]  # of streets, of localities

    @classmethod
    def of(cls, names: pd.Series) -> AssetSide:
        analysis = Analysis.of(names)
        parsed = Parsed.of(analysis)
        frequencies = (term_frequencies(parsed.street), term_frequencies(parsed.locality))
        return cls(parsed, analysis.codes, estimate_u(parsed), frequencies)


def parsed_queries(analysis: Analysis) -> Parsed:
    """``Parsed`` of an analysis's distinct strings, cached with the analysis."""
    cache = analysis._cache
    if "parsed" not in cache:
        cache["parsed"] = Parsed.of(analysis, field_data=True)  # type: ignore[assignment]
    return cache["parsed"]  # type: ignore[return-value]
