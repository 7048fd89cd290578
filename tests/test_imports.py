"""Import jobs end to end on a real site file: every overwrite rule, dry runs, rollback,
rejects, job states and the HTML result."""

from __future__ import annotations

import base64
import csv
import io
import json
import zipfile
from pathlib import Path

import pytest

from toolkit.errors import NotFoundError, OptionError
from toolkit.importing.pipeline import (
    ImportRequest,
    ImportRunner,
    materialise_data,
    request_from_spec,
)
from toolkit.store import SiteStore

RULES = Path(__file__).resolve().parent / "fixtures_rules"


@pytest.fixture
def site(any_site: SiteStore) -> SiteStore:
    """The import contract holds on both stores: SQLite and PostgreSQL."""
    return any_site


FACILITIES = (
    "Code,Name,Type,Capacity,Manager,WKT\n"
    "F1,Town Hall,Hall,200,Ann,POINT (143.85 -37.56)\n"
    "F2,Fire Station,,40,=cmd|' /C calc'!A0,POINT (143.86 -37.57)\n"
    "F3,Pool,Pool,lots,Bob,POINT (143.87 -37.58)\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _runner(site: SiteStore) -> ImportRunner:
    return ImportRunner(site, rule_paths=[RULES], user_id="officer")


def _assets(site: SiteStore) -> dict[str, dict[str, object]]:
    rows = site.db.connection.execute(
        "SELECT code, name, type, status, extra_info FROM asset ORDER BY code"
    ).fetchall()
    return {
        r["code"]: {
            "name": r["name"],
            "type": r["type"],
            "status": r["status"],
            **json.loads(r["extra_info"]),
        }
        for r in rows
    }


def test_an_asset_import_inserts_good_rows_and_lists_the_bad_ones(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = _write(tmp_path, "facilities.csv", FACILITIES)
    rejects = tmp_path / "out" / "rejects.csv"
    job = _runner(site).run(
        ImportRequest("asset", "test-facilities", source, rejects_path=rejects, message="load")
    )
    assert job["status"] == "COMPLETE"
    assert job["code"] == 200
    assert job["userId"] == "officer"
    assert job["summary"]["counts"] == {
        "read": 3,
        "inserted": 2,
        "updated": 0,
        "unchanged": 0,
        "skipped": 0,
        "retired": 0,
        "rejected": 1,
    }
    assert job["summary"]["errors"] == [
        {"row": 3, "column": "Capacity", "value": "lots", "reason": "is not a whole number"}
    ]
    assert _assets(site) == {
        "F1": {"name": "Town Hall", "type": "Hall", "status": 1, "capacity": 200, "manager": "Ann"},
        "F2": {
            "name": "Fire Station",
            "type": "Facility",
            "status": 1,
            "capacity": 40,
            "manager": "=cmd|' /C calc'!A0",
        },
    }
    with rejects.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows == [
        {
            "row": "3",
            "Code": "F3",
            "Name": "Pool",
            "Type": "Pool",
            "Capacity": "lots",
            "Manager": "Bob",
            "WKT": "POINT (143.87 -37.58)",
            "reason": "Capacity: is not a whole number",
        }
    ]
    assert "<li>inserted: 2</li>" in job["result"]
    assert "<td>lots</td>" in job["result"]


def test_update_and_insert_then_update_only_then_insert_only(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = _runner(site)
    runner.run(ImportRequest("asset", "test-facilities", _write(tmp_path, "a.csv", FACILITIES)))
    second = _write(tmp_path, "b.csv", "Code,Name,Manager\nF1,Town Hall (main),[NULL]\nF9,Depot,\n")
    job = runner.run(ImportRequest("asset", "test-facilities", second, overwrite_rule="updateOnly"))
    assert job["summary"]["counts"]["updated"] == 1
    assert job["summary"]["counts"]["skipped"] == 1
    assert _assets(site)["F1"] == {
        "name": "Town Hall (main)",
        "type": "Hall",
        "status": 1,
        "capacity": 200,
    }
    job = runner.run(ImportRequest("asset", "test-facilities", second, overwrite_rule="insertOnly"))
    assert (job["summary"]["counts"]["inserted"], job["summary"]["counts"]["skipped"]) == (1, 1)
    assert sorted(_assets(site)) == ["F1", "F2", "F9"]


def test_delete_and_insert_retires_instead_of_deleting(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = _runner(site)
    runner.run(ImportRequest("asset", "test-facilities", _write(tmp_path, "a.csv", FACILITIES)))
    job = runner.run(
        ImportRequest(
            "asset",
            "test-facilities",
            _write(tmp_path, "b.csv", "Code,Name\nF1,Town Hall\n"),
            overwrite_rule="deleteAndInsert",
        )
    )
    assert job["summary"]["counts"]["retired"] == 2
    statuses = site.db.connection.execute("SELECT code, status FROM asset ORDER BY id").fetchall()
    assert [tuple(s) for s in statuses] == [("F1", 0), ("F2", 0), ("F1", 1)]
    retire_audits = site.db.connection.execute(
        "SELECT count(*) FROM audit_log WHERE action = 'retire'"
    ).fetchone()[0]
    assert retire_audits == 2


def test_a_dry_run_writes_only_the_job_record(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job = _runner(site).run(
        ImportRequest(
            "asset", "test-facilities", _write(tmp_path, "a.csv", FACILITIES), dry_run=True
        )
    )
    assert job["status"] == "COMPLETE"
    assert job["summary"]["counts"]["inserted"] == 2
    assert "(dry run)" in job["result"]
    counts = site.db.connection.execute(
        "SELECT (SELECT count(*) FROM asset), "
        "(SELECT count(*) FROM audit_log WHERE record_type = 'asset'), "
        "(SELECT count(*) FROM import_job)"
    ).fetchone()
    assert tuple(counts) == (0, 0, 1)


def test_rollback_on_error_writes_nothing_and_fails_the_job(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job = _runner(site).run(
        ImportRequest(
            "asset",
            "test-facilities",
            _write(tmp_path, "a.csv", FACILITIES),
            rollback_on_error=True,
        )
    )
    assert job["status"] == "FAILED"
    assert job["code"] == 400
    assert "1 row(s) rejected and rollbackOnError is set" in job["result"]
    assert site.db.connection.execute("SELECT count(*) FROM asset").fetchone()[0] == 0


def test_item_imports_need_an_event_and_a_region(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = _write(tmp_path, "obs.csv", "Reference,Level\nR1,High\n")
    runner = _runner(site)
    with pytest.raises(OptionError, match="regionId required: items are stored within events"):
        runner.run(ImportRequest("item", "test-observations", source, event_id=1))
    with pytest.raises(NotFoundError, match="eventId 99 is not an event of this site"):
        runner.run(ImportRequest("item", "test-observations", source, event_id=99, region_id=1))
    with pytest.raises(OptionError, match="importRule 'test-observations' imports items, not"):
        runner.run(ImportRequest("asset", "test-observations", source))
    assert site.db.connection.execute("SELECT count(*) FROM import_job").fetchone()[0] == 0


def test_item_import_with_tags_and_null_clearing(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = _runner(site)
    first = _write(tmp_path, "a.csv", "Reference,Level,Count,Notes\nR1,high,3,leak\nR2,Low,,\n")
    job = runner.run(
        ImportRequest(
            "item", "test-observations", first, event_id=1, region_id=4, import_tag="batch-1"
        )
    )
    assert job["summary"]["counts"]["inserted"] == 2
    second = _write(tmp_path, "b.csv", "Reference,Notes,Count\nR1,[NULL],\nR3,new,1\n")
    job = runner.run(
        ImportRequest(
            "item", "test-observations", second, event_id=1, region_id=4, import_tag="batch-2"
        )
    )
    assert (job["summary"]["counts"]["updated"], job["summary"]["counts"]["inserted"]) == (1, 1)
    rows = site.db.connection.execute(
        "SELECT fields, tags, status, region_id FROM item ORDER BY id"
    ).fetchall()
    assert json.loads(rows[0]["fields"]) == {"reference": "R1", "level": "High", "count": 3}
    assert json.loads(rows[0]["tags"]) == ["batch-1", "batch-2"]
    assert json.loads(rows[2]["fields"]) == {"reference": "R3", "notes": "new", "count": 1}
    assert (rows[2]["status"], rows[2]["region_id"]) == (1, 4)
    register = site.registers.get("observation")
    assert register["name"] == "Observations"
    assert [f["name"] for f in json.loads(register["fields"])] == [
        "reference",
        "level",
        "count",
        "notes",
    ]


def test_user_import(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = _write(
        tmp_path,
        "users.csv",
        'Username,First Name,Positions,Team\nzoe,Zoë,"API User; Field ""Lead""",A\n',
    )
    job = _runner(site).run(ImportRequest("user", "test-users", source))
    assert job["status"] == "COMPLETE"
    user = site.users.by_username("zoe")
    assert user["first_name"] == "Zoë"
    assert json.loads(user["positions"]) == ["API User", 'Field "Lead"']
    assert json.loads(user["extra"]) == {"team": "A"}


def test_a_file_that_cannot_be_read_fails_the_job_with_its_reason(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    empty = _write(tmp_path, "empty.csv", "")
    job = _runner(site).run(ImportRequest("asset", "test-facilities", empty))
    assert job["status"] == "FAILED"
    assert "empty.csv" in job["summary"]["reason"]


def test_the_result_escapes_html_from_the_data(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = _write(tmp_path, "x.csv", "Code,Name,Capacity\nX,<b>bold</b>,<script>\n")
    job = _runner(site).run(ImportRequest("asset", "test-facilities", source))
    assert "<script>" not in job["result"]
    assert "&lt;script&gt;" in job["result"]


def test_spec_bodies_become_requests_and_inline_data_becomes_a_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, name = materialise_data({"data": "Code,Name\nA,B\n", "dataType": "csv"}, tmp_path)
    assert path.read_text() == "Code,Name\nA,B\n"
    assert name == "import data (csv)"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.txt", "x")
    path, _ = materialise_data(
        {"data": base64.b64encode(buffer.getvalue()).decode(), "encoding": "base64"}, tmp_path
    )
    assert path.suffix == ".zip"
    with pytest.raises(OptionError, match="data is not valid base64"):
        materialise_data({"data": "%%%", "encoding": "base64"}, tmp_path)
    with pytest.raises(OptionError, match="dataType 'pdf' is not one of: csv, zip"):
        materialise_data({"data": "x", "dataType": "pdf"}, tmp_path)
    request = request_from_spec(
        {
            "importType": "item",
            "importRule": "r",
            "eventId": "3",
            "regionId": 1,
            "dryRun": 1,
            "overwriteRule": "insertOnly",
        },
        path,
        name,
    )
    assert (request.event_id, request.region_id, request.dry_run) == (3, 1, True)
    with pytest.raises(OptionError, match="rollbackOnError 'yes' is not one of: 0, 1"):
        request_from_spec(
            {"importType": "item", "importRule": "r", "rollbackOnError": "yes"}, path, name
        )


def test_repeating_an_import_changes_nothing_and_a_dry_run_predicts_it(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = _runner(site)
    source = _write(tmp_path, "a.csv", FACILITIES)
    runner.run(ImportRequest("asset", "test-facilities", source))

    def state() -> tuple[object, ...]:
        return tuple(
            site.db.connection.execute(
                "SELECT (SELECT count(*) FROM audit_log), (SELECT max(date_modified) FROM asset)"
            ).fetchone()
        )

    before = state()
    dry = runner.run(ImportRequest("asset", "test-facilities", source, dry_run=True))
    real = runner.run(ImportRequest("asset", "test-facilities", source))
    assert dry["summary"]["counts"] == real["summary"]["counts"]
    assert real["summary"]["counts"]["updated"] == 0
    assert real["summary"]["counts"]["unchanged"] == 2
    assert state() == before
    changed = _write(tmp_path, "b.csv", FACILITIES.replace("Town Hall", "Town Hall (old)"))
    dry = runner.run(ImportRequest("asset", "test-facilities", changed, dry_run=True))
    assert (dry["summary"]["counts"]["updated"], dry["summary"]["counts"]["unchanged"]) == (1, 1)
    assert state() == before


def test_user_updates_change_columns_and_keep_extra_fields(site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = _runner(site)
    first = _write(tmp_path, "u1.csv", "Username,First Name,Positions,Team\nzoe,Zoe,API User,A\n")
    runner.run(ImportRequest("user", "test-users", first))
    second = _write(
        tmp_path, "u2.csv", "Username,Positions,Email\nzoe,API User;Inspector,z@x.org\n"
    )
    job = runner.run(ImportRequest("user", "test-users", second))
    assert (job["summary"]["counts"]["updated"], job["summary"]["counts"]["unchanged"]) == (1, 0)
    user = site.users.by_username("zoe")
    assert json.loads(user["positions"]) == ["API User", "Inspector"]
    assert (user["first_name"], user["email"]) == ("Zoe", "z@x.org")
    assert json.loads(user["extra"]) == {"team": "A"}
    again = runner.run(ImportRequest("user", "test-users", second))
    assert again["summary"]["counts"]["unchanged"] == 1


# --- hardening: rows without a usable geometry, a full disk, a job's record from the start ---


def test_rows_whose_geometry_cannot_be_made_are_rejected_not_stored_without_it(
    site: SiteStore, tmp_path: Path
) -> None:
    source = _write(
        tmp_path,
        "assets.csv",
        "code,name,wkt\n"
        "A1,good,POINT (143.85 -37.56)\n"
        "A2,broken,POINT (143.85\n"
        "A3,far,POINT (999 999)\n"
        "A4,nan,POINT (nan nan)\n"
        "A5,none,\n",
    )
    job = _runner(site).run(ImportRequest("asset", "assets-csv", source))
    assert job["status"] == "COMPLETE"
    assert (job["summary"]["counts"]["inserted"], job["summary"]["counts"]["rejected"]) == (2, 3)
    outside = "coordinates outside longitude -180..180, latitude -90..90 (EPSG:4326)"
    assert job["summary"]["errors"] == [
        {"row": 2, "column": "wkt", "value": "POINT (143.85", "reason": "not valid WKT"},
        {"row": 3, "column": "wkt", "value": "POINT (999 999)", "reason": outside},
        {
            "row": 4,
            "column": "wkt",
            "value": "POINT (nan nan)",
            "reason": "a coordinate is not a finite number",
        },
    ]
    # An empty cell is a row without a location, not a problem.
    assert sorted(_assets(site)) == ["A1", "A5"]


def test_a_full_disk_fails_the_job_saying_so_and_leaves_the_site_as_it_was(
    sqlite_site: SiteStore, tmp_path: Path
) -> None:
    # SQLite only: a full disk is made with its max_page_count (a server's disk is its own).
    site = sqlite_site
    first = _write(tmp_path, "first.csv", "code,name\nK1,kept\n")
    assert _runner(site).run(ImportRequest("asset", "assets-csv", first))["status"] == "COMPLETE"
    many = _write(
        tmp_path,
        "many.csv",
        "code,name,notes\n" + "".join(f"C{i},pole {i},{'x' * 200}\n" for i in range(5000)),
    )
    conn = site.db.connection
    # The file may grow by a few pages only: SQLite answers as on a full disk (SQLITE_FULL).
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 4}")
    before = _assets(site)
    audit = conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
    job = _runner(site).run(ImportRequest("asset", "assets-csv", many))
    assert job["status"] == "FAILED" and job["code"] == 500
    reason = job["summary"]["reason"]
    assert reason.startswith("the disk is full:") and "the site is as it was" in reason
    assert "internal error" not in reason and str(tmp_path) not in reason
    assert "the disk is full" in job["result"]
    assert "nothing was written; the counts say what the job would do" in job["summary"]["notes"]
    assert _assets(site) == before
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone()[0] == audit
    # With room again, the same import goes through.
    conn.execute("PRAGMA max_page_count = 1073741823")
    job = _runner(site).run(ImportRequest("asset", "assets-csv", many))
    assert job["status"] == "COMPLETE" and job["summary"]["counts"]["inserted"] == 5000


def test_a_job_says_what_it_is_from_the_moment_it_is_recorded(
    site: SiteStore, tmp_path: Path
) -> None:
    source = _write(tmp_path, "facilities.csv", FACILITIES)
    request = ImportRequest("asset", "test-facilities", source, source_name="import data (csv)")
    runner = _runner(site)
    job_id = runner.record(request, runner.check(request))
    job = runner.job_object(job_id)
    assert (job["status"], job["importType"], job["importRule"]) == (
        "NOT_STARTED",
        "asset",
        "test-facilities",
    )
    assert job["params"]["source"] == "import data (csv)"
    summary = job["summary"]
    assert summary["status"] == "NOT_STARTED"
    assert (summary["importRule"], summary["importType"], summary["source"]) == (
        "test-facilities",
        "asset",
        "import data (csv)",
    )
    assert (summary["overwriteRule"], summary["matchingId"]) == ("updateAndInsert", "code")
