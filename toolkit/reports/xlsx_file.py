"""XLSX contents: typed cells, a styled frozen header with an autofilter, sensible widths,
a sheet describing the run, and as many data sheets as the rows need.

xlsxwriter's constant-memory mode streams each sheet row by row, so memory stays
bounded; it has no column API, so cells are written one by one (as any xlsxwriter
program does), with everything that can be done on whole columns done first.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import xlsxwriter

from toolkit.reports import xlsx_fast
from toolkit.reports.csv_file import header_zone, labels
from toolkit.reports.map_png import RESOLUTION, MapImage, report_map
from toolkit.reports.snapshot import Snapshot
from toolkit.reports.times import local_time
from toolkit.safe_output import neutralise_formulas

log = logging.getLogger(__name__)

MAX_DATA_ROWS = 1_048_575  # Excel's 1,048,576 rows, less the header
EXCEL_EPOCH_DAYS = 25_569.0  # 1970-01-01 as an Excel serial day
MS_PER_DAY = 86_400_000.0
WORKBOOK_OPTIONS = {
    "constant_memory": True,
    # Text is only ever text: never a formula, link or number because of how it looks.
    "strings_to_formulas": False,
    "strings_to_urls": False,
    "strings_to_numbers": False,
}
MIN_WIDTH, MAX_WIDTH = 8, 60
TYPE_WIDTHS = {"integer": 10, "number": 14, "timestamp": 20, "boolean": 9, "date": 11}


def _excel_days(column: pa.Array) -> pa.Array:
    millis = column.cast(pa.int64()).cast(pa.float64())
    return pc.add(pc.divide(millis, MS_PER_DAY), EXCEL_EPOCH_DAYS)


def _risky(column: pa.Array) -> list[bool] | None:
    """Per cell, whether a spreadsheet would read it as a formula; None when no cell is."""
    starts = pc.fill_null(pc.match_substring_regex(column, r"^[=+\-@\t\r]"), False)
    if not pc.any(starts).as_py():
        return None
    # Only the cells that start like a formula go through neutralise_formulas.
    suspects = pd.Series(pc.filter(column, starts).to_pandas(), dtype="string")
    mask = starts.to_numpy(zero_copy_only=False).copy()
    mask[mask] = (neutralise_formulas(suspects) != suspects).fillna(False).to_numpy(dtype=bool)
    risky: list[bool] = mask.tolist()
    return risky


def _widths(spec: list[dict[str, Any]], first: pa.RecordBatch | None) -> list[int]:
    widths = []
    for position, field in enumerate(spec):
        width = max(TYPE_WIDTHS.get(field["type"], MIN_WIDTH), len(field["label"]) + 3)
        if field["type"] == "text" and first is not None and first.num_rows:
            longest = pc.max(pc.utf8_length(first.column(position).slice(0, 1000))).as_py()
            width = max(width, (longest or 0) + 2)
        widths.append(min(max(width, MIN_WIDTH), MAX_WIDTH))
    return widths


class _DataSheets:
    """The data sheets: a new one every ``rows_per_sheet`` rows, each with its header."""

    def __init__(
        self,
        workbook: xlsxwriter.Workbook,
        header: Mapping[str, Any],
        total_rows: int,
        rows_per_sheet: int,
        widths: list[int],
    ) -> None:
        self.spec = list(header["spec"])
        self.labels = labels(header)
        self.zone = header_zone(header)
        count = max(1, math.ceil(total_rows / rows_per_sheet))
        self.heading = workbook.add_format(
            {"bold": True, "font_color": "#FFFFFF", "bg_color": "#1F4E78", "border": 1}
        )
        self.date = workbook.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"})
        self.day = workbook.add_format({"num_format": "yyyy-mm-dd"})
        self.quoted = workbook.add_format({"quote_prefix": True})
        self.sheets = []
        for number in range(count):
            name = "Data" if count == 1 else f"Data {number + 1}"
            sheet = workbook.add_worksheet(name)
            rows = min(rows_per_sheet, total_rows - number * rows_per_sheet)
            for position, width in enumerate(widths):
                sheet.set_column(position, position, width)
            for position, label in enumerate(self.labels):
                sheet.write_string(0, position, label, self.heading)
            sheet.freeze_panes(1, 0)
            sheet.autofilter(0, 0, max(rows, 1), len(self.spec) - 1)
            print_setup(sheet, str(header["name"]), repeat_header=True)
            self.sheets.append(sheet)
        self.rows_per_sheet = rows_per_sheet
        self.names = [s.get_name() for s in self.sheets]

    def write(self, batch: pa.RecordBatch, start: int) -> None:
        """Write ``batch``, whose first row is data row ``start`` (0-based) of the report."""
        done = 0
        while done < batch.num_rows:
            sheet_number, offset = divmod(start + done, self.rows_per_sheet)
            take = min(batch.num_rows - done, self.rows_per_sheet - offset)
            self._write_rows(self.sheets[sheet_number], batch.slice(done, take), offset + 1)
            done += take

    def _write_rows(self, sheet: Any, batch: pa.RecordBatch, first_row: int) -> None:
        cells: list[tuple[Callable[..., Any], list[Any], Any, list[bool] | None]] = []
        for field, column in zip(self.spec, batch.columns, strict=True):
            kind = field["type"]
            if kind == "timestamp":
                days = _excel_days(local_time(column, self.zone)).to_pylist()
                cells.append((sheet.write_number, days, self.date, None))
            elif kind == "date":
                days = pc.add(column.cast(pa.int32()).cast(pa.float64()), EXCEL_EPOCH_DAYS)
                cells.append((sheet.write_number, days.to_pylist(), self.day, None))
            elif kind in ("integer", "number"):
                cells.append((sheet.write_number, column.to_pylist(), None, None))
            elif kind == "boolean":
                cells.append((sheet.write_boolean, column.to_pylist(), None, None))
            else:
                cells.append((sheet.write_string, column.to_pylist(), None, _risky(column)))
        quoted = self.quoted
        for index in range(batch.num_rows):
            row = first_row + index
            for position, (write, values, cell_format, risky) in enumerate(cells):
                value = values[index]
                if value is None:
                    continue
                if risky is not None and risky[index]:
                    write(row, position, value, quoted)
                else:
                    write(row, position, value, cell_format)


def print_setup(sheet: Any, title: str, *, repeat_header: bool) -> None:
    """A4 landscape, every column on the page's width (as many pages down as needed),
    the heading row on every page, the report's name and "page N of M" on each."""
    sheet.set_landscape()
    sheet.set_paper(9)  # A4
    sheet.fit_to_pages(1, 0)
    sheet.set_margins(left=0.4, right=0.4, top=0.6, bottom=0.6)
    if repeat_header:
        sheet.repeat_rows(0)
    # '&' starts a code in Excel's header text: a name's own '&' is doubled.
    sheet.set_header(f"&L&8{title.replace('&', '&&')}")
    sheet.set_footer("&R&8Page &P of &N")


def _table_sheets(workbook: xlsxwriter.Workbook, header: Mapping[str, Any]) -> None:
    """A sheet for each extra table of the metadata (e.g. items per inspection date)."""
    labels_of = {f["key"]: f["label"] for f in header["spec"]}
    bold = workbook.add_format({"bold": True, "font_color": "#FFFFFF", "bg_color": "#1F4E78"})
    for table in header.get("tables") or []:
        rows = next((m["value"] for m in header["meta"] if m["key"] == table["key"]), None)
        if not rows:
            continue
        sheet = workbook.add_worksheet(str(table["title"])[:31])
        keys = list(rows[0])
        for col, key in enumerate(keys):
            sheet.write_string(0, col, str(labels_of.get(key, key)), bold)
            sheet.set_column(col, col, max(12, len(str(labels_of.get(key, key))) + 3))
        for number, row in enumerate(rows, start=1):
            for col, key in enumerate(keys):
                value = row.get(key)
                if isinstance(value, bool) or value is None:
                    continue
                if isinstance(value, int | float):
                    sheet.write_number(number, col, value)
                else:
                    sheet.write_string(number, col, str(value))
        sheet.freeze_panes(1, 0)
        sheet.autofilter(0, 0, len(rows), len(keys) - 1)
        print_setup(sheet, f"{header['name']}: {table['title']}", repeat_header=True)


MAP_SHEET = "Map"


def _map_sheet(workbook: xlsxwriter.Workbook, header: Mapping[str, Any], image: MapImage) -> None:
    """The map as a picture under its title and caption, printed on one page."""
    sheet = workbook.add_worksheet(MAP_SHEET)
    sheet.write_string(0, 0, image.title, workbook.add_format({"bold": True, "font_size": 13}))
    sheet.write_string(1, 0, image.caption)
    sheet.insert_image(
        3,
        0,
        "map.png",
        {
            "image_data": io.BytesIO(image.png),
            "x_scale": 1 / RESOLUTION,
            "y_scale": 1 / RESOLUTION,
            "description": image.title,
        },
    )
    print_setup(sheet, f"{header['name']}: {image.title}", repeat_header=False)
    sheet.fit_to_pages(1, 1)


def _about_sheet(
    workbook: xlsxwriter.Workbook, header: Mapping[str, Any], rows: int, sheets: list[str]
) -> None:
    sheet = workbook.add_worksheet("About")
    title = workbook.add_format({"bold": True, "font_size": 14})
    bold = workbook.add_format({"bold": True})
    # User-given values (parameters, rule names) are text whatever they look like.
    text = workbook.add_format({"quote_prefix": True, "text_wrap": True, "valign": "top"})
    sheet.set_column(0, 0, 34)
    sheet.set_column(1, 1, 70)
    print_setup(sheet, str(header["name"]), repeat_header=False)
    sheet.write_string(0, 0, str(header["name"]), title)
    sheet.write_string(1, 0, "Data rows", bold)
    sheet.write_number(1, 1, rows)
    sheet.write_string(2, 0, "Data sheets", bold)
    sheet.write_string(2, 1, ", ".join(sheets), text)
    row = 4
    for heading, entries in (("Filters", header["filter"]), ("Metadata", header["meta"])):
        sheet.write_string(row, 0, heading, title)
        row += 1
        for entry in entries:
            sheet.write_string(row, 0, str(entry["label"]), bold)
            sheet.write_string(row, 1, str(entry["display"]), text)
            row += 1
        row += 1


def _plain(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Dictionary-encoded (category) columns as their values: written as what they say."""
    if not any(pa.types.is_dictionary(c.type) for c in batch.columns):
        return batch
    columns = [
        c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def table_records(header: Mapping[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The extra tables of the metadata as (title, rows keyed by heading)."""
    labels_of = {"date": "Date", **{f["key"]: f["label"] for f in header["spec"]}}
    tables = []
    for table in header.get("tables") or []:
        rows = next((m["value"] for m in header["meta"] if m["key"] == table["key"]), None)
        if rows:
            named = [{str(labels_of.get(k, k)): v for k, v in row.items()} for row in rows]
            tables.append((str(table["title"]), named))
    return tables


def about_records(header: Mapping[str, Any], rows: int, sheets: list[str]) -> list[dict[str, Any]]:
    """The About sheet as two columns (what, value) under the report's name."""
    name = str(header["name"])
    records: list[dict[str, Any]] = [
        {"About": "Data rows", name: rows},
        {"About": "Data sheets", name: ", ".join(sheets)},
    ]
    for heading, entries in (("Filters", header["filter"]), ("Metadata", header["meta"])):
        records.append({"About": "", name: ""})
        records.append({"About": heading, name: ""})
        records += [{"About": str(e["label"]), name: str(e["display"])} for e in entries]
    return records


Engine = Literal["auto", "rust", "xlsxwriter"]


def write_xlsx(
    snapshot: Snapshot,
    header: Mapping[str, Any],
    out: BinaryIO | str,
    *,
    rows_per_sheet: int = MAX_DATA_ROWS,
    engine: Engine = "auto",
) -> None:
    """Write the workbook to ``out`` (a path or a binary file): with the pinned
    rustpy-xlsxwriter behind its guards when installed (``auto``), else, or when a
    guard refuses, with typed constant-memory xlsxwriter."""
    if not 1 <= rows_per_sheet <= MAX_DATA_ROWS:
        raise ValueError(f"rows_per_sheet {rows_per_sheet} is not in 1..{MAX_DATA_ROWS}")
    image = report_map(snapshot, header)
    if engine != "xlsxwriter" and xlsx_fast.available():
        first_rows = next(snapshot.batches(rows=1000), None)
        try:
            xlsx_fast.check_columns(list(header["spec"]), snapshot.file.schema_arrow)
            xlsx_fast.write_fast(
                snapshot,
                header,
                out,
                rows_per_sheet=rows_per_sheet,
                widths=_widths(header["spec"], first_rows),
                image=image,
            )
            return
        except xlsx_fast.Unsupported as exc:
            if engine == "rust":
                raise
            log.info("XLSX by xlsxwriter: %s", exc)
    elif engine == "rust":
        raise ValueError(f"rustpy-xlsxwriter {xlsx_fast.PINNED} is not installed")
    _write_typed(snapshot, header, out, rows_per_sheet, image)


def _write_typed(
    snapshot: Snapshot,
    header: Mapping[str, Any],
    out: BinaryIO | str,
    rows_per_sheet: int,
    image: MapImage | None = None,
) -> None:
    total = snapshot.row_count
    batches = (_plain(batch) for batch in snapshot.batches())
    first = next(batches, None)
    workbook = xlsxwriter.Workbook(out, WORKBOOK_OPTIONS)
    workbook.set_properties({"title": str(header["name"]), "comments": "written by toolkit"})
    try:
        data = _DataSheets(workbook, header, total, rows_per_sheet, _widths(header["spec"], first))
        _table_sheets(workbook, header)
        if image is not None:
            _map_sheet(workbook, header, image)
        _about_sheet(workbook, header, total, data.names)
        start = 0
        if first is not None:
            data.write(first, 0)
            start = first.num_rows
        for batch in batches:
            data.write(batch, start)
            start += batch.num_rows
    finally:
        workbook.close()
