"""The rows of a report run, kept as Parquet and read back in row groups.

A run writes its rows once (to a temporary file the store then keeps inside the site
file); every fetch renders the same snapshot, in any format, by streaming row groups
from wherever it is kept, so memory stays bounded however many rows.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from toolkit.reports.catalogue import Field

ROW_GROUP_ROWS = 65_536

ARROW_TYPES: dict[str, pa.DataType] = {
    "integer": pa.int64(),
    "number": pa.float64(),
    "text": pa.string(),
    "timestamp": pa.timestamp("ms", tz="UTC"),
    "boolean": pa.bool_(),
    "date": pa.date32(),
}
# The column beside the fields holding each row's geometry (WKB, EPSG:4326), when any.
GEOMETRY = "geometry"


def arrow_schema(spec: Sequence[Field], geometry: bool = False) -> pa.Schema:
    fields = [pa.field(f.key, ARROW_TYPES[f.type]) for f in spec]
    if geometry:
        fields.append(pa.field(GEOMETRY, pa.binary()))
    return pa.schema(fields)


def to_batch(frame: pd.DataFrame, spec: Sequence[Field], geometry: bool = False) -> pa.RecordBatch:
    """The frame's columns (named by field key) in the field types; timestamps arrive
    as epoch milliseconds, booleans as 0/1, dates as ISO text, as SQLite gives them."""
    arrays = []
    for f in spec:
        column = frame[f.key]
        if f.type == "date":
            # Register dates are stored YYYY-MM-DD; anything else is not a date (null).
            parsed = pd.to_datetime(column, format="%Y-%m-%d", errors="coerce")
            arrays.append(pa.array(parsed, pa.timestamp("ns"), from_pandas=True).cast(pa.date32()))
        elif f.type == "timestamp":
            millis = pa.array(column, pa.int64(), from_pandas=True)
            arrays.append(millis.cast(ARROW_TYPES["timestamp"]))
        elif f.type == "boolean":
            arrays.append(pa.array(column, pa.int64(), from_pandas=True).cast(pa.bool_()))
        elif f.type == "text" and not pd.api.types.is_string_dtype(column):
            # Mixed SQLite values (numbers in a JSON text field) become their text.
            text = column.astype("string")
            arrays.append(pa.array(text, pa.string(), from_pandas=True))
        else:
            arrays.append(pa.array(column, ARROW_TYPES[f.type], from_pandas=True))
    if geometry:
        arrays.append(pa.array(frame[GEOMETRY], pa.binary(), from_pandas=True))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(spec, geometry))


# Where a snapshot is written or read: a file's path, or an open binary file.
Source = Path | IO[bytes] | io.RawIOBase


class SnapshotWriter:
    """Writes row batches as one Parquet file to ``where``. Nothing marks it whole: the
    caller keeps it (the store, in the transaction that completes the run) only when
    the writer closed without an error."""

    def __init__(self, where: Source, spec: Sequence[Field], *, geometry: bool = False) -> None:
        self.spec = tuple(spec)
        self.geometry = geometry
        self.writer = pq.ParquetWriter(where, arrow_schema(self.spec, geometry), compression="zstd")
        self.rows = 0

    def write(self, frame: pd.DataFrame) -> None:
        if len(frame):
            batch = to_batch(frame, self.spec, self.geometry)
            self.write_table(pa.Table.from_batches([batch]))

    def write_table(self, table: pa.Table) -> None:
        self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.rows += table.num_rows

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(
        self, _kind: type[BaseException] | None, _exc: object, _tb: TracebackType | None
    ) -> None:
        self.writer.close()


class Snapshot:
    """A finished snapshot, read a row group at a time; closing it closes an open file
    given as ``source`` unless ``close_source`` is false."""

    def __init__(self, source: Source, spec: Sequence[Field], *, close_source: bool = True) -> None:
        self.source = source
        self.close_source = close_source
        self.spec = tuple(spec)
        self.file = pq.ParquetFile(source)
        # Hears how many rows :meth:`batches` has handed out, once each batch is used.
        self.on_rows: Callable[[int], None] | None = None

    @property
    def row_count(self) -> int:
        return int(self.file.metadata.num_rows)

    @property
    def has_geometry(self) -> bool:
        """Whether the rows carry their asset's geometry (the map, spatial exports)."""
        return GEOMETRY in self.file.schema_arrow.names

    def batches(
        self, rows: int = ROW_GROUP_ROWS, *, geometry: bool = False
    ) -> Iterator[pa.RecordBatch]:
        """Every row, ``rows`` at a time, the fields only (with ``geometry`` the geometry
        column too, last); a snapshot without rows yields nothing."""
        columns = [f.key for f in self.spec] + ([GEOMETRY] if geometry else [])
        done = 0
        for batch in self.file.iter_batches(batch_size=rows, columns=columns):
            yield batch
            done += batch.num_rows
            if self.on_rows is not None:
                self.on_rows(done)

    def column(self, key: str) -> pa.ChunkedArray:
        """One whole column (reports read few, narrow columns for metadata and charts)."""
        return self.file.read(columns=[key]).column(0)

    def close(self) -> None:
        self.file.close()
        if self.close_source and not isinstance(self.source, Path):
            self.source.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
