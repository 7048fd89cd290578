"""Register fields of many rows as JSON objects, built on whole columns.

Each row becomes one JSON object text holding only the fields it gives: a
missing value is left out (on update: "leave the stored value alone"), and a
cleared cell (``[NULL]``) is written as ``null``, which is exactly an RFC 7396
merge patch, so SQLite's ``json_patch`` applies an update in C.

The text is assembled with pyarrow compute, column by column: each column
becomes ``,"key":value`` fragments (empty where missing), the fragments of all
columns are concatenated, and the leading comma becomes the opening brace.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# Control characters other than \n, \r and \t are rare; the cells holding them are
# encoded one by one with json.dumps rather than taught to the vectorised escaper.
_RARE_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f]"
TEXT = pa.large_string()  # 64-bit offsets: a column of a million long objects stays safe


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, type=TEXT)


def _json_text(column: pd.Series) -> pa.Array:
    """JSON value text of each cell (null where missing)."""
    dtype = column.dtype
    if pd.api.types.is_bool_dtype(dtype):
        flags = pa.array(
            column.astype("boolean").to_numpy(dtype=object, na_value=None), type=pa.bool_()
        )
        return pc.if_else(flags, _s("true"), _s("false"))
    if pd.api.types.is_integer_dtype(dtype):
        return pc.cast(pa.array(column.astype("Int64"), type=pa.int64()), TEXT)
    if pd.api.types.is_float_dtype(dtype):
        numbers = column.astype("Float64")
        finite = numbers.where(np.isfinite(numbers.fillna(0).to_numpy(dtype=float)))
        return pc.cast(pa.array(finite, type=pa.float64()), TEXT)
    if pd.api.types.is_string_dtype(dtype):
        text = pa.array(column.astype("string"), type=TEXT)
        escaped = pc.replace_substring(text, "\\", "\\\\")
        escaped = pc.replace_substring(escaped, '"', '\\"')
        escaped = pc.replace_substring(escaped, "\n", "\\n")
        escaped = pc.replace_substring(escaped, "\r", "\\r")
        escaped = pc.replace_substring(escaped, "\t", "\\t")
        quoted = pc.binary_join_element_wise(_s('"'), escaped, _s('"'), _s(""))
        rare = pc.fill_null(pc.match_substring_regex(text, _RARE_CONTROL), False)
        if pc.any(rare).as_py():
            values = quoted.to_pylist()
            originals = text.to_pylist()
            for position in np.flatnonzero(rare.to_numpy(zero_copy_only=False)):
                values[position] = json.dumps(originals[position], ensure_ascii=False)
            quoted = pa.array(values, type=TEXT)
        return quoted
    # Anything else (lists, mixed objects): one json.dumps per present cell.
    return pa.array(
        [
            None if v is None or v is pd.NA else json.dumps(v, ensure_ascii=False, default=str)
            for v in column.astype(object).tolist()
        ],
        type=TEXT,
    )


def fields_json(values: pd.DataFrame, cleared: pd.DataFrame | None = None) -> pd.Series:
    """One JSON object per row of ``values`` (index kept), without its missing values.

    ``cleared``, a boolean frame over some of the same columns, marks values to
    write as ``null``.
    """
    if values.shape[1] == 0:
        return pd.Series("{}", index=values.index, dtype="string")
    fragments = []
    for name in values.columns:
        key = "," + json.dumps(str(name), ensure_ascii=False) + ":"
        fragment = pc.binary_join_element_wise(_s(key), _json_text(values[name]), _s(""))
        if cleared is not None and name in cleared.columns:
            mask = pa.array(cleared[name].to_numpy(dtype=bool))
            fragment = pc.if_else(mask, _s(key + "null"), fragment)
        fragments.append(pc.fill_null(fragment, _s("")))
    # One pass over all columns; the leading comma then becomes the opening brace.
    joined = pc.binary_join_element_wise(*fragments, _s(""))
    objects = pc.binary_join_element_wise(
        _s("{"), pc.utf8_slice_codeunits(joined, 1), _s("}"), _s("")
    )
    return pd.Series(pd.arrays.ArrowStringArray(objects), index=values.index)


def as_python(column: pd.Series) -> list[object]:
    """A column as a list of plain Python values, missing values as None (for sqlite3)."""
    return column.astype(object).where(column.notna(), None).tolist()
