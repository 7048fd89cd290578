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

_RISKY_START = r"^[=+\-@\t\r]"


def safe_text(column: pa.Array) -> pa.Array:
    """A text column no spreadsheet can run as a formula (see :mod:`toolkit.safe_output`)."""
    # Find the few cells that start like a formula in Arrow; only those take the pandas
    # trip through neutralise_formulas (which also spares plain numbers such as -37.5).
    starts = pc.fill_null(pc.match_substring_regex(column, _RISKY_START), False)
    if not pc.any(starts).as_py():
        return column
    suspects = pd.Series(pc.filter(column, starts).to_pandas(), dtype="string")
    safe = pa.array(neutralise_formulas(suspects), pa.string(), from_pandas=True)
    return pc.replace_with_mask(column, starts, safe)


def iso_text(column: pa.Array) -> pa.Array:
    """Timestamps as ISO 8601 in UTC, e.g. ``2026-02-01T08:00:00.000Z``."""
    # Formatting a zoned timestamp consults the time-zone database per value (5x slower);
    # our values are UTC, so format them as naive UTC and say so with the Z.
    text = column.cast(pa.timestamp("ms")).cast(pa.string())
    iso = pc.replace_substring(text, " ", "T", max_replacements=1)
    return pc.binary_join_element_wise(iso, pa.scalar("Z"), "")


def labels(header: Mapping[str, Any]) -> list[str]:
    """Column headings: the fields' labels, themselves made safe (labels can come from rules)."""
    names = pa.array([f["label"] for f in header["spec"]], pa.string())
    safe: list[str] = safe_text(names).to_pylist()
    return safe


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
