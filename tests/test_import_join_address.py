"""Joining an import's address columns into one query text (the address way of linking)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolkit.importing.linking import _strings, join_address


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
