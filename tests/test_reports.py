"""Reports end to end on a real site file loaded by real imports: the catalogue, instance
states, repeats, every report's JSON contents against the shipped schema, and the CSV,
XLSX and HTML files."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import openpyxl
import pandas as pd
import pytest

from toolkit.errors import NotFoundError, OptionError
from toolkit.importing.pipeline import ImportRequest
from toolkit.query.filters import parse_time
from toolkit.reports import (
    ReportRunner,
    ReportTask,
    ThreadExecutor,
    load_schema,
    run_task,
    schema_url,
)
from toolkit.reports.catalogue import Field
from toolkit.reports.html_page import write_html
from toolkit.reports.snapshot import Snapshot
from toolkit.site import LocalSite
from toolkit.store import Database, SiteStore

RULES = Path(__file__).resolve().parent / "fixtures_rules"

FACILITIES = (
    "Code,Name,Type,Capacity,Manager,WKT\n"
    "F1,Town Hall,Hall,200,Ann,POINT (143.85 -37.56)\n"
    'F2,=HYPERLINK("x"),,40,Bob,POINT (143.86 -37.57)\n'
    "F3,Pool,Pool,10,Cy,POINT (143.87 -37.58)\n"
)
INSPECTION_RULE = """
from toolkit.importing.rules import AssetLink, FieldRule, ImportRule

RULE = ImportRule(
    name="test-inspections",
    import_type="item",
    description="inspections linked to facilities by asset id",
    register="inspection",
    register_name="Inspections",
    fields=(
        FieldRule("reference", "Reference", required=True),
        FieldRule("level", "Level", type="lookup", choices=("Low", "High")),
        FieldRule("count", "Count", type="integer"),
        FieldRule("notes", "Notes"),
        FieldRule("status", "Status", type="integer", default=1),
    ),
    asset_link=AssetLink(id_column="Asset"),
    matching_id="reference",
)
"""


class Loaded:
    """A site with three facilities, an event, and four inspections of them."""

    def __init__(self, tmp_path: Path) -> None:
        rule_file = tmp_path / "rules" / "inspections.py"
        rule_file.parent.mkdir()
        rule_file.write_text(INSPECTION_RULE)
        self.site = LocalSite(
            tmp_path / "site.sqlite", "demo", user_id="analyst", rule_paths=[RULES, rule_file]
        )
        facilities = tmp_path / "facilities.csv"
        facilities.write_text(FACILITIES)
        job = self.site.run_import(ImportRequest("asset", "test-facilities", facilities))
        assert job["status"] == "COMPLETE", job["result"]
        self.asset_job = job["id"]
        assets = self.site.list_assets({})["models"].values()
        self.asset = {a["code"]: int(a["id"]) for a in assets}
        self.event = self.site.create_event({"name": "Flood"})["id"]
        inspections = tmp_path / "inspections.csv"
        inspections.write_text(
            "Reference,Level,Count,Notes,Status,Asset\n"
            f"R1,High,3,roof leak,1,{self.asset['F1']}\n"
            f"R2,Low,-1,=1+2,1,{self.asset['F2']}\n"
            f"R3,Low,2,closed,0,{self.asset['F3']}\n"
            "R4,High,5,<script>alert(1)</script>,1,\n"
        )
        job = self.site.run_import(
            ImportRequest("item", "test-inspections", inspections, event_id=self.event, region_id=7)
        )
        assert job["status"] == "COMPLETE", job["result"]
        self.item_job = job["id"]
        # The import recorded how it linked each row (by id); these are links of other
        # modes, so the matching-quality report has every kind of row to show.
        self.site.store.jobs.record_links(
            self.item_job,
            pd.DataFrame(
                {
                    "row": [1, 2, 3, 4],
                    "reference": ["R1", "R2", "R3", "R4"],
                    "query": ["1 HIGH ST", "2 LOW RD", "POOL", None],
                    "asset_id": [self.asset["F1"], self.asset["F2"], self.asset["F3"], None],
                    "mode": ["code", "fuzzy", "fuzzy", None],
                    "accuracy": [1.0, 0.8, 0.6, None],
                    "candidates": [1, 3, 2, 0],
                    "err": [None, None, None, "no asset was found"],
                }
            ),
        )

    def run(self, report_id: int, **params: Any) -> dict[str, Any]:
        queued = self.site.report_run({"reportId": report_id, "params": params})
        return self.site.report_status(queued["id"])

    def contents(self, report_id: int, **params: Any) -> dict[str, Any]:
        instance = self.run(report_id, **params)
        assert instance["status"] == "COMPLETED", instance["result"]
        fetched = self.site.report_fetch(instance["id"], "json")
        jsonschema.Draft202012Validator(load_schema()).validate(fetched["contents"])
        return fetched["contents"]

    def file(self, instance_id: str, format: str) -> bytes:
        fetched = self.site.report_fetch(instance_id, format)
        assert fetched["format"] == format
        return base64.b64decode(fetched["contents"])


@pytest.fixture
def loaded(tmp_path: Path) -> Loaded:
    data = Loaded(tmp_path)
    yield data
    data.site.close()


def _meta(contents: dict[str, Any]) -> dict[str, Any]:
    return {m["key"]: m["value"] for m in contents["meta"]}


def _check_rows_follow_spec(contents: dict[str, Any]) -> None:
    """What a JSON Schema cannot say: rows are keyed by the spec, typed as it says."""
    keys = [f["key"] for f in contents["spec"]]
    python_types = {
        "integer": int,
        "number": (int, float),
        "text": str,
        "timestamp": int,
        "boolean": bool,
    }
    for row in contents["data"]:
        assert list(row) == keys
        for field in contents["spec"]:
            value = row[field["key"]]
            if value is not None:
                assert isinstance(value, python_types[field["type"]]), (field, value)
                if field["type"] in ("integer", "timestamp"):
                    assert not isinstance(value, bool)


def test_the_catalogue_has_stable_ids_and_typed_parameters(loaded: Loaded) -> None:
    reports = {r["id"]: r for r in loaded.site.report_list()}
    assert sorted(reports) == [1, 2, 3, 4, 5, 6]
    assert reports[1]["name"] == "Register items of an event"
    assert reports[6]["name"] == "Damage summary"
    params = {p["key"]: p for p in reports[1]["params"]}
    assert list(params) == [
        "eventId",
        "registerId",
        "status",
        "dateFrom",
        "dateTo",
        "inspectedFrom",
        "inspectedTo",
        "isTemplate",
    ]
    assert params["eventId"]["required"] is True
    assert params["status"]["choices"] == ["active", "inactive", "all"]
    assert [p["key"] for p in reports[4]["params"]] == ["jobId"]


def test_register_items_of_an_event(loaded: Loaded) -> None:
    contents = loaded.contents(1, eventId=loaded.event, registerId="inspection")
    assert contents["$schema"].endswith("report-contents.v1.json")
    assert contents["name"] == "Register items of an event"
    _check_rows_follow_spec(contents)
    rows = {r["reference"]: r for r in contents["data"]}
    assert sorted(rows) == ["R1", "R2", "R3", "R4"]
    assert rows["R1"]["assetId"] == loaded.asset["F1"]
    assert (rows["R1"]["assetName"], rows["R1"]["count"], rows["R1"]["level"]) == (
        "Town Hall",
        3,
        "High",
    )
    assert (rows["R3"]["status"], rows["R4"]["assetId"], rows["R2"]["count"]) == (
        "retired",
        None,
        -1,
    )
    assert (rows["R1"]["regionId"], rows["R1"]["event"], rows["R1"]["register"]) == (
        7,
        "Flood",
        "Inspections",
    )
    item = loaded.site.get_item(rows["R1"]["id"])
    assert rows["R1"]["dateCreated"] == parse_time("t", item["dateCreated"]) // 1000
    spec = {f["key"]: f["type"] for f in contents["spec"]}
    assert (spec["count"], spec["dateCreated"], spec["isTemplate"]) == (
        "integer",
        "timestamp",
        "boolean",
    )
    meta = _meta(contents)
    assert (meta["rowCount"], meta["active"], meta["inactive"], meta["withoutAsset"]) == (
        4,
        3,
        1,
        1,
    )
    assert meta["linkedShare"] == pytest.approx(0.75)
    filters = {f["key"]: (f["value"], f["display"]) for f in contents["filter"]}
    assert filters["eventId"] == (loaded.event, f"{loaded.event} (Flood)")
    assert filters["status"] == ("all", "all")
    assert filters["dateFrom"] == (None, "any")

    # The event's items are of one register: its fields are the columns by default.
    active = loaded.contents(1, eventId=loaded.event, status="active")
    assert sorted(r["reference"] for r in active["data"]) == [
        "R1",
        "R2",
        "R4",
    ]
    later = loaded.contents(1, eventId=loaded.event, dateFrom="2999-01-01")
    assert later["data"] == []


def test_impacted_assets(loaded: Loaded) -> None:
    # No register here has a severity field: impacted is the spec's "has an active item".
    contents = loaded.contents(2, eventId=loaded.event)
    assert _meta(contents)["impactMeans"] is False
    same = loaded.contents(2, eventId=loaded.event, impact="any")
    assert contents["data"] == same["data"]
    _check_rows_follow_spec(contents)
    rows = {r["code"]: r for r in contents["data"]}
    assert sorted(rows) == ["F1", "F2"]  # F3's only item is retired
    assert rows["F1"]["activeItems"] == 1
    assert (rows["F1"]["longitude"], rows["F1"]["latitude"]) == (143.85, -37.56)
    assert rows["F2"]["name"] == '=HYPERLINK("x")'
    meta = _meta(contents)
    assert (meta["activeAssets"], meta["activeItems"]) == (3, 2)
    assert meta["impactedShare"] == pytest.approx(2 / 3)


def test_import_jobs(loaded: Loaded) -> None:
    contents = loaded.contents(3)
    _check_rows_follow_spec(contents)
    rows = {r["id"]: r for r in contents["data"]}
    assert rows[loaded.asset_job]["importType"] == "asset"
    assert (rows[loaded.asset_job]["inserted"], rows[loaded.asset_job]["status"]) == (
        3,
        "COMPLETE",
    )
    assert (rows[loaded.item_job]["read"], rows[loaded.item_job]["dryRun"]) == (4, False)
    assert _meta(contents)["rowsRead"] == 7
    only_items = loaded.contents(3, importType="item")
    assert [r["id"] for r in only_items["data"]] == [loaded.item_job]


def test_matching_quality_of_an_import(loaded: Loaded) -> None:
    contents = loaded.contents(4, jobId=loaded.item_job)
    _check_rows_follow_spec(contents)
    assert [(r["row"], r["mode"], r["accuracy"], r["error"]) for r in contents["data"]] == [
        (1, "code", 1.0, None),
        (2, "fuzzy", 0.8, None),
        (3, "fuzzy", 0.6, None),
        (4, None, None, "no asset was found"),
    ]
    assert contents["data"][1]["assetName"] == '=HYPERLINK("x")'
    meta = _meta(contents)
    assert (meta["linked"], meta["unlinked"], meta["byMode"]) == (
        3,
        1,
        {"code": 1, "fuzzy": 2, "none": 1},
    )
    assert meta["meanAccuracy"] == pytest.approx(0.8)


def test_audit_log(loaded: Loaded) -> None:
    contents = loaded.contents(5, recordType="item", importJobId=loaded.item_job)
    _check_rows_follow_spec(contents)
    assert [(r["action"], r["userId"]) for r in contents["data"]] == [("create", "analyst")] * 4
    assert all(r["changes"].startswith("reference: R") for r in contents["data"])
    assert {json.loads(r["changesJson"])["fields"]["reference"] for r in contents["data"]} == {
        "R1",
        "R2",
        "R3",
        "R4",
    }
    assert _meta(contents)["users"] == 1


def test_an_instance_moves_from_queued_to_completed(loaded: Loaded) -> None:
    tasks: list[ReportTask] = []
    loaded.site.report_executor = tasks.append  # run later, as a scheduler would
    queued = loaded.site.report_run({"reportId": 3})
    assert queued["code"] == 200
    assert queued["id"] == str(tasks[0].instance_id)
    assert "scheduled" in queued["result"]
    waiting = loaded.site.report_status(queued["id"])
    assert waiting["status"] == "QUEUED"
    assert (waiting["dateRun"], waiting["dateCompleted"], waiting["rowCount"]) == (None,) * 3
    assert waiting["userId"] == "analyst"
    with pytest.raises(OptionError, match="is QUEUED; only a COMPLETED run has contents"):
        loaded.site.report_fetch(queued["id"], "csv")

    run_task(tasks[0])
    done = loaded.site.report_status(queued["id"])
    assert done["status"] == "COMPLETED"
    assert done["rowCount"] == "2"
    assert float(done["timeTaken"]) >= 0
    assert done["dateRun"] <= done["dateCompleted"]
    assert done["params"] == {}


def test_a_running_instance_is_not_run_twice(loaded: Loaded) -> None:
    tasks: list[ReportTask] = []
    loaded.site.report_executor = tasks.append
    queued = loaded.site.report_run({"reportId": 3})
    assert loaded.site.store.reports.start(int(queued["id"]))
    running = loaded.site.report_status(queued["id"])
    assert (running["status"], running["dateCompleted"]) == ("RUNNING", None)
    assert running["dateRun"] is not None
    assert loaded.site.report_work(queued["id"])["status"] == "RUNNING"


def test_a_thread_executor_runs_reports_in_the_background(loaded: Loaded) -> None:
    executor = ThreadExecutor()
    loaded.site.report_executor = executor
    queued = loaded.site.report_run({"reportId": 1, "params": {"eventId": loaded.event}})
    executor.join(timeout=30)
    assert loaded.site.report_status(queued["id"])["rowCount"] == "4"


def test_bad_parameters_are_refused_naming_the_value_and_the_allowed_set(loaded: Loaded) -> None:
    site = loaded.site
    with pytest.raises(OptionError, match=r"parameter status 'open' is not one of: active, in"):
        site.report_run({"reportId": 1, "params": {"eventId": 1, "status": "open"}})
    with pytest.raises(OptionError, match="needs parameter eventId"):
        site.report_run({"reportId": 1})
    with pytest.raises(OptionError, match=r"has no parameter colour; its parameters: eventId"):
        site.report_run({"reportId": 1, "params": {"eventId": 1, "colour": "red"}})
    with pytest.raises(OptionError, match="parameter eventId 'one' is not a whole number"):
        site.report_run({"reportId": 1, "params": {"eventId": "one"}})
    with pytest.raises(OptionError, match="parameter dateFrom 'soon' is not a date"):
        site.report_run({"reportId": 5, "params": {"dateFrom": "soon"}})
    with pytest.raises(NotFoundError, match=r"report 9 does not exist; reports: 1 \(Register"):
        site.report_run({"reportId": 9})
    with pytest.raises(OptionError, match="exactly one of reportId and reportInstanceId"):
        site.report_run({"reportId": 1, "reportInstanceId": 1})
    assert site.store.reports.get(1) is None  # nothing was queued


def test_a_run_that_cannot_complete_fails_with_its_reason(loaded: Loaded) -> None:
    failed = loaded.run(1, eventId=999)
    assert failed["status"] == "FAILED"
    assert failed["code"] == 400
    assert failed["result"] == "parameter eventId 999: event 999 does not exist"
    assert failed["dateCompleted"] is not None
    assert failed["rowCount"] is None
    wrong_job = loaded.run(4, jobId=loaded.asset_job)
    assert wrong_job["status"] == "FAILED"
    assert "only item imports link rows to assets" in wrong_job["result"]
    # A failed run keeps no snapshot, in the file or beside it.
    assert loaded.site.store.reports.snapshot(int(failed["id"])) is None
    assert loaded.site.store.reports.snapshot(int(wrong_job["id"])) is None
    site_file = loaded.site.db.path
    beside = {p.name for p in site_file.parent.iterdir() if p.name.startswith(site_file.name)}
    assert beside <= {site_file.name, f"{site_file.name}-shm", f"{site_file.name}-wal"}
    assert not [p for p in site_file.parent.iterdir() if p.name.startswith(".report-")]


def test_repeating_a_run_keeps_its_parameters_and_applies_overrides(loaded: Loaded) -> None:
    first = loaded.run(1, eventId=loaded.event, status="active", dateFrom="2020-01-01")
    assert first["params"] == {
        "eventId": loaded.event,
        "status": "active",
        "dateFrom": "2020-01-01T00:00:00.000+00:00",
    }
    again = loaded.site.report_run(
        {"reportInstanceId": int(first["id"]), "params": {"status": "inactive", "dateFrom": None}}
    )
    repeated = loaded.site.report_status(again["id"])
    assert repeated["id"] != first["id"]
    assert repeated["params"] == {"eventId": loaded.event, "status": "inactive"}
    assert (first["rowCount"], repeated["rowCount"]) == ("3", "1")
    with pytest.raises(NotFoundError, match="report instance 404 does not exist"):
        loaded.site.report_run({"reportInstanceId": 404})


def test_another_sites_instances_are_not_found(loaded: Loaded, tmp_path: Path) -> None:
    instance = loaded.run(3)
    other = LocalSite(tmp_path / "site.sqlite", "other")
    try:
        with pytest.raises(NotFoundError, match=f"report instance {instance['id']} does not"):
            other.report_status(instance["id"])
    finally:
        other.close()


def test_a_queued_run_whose_worker_died_becomes_failed(loaded: Loaded, tmp_path: Path) -> None:
    tasks: list[ReportTask] = []
    loaded.site.report_executor = tasks.append
    queued = loaded.site.report_run({"reportId": 3})
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    loaded.site.store.reports.hand_over(int(queued["id"]), int(gone.stdout))
    with Database(tmp_path / "site.sqlite") as db:
        row = SiteStore(db, "demo").reports.get(int(queued["id"]))
    assert (row["status"], row["code"]) == ("FAILED", 500)
    assert "stopped before it finished" in row["result"]
    assert os.getpid() != int(gone.stdout)


def test_schema_url_points_at_the_packaged_file_or_a_server() -> None:
    local = schema_url()
    assert local.startswith("file://") and local.endswith("/report-contents.v1.json")
    assert Path(local.removeprefix("file://")).is_file()
    assert (
        schema_url("https://sandbox.example.org/")
        == "https://sandbox.example.org/api/json/schemas/report-contents.v1.json"
    )


def test_json_contents_carry_the_servers_schema_url(loaded: Loaded, tmp_path: Path) -> None:
    served = LocalSite(tmp_path / "site.sqlite", "demo", schema_base_url="http://localhost:8080")
    try:
        instance = loaded.run(3)
        contents = served.report_fetch(instance["id"])["contents"]
    finally:
        served.close()
    assert contents["$schema"] == "http://localhost:8080/api/json/schemas/report-contents.v1.json"


# --- files --------------------------------------------------------------------------------


def test_csv_neutralises_formulas_and_leaves_numbers_alone(loaded: Loaded) -> None:
    instance = loaded.run(1, eventId=loaded.event, registerId="inspection")
    text = loaded.file(instance["id"], "csv").decode("utf-8")
    rows = {r["Reference"]: r for r in csv.DictReader(io.StringIO(text))}
    assert rows["R2"]["Notes"] == "'=1+2"
    assert rows["R2"]["Count"] == "-1"
    assert rows["R2"]["Asset"] == '\'=HYPERLINK("x")'
    assert rows["R4"]["Notes"] == "<script>alert(1)</script>"
    item = loaded.site.get_item(int(rows["R1"]["Item id"]))
    # Times in the site's zone (UTC unless TOOLKIT_TIMEZONE says), named in the heading.
    created = datetime.fromisoformat(rows["R1"]["Created (UTC)"])
    assert created == datetime.fromisoformat(item["dateCreated"])
    assert rows["R1"]["Created (UTC)"].endswith("+00:00")
    impacted = loaded.run(2, impact="any")
    coordinates = list(csv.DictReader(io.StringIO(loaded.file(impacted["id"], "csv").decode())))
    assert [r["Latitude"] for r in coordinates] == ["-37.56", "-37.57"]


def test_csv_of_an_empty_report_has_its_header(loaded: Loaded) -> None:
    instance = loaded.run(1, eventId=loaded.event, dateFrom="2999-01-01")
    lines = loaded.file(instance["id"], "csv").decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith('"Item id","Event id","Event","Register"')


def test_xlsx_has_typed_cells_a_frozen_filtered_header_and_an_about_sheet(
    loaded: Loaded, tmp_path: Path
) -> None:
    instance = loaded.run(1, eventId=loaded.event, registerId="inspection")
    path = tmp_path / "items.xlsx"
    path.write_bytes(loaded.file(instance["id"], "xlsx"))
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Data", "About"]
    sheet = book["Data"]
    heads = [c.value for c in sheet[1]]
    assert heads[:4] == ["Item id", "Event id", "Event", "Register"]
    assert sheet.freeze_panes == "A2"
    assert sheet.auto_filter.ref == f"A1:{openpyxl.utils.get_column_letter(len(heads))}5"
    assert sheet["A1"].font.b
    rows = {r[heads.index("Reference")]: r for r in sheet.iter_rows(min_row=2, values_only=True)}
    r2 = rows["R2"]
    # A number cell (xlsxwriter writes 2, rustpy-xlsxwriter 2.0: the same number to Excel).
    item_id = r2[heads.index("Item id")]
    assert isinstance(item_id, int | float) and not isinstance(item_id, bool)
    assert item_id == int(item_id) > 0
    assert r2[heads.index("Count")] == -1
    assert isinstance(r2[heads.index("Created (UTC)")], datetime)
    assert r2[heads.index("Template")] is False
    assert rows["R4"][heads.index("Asset id")] is None
    notes = sheet.cell(row=3, column=heads.index("Notes") + 1)
    assert (notes.value, notes.data_type, notes.quotePrefix) == ("=1+2", "s", True)
    assert sheet.column_dimensions["D"].width >= len("Inspections")
    about = {r[0]: r[1] for r in book["About"].iter_rows(values_only=True) if r[0]}
    assert about["Register"] == "inspection"
    assert about["Items without an asset"] == "1"
    assert (about["Data rows"], about["Rows"]) == (4, "4")


def test_xlsx_splits_rows_across_sheets(loaded: Loaded, tmp_path: Path) -> None:
    instance = loaded.run(5, recordType="item")
    runner = ReportRunner(loaded.site.store)
    path = tmp_path / "audit.xlsx"
    with path.open("wb") as out:
        runner.write(instance["id"], "xlsx", out, rows_per_sheet=3)
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Data 1", "Data 2", "About"]
    first = list(book["Data 1"].iter_rows(values_only=True))
    second = list(book["Data 2"].iter_rows(values_only=True))
    assert first[0] == second[0] and first[0][0] == "Entry id"
    ids = [r[0] for r in first[1:] + second[1:]]
    assert len(first) == 4 and len(second) == 2
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert book["Data 2"].auto_filter.ref == "A1:M2"
    assert book["Data 2"].freeze_panes == "A2"


def test_html_is_self_contained_escaped_and_charted(loaded: Loaded) -> None:
    instance = loaded.run(1, eventId=loaded.event, registerId="inspection")
    page = loaded.file(instance["id"], "html").decode("utf-8")
    # One script, the page's own (the table's sort, search and filter); data is escaped.
    assert page.count("<script") == 1 and "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http:" not in page and "https:" not in page and "//" not in page
    assert "<link" not in page and "<script src" not in page and "url(" not in page
    assert "default-src 'none'" in page  # the Content-Security-Policy forbids fetching
    assert "<title>Register items of an event</title>" in page
    assert "Items per status" in page and "<svg" in page
    assert "All 4 rows." in page
    assert "Items without an asset" in page

    impacted = loaded.run(2)
    page = loaded.file(impacted["id"], "html").decode("utf-8")
    assert "2 of 2 located assets drawn" in page
    assert page.count("h0") == 2
    assert "=HYPERLINK(&quot;x&quot;)" in page


def test_html_caps_the_table_and_says_so(loaded: Loaded) -> None:
    instance = loaded.run(5)
    row = loaded.site.store.reports.get(int(instance["id"]))
    header = json.loads(row["header"])
    spec = header["spec"]
    stored = loaded.site.store.reports.snapshot(int(instance["id"]))
    assert stored is not None
    with Snapshot(stored, [Field(f["key"], f["label"], f["type"]) for f in spec]) as snapshot:
        page = write_html(snapshot, header, generated="now", max_rows=2)
        total = snapshot.row_count
    assert f"shows the first 2 of {total:,} rows" in page
    assert page.count("<tr><td") == 2
