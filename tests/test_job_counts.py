"""Counts that add up: every import job's summary shows every count, and each row of the
file is exactly one of inserted, updated, unchanged, skipped or rejected, so those add up
to ``read`` (the file's rows, those the reader left out included), whatever the overwrite
rule, with rejects, dry runs, rollbackOnError and re-runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.names import JOB_COUNTS, ROW_OUTCOMES

RULES = Path(__file__).resolve().parent / "fixtures_rules"

# F3 and F4 have the wrong number of values (left out by the reader), F2 a bad capacity.
FACILITIES = "Code,Name,Capacity\nF1,Hall,200\nF2,Pool,lots\nF3,x\nF4,Gym,5,extra\nF5,Park,7\n"
CHANGED = "Code,Name,Capacity\nF1,Hall,250\nF5,Park,7\nF6,Oval,30\n"


def _run(store: Path, *args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(
        cli, ["--store", str(store), "--rules", str(RULES), "--json", *args]
    )
    return result.exit_code, json.loads(result.stdout or "null"), result.stderr


def _import(store: Path, source: Path, *options: str) -> dict[str, Any]:
    code, job, err = _run(
        store, "import", str(source), "--type", "asset", "--rule", "test-facilities", *options
    )
    assert code == (0 if job["status"] == "COMPLETE" else 1), err
    return job


def _counts(job: dict[str, Any]) -> dict[str, int]:
    counts = job["summary"]["counts"]
    assert list(counts) == list(JOB_COUNTS), counts  # every count, in the one order
    assert sum(counts[n] for n in ROW_OUTCOMES) == counts["read"], counts
    return {k: v for k, v in counts.items() if v}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "facilities.csv", tmp_path / "changed.csv"
    first.write_text(FACILITIES, encoding="utf-8")
    second.write_text(CHANGED, encoding="utf-8")
    return first, second


def test_counts_add_up_over_every_kind_of_run(tmp_path: Path, files: tuple[Path, Path]) -> None:
    store = tmp_path / "site.sqlite"
    first, changed = files
    update_only, insert_only = (
        ("--overwrite-rule", "updateOnly"),
        ("--overwrite-rule", "insertOnly"),
    )
    delete_and_insert = ("--overwrite-rule", "deleteAndInsert")
    runs = [
        ((first,), {"read": 5, "inserted": 2, "rejected": 3}),
        # Run again: the two good rows are found as they are.
        ((first,), {"read": 5, "unchanged": 2, "rejected": 3}),
        # rollbackOnError refuses, and counts exactly what a plain run would do.
        ((first, "--rollback-on-error"), {"read": 5, "unchanged": 2, "rejected": 3}),
        ((changed, "--dry-run"), {"read": 3, "inserted": 1, "updated": 1, "unchanged": 1}),
        ((changed, *update_only), {"read": 3, "updated": 1, "unchanged": 1, "skipped": 1}),
        ((changed, *insert_only), {"read": 3, "inserted": 1, "skipped": 2}),
        ((changed, "--rollback-on-error"), {"read": 3, "unchanged": 3}),
        # deleteAndInsert retires the 3 records there (not rows of the file), inserts all.
        ((changed, *delete_and_insert), {"read": 3, "inserted": 3, "retired": 3}),
        ((first, *delete_and_insert, "--dry-run"),
         {"read": 5, "inserted": 2, "retired": 3, "rejected": 3}),
    ]  # fmt: skip
    statuses = []
    for args, expected in runs:
        job = _import(store, *args)
        statuses.append(job["status"])
        assert _counts(job) == expected, (args, job["summary"])
    assert statuses == ["COMPLETE", "COMPLETE", "FAILED", *["COMPLETE"] * 6]
    # The list of jobs and each job's summary show the same counts, unchanged included.
    code, jobs, _ = _run(store, "import-status")
    assert code == 0
    assert [_counts(job) for job in jobs] == [expected for _, expected in runs]
    table = CliRunner().invoke(cli, ["--store", str(store), "import-status"]).stdout
    header = next(line for line in table.splitlines() if " read " in line)
    assert header.replace("┃", " ").split()[4:] == list(JOB_COUNTS)
    one = CliRunner().invoke(cli, ["--store", str(store), "import-status", "2"]).stdout
    assert "read 5, inserted 0, updated 0, unchanged 2, skipped 0, retired 0, rejected 3" in one


def test_rollback_on_error_does_not_call_unchanged_rows_updated(
    tmp_path: Path, files: tuple[Path, Path]
) -> None:
    store = tmp_path / "site.sqlite"
    first, _ = files
    _import(store, first)
    refused = _import(store, first, "--rollback-on-error")
    assert refused["status"] == "FAILED"
    assert refused["summary"]["counts"]["updated"] == 0
    assert refused["summary"]["counts"]["unchanged"] == 2
    # ...and it really wrote nothing: the next plain run finds the same rows unchanged,
    # and the audit log holds only the first import's two creates.
    assert _counts(_import(store, first)) == {"read": 5, "unchanged": 2, "rejected": 3}
    code, log, _ = _run(store, "audit-log", "list")
    assert code == 0
    assert sorted(e["action"] for e in log["models"].values()) == ["create", "create"]


def test_item_and_user_imports_add_up_too(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    assert _run(store, "event", "create", "Flood")[0] == 0
    items = tmp_path / "obs.csv"
    # R1 twice: the second is refused by the plan; R3's level is not a choice.
    items.write_text("Reference,Level\nR1,Low\nR2,High\nR1,High\nR3,Huge\n", encoding="utf-8")
    item_args = ["--type", "item", "--rule", "test-observations", "--event-id", "1"]
    for expected in (
        {"read": 4, "inserted": 2, "rejected": 2},
        {"read": 4, "unchanged": 2, "rejected": 2},
    ):
        code, job, err = _run(store, "import", str(items), *item_args, "--region-id", "1")
        assert code == 0, err
        assert _counts(job) == expected
    users = tmp_path / "users.csv"
    users.write_text("Username,Email\nann,a@x.org\nbob,b@x.org\n,nobody@x.org\n", encoding="utf-8")
    code, job, err = _run(store, "import", str(users), "--type", "user", "--rule", "test-users")
    assert code == 0, err
    assert _counts(job) == {"read": 3, "inserted": 2, "rejected": 1}
