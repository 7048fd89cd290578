"""Register fields as JSON merge patches, built per column."""

from __future__ import annotations

import json

import pandas as pd

from toolkit.model.fieldjson import as_python, fields_json


def test_missing_values_are_left_out_and_cleared_ones_are_null() -> None:
    index = [5, 6, 7]
    values = pd.DataFrame(
        {
            "notes": pd.Series(['say "hi", null', None, "x"], dtype="string", index=index),
            "count": pd.Series([1, None, None], dtype="Int64", index=index),
            "ok": pd.Series([True, False, None], dtype="boolean", index=index),
            "café": pd.Series([None, None, "Zoë"], dtype="string", index=index),
        }
    )
    cleared = pd.DataFrame(
        {"count": [False, True, False], "notes": [False, True, False]}, index=[5, 6, 7]
    )
    objects = fields_json(values, cleared)
    assert list(objects.index) == [5, 6, 7]
    assert [json.loads(o) for o in objects] == [
        {"notes": 'say "hi", null', "count": 1, "ok": True},
        {"ok": False, "count": None, "notes": None},
        {"notes": "x", "café": "Zoë"},
    ]
    assert "Zoë" in objects.iloc[2]


def test_a_row_with_nothing_is_an_empty_object() -> None:
    values = pd.DataFrame({"a": pd.Series([None], dtype="string")})
    assert fields_json(values).tolist() == ["{}"]
    assert fields_json(pd.DataFrame(index=[1, 2])).tolist() == ["{}", "{}"]


def test_a_text_value_that_looks_like_a_null_member_survives() -> None:
    values = pd.DataFrame({"a": pd.Series(['{"a":null', ',"a":null}'], dtype="string")})
    assert [json.loads(o) for o in fields_json(values)] == [{"a": '{"a":null'}, {"a": ',"a":null}'}]


def test_columns_become_plain_python_values_for_sqlite() -> None:
    assert as_python(pd.Series([1, None], dtype="Int64")) == [1, None]
    assert type(as_python(pd.Series([1, 2], dtype="int64"))[0]) is int
    assert as_python(pd.Series(["a", None], dtype="string")) == ["a", None]


def test_text_in_several_chunks_that_needs_escapes() -> None:
    """A column read in blocks arrives as a chunked Arrow array; with nothing filtered out
    of its part it stays chunked, and its quotes, line breaks and control characters are
    escaped all the same (this raised ArrowInvalid: "Mask must be array")."""
    import pyarrow as pa

    chunks = pa.chunked_array([['say "hi"', "plain"], ["two\nlines", None, "bell\x07"]])
    values = pd.DataFrame({"notes": pd.Series(pd.arrays.ArrowStringArray(chunks))})
    assert [json.loads(o) for o in fields_json(values)] == [
        {"notes": 'say "hi"'},
        {"notes": "plain"},
        {"notes": "two\nlines"},
        {},
        {"notes": "bell\x07"},
    ]
