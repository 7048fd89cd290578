"""`toolkit report`: list, run (waited and detached), status, fetch to a file or as JSON."""

from __future__ import annotations

import base64
import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.site import LocalSite

RULES = Path(__file__).resolve().parent / "fixtures_rules"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A site file with one event (id 1) holding two observations, one formula-looking."""
    path = tmp_path / "site.sqlite"
    source = tmp_path / "obs.csv"
    source.write_text("Reference,Level,Count,Notes\nR1,High,3,roof\nR2,Low,-1,=1+2\n")
    with LocalSite(path, "default", rule_paths=[RULES]) as site:
        event = site.create_event({"name": "Flood"})
        job = site.run_import(
            ImportRequest("item", "test-observations", source, event_id=event["id"], region_id=1)
        )
        assert job["status"] == "COMPLETE"
    return path


def invoke(store: Path, *args: str) -> object:
    return CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)


def test_list_shows_every_report_and_its_parameters(store: Path) -> None:
    result = invoke(store, "report", "list", "--json")
    assert result.exit_code == 0
    reports = json.loads(result.stdout)
    assert [r["id"] for r in reports] == [1, 2, 3, 4, 5, 6]
    table = invoke(store, "report", "list")
    assert "eventId* (integer)" in table.stdout
    assert "Impacted assets" in table.stdout


def test_a_waited_run_prints_the_completed_instance(store: Path) -> None:
    result = invoke(
        store,
        "report",
        "run",
        "1",
        "--param",
        "eventId=1",
        "--param",
        "status=active",
        "--wait",
        "--json",
    )
    assert result.exit_code == 0, result.output
    instance = json.loads(result.stdout)
    assert (instance["status"], instance["rowCount"], instance["params"]) == (
        "COMPLETED",
        "2",
        {"eventId": 1, "status": "active"},
    )
    again = invoke(
        store, "report", "run", "--instance", instance["id"], "--param", "status=inactive", "--wait"
    )
    assert again.exit_code == 0
    assert "COMPLETED" in again.stdout and "status=inactive" in again.stdout
    status = invoke(store, "report", "status", instance["id"], "--json")
    assert json.loads(status.stdout)["id"] == instance["id"]


def test_a_failed_waited_run_exits_1_and_bad_input_is_refused(store: Path) -> None:
    failed = invoke(store, "report", "run", "1", "--param", "eventId=42", "--wait")
    assert failed.exit_code == 1
    assert "FAILED" in failed.stdout and "event 42 does not exist" in failed.stdout
    # A batch log that keeps only stderr still says why.
    assert failed.stderr.startswith("Error: report instance ")
    assert " FAILED: " in failed.stderr and "event 42 does not exist" in failed.stderr
    bad = CliRunner().invoke(
        cli, ["--store", str(store), "report", "run", "1", "--param", "status=open"]
    )
    assert bad.exit_code == 1
    assert "parameter status 'open' is not one of: active, inactive, all" in bad.output
    neither = CliRunner().invoke(cli, ["--store", str(store), "report", "run"])
    assert neither.exit_code == 2
    malformed = CliRunner().invoke(
        cli, ["--store", str(store), "report", "run", "1", "--param", "eventId"]
    )
    assert malformed.exit_code == 2 and "is not key=value" in malformed.output


def test_fetch_writes_the_decoded_file_or_prints_the_fetch_object(
    store: Path, tmp_path: Path
) -> None:
    run = invoke(
        store,
        "report",
        "run",
        "1",
        "--param",
        "eventId=1",
        "--param",
        "registerId=observation",
        "--wait",
        "--json",
    )
    instance_id = json.loads(run.stdout)["id"]

    target = tmp_path / "out" / "items.csv"
    written = invoke(store, "report", "fetch", instance_id, "--format", "csv", "-o", str(target))
    assert written.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [(r["Reference"], r["Notes"], r["Count"]) for r in rows] == [
        ("R1", "roof", "3"),
        ("R2", "'=1+2", "-1"),
    ]
    assert not list(target.parent.glob("*.partial"))

    book_path = tmp_path / "items.xlsx"
    assert (
        invoke(
            store, "report", "fetch", instance_id, "--format", "xlsx", "-o", str(book_path)
        ).exit_code
        == 0
    )
    assert openpyxl.load_workbook(book_path).sheetnames == ["Data", "About"]

    page = invoke(store, "report", "fetch", instance_id, "--format", "html")
    assert page.exit_code == 0
    assert page.stdout.startswith("<!DOCTYPE html>")
    assert "<h1>Register items of an event</h1>" in page.stdout
    printed = invoke(store, "report", "fetch", instance_id, "--format", "html", "--json")
    fetched = json.loads(printed.stdout)
    assert (fetched["status"], fetched["format"]) == ("COMPLETED", "html")
    assert "<h1>Register items of an event</h1>" in base64.b64decode(fetched["contents"]).decode()

    as_json = json.loads(invoke(store, "report", "fetch", instance_id).stdout)
    assert "format" not in as_json
    assert [r["reference"] for r in as_json["contents"]["data"]] == ["R1", "R2"]


def test_a_run_without_wait_completes_after_the_command_returns(store: Path) -> None:
    queued = subprocess.run(
        [sys.executable, "-m", "toolkit", "--store", str(store), "report", "run", "3", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    instance_id = json.loads(queued.stdout)["id"]
    assert "toolkit report status" in queued.stderr
    # The run starts a process of its own, which on a busy machine can take a while to
    # import what it needs: generous, since a stuck run fails this test either way.
    deadline = time.monotonic() + 120
    while True:
        status = json.loads(invoke(store, "report", "status", instance_id, "--json").stdout)
        if status["status"] in ("COMPLETED", "FAILED") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status["status"] == "COMPLETED", status
    assert status["rowCount"] == "1"
