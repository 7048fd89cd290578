"""JSON contents (spec 4.5), written incrementally a row group at a time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.reports.snapshot import Snapshot

_PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}


def contents_head(header: Mapping[str, Any], schema: str) -> dict[str, Any]:
    """Everything of the contents but ``data``, in the spec's order."""
    return {
        "$schema": schema,
        "name": header["name"],
        "meta": header["meta"],
        "filter": header["filter"],
        "spec": header["spec"],
    }


def _json_rows(batch: pa.RecordBatch) -> str:
    """The rows of ``batch`` as JSON objects joined by commas (timestamps as epoch seconds)."""
    columns = []
    for column in batch.columns:
        if pa.types.is_timestamp(column.type):
            column = pc.divide(column.cast(pa.int64()), 1000)
        columns.append(column)
    frame = pa.RecordBatch.from_arrays(columns, names=batch.schema.names).to_pandas(
        types_mapper=_PANDAS_TYPES.get
    )
    # pandas' JSON writer is C code over whole columns; 15 digits keep coordinates exact.
    text = frame.to_json(orient="records", double_precision=15, force_ascii=False)
    return text[1:-1]


def write_json(snapshot: Snapshot, header: Mapping[str, Any], schema: str, out: BinaryIO) -> None:
    """Write the contents object to ``out``; memory holds one row group at a time."""
    head = json.dumps(contents_head(header, schema), ensure_ascii=False)
    out.write((head[:-1] + ', "data": [').encode("utf-8"))
    first = True
    for batch in snapshot.batches():
        rows = _json_rows(batch)
        if not rows:
            continue
        out.write((rows if first else "," + rows).encode("utf-8"))
        first = False
    out.write(b"]}")
