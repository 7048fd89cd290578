"""JSON contents (spec 4.5), written incrementally a row group at a time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.reports.snapshot import Snapshot

_NULL = pa.scalar("null")
_CONTROL = r"[\x00-\x1f]"
_NEEDS_ESCAPE = r'[\\"\x00-\x1f]'


def _escaped(text: pa.Array) -> pa.Array:
    """JSON escapes of strings that need some (backslash, quote, control characters)."""
    escaped = pc.replace_substring(text, "\\", "\\\\")
    for raw, spelled in (('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        escaped = pc.replace_substring(escaped, raw, spelled)
    odd = pc.fill_null(pc.match_substring_regex(escaped, _CONTROL), False)
    if pc.any(odd).as_py():
        # Other control characters are rare: let the json module spell those few cells.
        cells = [json.dumps(v)[1:-1] for v in pc.filter(text, odd).to_pylist()]
        escaped = pc.replace_with_mask(escaped, odd, pa.array(cells, pa.string()))
    return escaped


def _json_text(column: pa.Array) -> pa.Array:
    """Each string as a JSON string literal, or ``null``."""
    # Most cells need no escape; find the few that do and escape only those.
    needs = pc.fill_null(pc.match_substring_regex(column, _NEEDS_ESCAPE), False)
    if pc.any(needs).as_py():
        column = pc.replace_with_mask(column, needs, _escaped(pc.filter(column, needs)))
    return pc.fill_null(pc.binary_join_element_wise('"', column, '"', ""), _NULL)


def _json_values(column: pa.Array) -> pa.Array:
    """Each value of the column as JSON text (timestamps as integer epoch seconds)."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _json_text(column)
    if pa.types.is_timestamp(kind):
        column = pc.divide(column.cast(pa.int64()), 1000)
    elif pa.types.is_floating(kind):
        # NaN and infinity are not JSON numbers; they are missing values.
        column = pc.if_else(pc.is_finite(column), column, pa.scalar(None, kind))
    return pc.fill_null(column.cast(pa.string()), _NULL)


def _json_rows(batch: pa.RecordBatch, first: bool) -> memoryview:
    """The rows of ``batch`` as JSON objects, each after a comma but the very ``first``.

    Built column by column in Arrow (no Python object per cell), in the spec's order.
    """
    parts: list[pa.Array | str] = []
    for position, name in enumerate(batch.schema.names):
        parts.append(("{" if position == 0 else ",") + json.dumps(name) + ":")
        parts.append(_json_values(batch.column(position)))
    parts.append("}")
    rows = pc.binary_join_element_wise(",", *parts, "")
    if len(rows) == 0:
        return memoryview(b"")
    # No row is null, so the rows are exactly the bytes between the first and last offset.
    _validity, offsets, data = rows.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32)[rows.offset : rows.offset + len(rows) + 1]
    return memoryview(data)[int(bounds[0]) + int(first) : int(bounds[-1])]


def contents_head(header: Mapping[str, Any], schema: str) -> dict[str, Any]:
    """Everything of the contents but ``data``, in the spec's order."""
    return {
        "$schema": schema,
        "name": header["name"],
        "meta": header["meta"],
        "filter": header["filter"],
        "spec": header["spec"],
    }


def write_json(snapshot: Snapshot, header: Mapping[str, Any], schema: str, out: BinaryIO) -> None:
    """Write the contents object to ``out``; memory holds one row group at a time."""
    head = json.dumps(contents_head(header, schema), ensure_ascii=False)
    out.write((head[:-1] + ', "data": [').encode("utf-8"))
    first = True
    for batch in snapshot.batches():
        if batch.num_rows:
            out.write(_json_rows(batch, first))
            first = False
    out.write(b"]}")
