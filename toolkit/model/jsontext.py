"""JSON literals of whole Arrow columns: the one place values are spelled as JSON text.

Used where many rows become JSON without a Python object per cell: register fields
(``fieldjson``) and report contents (``reports.json_contents``). Strings are escaped
in Arrow, only in the cells that need it; the rare other control characters are
spelled by the json module.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

from toolkit.lazy import lazy

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    np = lazy("numpy")
    pa = lazy("pyarrow")
    pc = lazy("pyarrow.compute")


# Made on first use, as making them imports pyarrow (a command may never need it).
@functools.cache
def text_type() -> pa.DataType:
    """The type of these columns: 64-bit offsets, so a million long values stay safe."""
    return pa.large_string()


@functools.cache
def null_text() -> pa.Scalar:
    """The JSON literal ``null`` as a scalar of :func:`text_type`."""
    return pa.scalar("null", text_type())


_CONTROL = r"[\x00-\x1f]"
_NEEDS_ESCAPE = r'[\\"\x00-\x1f]'


def text(value: str) -> pa.Scalar:
    """A string scalar of the type these columns use."""
    return pa.scalar(value, text_type())


def _escaped(strings: pa.Array) -> pa.Array:
    """JSON escapes of strings that need some (backslash, quote, control characters)."""
    escaped = pc.replace_substring(strings, "\\", "\\\\")
    for raw, spelled in (('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        escaped = pc.replace_substring(escaped, raw, spelled)
    odd = pc.fill_null(pc.match_substring_regex(escaped, _CONTROL), False)
    if pc.any(odd).as_py():
        # Other control characters are rare: let the json module spell those few cells.
        cells = [json.dumps(v)[1:-1] for v in pc.filter(strings, odd).to_pylist()]
        escaped = pc.replace_with_mask(escaped, odd, pa.array(cells, text_type()))
    return escaped


def json_strings(column: pa.Array) -> pa.Array:
    """Each string as a JSON string literal; null stays null."""
    return pc.binary_join_element_wise(text('"'), json_escaped(column), text('"'), text(""))


def json_escaped(column: pa.Array) -> pa.Array:
    """Each string as the inside of its JSON string literal (the quotes left to the
    caller, who may join them with more text in the same pass); null stays null."""
    if isinstance(column, pa.ChunkedArray):
        # A column read in blocks comes chunked, and replace_with_mask takes no chunked
        # mask: a clean part (nothing filtered out) whose text needed escapes failed here.
        column = column.combine_chunks()
    column = column.cast(text_type())
    if not _may_need_escapes(column):
        return column
    # Most cells need no escape; find the few that do and escape only those.
    needs = pc.fill_null(pc.match_substring_regex(column, _NEEDS_ESCAPE), False)
    if pc.any(needs).as_py():
        column = pc.replace_with_mask(column, needs, _escaped(pc.filter(column, needs)))
    return column


def _may_need_escapes(column: pa.Array) -> bool:
    """Whether the text of a ``large_string`` array holds a byte JSON escapes (a quote, a
    backslash, a control character): numpy's comparisons of its bytes, all at once, take
    a thirtieth of the regex over each string (0.5 ms against 15 for a 250,000-row column
    of addresses), and most columns hold none. A byte of a null slot may answer yes; the
    regex then looks at each string."""
    _, offsets, data = column.buffers()
    if data is None or len(column) == 0:
        return False
    ends = np.frombuffer(offsets, dtype=np.int64, count=len(column) + 1, offset=8 * column.offset)
    text = np.frombuffer(data, dtype=np.uint8)[ends[0] : ends[-1]]
    return bool((text < 0x20).any() or (text == ord('"')).any() or (text == ord("\\")).any())


def json_literals(column: pa.Array) -> pa.Array:
    """Each value as JSON text; null (and NaN, infinity) stay null.

    Timestamps become integer epoch seconds, as report contents carry them.
    """
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return json_strings(column)
    if pa.types.is_timestamp(kind):
        seconds = pc.divide(column.cast(pa.timestamp("ms", kind.tz)).cast(pa.int64()), 1000)
        return seconds.cast(text_type())
    if pa.types.is_floating(kind):
        # NaN and infinity are not JSON numbers; they are missing values.
        column = pc.if_else(pc.is_finite(column), column, pa.scalar(None, kind))
    if pa.types.is_boolean(kind):
        return pc.if_else(column, text("true"), text("false"))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return column.cast(text_type())
    # Anything else (lists, structs): the json module, once per present cell.
    return pa.array(
        [
            None if v is None else json.dumps(v, ensure_ascii=False, default=str)
            for v in column.to_pylist()
        ],
        text_type(),
    )
