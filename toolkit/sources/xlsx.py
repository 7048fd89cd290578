"""Reading one sheet of an XLSX workbook as text columns, like a CSV."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from toolkit.errors import SourceError
from toolkit.sources.csv import clean_header
from toolkit.sources.report import ReadLimits, SourceProblem


@dataclass
class SheetTable:
    """A sheet's text columns, each kept row's record number, and each record's sheet row."""

    table: pa.Table
    row_numbers: NDArray[np.int64]
    record_lines: NDArray[np.int64]
    sheet: str
    problems: list[SourceProblem] = field(default_factory=list)
    rejected_rows: dict[int, SourceProblem] = field(default_factory=dict)
    # Columns with cells the workbook types as numbers: (how many, the first as text).
    # A code typed in Excel as 007 is stored as the number 7; its zeros are gone.
    numbers: dict[str, tuple[int, str]] = field(default_factory=dict)


def cell_text(value: Any) -> str | None:
    """A cell as the text a person sees: 7.0 is "7", dates are ISO 8601, blanks are missing."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value != "" else None
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _non_empty_rows(rows: Iterable[tuple[Any, ...]]) -> Iterable[tuple[int, tuple[Any, ...]]]:
    for sheet_row, values in enumerate(rows, start=1):
        if any(v is not None and v != "" for v in values):
            yield sheet_row, values


# Rows read between two progress reports: openpyxl reads a few tens of thousands a second.
_REPORT_EVERY = 5_000


def _reported(
    rows: Iterable[tuple[Any, ...]], total: int | None, on_rows: Callable[[int, int | None], None]
) -> Iterator[tuple[Any, ...]]:
    for count, values in enumerate(rows, start=1):
        if count % _REPORT_EVERY == 0:
            on_rows(count, total)
        yield values


def read_sheet(
    path: Path,
    sheet: str | None,
    limits: ReadLimits,
    *,
    on_rows: Callable[[int, int | None], None] | None = None,
) -> SheetTable:
    """Read the named (or first) sheet: first non-empty row is the header; blank rows skipped.
    ``on_rows(done, total)`` hears of the sheet rows read (total: the sheet's declared size)."""
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises zipfile, KeyError and its own errors
        raise SourceError(f"{path}: not a readable XLSX workbook: {exc}") from exc
    try:
        names = workbook.sheetnames
        if sheet is None:
            sheet = names[0]
        elif sheet not in names:
            raise SourceError(
                f"{path}: no sheet {sheet!r}; pass --layer one of: {', '.join(names)}"
            )
        worksheet = workbook[sheet]
        rows: Iterable[tuple[Any, ...]] = worksheet.iter_rows(values_only=True)
        if on_rows is not None:
            # The sheet's own dimension, which writers normally record; None when absent.
            declared = worksheet.max_row if isinstance(worksheet.max_row, int) else None
            rows = _reported(rows, declared, on_rows)
        records = list(_non_empty_rows(rows))
    finally:
        workbook.close()
    if not records:
        raise SourceError(f"{path}: sheet {sheet!r} is empty (no header, no data)")

    header_line, header = records[0]
    width = len(header)
    while width and (header[width - 1] is None or str(header[width - 1]).strip() == ""):
        # A column without a name counts only if some row has a value in it.
        if any(len(v) >= width and v[width - 1] is not None for _, v in records[1:]):
            break
        width -= 1
    names_clean, problems = clean_header([cell_text(v) or "" for v in header[:width]])
    problems = [
        SourceProblem(p.message, line=header_line, column=p.column, value=p.value) for p in problems
    ]

    data = records[1:]
    rejected: dict[int, SourceProblem] = {}
    columns: list[list[str | None]] = [[] for _ in range(width)]
    kept_rows: list[int] = []
    number_counts = [0] * width
    number_examples: list[str | None] = [None] * width
    for row_number, (sheet_row, values) in enumerate(data, start=1):
        texts = [cell_text(v) for v in values[:width]]
        texts += [None] * (width - len(texts))
        overflow = [cell_text(v) for v in values[width:] if v is not None]
        too_long = any(t is not None and len(t.encode()) > limits.max_field_bytes for t in texts)
        if overflow or too_long:
            reason = (
                f"values beyond the last named column: {overflow[:3]}"
                if overflow
                else f"a value is longer than {limits.max_field_bytes} bytes"
            )
            rejected[row_number] = SourceProblem(
                f"{reason}; row left out", row=row_number, line=sheet_row
            )
            continue
        kept_rows.append(row_number)
        for column, text in zip(columns, texts, strict=True):
            column.append(text)
        for i, value in enumerate(values[:width]):
            if isinstance(value, int | float) and not isinstance(value, bool):
                number_counts[i] += 1
                if number_examples[i] is None:
                    number_examples[i] = texts[i]
    table = pa.table(
        {
            name: pa.array(column, type=pa.string())
            for name, column in zip(names_clean, columns, strict=True)
        }
    )
    record_lines = np.array([sheet_row for sheet_row, _ in data], dtype=np.int64)
    if not data:
        problems.append(SourceProblem(f"sheet {sheet!r} has a header but no data rows"))
    numbers = {
        name: (count, example or "")
        for name, count, example in zip(names_clean, number_counts, number_examples, strict=True)
        if count
    }
    return SheetTable(
        table, np.array(kept_rows, dtype=np.int64), record_lines, sheet, problems, rejected, numbers
    )
