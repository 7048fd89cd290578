"""`toolkit import --max-rejects N|N%` on the embedded site: over the limit, the job FAILS
and writes nothing; within it, the good rows are written as without a limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.errors import OptionError
from toolkit.importing.reject_limit import RejectLimit
from toolkit.importing.request import request_from_spec

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def _facilities(tmp_path: Path) -> Path:
    """Ten facilities, three of them with a capacity that is not a number."""
    rows = [f"F{i},Hall {i},{'lots' if i in (2, 5, 9) else i * 10}" for i in range(1, 11)]
    path = tmp_path / "facilities.csv"
    path.write_text("Code,Name,Capacity\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _import(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli,
        [
            *("--store", str(tmp_path / "site.sqlite"), "--rules", str(RULES)),
            *("import", str(_facilities(tmp_path)), "--type", "asset"),
            *("--rule", "test-facilities", *extra),
        ],
    )
    return result.exit_code, result.stdout, result.stderr


def _asset_codes(tmp_path: Path) -> list[str]:
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "site.sqlite"), "--json", "asset", "list", "--all"]
    )
    assert result.exit_code == 0, result.stderr
    return sorted(a["code"] for a in json.loads(result.stdout)["models"].values())


@pytest.mark.parametrize(
    ("limit", "shown"),
    [("2", "2"), ("25%", "25% (2 of 10 rows read)"), ("0", "0")],
)
def test_more_rejects_than_allowed_fail_the_job_and_write_nothing(
    tmp_path: Path, limit: str, shown: str
) -> None:
    code, out, err = _import(tmp_path, "--max-rejects", limit)
    assert code == 1
    assert "Import job 1: FAILED" in out
    assert "read 10, inserted 7, updated 0, unchanged 0, skipped 0, retired 0, rejected 3" in out
    assert err == (
        f"Error: import job 1 FAILED: 3 row(s) rejected, more than --max-rejects {shown} "
        "allows; nothing was written\n"
    )
    assert _asset_codes(tmp_path) == []


@pytest.mark.parametrize("limit", ["3", "30%", "100%", None])
def test_within_the_limit_or_without_one_the_good_rows_are_written(
    tmp_path: Path, limit: str | None
) -> None:
    code, out, err = _import(tmp_path, *(["--max-rejects", limit] if limit else []))
    assert code == 0, err
    assert "Import job 1: COMPLETE" in out
    assert "inserted 7" in out and "rejected 3" in out
    assert _asset_codes(tmp_path) == sorted(f"F{i}" for i in (1, 3, 4, 6, 7, 8, 10))


def test_a_dry_run_over_the_limit_fails_too(tmp_path: Path) -> None:
    code, out, err = _import(tmp_path, "--max-rejects", "1", "--dry-run", "--json")
    job = json.loads(out)
    assert code == 1
    assert (job["status"], job["summary"]["dryRun"]) == ("FAILED", True)
    assert job["params"]["maxRejects"] == "1"
    assert "3 row(s) rejected, more than --max-rejects 1 allows" in err


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("-1", "'-1' is not a whole number of rows (10) or a percentage"),
        ("101%", "'101%': a percentage is 0% to 100%"),
        ("abc", "'abc' is not a whole number of rows"),
        ("1.5", "'1.5' is not a whole number of rows"),
        ("", "'' is not a whole number of rows"),
    ],
)
def test_a_limit_that_is_no_limit_is_a_usage_error(tmp_path: Path, value: str, says: str) -> None:
    code, _out, err = _import(tmp_path, f"--max-rejects={value}")
    assert code == 2
    assert f"Error: Invalid value for '--max-rejects': {says}" in err
    assert not (tmp_path / "site.sqlite").exists()


def test_the_limit_as_the_api_takes_it() -> None:
    assert RejectLimit.parse(10).allowed(1000) == 10
    assert RejectLimit.parse("2.5%").allowed(1000) == 25
    assert RejectLimit.parse("2.5%").allowed(99) == 2  # rounded down: 2.475 rows
    assert str(RejectLimit.parse(" 7 % ")) == "7%"
    request = request_from_spec(
        {"importType": "asset", "importRule": "r", "maxRejects": "5%"}, Path("x.csv"), "x.csv"
    )
    assert request.max_rejects == RejectLimit(percent=RejectLimit.parse("5%").percent)
    assert request.spec_params()["maxRejects"] == "5%"
    with pytest.raises(OptionError, match="maxRejects True is not a whole number"):
        RejectLimit.parse(True)
    with pytest.raises(OptionError, match="maxRejects -3 is not"):
        request_from_spec(
            {"importType": "asset", "importRule": "r", "maxRejects": -3}, Path("x"), "x"
        )
