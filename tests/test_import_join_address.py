"""Joining an import's address columns into one query text (the address way of linking),
and the link result's columns made of a way's answers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolkit.importing.linking import _asset_numbers, _is_in, _strings, join_address


def test_address_columns_join_leaving_out_a_part_already_typed() -> None:
    address = pd.Series(
        ["12 Smith St Buninyong", "", None, "7 High St", "1 GROSSE ST", "ÉCOLE RD", "2 X ST\x00"],
        dtype="string",
    )
    suburb = pd.Series(
        ["BUNINYONG", "Ballarat", None, "Ballarat", "Große", "école", "Y"], dtype="string"
    )
    joined = join_address([address, suburb])
    assert joined.tolist() == [
        "12 Smith St Buninyong",  # the suburb is in the address already, in another case
        "Ballarat",
        pd.NA,  # nothing at all is missing, not ""
        "7 High St Ballarat",
        "1 GROSSE ST",  # "Große" in upper case is "GROSSE" (full case mapping)
        "ÉCOLE RD",
        "2 X ST\x00 Y",
    ]
    assert joined.index.equals(address.index)
    # Three columns; a NUL at the end is stripped like a space (as numpy strips it).
    more = join_address(
        [
            pd.Series(["\x00 5 A ST", "6 B ST\x00"], dtype="string"),
            pd.Series(["B", None]),
            pd.Series(["5 a st", ""]),
        ]
    )
    assert more.tolist() == ["\x00 5 A ST B", "6 B ST"]


def test_link_text_columns_are_what_pandas_makes_of_them() -> None:
    """The link result's text columns go through Arrow at once: the same dtype and values
    as ``pd.array(..., dtype="string")`` for text, missing values, accents and NUL; other
    values (a number) as pandas writes them."""
    for values in (
        np.array(["a", None, "Ünit 2 Smïth", np.nan, "", "x\x00y", "a"], dtype=object),
        np.array([None, None], dtype=object),
        np.array([], dtype=object),
        np.array(["7", 7, None], dtype=object),
    ):
        fast, slow = _strings(values), pd.array(values, dtype="string")
        assert fast.dtype == slow.dtype
        assert pd.Series(fast).equals(pd.Series(slow)), values


def test_asset_ids_read_as_numbers_as_pandas_reads_them() -> None:
    """The found rows' asset ids (text in the index) become the numbers ``to_numeric``
    makes of them, whichever text column a way's answers hold them in; rows not found are
    left out; an id Arrow cannot read as an integer still goes the old way."""
    found = np.array([True, False, True, True])
    for ids in (
        pd.Series(pd.array(["12", None, "7", "4000000001"], dtype="str")),
        pd.Series(pd.array(["12", None, "7", "4000000001"], dtype="string")),
        pd.Series(["12", None, "7", "4000000001"], dtype=object),
    ):
        numbers = _asset_numbers(ids, found)
        assert numbers.dtype == np.int64
        assert numbers.tolist() == [12, 7, 4_000_000_001]
        expected = pd.to_numeric(ids, errors="coerce").to_numpy()[found].astype(np.int64)
        assert np.array_equal(numbers, expected)
    assert _asset_numbers(pd.Series(["12", "x"]), np.array([False, False])).tolist() == []
    assert _asset_numbers(pd.Series([" 12", "7.0"]), np.array([True, True])).tolist() == [12, 7]


def test_rows_given_to_fuzzy_are_found_by_their_text_as_pandas_finds_them() -> None:
    """``_is_in`` (which address rows' texts mode fuzzy was given) agrees with pandas'
    ``get_indexer`` for text, missing values, accents, empty text and NUL, and for values
    that are not all text."""
    texts = pd.Series(["12 SMITH ST", "Ünit 2 Smïth", "", "x\x00y"], dtype=object)
    for values in (
        np.array(["12 SMITH ST", None, "Ünit 2 Smïth", "12 smith st", "", "x\x00y", "x"]),
        np.array([None, None], dtype=object),
        np.array([], dtype=object),
        np.array(["12 SMITH ST", 7, None], dtype=object),
    ):
        values = values.astype(object)
        expected = pd.Index(texts).get_indexer(values) >= 0
        assert _is_in(values, texts).tolist() == expected.tolist(), values
    assert _is_in(np.array(["a", "b", None], dtype=object), texts).tolist() == [False] * 3
    assert _is_in(np.array(["", "12 SMITH ST"], dtype=object), texts).tolist() == [True, True]
