"""XLSX through rustpy-xlsxwriter (Rust): the same workbook as :mod:`xlsx_file`, several
times faster, streamed from the snapshot's Arrow batches in bounded memory.

The library writes what it is given without asking, and as-is it loses data: pandas
categories become empty cells, zoned times are written as UTC, and dates get an ISO
text-like format. So it is used only behind guards, and only the pinned version:

- every column is one of the snapshot's own Arrow types (int64, float64, string,
  bool, timestamp, date32); anything else (a category, a dictionary, a nested type)
  is refused and the typed xlsxwriter writer runs instead;
- timestamps become Excel serial days of the local time in the run's zone, dates
  serial days, each with an explicit number format (no date handling of the
  library's is used);
- text cells are written as text (never formulas) and carry the quote-prefix
  format, so a cell such as ``=1+2`` stays text even when edited in Excel;
- the workbook is written to a temporary file and copied to ``out`` only when whole;
  the library is given that file's path, not an open file: given a Python file it
  held the whole zip in memory (peak 437 MiB for 1,000,000 x 12 rows; by path 242 MiB,
  the same as only reading the snapshot).

``tests/test_report_xlsx.py`` reads the files back with openpyxl (types and values);
``tests/benchmarks/bench_xlsx.py`` measures it beside constant-memory xlsxwriter.
"""

from __future__ import annotations

import importlib.metadata
import logging
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from toolkit.reports.csv_file import header_zone, labels
from toolkit.reports.map_png import RESOLUTION, MapImage
from toolkit.reports.snapshot import Snapshot
from toolkit.reports.times import local_time
from toolkit.scratch import scratch_folder

log = logging.getLogger(__name__)

PINNED = "0.8.0"  # the version whose behaviour the guards and the read-back test know
EXCEL_EPOCH_DAYS = 25_569.0
MS_PER_DAY = 86_400_000.0
ALLOWED = {"integer", "number", "text", "boolean", "timestamp", "date"}
ARROW_OK = {
    "integer": pa.types.is_int64,
    "number": pa.types.is_float64,
    "text": pa.types.is_string,
    "boolean": pa.types.is_boolean,
    "timestamp": pa.types.is_timestamp,
    "date": pa.types.is_date32,
}
FORMATS = {"timestamp": "yyyy-mm-dd hh:mm:ss", "date": "yyyy-mm-dd"}


class Unsupported(Exception):
    """The fast writer cannot write this faithfully; the typed writer must."""


def available() -> bool:
    """Whether the pinned rustpy-xlsxwriter is installed."""
    try:
        version = importlib.metadata.version("rustpy-xlsxwriter")
    except importlib.metadata.PackageNotFoundError:
        return False
    if version != PINNED:
        log.info("rustpy-xlsxwriter %s is not the pinned %s; using xlsxwriter", version, PINNED)
        return False
    return True


def check_columns(spec: list[dict[str, Any]], schema: pa.Schema) -> None:
    """Refuse (Unsupported) any column the guards do not cover."""
    for position, field in enumerate(spec):
        kind = field["type"]
        arrow = schema.field(position).type
        if kind not in ALLOWED or not ARROW_OK[kind](arrow):
            raise Unsupported(f"column {field['key']!r}: {kind} as {arrow}")


def excel_columns(batch: pa.RecordBatch, spec: list[dict[str, Any]], zone: str) -> list[Any]:
    """The batch's columns as the library must get them (see the module's guards)."""
    columns = []
    for field, column in zip(spec, batch.columns, strict=True):
        kind = field["type"]
        if kind == "timestamp":
            millis = local_time(column, zone).cast(pa.int64()).cast(pa.float64())
            column = pc.add(pc.divide(millis, MS_PER_DAY), EXCEL_EPOCH_DAYS)
        elif kind == "date":
            column = pc.add(column.cast(pa.int32()).cast(pa.float64()), EXCEL_EPOCH_DAYS)
        columns.append(column)
    return columns


def _sheet_readers(
    snapshot: Snapshot, header: Mapping[str, Any], rows_per_sheet: int, names: list[str]
) -> Iterator[tuple[str, pa.RecordBatchReader]]:
    """One reader per data sheet, each of at most ``rows_per_sheet`` rows, in order,
    streaming the snapshot's batches (the sheets are written one after the other)."""
    spec = list(header["spec"])
    zone = header_zone(header)
    total = snapshot.row_count
    count = max(1, -(-total // rows_per_sheet))
    batches = snapshot.batches()
    pending: list[pa.RecordBatch] = []
    kinds = [pa.float64() if f["type"] in FORMATS else None for f in spec]
    schema: pa.Schema | None = None

    def fields(batch: pa.RecordBatch) -> pa.Schema:
        return pa.schema(
            [pa.field(name, kinds[i] or batch.schema.field(i).type) for i, name in enumerate(names)]
        )

    def take(limit: int) -> Iterator[pa.RecordBatch]:
        left = limit
        while left > 0:
            batch = pending.pop(0) if pending else next(batches, None)
            if batch is None:
                return
            if batch.num_rows > left:
                pending.insert(0, batch.slice(left))
                batch = batch.slice(0, left)
            left -= batch.num_rows
            yield pa.record_batch(excel_columns(batch, spec, zone), schema=schema)

    first = next(batches, None)
    if first is not None:
        check_columns(spec, first.schema)
        pending.append(first)
        schema = fields(first)
    else:
        schema = pa.schema([pa.field(n, kinds[i] or pa.string()) for i, n in enumerate(names)])
    for number in range(count):
        name = "Data" if count == 1 else f"Data {number + 1}"
        yield name, pa.RecordBatchReader.from_batches(schema, take(rows_per_sheet))


def write_fast(
    snapshot: Snapshot,
    header: Mapping[str, Any],
    out: BinaryIO | str,
    *,
    rows_per_sheet: int,
    widths: list[int],
    image: MapImage | None = None,
) -> None:
    """Write the workbook with rustpy-xlsxwriter (raises Unsupported before writing
    anything when a column is not covered by the guards)."""
    from rustpy_xlsxwriter import FastExcel, Format

    from toolkit.reports.xlsx_file import MAP_SHEET, about_records, table_records

    spec = list(header["spec"])
    names = labels(header)
    if len(set(names)) != len(names):
        raise Unsupported("two columns share a heading")
    check_columns(spec, snapshot.file.schema_arrow)
    title = str(header["name"])
    heading = (
        Format().set_bold().set_font_color("#FFFFFF").set_background_color("#1F4E78")
    ).set_border("thin")
    text = Format().set_quote_prefix()

    def column_format(kind: str) -> Any:
        if kind in FORMATS:
            return Format().set_num_format(FORMATS[kind])
        return text if kind == "text" else None

    formats = [column_format(f["type"]) for f in spec]
    # The library's stubs say list[Format]; None (no format) is what it takes for "none".
    about_formats: list[Any] = [None, text]
    widths_: list[float] = [float(w) for w in widths]

    def page(sheet_title: str) -> dict[str, Any]:
        return {
            "landscape": True,
            "paper_size": 9,
            "fit_to_pages": (1, 0),
            "repeat_rows": 0,
            "margins": {"left": 0.4, "right": 0.4, "top": 0.6, "bottom": 0.6},
            "header": f"&L&8{sheet_title.replace('&', '&&')}",
            "footer": "&R&8Page &P of &N",
        }

    with scratch_folder("toolkit-xlsx-") as folder:
        target = Path(folder) / "report.xlsx"
        book = FastExcel(str(target), output_format="xlsx").freeze(row=1)
        sheets = []
        for name, reader in _sheet_readers(snapshot, header, rows_per_sheet, names):
            sheets.append(name)
            book.sheet(
                name,
                reader,
                column_widths=widths_,
                column_formats=formats,
                header_format=heading,
                autofilter=True,
                page_setup=page(title),
            )
        for sheet_title, records in table_records(header):
            book.sheet(
                sheet_title[:31],
                records,
                header_format=heading,
                autofilter=True,
                column_width=14,
                page_setup=page(f"{title}: {sheet_title}"),
            )
        if image is not None:  # the picture under its title (heading) and caption
            setup = page(f"{title}: {image.title}")
            del setup["repeat_rows"]
            book.sheet(
                MAP_SHEET,
                [{image.title: image.caption}],
                header_format=Format().set_bold().set_font_size(13),
                column_formats=[text],
                images=[
                    {
                        "data": image.png,
                        "row": 3,
                        "col": 0,
                        "scale": 1 / RESOLUTION,
                        "alt_text": image.title,
                    }
                ],
                page_setup={**setup, "fit_to_pages": (1, 1)},
            )
        book.sheet(
            "About",
            about_records(header, snapshot.row_count, sheets),
            header_format=heading,
            column_widths=[34, 70],
            column_formats=about_formats,
            page_setup={k: v for k, v in page(title).items() if k != "repeat_rows"},
        )
        book.save()
        with target.open("rb") as spool:
            if isinstance(out, str):
                with Path(out).open("wb") as handle:
                    shutil.copyfileobj(spool, handle)
            else:
                shutil.copyfileobj(spool, out)
