"""JSON literals of whole Arrow columns: the one place values are spelled as JSON text.

Used where many rows become JSON without a Python object per cell: register fields
(``fieldjson``) and report contents (``reports.json_contents``). Strings are escaped
in Arrow, only in the cells that need it; the rare other control characters are
spelled by the json module.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

TEXT = pa.large_string()  # 64-bit offsets: a column of a million long values stays safe
NULL = pa.scalar("null", TEXT)
_CONTROL = r"[\x00-\x1f]"
_NEEDS_ESCAPE = r'[\\"\x00-\x1f]'


def text(value: str) -> pa.Scalar:
    """A string scalar of the type these columns use."""
    return pa.scalar(value, TEXT)


def _escaped(strings: pa.Array) -> pa.Array:
    """JSON escapes of strings that need some (backslash, quote, control characters)."""
    escaped = pc.replace_substring(strings, "\\", "\\\\")
    for raw, spelled in (('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        escaped = pc.replace_substring(escaped, raw, spelled)
    odd = pc.fill_null(pc.match_substring_regex(escaped, _CONTROL), False)
    if pc.any(odd).as_py():
        # Other control characters are rare: let the json module spell those few cells.
        cells = [json.dumps(v)[1:-1] for v in pc.filter(strings, odd).to_pylist()]
        escaped = pc.replace_with_mask(escaped, odd, pa.array(cells, TEXT))
    return escaped


def json_strings(column: pa.Array) -> pa.Array:
    """Each string as a JSON string literal; null stays null."""
    column = column.cast(TEXT)
    # Most cells need no escape; find the few that do and escape only those.
    needs = pc.fill_null(pc.match_substring_regex(column, _NEEDS_ESCAPE), False)
    if pc.any(needs).as_py():
        column = pc.replace_with_mask(column, needs, _escaped(pc.filter(column, needs)))
    return pc.binary_join_element_wise(text('"'), column, text('"'), text(""))


def json_literals(column: pa.Array) -> pa.Array:
    """Each value as JSON text; null (and NaN, infinity) stay null.

    Timestamps become integer epoch seconds, as report contents carry them.
    """
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return json_strings(column)
    if pa.types.is_timestamp(kind):
        seconds = pc.divide(column.cast(pa.timestamp("ms", kind.tz)).cast(pa.int64()), 1000)
        return seconds.cast(TEXT)
    if pa.types.is_floating(kind):
        # NaN and infinity are not JSON numbers; they are missing values.
        column = pc.if_else(pc.is_finite(column), column, pa.scalar(None, kind))
    if pa.types.is_boolean(kind):
        return pc.if_else(column, text("true"), text("false"))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return column.cast(TEXT)
    # Anything else (lists, structs): the json module, once per present cell.
    return pa.array(
        [
            None if v is None else json.dumps(v, ensure_ascii=False, default=str)
            for v in column.to_pylist()
        ],
        TEXT,
    )
