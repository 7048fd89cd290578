"""XLSX through rustpy-xlsxwriter behind its guards, read back with openpyxl: every type
and value is what the typed xlsxwriter writer gives, times are local in the run's
zone, text is never a formula, and what the guards do not cover falls back."""

from __future__ import annotations

import importlib.metadata
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolkit.reports import xlsx_fast
from toolkit.reports.catalogue import Field
from toolkit.reports.snapshot import Snapshot, SnapshotWriter
from toolkit.reports.xlsx_file import write_xlsx

SPEC = (
    Field("id", "Id", "integer"),
    Field("share", "Share", "number"),
    Field("note", "Note", "text"),
    Field("ok", "OK", "boolean"),
    Field("when", "When", "timestamp"),
    Field("day", "Day", "date"),
)
# 2026-02-14 08:00:00.250 UTC is 19:00:00.250 in Melbourne (daylight time, +11:00).
MOMENT = 1_771_056_000_250


def _header(zone: str = "Australia/Melbourne") -> dict[str, Any]:
    return {
        "name": "Types & values",
        "filter": [],
        "meta": [{"key": "rowCount", "label": "Rows", "value": 3, "display": "3"}],
        "spec": [f.describe() for f in SPEC],
        "timeZone": zone,
    }


def _snapshot(path: Path) -> Path:
    table = pa.table(
        {
            "id": pa.array([1, None, 2**40], pa.int64()),
            "share": pa.array([0.25, None, -37.56]),
            "note": pa.array(['=HYPERLINK("x")', None, 'Zoë, "quoted"\nline']),
            "ok": pa.array([True, None, False]),
            "when": pa.array([MOMENT, None, 0], pa.int64()).cast(pa.timestamp("ms", "UTC")),
            "day": pa.array([date(2026, 2, 14), None, date(1999, 12, 31)], pa.date32()),
        }
    )
    with SnapshotWriter(path, SPEC) as writer:
        writer.write_table(table)
    return path


def _cells(path: Path) -> list[list[Any]]:
    sheet = openpyxl.load_workbook(path)["Data"]
    return [[(c.value, c.data_type, c.number_format) for c in row] for row in sheet.iter_rows()]


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return _snapshot(tmp_path / "snapshot.parquet")


def _write(snapshot: Path, out: Path, engine: str, zone: str = "Australia/Melbourne") -> Path:
    with Snapshot(snapshot, SPEC) as snap:
        write_xlsx(snap, _header(zone), str(out), engine=engine)  # type: ignore[arg-type]
    return out


def test_the_pinned_version_is_installed_and_used() -> None:
    assert importlib.metadata.version("rustpy-xlsxwriter") == xlsx_fast.PINNED
    assert xlsx_fast.available()


def test_rust_cells_read_back_with_the_types_and_values_of_the_typed_writer(
    snapshot: Path, tmp_path: Path
) -> None:
    fast = _cells(_write(snapshot, tmp_path / "fast.xlsx", "rust"))
    typed = _cells(_write(snapshot, tmp_path / "typed.xlsx", "xlsxwriter"))
    assert [c[0] for c in fast[0]] == [
        "Id",
        "Share",
        "Note",
        "OK",
        "When (Australia/Melbourne)",
        "Day",
    ]
    assert [c[0] for c in fast[0]] == [c[0] for c in typed[0]]
    for fast_row, typed_row in zip(fast[1:], typed[1:], strict=True):
        for (value, kind, fmt), (expected, typed_kind, typed_fmt) in zip(
            fast_row, typed_row, strict=True
        ):
            if isinstance(expected, datetime):
                assert abs(value - expected) < timedelta(milliseconds=1)
            else:
                assert value == expected
            assert (kind, fmt) == (typed_kind, typed_fmt)
    first = [c[0] for c in fast[1]]
    assert first[0] == 1 and first[1] == 0.25 and first[3] is True
    # Text, never a formula; local time in the run's zone, with its explicit format.
    assert fast[1][2][:2] == ('=HYPERLINK("x")', "s")
    assert abs(first[4] - datetime(2026, 2, 14, 19, 0, 0, 250_000)) < timedelta(milliseconds=1)
    assert fast[1][4][2] == "yyyy-mm-dd hh:mm:ss" and fast[1][5][2] == "yyyy-mm-dd"
    assert first[5] == datetime(2026, 2, 14)
    assert [c[0] for c in fast[2]] == [None] * 6  # nulls stay empty cells
    assert fast[3][0][0] == 2**40 and fast[3][2][0] == 'Zoë, "quoted"\nline'
    assert fast[3][4][0] == datetime(1970, 1, 1, 10, 0)  # epoch 0 in Melbourne (+10:00)
    sheet = openpyxl.load_workbook(tmp_path / "fast.xlsx")["Data"]
    assert sheet["C2"].quotePrefix  # text stays text even when edited in Excel
    assert (sheet.freeze_panes, sheet.auto_filter.ref) == ("A2", "A1:F4")
    assert sheet.page_setup.orientation == "landscape" and sheet.print_title_rows == "$1:$1"
    about = {
        r[0]: r[1]
        for r in openpyxl.load_workbook(tmp_path / "fast.xlsx")["About"].iter_rows(values_only=True)
    }
    assert about["Data rows"] == 3 and about["Rows"] == "3"


def test_utc_runs_keep_utc_times(snapshot: Path, tmp_path: Path) -> None:
    fast = _cells(_write(snapshot, tmp_path / "utc.xlsx", "rust", zone="UTC"))
    assert fast[0][4][0] == "When (UTC)"
    assert abs(fast[1][4][0] - datetime(2026, 2, 14, 8, 0, 0, 250_000)) < timedelta(milliseconds=1)


def test_a_category_column_is_refused_and_the_typed_writer_keeps_its_values(
    tmp_path: Path,
) -> None:
    spec = (Field("kind", "Kind", "text"), Field("n", "N", "integer"))
    path = tmp_path / "categories.parquet"
    kinds = pa.array(["flood", "fire", "flood"]).dictionary_encode()
    pq.write_table(pa.table({"kind": kinds, "n": pa.array([1, 2, 3])}), path)
    header = {
        "name": "Categories",
        "filter": [],
        "meta": [],
        "spec": [f.describe() for f in spec],
    }
    with Snapshot(path, spec) as snap:
        assert pa.types.is_dictionary(snap.file.schema_arrow.field("kind").type)
        with pytest.raises(xlsx_fast.Unsupported, match="'kind'"):
            write_xlsx(snap, header, str(tmp_path / "refused.xlsx"), engine="rust")
        assert not (tmp_path / "refused.xlsx").exists()  # nothing half-written
        write_xlsx(snap, header, str(tmp_path / "auto.xlsx"))  # falls back
    rows = list(openpyxl.load_workbook(tmp_path / "auto.xlsx")["Data"].iter_rows(values_only=True))
    assert rows == [("Kind", "N"), ("flood", 1), ("fire", 2), ("flood", 3)]


def test_another_version_is_not_used(
    monkeypatch: pytest.MonkeyPatch, snapshot: Path, tmp_path: Path
) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "0.9.0" if name == "rustpy-xlsxwriter" else real(name),
    )
    assert not xlsx_fast.available()
    with pytest.raises(ValueError, match=r"0\.8\.0 is not installed"):
        _write(snapshot, tmp_path / "x.xlsx", "rust")
    typed = _cells(_write(snapshot, tmp_path / "auto.xlsx", "auto"))
    assert typed[1][0][0] == 1 and isinstance(typed[1][0][0], int)  # xlsxwriter's integer
