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
from typing import TYPE_CHECKING, Any

from toolkit.lazy import lazy
from toolkit.model.jsontext import json_escaped, json_literals, text, text_type

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    np = lazy("numpy")
    pd = lazy("pandas")
    pa = lazy("pyarrow")
    pc = lazy("pyarrow.compute")


def _fragment(key: str, column: pd.Series) -> pa.Array:
    """``key`` followed by the JSON value text of each cell of a pandas column (null where
    missing); a string's quotes are joined in the same pass."""
    dtype = column.dtype
    if pd.api.types.is_bool_dtype(dtype):
        array = pa.array(column.astype("boolean"), type=pa.bool_())
    elif pd.api.types.is_integer_dtype(dtype):
        array = pa.array(column.astype("Int64"), type=pa.int64())
    elif pd.api.types.is_float_dtype(dtype):
        array = pa.array(column.astype("Float64"), type=pa.float64())
    elif pd.api.types.is_string_dtype(dtype):
        strings = pa.array(column.astype("string"), type=text_type())
        return pc.binary_join_element_wise(
            text(key + '"'), json_escaped(strings), text('"'), text("")
        )
    else:
        array = pa.array(column.astype(object).where(column.notna(), None).tolist())
    return pc.binary_join_element_wise(text(key), json_literals(array), text(""))


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
        fragment = _fragment(key, values[name])
        if cleared is not None and name in cleared.columns:
            mask = pa.array(cleared[name].to_numpy(dtype=bool))
            fragment = pc.if_else(mask, text(key + "null"), fragment)
        fragments.append(fragment)
    # One pass over all columns, a missing value's fragment left out, and the closing
    # brace; the leading comma then becomes the opening brace (a byte for a byte: no
    # copy of the text as slicing it off and joining the brace made, 20% of the work).
    joined = pc.binary_join_element_wise(*fragments, text("}"), text(""), null_handling="skip")
    # The fragments are let go before the text is copied once more: of a part's rows they
    # are as large as the text (a quarter-million rows: 60 MiB).
    del fragments, fragment
    objects = pc.utf8_replace_slice(joined, 0, 1, "{")
    empty = pc.equal(joined, text("}"))
    if pc.any(empty).as_py():  # a row with no value at all: "{" would be left of it
        objects = pc.if_else(empty, text("{}"), objects)
    return pd.Series(pd.arrays.ArrowStringArray(objects), index=values.index)


# A value this large or larger goes pandas' way (``rounded_numbers_json``): below it,
# Arrow's shortest form of a value rounded to 3 places is the text pandas writes.
_SHORT_NUMBER = 1e5


def rounded_numbers_json(values: pd.DataFrame) -> np.ndarray:
    """One JSON object text per row of ``values`` (floats rounded to 3 places, e.g. a
    link's evidence in bits), as pandas' ``to_json(orient="records", lines=True)`` writes
    it, assembled by Arrow on whole columns: pandas took 0.66 s for 200,000 rows of seven
    values, this 0.4 s. A value that is missing, infinite or large sends every row
    pandas' way."""
    numbers = values.to_numpy(dtype=np.float64)
    if not np.isfinite(numbers).all() or bool((np.abs(numbers) >= _SHORT_NUMBER).any()):
        texts: np.ndarray = np.array(
            values.to_json(orient="records", lines=True).splitlines(), dtype=object
        )
        return texts
    numbers = numbers + 0.0  # -0.0 is written 0.0
    pieces: list[pa.Array | pa.Scalar] = []
    for i, name in enumerate(values.columns):
        number = pa.array(numbers[:, i]).cast(text_type())
        # Arrow writes a whole number without its point (2, pandas 2.0).
        whole = pc.invert(pc.match_substring(number, "."))
        number = pc.if_else(
            whole, pc.binary_join_element_wise(number, text(".0"), text("")), number
        )
        pieces += [text(("{" if i == 0 else ",") + json.dumps(str(name)) + ":"), number]
    joined = pc.binary_join_element_wise(*pieces, text("}"), text(""))
    objects: np.ndarray = joined.to_numpy(zero_copy_only=False)
    return objects


def as_python(column: pd.Series) -> list[Any]:
    """A column as a list of plain Python values, missing values as None (for sqlite3).

    The values are of the column's dtype (int for ``Int64``, str for ``string``), which
    only the caller knows: the list is ``Any`` here and typed where it is used.
    """
    return column.astype(object).where(column.notna(), None).tolist()


def id_list(ids: npt.ArrayLike) -> list[int]:
    """Record ids (a plan's numpy array) as Python ints, which sqlite3 takes."""
    values: list[int] = np.asarray(ids, dtype=np.int64).tolist()
    return values
