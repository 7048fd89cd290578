"""JSON contents (spec 4.5), written incrementally a row group at a time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.model.jsontext import json_literals, null_text, text
from toolkit.reports.snapshot import Snapshot


def _json_rows(batch: pa.RecordBatch, first: bool) -> memoryview:
    """The rows of ``batch`` as JSON objects, each after a comma but the very ``first``.

    Built column by column in Arrow (no Python object per cell), in the spec's order.
    """
    parts: list[pa.Array | str] = []
    for position, name in enumerate(batch.schema.names):
        parts.append(("{" if position == 0 else ",") + json.dumps(name) + ":")
        column = batch.column(position)
        if pa.types.is_date(column.type):  # a calendar date is its ISO text
            column = column.cast(pa.string())
        parts.append(pc.fill_null(json_literals(column), null_text()))
    parts.append("}")
    # Every row starts with its comma; the very first row's is skipped below.
    pieces = [text(","), *(text(p) if isinstance(p, str) else p for p in parts)]
    rows = pc.binary_join_element_wise(*pieces, text("")).cast(pa.string())
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
