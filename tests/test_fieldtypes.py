"""Register field types: one converter for import columns and REST values alike."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from toolkit.errors import OptionError
from toolkit.importing.rules import FieldRule
from toolkit.model.fieldtypes import (
    _DISTINCT_FROM,
    FIELD_TYPES,
    IMPORT_FIELD_TYPES,
    convert_column,
    convert_value,
)


def test_the_types_are_one_literal() -> None:
    assert FIELD_TYPES == (
        "text", "integer", "decimal", "date", "boolean", "lookup", "list", "media"
    )  # fmt: skip
    assert "media" not in IMPORT_FIELD_TYPES
    with pytest.raises(OptionError, match="type 'media' is not one of: text, integer"):
        FieldRule("photos", "Photos", type="media")  # type: ignore[arg-type]


def test_columns_convert_whole_and_mark_bad_cells() -> None:
    text = pd.Series(["3", "2.0", "x", None, str(2**63), "-7"], dtype="string")
    values, bad, reason = convert_column("integer", text)
    assert values.tolist() == [3, 2, pd.NA, pd.NA, pd.NA, -7]
    assert bad.tolist() == [False, False, True, False, True, False]
    assert reason == "is not a whole number"
    dates = pd.Series(
        [
            "2026-02-14",
            "14/02/2026",
            "2026-02-14T23:00:00-10:00",
            "2026-02-14T08:00Z",
            "31/31/2026",
        ],
        dtype="string",
    )
    values, bad, _ = convert_column("date", dates)
    # Mixed offsets in one column no longer stop the conversion; each date is as written.
    assert values.tolist()[:4] == ["2026-02-14"] * 4 and bad.tolist() == [False] * 4 + [True]
    numbers = pd.Series(["1.5", "inf", "nan", "1e999"], dtype="string")
    assert convert_column("decimal", numbers)[1].tolist() == [False, True, True, True]


@pytest.mark.parametrize(
    ("kind", "value", "stored"),
    [
        ("integer", 5, 5),
        ("integer", "7", 7),
        ("integer", 5.0, 5),
        ("decimal", 1.5, 1.5),
        ("date", "14/02/2026", "2026-02-14"),
        ("boolean", True, True),
        ("boolean", "no", False),
        ("text", "hi", "hi"),
        ("list", ["a", "b"], "a;b"),
        ("media", [1, "2"], [1, 2]),
        ("integer", None, None),
    ],
)
def test_a_rest_value_is_stored_as_an_import_cell_would_be(
    kind: str, value: Any, stored: Any
) -> None:
    result = convert_value("f", {"type": kind}, value)
    assert result == stored and type(result) is type(stored)


@pytest.mark.parametrize(
    ("kind", "value", "reason"),
    [
        ("integer", True, "is not a whole number"),
        ("integer", 2.5, "is not a whole number"),
        ("integer", 2**63, "is not a whole number"),
        ("integer", {"a": 1}, "is not a value of type integer"),
        ("decimal", "1e999", "is not a number"),
        ("date", "31/31/2026", "is not a date"),
        ("date", 20260214, "is not a value of type date"),
        ("boolean", "abc", "is not a yes/no value"),
        ("text", 5, "is not a value of type text"),
        ("media", 3, "must be a list of media file ids"),
        ("media", [True], "is not a whole number"),
    ],
)
def test_a_bad_rest_value_names_the_field(kind: str, value: Any, reason: str) -> None:
    with pytest.raises(OptionError, match=reason) as caught:
        convert_value("myField", {"type": kind}, value)
    assert str(caught.value).startswith("myField ")


def test_lookups_take_their_declared_spelling() -> None:
    definition = {"type": "lookup", "choices": ["Minor", "Major"]}
    assert convert_value("level", definition, "major") == "Major"
    with pytest.raises(OptionError, match="is not one of: Minor, Major"):
        convert_value("level", definition, "Total")


@pytest.mark.parametrize(
    ("kind", "cells", "choices"),
    [
        ("integer", ["3", " 2.0", "x", None, str(2**63), "-7", "", "007"], ()),
        # Whole numbers alone: read exactly past 2^53 (one float cell would refuse them).
        ("integer", [str(2**53 + 1), "12", None, "-3"], ()),
        ("decimal", ["1.5", "1e999", "nan", "abc", None, " -2 "], ()),
        ("date", ["2026-02-14", "14/02/2026", "2026-02-14T23:30:00-05:00", "31/31/2026", None], ()),
        ("boolean", ["Yes", "n", " TRUE ", "0", "maybe", None], ()),
        ("lookup", ["minor", "MAJOR ", "Total", None, "Straße"], ("Minor", "Major", "STRASSE")),
    ],
)
def test_a_long_column_converts_as_its_cells_do(
    kind: str, cells: list[str | None], choices: tuple[str, ...]
) -> None:
    # A long column is converted once per distinct cell: the same values and bad cells as
    # the cells converted in a short column, row by row.
    short = pd.Series(cells, dtype="string")
    want, want_bad, want_reason = convert_column(kind, short, choices=choices)
    times = 2 * _DISTINCT_FROM // len(cells) + 1
    long = pd.Series(cells * times, dtype="string", index=pd.RangeIndex(5, 5 + len(cells) * times))
    values, bad, reason = convert_column(kind, long, choices=choices)
    assert len(values) == len(long) > _DISTINCT_FROM
    assert values.index.equals(long.index) and values.dtype == want.dtype
    assert values.tolist() == want.tolist() * times
    assert bad.tolist() == want_bad.tolist() * times
    assert reason == want_reason
    assert want_bad.any() or 2**53 + 1 in values.tolist()


def test_a_long_column_with_no_value_converts_to_missing() -> None:
    values, bad, _ = convert_column("date", pd.Series([None] * 1500, dtype="string"))
    assert values.isna().all() and not bad.any() and len(values) == 1500
