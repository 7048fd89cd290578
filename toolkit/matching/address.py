"""Vectorised normalisation and parsing of Australian addresses.

Every function works on a whole column and computes each distinct string once. Text goes
through pyarrow's RE2 kernels (fast, no Python per row); words are then handled as a flat
array with row offsets, so per-word work (street-type table, sounds-like keys) runs once per
*distinct word* and is mapped back with integer codes.

Canonical form: upper case, accents folded (``CAFÉ`` -> ``CAFE``), punctuation removed,
spaces collapsed, every street type in its full form (``ST`` -> ``STREET``), unit forms
``1/12``, ``UNIT 1 12``, ``U1 12``, ``FLAT 1 12``, ``1 12 SMITH`` -> ``UNIT 1 12``, ranges
``12 - 14`` -> ``12-14``. The parse splits a canonical address into unit, number, street
name, street type, locality, state and postcode; locality, state and postcode are optional.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import jellyfish
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# Australia Post / AS 4590 common street types: canonical (full) form -> abbreviations.
STREET_TYPES: dict[str, tuple[str, ...]] = {
    "ALLEY": ("ALLY", "AL"),
    "APPROACH": ("APP",),
    "ARCADE": ("ARC",),
    "AVENUE": ("AVE", "AV", "AVN"),
    "BOULEVARD": ("BVD", "BLVD", "BOULEVARDE", "BVDE"),
    "BYPASS": ("BYPA",),
    "CHASE": ("CH",),
    "CIRCLE": ("CIR",),
    "CIRCUIT": ("CCT",),
    "CLOSE": ("CL",),
    "CONCOURSE": ("CON", "CNSE"),
    "COURT": ("CT", "CRT"),
    "CRESCENT": ("CRES", "CR", "CRS", "CRESC"),
    "DRIVE": ("DR", "DRV"),
    "ESPLANADE": ("ESP", "ESPL"),
    "FREEWAY": ("FWY",),
    "GARDENS": ("GDNS",),
    "GLADE": ("GLD",),
    "GREEN": ("GRN",),
    "GROVE": ("GR", "GV", "GRV"),
    "HIGHWAY": ("HWY",),
    "LANE": ("LN",),
    "LOOP": ("LP",),
    "MALL": (),
    "MEWS": (),
    "PARADE": ("PDE",),
    "PARKWAY": ("PKWY",),
    "PLACE": ("PL",),
    "PROMENADE": ("PROM",),
    "QUAY": ("QY",),
    "RIDGE": ("RDGE",),
    "RISE": (),
    "ROAD": ("RD",),
    "ROW": (),
    "SQUARE": ("SQ",),
    "STREET": ("ST", "STR"),
    "TERRACE": ("TCE", "TER", "TERR"),
    "TRACK": ("TRK",),
    "TRAIL": ("TRL",),
    "VIEW": ("VW",),
    "WALK": ("WLK",),
    "WAY": ("WY",),
}

# Street types that may come before the name (``AVENUE SCOTT``): those that seldom begin a
# street's own name. Not STREET (``ST KILDA`` is Saint Kilda), nor GROVE, GREEN, VIEW, RISE,
# RIDGE... (``GREEN STREET`` with its type left out would read as type GREEN, name STREET).
LEADING_TYPES = frozenset(
    {
        "ALLEY", "APPROACH", "ARCADE", "AVENUE", "BOULEVARD", "BYPASS", "CIRCUIT", "CLOSE",
        "CONCOURSE", "COURT", "CRESCENT", "DRIVE", "ESPLANADE", "FREEWAY", "HIGHWAY", "LANE",
        "PARADE", "PARKWAY", "PLACE", "PROMENADE", "ROAD", "TERRACE",
    }
)  # fmt: skip

# Every spelling -> the one canonical token.
STREET_TYPE_CANONICAL: dict[str, str] = {
    spelling: full for full, short in STREET_TYPES.items() for spelling in (full, *short)
}

STATES: dict[str, str] = {
    "VIC": "VIC",
    "VICTORIA": "VIC",
    "NSW": "NSW",
    "QLD": "QLD",
    "QUEENSLAND": "QLD",
    "SA": "SA",
    "WA": "WA",
    "TAS": "TAS",
    "TASMANIA": "TAS",
    "NT": "NT",
    "ACT": "ACT",
}

PARSED_COLUMNS = (
    "normalised",
    "unit",
    "number",
    "street_name",
    "street_type",
    "street",
    "locality",
    "state",
    "postcode",
)

_UNIT_WORDS = r"(?:UNIT|UNT|U|FLAT|FLT|APARTMENT|APT|SUITE|STE|SHOP)"


def _sub(text: pa.Array, pattern: str, replacement: str) -> pa.Array:
    """Regex replace, run only on the strings that match: RE2 matching is several times
    cheaper than replacing, and most addresses need none of these fixes."""
    hit = pc.fill_null(pc.match_substring_regex(text, pattern), False)
    if not pc.any(hit).as_py():
        return text
    changed = pc.replace_substring_regex(pc.filter(text, hit), pattern, replacement)
    return pc.replace_with_mask(text, hit, changed)


def clean_text(texts: pa.Array) -> pa.Array:
    """Upper-case, fold accents, canonical unit and range forms, punctuation to spaces.

    Spaces are not collapsed here: ``split_words`` drops the empty words instead, which is
    cheaper than another regex pass over the column.
    """
    text = pc.fill_null(texts.cast(pa.large_string()), "")
    ascii_only = pc.string_is_ascii(text)
    if not pc.all(ascii_only).as_py():
        # Accent folding is the slow part; only the non-ASCII strings need it.
        non_ascii = pc.invert(ascii_only)
        folded = pc.utf8_normalize(pc.filter(text, non_ascii), form="NFKD")
        folded = pc.replace_substring_regex(folded, r"\p{M}+", "")
        text = pc.replace_with_mask(text, non_ascii, folded)
        text = pc.utf8_upper(text)
    else:
        text = pc.ascii_upper(text)
    # A string that no fix matches is left as it is by every one of them (each changes only
    # the strings it matches), so the fixes run on the strings one regex of all of them
    # finds: one pass over the column instead of one per fix.
    hit = pc.fill_null(pc.match_substring_regex(text, _ANY_FIX), False)
    if not pc.any(hit).as_py():
        return text
    fixed = pc.filter(text, hit)
    for pattern, replacement in _FIXES:
        fixed = _sub(fixed, pattern, replacement)
    return pc.replace_with_mask(text, hit, fixed)


# The fixes of ``clean_text``, in order.
_FIXES = (
    (r"[^\p{L}\p{N}/\- ]+", " "),
    # A house number typed against its street's name ("14EMU ROAD"): apart. Two letters
    # stay (an ordinal, 2ND, or a number's suffix, 12A, is no name).
    (r"\b([0-9]+)([A-Z]{3,})\b", r"\1 \2"),
    (r"([0-9]+[A-Z]?) *- *([0-9]+[A-Z]?)", r"\1-\2"),
    (r"^ *(?:" + _UNIT_WORDS + r" *)?([0-9]+[A-Z]?|[A-Z]) */ *([0-9])", r"UNIT \1 \2"),
    (r"^ *" + _UNIT_WORDS + r" *([0-9]+[A-Z]?|[A-Z]) +([0-9])", r"UNIT \1 \2"),
    # Two numbers before the street name ("1 76 BIRCH ROAD"): the unit, then the house.
    (r"^ *([0-9]+[A-Z]?) +([0-9]+[A-Z]?) +([A-Z])", r"UNIT \1 \2 \3"),
    # Name words written out or short (SAINT JOHNS / ST JOHNS, MOUNT CLEAR / MT CLEAR) take
    # one form, on both sides of a match; a non-final ST is then read as Saint, not Street.
    (r"\bSAINT\b", "ST"),
    (r"\bMOUNT\b", "MT"),
    # A slash or dash left over is punctuation, not a unit or a range.
    (r"/", " "),
    (r"(^|[^0-9])-", r"\1 "),
    (r"-([^0-9]|$)", r" \1"),
)
_ANY_FIX = "|".join(f"(?:{pattern})" for pattern, _ in _FIXES)


@dataclass(frozen=True)
class Words:
    """Distinct address strings split into words: a flat word array with row offsets."""

    row: np.ndarray  # int64, the distinct-address row of each flat word
    position: np.ndarray  # int64, 0-based position of the word in its address
    word_code: np.ndarray  # int64, index into ``vocabulary``
    vocabulary: np.ndarray  # object array of distinct canonical words
    n_rows: int

    @cached_property
    def row_runs(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's first flat word and its number of words (words sorted by row):
        counted once for the several per-row sums of an analysis."""
        counts = np.bincount(self.row, minlength=self.n_rows)
        return np.cumsum(counts) - counts, counts


# Street types that are also written joined to the name (``PRIDHAMSTREET``): long and
# rarely the tail of a real name word (unlike GROVE, RIDGE, VIEW: ELMGROVE, PINERIDGE).
_JOINED_TYPES = (
    "STREET", "CRESCENT", "AVENUE", "CIRCUIT", "PLACE", "DRIVE", "CLOSE", "COURT", "PARADE",
    "TERRACE", "HIGHWAY", "BOULEVARD", "ESPLANADE",
)  # fmt: skip
# A word this long or longer, one edit (OSA: transpositions count one) from a street type's
# full form, is that type misspelt (SETREET, CRESCANT, STRET); shorter words are too often
# real names (LANG, ROAM).
TYPO_MIN_LENGTH = 5


def _typo_canonical(words: np.ndarray) -> dict[str, str]:
    """Misspelt street types and states among ``words`` -> their canonical form."""
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    candidates = [
        w
        for w in words
        if len(w) >= TYPO_MIN_LENGTH and w.isalpha() and w not in STREET_TYPE_CANONICAL
    ]
    if not candidates:
        return {}
    full = [t for t in STREET_TYPES if len(t) >= TYPO_MIN_LENGTH - 1]
    distances = process.cdist(candidates, full, scorer=OSA.distance, score_cutoff=1, workers=1)
    found: dict[str, str] = {}
    best = distances.argmin(axis=1)
    for word, column, row in zip(candidates, best, distances, strict=True):
        if row[column] <= 1 and (row <= 1).sum() == 1:
            found[word] = full[column]
    return found


def split_words(cleaned: pa.Array) -> Words:
    """Split cleaned text into canonical words (street types in full, states abbreviated;
    a street type misspelt by one edit, or joined to the name before it, is recognised)."""
    cleaned = _sub(cleaned, r"\b([A-Z]{3,}?)(" + "|".join(_JOINED_TYPES) + r")\b", r"\1 \2")
    lists = pc.split_pattern(cleaned, " ")
    flat = lists.flatten()
    offsets = lists.offsets.to_numpy().astype(np.int64)
    counts = np.diff(offsets)
    row = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    encoded = pc.dictionary_encode(flat)
    codes = encoded.indices.to_numpy()
    raw_words = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
    keep = (raw_words != "")[codes]
    row, codes = row[keep], codes[keep]
    counts = np.bincount(row, minlength=len(counts))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.arange(len(row), dtype=np.int64) - starts[row]
    typos = _typo_canonical(raw_words)
    canonical = np.array(
        [STREET_TYPE_CANONICAL.get(w) or STATES.get(w) or typos.get(w, w) for w in raw_words],
        dtype=object,
    )
    # Two spellings can map to one canonical word; merge their codes.
    canon_codes, vocabulary = pd.factorize(canonical, sort=False)
    word_code = canon_codes[codes].astype(np.int64)
    return Words(row, position, word_code, np.asarray(vocabulary, dtype=object), len(counts))


def _join_words(words: Words, mask: np.ndarray) -> np.ndarray:
    """For each row, the masked words joined by one space (empty string when none)."""
    rows = words.row[mask]
    codes = words.word_code[mask]
    joined = join_words_arrow(words, rows, codes)
    return np.asarray(joined.to_numpy(zero_copy_only=False), dtype=object)


def join_words_arrow(
    words: Words,
    rows: np.ndarray,
    codes: np.ndarray,
    separator: str = " ",
    vocabulary: pa.Array | None = None,
) -> pa.Array:
    """Per row of ``words``, the words ``codes`` (flat, grouped by ``rows`` in order)
    joined by ``separator``, as an arrow string array ("" where a row has none);
    ``vocabulary``: the words' vocabulary already as arrow, when joining many times."""
    counts = np.bincount(rows, minlength=words.n_rows)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if vocabulary is None:
        vocabulary = pa.array(words.vocabulary, type=pa.large_string())
    values = vocabulary.take(pa.array(codes))
    lists = pa.LargeListArray.from_arrays(pa.array(offsets), values)
    return pc.binary_join(lists, pa.scalar(separator, pa.large_string()))


@dataclass(frozen=True)
class Structure:
    """Per flat word: which part of the address it belongs to."""

    is_unit: np.ndarray
    is_number: np.ndarray
    is_name: np.ndarray
    is_type: np.ndarray
    is_street: np.ndarray
    is_locality: np.ndarray
    is_state: np.ndarray
    is_postcode: np.ndarray
    # A street type written before the name (``31 AVENUE SCOTT``); also in ``is_type``.
    is_leading_type: np.ndarray


def word_flags(vocabulary: np.ndarray) -> dict[str, np.ndarray]:
    """Per distinct word, by arrow kernels (no Python loop over words): holds a digit
    (``digit``), is letters only (``alpha``), is a street type, a type that may lead, a
    state, a 4-digit postcode; and its length."""
    text = pa.array(vocabulary, type=pa.large_string())

    def flag(values: pa.Array) -> np.ndarray:
        return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)

    def member(names: Iterable[str]) -> np.ndarray:
        return flag(pc.is_in(text, value_set=pa.array(sorted(names), type=pa.large_string())))

    length = np.asarray(pc.utf8_length(text).to_numpy(zero_copy_only=False), dtype=np.int64)
    digit = flag(pc.match_substring_regex(text, "[0-9]"))
    return {
        "digit": digit,
        "alpha": flag(pc.utf8_is_alpha(text)),
        "type": member(STREET_TYPES),
        "leading": member(LEADING_TYPES),
        "state": member(STATES),
        "postcode": flag(pc.utf8_is_digit(text)) & (length == 4),
        "length": length,
    }


def _per_row_cumsum(flag: np.ndarray, words: Words) -> np.ndarray:
    """Inclusive cumulative count of ``flag`` (one per flat word) within each row."""
    # Two word-long arrays made, not four (a running total, its copy past a leading 0, a
    # gather and the difference): at a million names each is 47 MiB of fresh pages.
    total = np.empty(len(flag) + 1, dtype=np.int64)
    total[0] = 0
    # Widened first, then summed in place: a cumsum that casts as it goes (bool to int64)
    # runs through numpy's buffered loop, three times slower.
    total[1:] = flag
    np.cumsum(total[1:], out=total[1:])
    starts, counts = words.row_runs
    # The total before each row's first word, repeated over the row's words (rows sorted).
    cumulative = np.repeat(total[starts], counts)
    np.subtract(total[1:], cumulative, out=cumulative)
    return cumulative


def structure(words: Words) -> Structure:
    """Classify each word: unit, house number, street name/type, locality, state, postcode.

    The street type is the first street-type word that follows a name word, so ``ST`` in
    ``12 ST KILDA RD`` is part of the name (SAINT) and ``RD`` ends the street. Words after it
    are the locality, except a trailing run of state and 4-digit postcode words.

    With no type after a name, a type word that comes first and is followed by a name word
    is the type written before the name (``31 AVENUE SCOTT``, as French and some Australian
    addresses have it), when it is one of ``LEADING_TYPES``; the words after it are then
    the street name (where the name ends and a locality starts is left to the matcher).
    """
    vocab = words.vocabulary
    flags = word_flags(vocab)
    has_digit = flags["digit"]
    w_type = flags["type"][words.word_code]
    w_state = flags["state"][words.word_code]
    w_postcode = flags["postcode"][words.word_code]
    w_digit = has_digit[words.word_code]
    row, pos, n = words.row, words.position, words.n_rows
    unit_word = np.flatnonzero(vocab == "UNIT")
    is_unit_kw = (pos == 0) & np.isin(words.word_code, unit_word)
    # "UNIT 1 12": the word after a leading UNIT is the unit number.
    is_unit = is_unit_kw.copy()
    is_unit[1:] |= is_unit_kw[:-1] & (pos[1:] == 1)
    alpha = ~w_digit & ~is_unit
    names_so_far = _per_row_cumsum(alpha & ~w_type, words)
    names_before = names_so_far - (alpha & ~w_type)
    boundary_candidate = w_type & (names_before > 0)
    boundaries_seen = _per_row_cumsum(boundary_candidate, words)
    is_type = boundary_candidate & (boundaries_seen == 1)
    w_leading = flags["leading"][words.word_code]
    first_alpha = alpha & (_per_row_cumsum(alpha, words) == 1)
    name_follows = np.zeros(len(row), dtype=bool)
    name_follows[:-1] = (row[1:] == row[:-1]) & alpha[1:] & ~w_type[1:]
    no_boundary = np.bincount(row[boundary_candidate], minlength=n) == 0
    is_leading = w_leading & first_alpha & name_follows & no_boundary[row]
    is_type = is_type | is_leading
    after_type = (boundaries_seen >= 1) & ~is_type
    # Trailing run of state/postcode words after at least one name word.
    tail_kind = (w_state | w_postcode) & (names_before > 0)
    non_tail = ~tail_kind
    non_tail_total = np.bincount(row, weights=non_tail, minlength=n).astype(np.int64)
    non_tail_after = non_tail_total[row] - _per_row_cumsum(non_tail, words)
    trailing = tail_kind & (non_tail_after == 0)
    is_state = trailing & w_state
    is_postcode = trailing & w_postcode & ~is_state
    is_locality = after_type & ~trailing
    is_street = ~after_type & ~trailing
    is_number = is_street & w_digit & ~is_unit & (names_before == 0)
    is_name = is_street & ~is_unit & ~is_number & ~is_type
    return Structure(
        is_unit,
        is_number,
        is_name,
        is_type,
        is_street,
        is_locality,
        is_state,
        is_postcode,
        is_leading,
    )


def _distinct(texts: pd.Series) -> tuple[np.ndarray, pa.Array]:
    """(code of each row, distinct strings): the work is done once per distinct string."""
    array = pa.array(texts.astype("str").array, from_pandas=True)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    encoded = pc.dictionary_encode(pc.fill_null(array.cast(pa.large_string()), ""))
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def normalise(texts: pd.Series) -> pd.Series:
    """The canonical form of each address string, same index; missing becomes ``""``."""
    return parse(texts)["normalised"]


def parse(texts: pd.Series) -> pd.DataFrame:
    """Parse addresses into the columns of ``PARSED_COLUMNS`` (strings, ``""`` when absent).

    ``unit`` keeps the unit number only (``UNIT 1 12`` -> ``1``); states are abbreviated
    everywhere (``VICTORIA`` -> ``VIC``) so both spellings compare equal.
    """
    codes, uniques = _distinct(texts)
    words = split_words(clean_text(uniques))
    parts = structure(words)
    unit_numbers = parts.is_unit & (words.position == 1)
    columns = {
        "normalised": _join_words(words, np.ones(len(words.row), dtype=bool)),
        "unit": _join_words(words, unit_numbers),
        "number": _join_words(words, parts.is_number),
        "street_name": _join_words(words, parts.is_name),
        "street_type": _join_words(words, parts.is_type),
        "street": _join_words(words, parts.is_street),
        "locality": _join_words(words, parts.is_locality),
        "state": _join_words(words, parts.is_state),
        "postcode": _join_words(words, parts.is_postcode),
    }
    return pd.DataFrame(
        {name: pd.array(values[codes], dtype="str") for name, values in columns.items()},
        index=texts.index,
    )


def soundex_keys(vocabulary: np.ndarray) -> np.ndarray:
    """Sounds-like key per distinct word: soundex for letters-only words, else the word.

    Words holding digits (house numbers, ranges, unit numbers) must match exactly, so they
    are their own key; a ``=`` prefix keeps them apart from soundex codes like ``S530``.
    """
    return np.array(
        [jellyfish.soundex(w) if w.isalpha() and w.isascii() else "=" + w for w in vocabulary],
        dtype=object,
    )


# --- keys for exact and sounds-like matching -------------------------------------------------

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(values: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """splitmix64 finaliser: a cheap, well-spread 64-bit hash of each uint64 value.

    ``copy=False``: a uint64 ``values`` the caller made for this is mixed in place (no
    second array of its size)."""
    z = values.astype(np.uint64, copy=copy)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def string_hashes(values: np.ndarray) -> np.ndarray:
    """A stable 64-bit hash per string (the same in every process and file)."""
    return pd.util.hash_array(np.asarray(values, dtype=object), categorize=False)


def _row_sums(values: np.ndarray, row: np.ndarray, n_rows: int) -> np.ndarray:
    """Wrapping uint64 sum of ``values`` per row (flat arrays sorted by row)."""
    counts = np.bincount(row, minlength=n_rows)
    # One pass summing each row's run of values in place of a running total of them all
    # (a word-long array); the wrapping sums are the same.
    present = counts > 0
    sums = np.zeros(n_rows, dtype=np.uint64)
    if len(values):
        starts = np.cumsum(counts) - counts
        sums[present] = np.add.reduceat(values.astype(np.uint64, copy=False), starts[present])
    return sums


def sequence_keys(words: Words, element: np.ndarray, mask: np.ndarray, ordered: bool) -> np.ndarray:
    """One uint64 key per row for the masked words; 0 when the row has none of them.

    ``element`` is a hash per vocabulary word. Ordered keys mix each word with its position
    in the address (the street and the street-plus-locality words are both a prefix of the
    address, so position is their rank); unordered keys are a multiset hash.
    """
    row = words.row[mask]
    counts = np.bincount(row, minlength=words.n_rows).astype(np.uint64)
    elem = element[words.word_code[mask]]
    if ordered:
        elem = mix64(elem ^ (words.position[mask].astype(np.uint64) * _GOLDEN))
    else:
        elem = mix64(elem)
    keys = mix64(_row_sums(elem, row, words.n_rows) + counts * _GOLDEN)
    keys[counts == 0] = 0
    # 0 means "no key"; a real key of 0 is astronomically unlikely, but never let it match.
    keys[(counts > 0) & (keys == 0)] = 1
    return keys


def word_hashes(words: Words, element: np.ndarray, ordered: bool) -> np.ndarray:
    """Each flat word's part of a ``sequence_keys`` key: its ``element`` hash mixed (with
    its position when ``ordered``). Worked out once, it serves every mask."""
    elem = element[words.word_code]  # a new array, mixed in place
    if ordered:
        elem ^= words.position.astype(np.uint64) * _GOLDEN
    return mix64(elem, copy=False)


def _keys_of(words: Words, mixed: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``sequence_keys`` of the masked words from their ``word_hashes`` (every word's):
    the other words add 0 to their row's wrapping sum, so it is the masked words' sum (one
    pass over the words, no gathers of the masked ones)."""
    counts = np.bincount(words.row[mask], minlength=words.n_rows).astype(np.uint64)
    summed = np.where(mask, mixed, np.uint64(0))
    keys = mix64(_row_sums(summed, words.row, words.n_rows) + counts * _GOLDEN, copy=False)
    keys[counts == 0] = 0
    # 0 means "no key"; a real key of 0 is astronomically unlikely, but never let it match.
    keys[(counts > 0) & (keys == 0)] = 1
    return keys


KEY_NAMES = (
    "exact_full",
    "exact_street",
    "sound_full",
    "sound_street",
    "anyorder_full",
    "anyorder_street",
    "postcode",
)
TEXT_NAMES = ("normalised",)


class Analysis:
    """A column of addresses analysed once: words and structure of its distinct values.

    ``keys()`` and ``texts()`` are computed on first use and shared by every ``take``.
    """

    def __init__(
        self,
        codes: np.ndarray,
        words: Words,
        parts: Structure,
        cache: dict[str, dict[str, np.ndarray]] | None = None,
    ) -> None:
        self.codes = codes
        self.words = words
        self.parts = parts
        self._cache = {} if cache is None else cache

    @classmethod
    def of(cls, texts: pd.Series) -> Analysis:
        codes, uniques = _distinct(texts)
        words = split_words(clean_text(uniques))
        return cls(codes, words, structure(words))

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, positions: np.ndarray) -> Analysis:
        return Analysis(self.codes[positions], self.words, self.parts, self._cache)

    def keys(self) -> dict[str, np.ndarray]:
        """uint64 columns ``KEY_NAMES`` and the bool ``has_locality``, one row per address.

        ``*_full`` cover street and locality; ``*_street`` the street part only, used when
        the query names no locality. ``exact`` compares canonical words, ``sound`` the
        sounds-like key of each word in order, ``anyorder`` the same keys in any order.
        (``block`` and ``block2``, keys of a fuzzy matcher that is gone, are no longer made:
        no mode read them, and a million assets' index kept 16 MiB of them.)
        """
        if "keys" not in self._cache:
            self._cache["keys"] = self._distinct_keys()
        return self._expand(self._cache["keys"])

    def texts(self) -> dict[str, np.ndarray]:
        """``normalised``: the canonical text (street and locality) of each address, an
        object array. (The street alone and the token-sorted forms that were kept beside it
        served a matcher that is gone; they cost a million-asset index 1.1 s to build.)"""
        if "texts" not in self._cache:
            words, parts = self.words, self.parts
            full = parts.is_street | parts.is_locality
            self._cache["texts"] = {"normalised": _join_words(words, full)}
        return self._expand(self._cache["texts"])

    def _expand(self, distinct: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {name: column[self.codes] for name, column in distinct.items()}

    def _distinct_keys(self) -> dict[str, np.ndarray]:
        words, parts = self.words, self.parts
        exact = string_hashes(words.vocabulary)
        sound = string_hashes(soundex_keys(words.vocabulary))
        full = parts.is_street | parts.is_locality
        street = parts.is_street
        # Each word's hashes once, for the street and the full address alike.
        exact_ordered = word_hashes(words, exact, ordered=True)
        sound_ordered = word_hashes(words, sound, ordered=True)
        sound_any = word_hashes(words, sound, ordered=False)
        return {
            "exact_full": _keys_of(words, exact_ordered, full),
            "exact_street": _keys_of(words, exact_ordered, street),
            "sound_full": _keys_of(words, sound_ordered, full),
            "sound_street": _keys_of(words, sound_ordered, street),
            "anyorder_full": _keys_of(words, sound_any, full),
            "anyorder_street": _keys_of(words, sound_any, street),
            "postcode": sequence_keys(words, exact, parts.is_postcode, ordered=False),
            "has_locality": np.bincount(
                words.row[parts.is_locality], minlength=words.n_rows
            ).astype(bool),
        }


def address_keys(texts: pd.Series) -> pd.DataFrame:
    """Keys (``Analysis.keys``) and canonical texts (``Analysis.texts``) of each address."""
    analysis = Analysis.of(texts)
    return pd.DataFrame({**analysis.keys(), **analysis.texts()}, index=texts.index)
