"""Register fields of many rows as JSON objects, built on whole columns.

Each row becomes one JSON object text holding only the fields it gives: a
missing value is left out (on update: "leave the stored value alone"), and a
cleared cell (``[NULL]``) is written as ``null``, which is exactly an RFC 7396
merge patch, so SQLite's ``json_patch`` applies an update in C.
"""

from __future__ import annotations

import json
import re

import pandas as pd


def fields_json(values: pd.DataFrame, cleared: pd.DataFrame | None = None) -> pd.Series:
    """One JSON object per row of ``values`` (index kept), without its missing values.

    ``cleared``, a boolean frame over some of the same columns, marks values to
    write as ``null``.
    """
    if values.shape[1] == 0:
        return pd.Series("{}", index=values.index, dtype="string")
    # pandas writes JSON in C; rows come out one per line, in order.
    lines = values.to_json(orient="records", lines=True, force_ascii=False, date_format="iso")
    objects = pd.Series(lines.rstrip("\n").split("\n"), index=values.index, dtype="string")
    # Inside a JSON string every quote is escaped, so `{"key":null` or `,"key":null`
    # with these exact keys can only be a member of the object itself.
    keys = "|".join(re.escape(_json_key(name)) for name in values.columns)
    objects = objects.str.replace(rf",(?:{keys}):null(?=[,}}])", "", regex=True)
    objects = objects.str.replace(rf"\{{(?:{keys}):null(?:,|(?=\}}))", "{", regex=True)
    if cleared is not None and cleared.to_numpy().any():
        suffix = pd.Series("", index=values.index, dtype="string")
        for name in cleared.columns:  # a loop over columns; each step is whole-column
            mask = cleared[name].to_numpy(dtype=bool)
            if mask.any():
                suffix = suffix.where(~mask, suffix + f",{_json_key(name)}:null")
        has_suffix = (suffix != "").to_numpy()
        body = objects.str.slice(0, -1)
        joined = body + suffix + "}"
        joined = joined.str.replace(r"^\{,", "{", regex=True)
        objects = objects.where(~has_suffix, joined)
    return objects


def _json_key(name: str) -> str:
    return json.dumps(str(name), ensure_ascii=False)


def as_python(column: pd.Series) -> list[object]:
    """A column as a list of plain Python values, missing values as None (for sqlite3)."""
    return column.astype(object).where(column.notna(), None).tolist()
