"""Addresses parsed for fuzzy matching: components as integer codes, and blocking keys.

One ``Parsed`` holds the distinct address strings of a batch (or of an asset table): each
component is an int32 code per string into one shared ``vocabulary`` ("" is code 0), so
comparisons, equality and term frequencies work on integers, and text is looked at only
for the distinct pairs of texts a similarity is needed for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import jellyfish
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.matching.address import (
    Analysis,
    Structure,
    Words,
    _per_row_cumsum,
    join_words_arrow,
    mix64,
    string_hashes,
    word_flags,
)

# Components compared as codes (equal or not; numbers and postcodes also one edit apart).
CODE_FIELDS = ("number", "unit", "postcode", "state", "street_type")
# Everything an asset side keeps: the code fields, the street name and the locality.
ASSET_FIELDS = (*CODE_FIELDS, "street", "locality")
# A query's readings of its words (see ``probabilistic.compare``): every name and locality
# word (``alpha``), the first k of them (``head``), those after the first k (``tail``),
# the last k (``last``); for an address written suburb first (MOUNT HELEN 19 RAILWAY
# ROAD), the words of letters before its house number (``before``) and the name words after
# it (``after``); joined without spaces, as ``street`` and ``locality`` are.
READING_FIELDS = (
    "alpha",
    *(f"{part}{k}" for part in ("head", "tail", "last") for k in (1, 2, 3)),
    "before",
    "after",
)
TEXT_FIELDS = (*ASSET_FIELDS, *READING_FIELDS)
# Blocking keys keep their top KEY_BITS bits, so a key and the row holding it pack into
# one uint64 (sorted and deduplicated in one pass) for up to 2**(64 - KEY_BITS) rows.
KEY_BITS = 40
_ROW_BITS = np.uint64(64 - KEY_BITS)


@dataclass(frozen=True)
class Parsed:
    """Components of distinct address strings as codes into ``vocabulary``."""

    vocabulary: np.ndarray  # object array of distinct texts; vocabulary[0] == ""
    codes: dict[str, np.ndarray]  # field -> int32 code per distinct string
    street_words: np.ndarray  # int16: words in the street name
    locality_words: np.ndarray  # int16: words in the locality
    key_rows: np.ndarray  # int32: distinct string of each blocking key, sorted by key
    keys: np.ndarray  # uint64 blocking keys (top KEY_BITS bits), sorted

    @classmethod
    def of(cls, analysis: Analysis, *, field_data: bool = False) -> Parsed:
        """Parse the distinct strings of ``analysis``; ``field_data`` (queries, not an
        asset table) also takes a house number found anywhere (MOUNT CLEAR 31 MAGPIE ROAD:
        the suburb typed first), where clean asset names only allow one moved to the end."""
        return cls.of_words(analysis.words, analysis.parts, field_data=field_data)

    @classmethod
    def of_words(
        cls,
        words: Words,
        parts: Structure,
        *,
        field_data: bool = False,
        readings: bool = True,
        blocking: bool = True,
    ) -> Parsed:
        """``of`` on words and their structure. Without ``readings`` the fields of
        READING_FIELDS are left out (an asset table keeps none of them), without
        ``blocking`` the blocking keys (both empty)."""
        vocab = words.vocabulary
        flags = word_flags(vocab)
        is_alpha_word = flags["alpha"][words.word_code]
        has_digit = flags["digit"]
        n_words = len(words.row)
        # Field data may put "UNIT 2 6" after the suburb: the unit keyword anywhere, and
        # the number after it is the unit.
        late_keyword = np.zeros(n_words, dtype=bool)
        late_unit = np.zeros(n_words, dtype=bool)
        if field_data:
            late_keyword = (vocab == "UNIT")[words.word_code] & ~parts.is_unit
            follows = np.zeros(n_words, dtype=bool)
            follows[1:] = late_keyword[:-1] & (words.row[1:] == words.row[:-1])
            late_unit = follows & has_digit[words.word_code]
            late_keyword[:-1] &= late_unit[1:]
        alpha = (parts.is_name | parts.is_locality) & is_alpha_word & ~late_keyword
        # For the readings split by the asset's shape, every word of letters counts, street
        # types included: GARDENS in LAKE GARDENS is a locality word, not the street type.
        # A type written before the name (31 AVENUE SCOTT) is not one of those words: the
        # readings then start at the name, as they would for SCOTT AVENUE.
        lettered = alpha | (parts.is_type & ~parts.is_leading_type & is_alpha_word)
        rank = _per_row_cumsum(lettered, words) - 1
        n_lettered = np.bincount(words.row[lettered], minlength=words.n_rows)
        from_end = n_lettered[words.row] - rank  # 1 for the last word of letters
        unit_number = (parts.is_unit & (words.position == 1)) | late_unit
        # The house number: the parsed one, else a number ending the address that is not
        # a postcode (SMITH STREET KEW 17: the number moved to the end).
        parsed_number = np.bincount(words.row[parts.is_number], minlength=words.n_rows) > 0
        row_length = words.row_runs[1]
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
        number_rank = _per_row_cumsum(number_word, words)
        house_number = number_word & (number_rank == 1)
        number_at = np.full(words.n_rows, -1, dtype=np.int64)
        number_at[words.row[house_number]] = words.position[house_number]
        before = lettered & (words.position < number_at[words.row])
        has_before = np.bincount(words.row[before], minlength=words.n_rows) > 0
        after = alpha & (words.position > number_at[words.row]) & has_before[words.row]
        street_word = parts.is_name & is_alpha_word
        locality_word = parts.is_locality & is_alpha_word
        masks = {
            "number": (house_number, " "),
            "unit": (unit_number, " "),
            "postcode": (parts.is_postcode, " "),
            "state": (parts.is_state, " "),
            "street_type": (parts.is_type, " "),
            "street": (street_word, ""),
            "locality": (locality_word, ""),
            "alpha": (alpha, ""),
            **{f"head{k}": (lettered & (rank < k), "") for k in (1, 2, 3)},
            **{f"tail{k}": (lettered & (rank >= k), "") for k in (1, 2, 3)},
            **{f"last{k}": (lettered & (from_end <= k), "") for k in (1, 2, 3)},
            "before": (before, ""),
            "after": (after, ""),
            "letters": (lettered, ""),  # for a blocking key only
        }
        # (The fields come first: left out, the others are encoded in the same order.)
        if not readings:
            masks = {k: v for k, v in masks.items() if k not in READING_FIELDS}
        if not blocking:
            del masks["letters"]
        arrow_vocab = pa.array(vocab, type=pa.large_string())
        texts = {
            name: join_words_arrow(
                words, words.row[mask], words.word_code[mask], separator, arrow_vocab
            )
            for name, (mask, separator) in masks.items()
        }
        vocabulary, codes = encode(texts)
        # Their texts are in ``vocabulary`` now: let go before the keys (the build's peak).
        del texts, masks
        if blocking:
            key_rows, keys = _blocking_keys(words, parts, alpha, vocabulary, codes)
            del codes["letters"]
        else:
            key_rows, keys = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint64)
        return cls(
            vocabulary,
            codes,
            np.bincount(words.row[street_word], minlength=words.n_rows).astype(np.int16),
            np.bincount(words.row[locality_word], minlength=words.n_rows).astype(np.int16),
            key_rows,
            keys,
        )

    def __len__(self) -> int:
        return len(self.street_words)

    def text(self, field: str) -> np.ndarray:
        """One component as an object array of str ("" when absent)."""
        component: np.ndarray = self.vocabulary[self.codes[field]]  # numpy's stubs give Any
        return component

    @cached_property
    def vocabulary_index(self) -> pd.Index[str]:
        """The vocabulary as a hash index (text -> code), for translating other codes."""
        index: pd.Index[str] = pd.Index(self.vocabulary)
        return index

    @cached_property
    def shapes(self) -> Shapes:
        """The distinct (street, locality, street words, locality words) of the strings."""
        return Shapes.of(self)

    def restricted(self, fields: tuple[str, ...]) -> Parsed:
        """Only ``fields``, with a vocabulary of just their texts (an asset side to keep)."""
        # The codes are below len(vocabulary): a count of each and a running sum of the
        # used ones renumber them as np.unique would (in order), without its sort.
        used_mask = np.zeros(len(self.vocabulary), dtype=bool)
        used_mask[0] = True
        for f in fields:
            used_mask[self.codes[f]] = True
        used = np.flatnonzero(used_mask)
        renumber = (np.cumsum(used_mask, dtype=np.int32) - 1).astype(np.int32)
        codes = {f: renumber[self.codes[f]] for f in fields}
        return Parsed(
            self.vocabulary[used],
            codes,
            self.street_words,
            self.locality_words,
            self.key_rows,
            self.keys,
        )


@dataclass(frozen=True)
class Shapes:
    """The distinct street/locality shapes of a ``Parsed``: every similarity of a query
    with an asset depends on the asset only through its shape."""

    of_row: np.ndarray  # int32: shape of each distinct string
    street: np.ndarray  # int32 code of the shape's street
    locality: np.ndarray  # int32 code of its locality
    street_words: np.ndarray  # int8: its street words, 1-3
    locality_words: np.ndarray  # int8: its locality words, 1-3

    @classmethod
    def of(cls, parsed: Parsed) -> Shapes:
        size = np.int64(max(len(parsed.vocabulary), 1))
        k = np.clip(parsed.street_words, 1, 3).astype(np.int64) - 1
        j = np.clip(parsed.locality_words, 1, 3).astype(np.int64) - 1
        packed = (
            (parsed.codes["street"].astype(np.int64) * size + parsed.codes["locality"]) * 9
            + k * 3
            + j
        )
        distinct, of_row = np.unique(packed, return_inverse=True)
        pair, kj = np.divmod(distinct, 9)
        street, locality = np.divmod(pair, size)
        return cls(
            of_row.astype(np.int32),
            street.astype(np.int32),
            locality.astype(np.int32),
            (kj // 3 + 1).astype(np.int8),
            (kj % 3 + 1).astype(np.int8),
        )

    def __len__(self) -> int:
        return len(self.street)


def encode(texts: dict[str, pa.Array]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Arrow string columns of equal length -> (vocabulary with "" first, int32 codes)."""
    names = list(texts)
    n = len(texts[names[0]]) if names else 0
    empty = pa.array([""], type=pa.large_string())
    encoded = pc.dictionary_encode(pa.concat_arrays([empty, *texts.values()]))
    indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    vocabulary = np.asarray(encoded.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    codes = {name: indices[1 + i * n : 1 + (i + 1) * n] for i, name in enumerate(names)}
    return vocabulary, codes


def subset_words(analysis: Analysis) -> tuple[Words, Structure, np.ndarray]:
    """The words and structure of only the distinct strings ``analysis`` uses (a fallback
    batch shares the whole batch's analysis), and each row's string among them."""
    words, parts = analysis.words, analysis.parts
    used, wanted = _renumbered(analysis.codes, words.n_rows)
    keep = wanted[words.row] >= 0
    word_used, word_wanted = _renumbered(words.word_code[keep], len(words.vocabulary))
    sub = Words(
        wanted[words.row[keep]],
        words.position[keep],
        word_wanted[words.word_code[keep]],
        words.vocabulary[word_used],
        len(used),
    )
    sub_parts = Structure(*(getattr(parts, f)[keep] for f in Structure.__dataclass_fields__))
    return sub, sub_parts, wanted[analysis.codes]


def rows_of_words(words: Words, parts: Structure, start: int, stop: int) -> tuple[Words, Structure]:
    """The words and structure of the distinct strings ``start`` to ``stop`` of ``words``
    alone, numbered from 0, with only the vocabulary they use (each string parses as it
    does among all of them)."""
    keep = (words.row >= start) & (words.row < stop)
    word_used, word_wanted = _renumbered(words.word_code[keep], len(words.vocabulary))
    sub = Words(
        words.row[keep] - start,
        words.position[keep],
        word_wanted[words.word_code[keep]],
        words.vocabulary[word_used],
        stop - start,
    )
    sub_parts = Structure(*(getattr(parts, f)[keep] for f in Structure.__dataclass_fields__))
    return sub, sub_parts


def _renumbered(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``codes`` (each below ``size``) in order, and each code's number among
    them (-1: unused): ``np.unique``'s answer by a mark and a running count, not its sort
    (0.4 s of CPU for the 250,000 fuzzy texts of a 1M import)."""
    mark = np.zeros(size, dtype=bool)
    mark[codes] = True
    number = np.cumsum(mark, dtype=np.int64) - 1
    number[~mark] = -1
    return np.flatnonzero(mark), number


def _blocking_keys(
    words: Words,
    parts: Structure,
    alpha: np.ndarray,
    vocabulary: np.ndarray,
    codes: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Blocking keys per distinct string, as a long (row, key) table sorted by key.

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
    # A hash per text of the vocabulary, 0 for the empty text.
    text_hash = string_hashes(vocabulary)
    text_hash[0] = 0
    number_hash = text_hash[codes["number"]]
    type_hash = text_hash[codes["street_type"]]
    postcode_hash = text_hash[codes["postcode"]]
    rank_in_name = _per_row_cumsum(alpha & parts.is_name, words)
    row = words.row[alpha]
    code = words.word_code[alpha]
    collected = _Collected(words.n_rows)
    add = collected.add
    has_number = number_hash[row] != 0
    # (Every key below is mixed in the array its sum or gather made: ``copy=False``.)
    numbered = row[has_number]
    add(numbered, _mix_with(number_hash[numbered], mix64(sound[code[has_number]], copy=False)))
    with_ending = has_number & long_word[code]
    numbered = row[with_ending]
    number = number_hash[numbered]
    add(numbered, _mix_with(number.copy(), mix64(ending[code[with_ending]] + 1, copy=False)))
    add(numbered, _mix_with(number, mix64(beginning[code[with_ending]] + 7, copy=False)))
    del number, numbered
    # Unordered pairs of words of one address (up to 6 apart).
    for gap in range(1, 7):
        same = row[gap:] == row[:-gap]
        pair = mix64(sound[code[:-gap][same]] + 2, copy=False)
        pair += mix64(sound[code[gap:][same]] + 2, copy=False)
        add(row[gap:][same], mix64(pair, copy=False))
    # A single word spelt exactly (4 letters or more), without the number: the number and
    # every other word may be wrong; common words fall to MAX_KEY_ASSETS.
    exact = string_hashes(vocab)
    single = long_word[code]
    add(row[single], mix64(exact[code[single]] + 4, copy=False))
    # ... or sounding alike, for words of five letters or more (rarer codes).
    longer = np.array([len(w) >= 5 for w in vocab], dtype=bool)[code]
    add(row[longer], mix64(sound[code[longer]] + 9, copy=False))
    # The street, the locality, and all the words with the street type, each with their
    # words joined (VENUS BAY = VENUSBAY; HALLENC LOSE = HALLEN CLOSE).
    for name, salt in (("street", 5), ("locality", 6), ("letters", 8)):
        hashed = text_hash[codes[name]]
        present = np.flatnonzero(hashed != 0)
        add(present, mix64(hashed[present] + np.uint64(salt), copy=False))
    # Number + street type + the street name's first letter: any later typo in the name.
    first_name = alpha & parts.is_name & (rank_in_name == 1)
    row_first = words.row[first_name]
    has_type = (number_hash[row_first] != 0) & (type_hash[row_first] != 0)
    initial = string_hashes(np.array([w[:1] for w in vocab], dtype=object))
    typed = row_first[has_type]
    add(
        typed,
        _mix_with(
            number_hash[typed],
            mix64(type_hash[typed] + initial[words.word_code[first_name]][has_type], copy=False),
        ),
    )
    both = (number_hash != 0) & (postcode_hash != 0)
    add(
        np.flatnonzero(both),
        _mix_with(number_hash[both], mix64(postcode_hash[both] + np.uint64(3), copy=False)),
    )
    return collected.sorted()


def _mix_with(number: np.ndarray, mixed: np.ndarray) -> np.ndarray:
    """``mix64(number ^ mixed)``, in ``number``'s array (which the caller gives up)."""
    number ^= mixed
    return mix64(number, copy=False)


class _Collected:
    """The (row, key) pairs of ``_blocking_keys``: each part packed into one uint64 per
    pair as it comes (the key's top bits, then the row), so the pairs are held once, not as
    two columns and their concatenations (at a million assets, 25 million pairs: 1.2 GiB
    at the build's peak before)."""

    def __init__(self, n_rows: int) -> None:
        self.n_rows = n_rows
        self.packs = n_rows <= 1 << int(_ROW_BITS)
        self.parts: list[np.ndarray] = []  # packed; or (too many rows) rows and keys by turns

    def add(self, rows: np.ndarray, keys: np.ndarray) -> None:
        """Collect ``keys[i]`` of row ``rows[i]``; ``keys`` (uint64, made by the caller for
        this) is packed in place."""
        if not self.packs:
            self.parts += [rows, keys]
            return
        packed = keys.astype(np.uint64, copy=False)
        packed &= ~_ROW_MASK
        packed |= rows.astype(np.uint64)
        self.parts.append(packed)

    def sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct pairs sorted by key, then row (as ``sorted_keys``)."""
        if not self.packs:
            rows, keys = self.parts[0::2], self.parts[1::2]
            return sorted_keys(np.concatenate(rows), np.concatenate(keys), self.n_rows)
        # Passed on unnamed, so the sorted pairs' first copy goes once it is compacted.
        return _sorted_packed(self._joined())

    def _joined(self) -> np.ndarray:
        """The packed parts as one array, each let go once copied (at a million assets
        the pairs are held once and a part, not twice)."""
        parts, self.parts = self.parts, []
        joined = np.empty(sum(len(p) for p in parts), dtype=np.uint64)
        at = 0
        while parts:
            part = parts.pop(0)
            joined[at : at + len(part)] = part
            at += len(part)
        return joined


_ROW_MASK = np.uint64((1 << int(_ROW_BITS)) - 1)


# Pairs are sorted in runs of this many (8 KiB, within a core's fast cache), which a stable
# sort (timsort, which finds runs already sorted) then merges.
_SORTED_RUN = 1024


def _sort_in_runs(values: np.ndarray) -> None:
    """Sort a contiguous array in place: each run of ``_SORTED_RUN`` values (one call,
    rows of a 2-D view), then the whole by merging the runs. At a million assets' 18.7
    million pairs 0.6 s of CPU where one quicksort of the whole took 1.3 s (the same order:
    integers sort to one order whichever way)."""
    if not values.flags.c_contiguous:
        values.sort()
        return
    whole = len(values) - len(values) % _SORTED_RUN
    values[:whole].reshape(-1, _SORTED_RUN).sort(axis=1)
    values[whole:].sort()
    values.sort(kind="stable")


def _sorted_packed(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct packed (key, row) integers sorted (in place), split into rows and keys."""
    _sort_in_runs(packed)
    first = np.empty(len(packed), dtype=bool)
    first[:1] = True
    np.not_equal(packed[1:], packed[:-1], out=first[1:])
    if not first.all():
        packed = packed[first]
    # The rows from the low 32 bits (a cast that keeps them), the keys shifted in place:
    # at a million assets two fewer arrays of 150 MiB at the build's peak.
    rows = packed.astype(np.uint32)
    rows &= np.uint32(_ROW_MASK)
    packed >>= _ROW_BITS
    return rows.view(np.int32), packed


def sorted_keys(rows: np.ndarray, keys: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (row, key) pairs sorted by key (then row), keys cut to their top KEY_BITS
    bits; one row may give the same key twice (two words sounding alike)."""
    if n_rows <= 1 << int(_ROW_BITS):
        # One sort of packed integers, far cheaper than sorting pairs of columns; packed
        # and sorted in place (at a million assets each copy is 200 MiB to page in).
        packed = keys.astype(np.uint64, copy=True)
        packed &= ~_ROW_MASK
        packed |= rows.astype(np.uint64)
        return _sorted_packed(packed)
    top = keys.astype(np.uint64) >> _ROW_BITS
    table = pd.DataFrame({"row": rows, "key": top}).drop_duplicates()
    table = table.sort_values(["key", "row"], kind="stable")
    return table["row"].to_numpy(np.int64), table["key"].to_numpy(np.uint64)
