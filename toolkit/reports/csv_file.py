"""CSV contents: pyarrow's writer over row groups, after formula neutralisation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from toolkit.reports.snapshot import Snapshot
from toolkit.safe_output import neutralise_formulas

ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # on millisecond timestamps %S carries the milliseconds
_RISKY_START = r"^[=+\-@\t\r]"


def safe_text(column: pa.Array) -> pa.Array:
    """A text column no spreadsheet can run as a formula (see :mod:`toolkit.safe_output`)."""
    # Most columns hold no risky cell at all; checking that in Arrow skips the pandas trip.
    if not pc.any(pc.match_substring_regex(column, _RISKY_START)).as_py():
        return column
    safe = neutralise_formulas(pd.Series(column.to_pandas(), dtype="string"))
    return pa.array(safe, pa.string(), from_pandas=True)


def iso_text(column: pa.Array) -> pa.Array:
    """Timestamps as ISO 8601 in UTC."""
    return pc.strftime(column, format=ISO_FORMAT)


def labels(header: Mapping[str, Any]) -> list[str]:
    """Column headings: the fields' labels, themselves made safe (labels can come from rules)."""
    names = pa.array([f["label"] for f in header["spec"]], pa.string())
    return safe_text(names).to_pylist()


def _csv_batch(batch: pa.RecordBatch, names: list[str]) -> pa.RecordBatch:
    columns = []
    for column in batch.columns:
        if pa.types.is_timestamp(column.type):
            column = iso_text(column)
        elif pa.types.is_string(column.type):
            column = safe_text(column)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=names)


def write_csv(snapshot: Snapshot, header: Mapping[str, Any], out: BinaryIO) -> None:
    names = labels(header)
    writer: pacsv.CSVWriter | None = None
    for batch in snapshot.batches():
        safe = _csv_batch(batch, names)
        if writer is None:
            writer = pacsv.CSVWriter(out, safe.schema)
        writer.write_batch(safe)
    if writer is None:  # no rows: the header alone
        empty = pa.schema([pa.field(name, pa.string()) for name in names])
        writer = pacsv.CSVWriter(out, empty)
        writer.write_table(empty.empty_table())
    writer.close()
