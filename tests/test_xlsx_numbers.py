"""XLSX cells typed as numbers where a rule expects text: a code typed 007 in a number
cell is stored by Excel as 7. The import warns per column, naming the file, the sheet,
the column and an example, and goes on (the zeros cannot be recovered here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openpyxl
from click.testing import CliRunner

from toolkit.cli import cli

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def _workbook(path: Path, rows: list[list[Any]]) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Facilities"
    sheet.append(["Code", "Name", "Capacity", "Manager"])
    for row in rows:
        sheet.append(row)
    book.save(path)
    return path


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "site.sqlite"), "--rules", str(RULES), *args]
    )
    return result.exit_code, result.stdout, result.stderr


def _warning(column: str, count: int, example: str, field: str) -> str:
    return (
        f"Warning: facilities.xlsx: sheet 'Facilities', column '{column}': {count} cell(s) "
        f"are numbers in the workbook, e.g. '{example}', but field '{field}' is text: any "
        "leading zeros were lost in Excel (007 is stored as 7); format the column as Text "
        "and retype them, or check them before they overwrite stored values\n"
    )


def test_a_text_field_given_numbers_warns_per_column(tmp_path: Path) -> None:
    # The codes were typed 007 and 0042 in number cells: Excel kept 7 and 42. One code
    # was typed in a text cell and kept its zeros. Capacity is a number field: no warning.
    book = _workbook(
        tmp_path / "facilities.xlsx",
        [[7, "Hall", 200, "Ann"], ["0099", "Pool", 50, 12], [42, "Oval", 10, "Bob"]],
    )
    import_args = ("import", str(book), "--type", "asset", "--rule", "test-facilities")
    code, out, err = _run(tmp_path, "--json", *import_args)
    assert code == 0, err
    assert err == _warning("Code", 2, "7", "code") + _warning("Manager", 1, "12", "manager")
    summary = json.loads(out)["summary"]
    assert summary["warnings"] == [line.removeprefix("Warning: ") for line in err.splitlines()]
    assert summary["counts"]["inserted"] == 3
    code, out, _ = _run(tmp_path, "--json", "asset", "list", "--all")
    stored = {a["code"]: a["name"] for a in json.loads(out)["models"].values()}
    assert stored == {"7": "Hall", "0099": "Pool", "42": "Oval"}  # as the workbook has them
    # The human summary says it too, and a dry run warns before anything is written.
    code, out, err = _run(tmp_path, *import_args, "--dry-run")
    assert code == 0
    assert "  warning: facilities.xlsx: sheet 'Facilities', column 'Code': 2 cell(s)" in out
    assert err.count("Warning: ") == 2


def test_text_cells_give_no_warning(tmp_path: Path) -> None:
    book = _workbook(tmp_path / "facilities.xlsx", [["007", "Hall", 200, "Ann"]])
    code, out, err = _run(
        tmp_path, "--json", "import", str(book), "--type", "asset", "--rule", "test-facilities"
    )
    assert (code, err) == (0, "")
    assert json.loads(out)["summary"]["warnings"] == []
