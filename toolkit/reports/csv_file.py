"""CSV contents: pyarrow's writer over row groups, after formula neutralisation.

Two flavours:

- **plain** (the default): UTF-8 without a BOM, fields quoted as RFC 4180 says, times
  as ISO 8601 with the offset of the run's time zone (``2026-02-14T19:00:00+11:00``),
  dates ``2026-02-14``; a text cell a spreadsheet would run as a formula gets a leading
  apostrophe (OWASP's advice), which other programs read as part of the text.
- **excel** (``--excel``): for opening in Excel by double-click. A UTF-8 BOM (else
  Excel reads the file as the local code page and garbles ``Zoë``), CRLF line ends,
  local times Excel parses as dates (``2026-02-14 19:00:00``, the zone in the heading),
  and text Excel would change written as a text formula: ``="007"`` keeps the leading
  zeros of a code, ``="=1+2"`` shows ``=1+2`` as text. A text formula only ever yields
  its text (quotes inside are doubled), so nothing runs, and no apostrophe shows.
  Excel caps a formula's text literal at 255 characters, so longer text is joined from
  pieces; text too long for one formula keeps the apostrophe.

Timestamp headings name the zone in both: ``Created (Australia/Melbourne)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from toolkit.reports.snapshot import Snapshot
from toolkit.reports.times import UTC, iso_local, zone_label
from toolkit.safe_output import neutralise_formulas

_RISKY_START = r"^[=+\-@\t\r]"
# Text Excel would turn into a number and so change: leading zeros (``007``, ``0412 345``
# phone numbers), digit strings beyond its 15 significant digits, and text it reads as
# a number in scientific notation or a fraction or date (``1E5``, ``1/2``, ``3-4``).
_EXCEL_CHANGES = (
    r"^(0\d[\d ]*|\d{16,}|[+-]?\d+(\.\d+)?[eE][+-]?\d+|\d{1,4}[/-]\d{1,2}([/-]\d{1,4})?)$"
)
BOM = b"\xef\xbb\xbf"
EXCEL_LITERAL = 255  # characters in one text literal of an Excel formula
EXCEL_FORMULA = 8_192  # characters in one formula


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


def _text_formula(cells: pd.Series) -> pd.Series:
    """Each text as an Excel formula yielding exactly that text, or None when too long."""
    quoted = cells.str.replace('"', '""', regex=False)
    pieces = [
        quoted.str.slice(start, start + EXCEL_LITERAL)
        for start in range(0, int(quoted.str.len().max() or 0), EXCEL_LITERAL)
    ]
    formula = pd.Series("", index=cells.index, dtype="string")
    for n, piece in enumerate(pieces):
        present = piece.str.len() > 0
        joined = ('&"' if n else '="') + piece + '"'
        formula = formula.where(~present, formula + joined)
    return formula.where(formula.str.len() <= EXCEL_FORMULA)


def excel_text(column: pa.Array) -> pa.Array:
    """A text column as Excel should show it: cells it would run or change become text
    formulas; what is too long for one keeps the apostrophe of :func:`safe_text`."""
    risky = pc.fill_null(pc.match_substring_regex(column, _RISKY_START), False)
    changes = pc.fill_null(pc.match_substring_regex(column, _EXCEL_CHANGES), False)
    marked = pc.or_(risky, changes)
    if not pc.any(marked).as_py():
        return column
    cells = pd.Series(pc.filter(column, marked).to_pandas(), dtype="string")
    formula = _text_formula(cells)
    fallback = neutralise_formulas(cells)
    # A plain number such as -37.5 starts like a formula but is a number to Excel too.
    changed = pd.Series(pc.filter(changes, marked).to_pandas(), index=cells.index)
    keep = ((fallback == cells) & ~changed).fillna(False)
    text = formula.where(formula.notna(), fallback).where(~keep, cells)
    return pc.replace_with_mask(column, marked, pa.array(text, pa.string(), from_pandas=True))


def header_zone(header: Mapping[str, Any]) -> str:
    """The time zone a run was made in (runs from before zones were recorded: UTC)."""
    return str(header.get("timeZone") or UTC)


def labels(header: Mapping[str, Any]) -> list[str]:
    """Column headings: the fields' labels, timestamps with their zone, themselves made
    safe (labels can come from rules)."""
    zone = header_zone(header)
    names = pa.array(
        [
            zone_label(f["label"], zone) if f["type"] == "timestamp" else f["label"]
            for f in header["spec"]
        ],
        pa.string(),
    )
    safe: list[str] = safe_text(names).to_pylist()
    return safe


def _csv_batch(batch: pa.RecordBatch, names: list[str], zone: str, excel: bool) -> pa.RecordBatch:
    columns = []
    for column in batch.columns:
        if pa.types.is_timestamp(column.type):
            column = iso_local(column, zone, excel=excel)
        elif pa.types.is_string(column.type):
            column = excel_text(column) if excel else safe_text(column)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=names)


def write_csv(
    snapshot: Snapshot, header: Mapping[str, Any], out: BinaryIO, *, excel: bool = False
) -> None:
    """Write every row to ``out``; ``excel`` for the Excel flavour (see the module)."""
    names = labels(header)
    zone = header_zone(header)
    options = pacsv.WriteOptions(eol="\r\n") if excel else None
    if excel:
        out.write(BOM)
    writer: pacsv.CSVWriter | None = None
    for batch in snapshot.batches():
        safe = _csv_batch(batch, names, zone, excel)
        if writer is None:
            writer = pacsv.CSVWriter(out, safe.schema, write_options=options)
        writer.write_batch(safe)
    if writer is None:  # no rows: the header alone
        empty = pa.schema([pa.field(name, pa.string()) for name in names])
        writer = pacsv.CSVWriter(out, empty, write_options=options)
        writer.write_table(empty.empty_table())
    writer.close()
