"""The import pipeline's stages on their own: the plan is a pure function of the kept rows
and the existing keys, and the write stage's dry run is a real run rolled back."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from toolkit.importing.pipeline import ImportRequest, ImportRunner, plan_rows
from toolkit.store import SiteStore

RULES = Path(__file__).resolve().parent / "fixtures_rules"

FACILITIES = (
    "Code,Name,Type,Capacity,Manager,WKT\n"
    "F1,Town Hall,Hall,200,Ann,POINT (143.85 -37.56)\n"
    "F2,Fire Station,,40,Cat,POINT (143.86 -37.57)\n"
    "F3,Pool,Pool,lots,Bob,POINT (143.87 -37.58)\n"
)


def test_the_plan_stage_splits_rows_and_adds_its_refusals_to_the_rejections() -> None:
    values = pd.DataFrame({"code": ["A", "B", "A", "C"]}, index=[0, 1, 3, 4])
    existing = pd.DataFrame({"id": [10, 11, 12], "key": ["B", "C", "C"]})
    earlier = pd.DataFrame({"row": [2], "column": ["Name"], "value": ["x"], "reason": ["bad"]})
    planned = plan_rows(
        values, existing, "updateAndInsert", matching_id="code", column="Code", rejected=earlier
    )
    assert planned.plan.inserts.tolist() == [0]
    assert planned.plan.updates.tolist() == [1]
    assert planned.plan.update_ids.tolist() == [10]
    assert planned.rejected_count == 3  # row 2 (earlier), row 3 (repeats A), row 4 (C twice)
    assert planned.rejections["row"].tolist() == [2, 3, 4]
    assert planned.rejections["column"].tolist() == ["Name", "Code", "Code"]
    assert planned.rejections["value"].tolist() == ["x", "A", "C"]
    assert planned.rejections["reason"].iloc[1] == "code 'A' repeats row 1 of this file"


def _state(site: SiteStore) -> list[tuple[object, ...]]:
    rows = site.db.connection.execute(
        "SELECT code, name, status, extra_info FROM asset ORDER BY code"
    ).fetchall()
    return [(r["code"], r["name"], r["status"], json.loads(r["extra_info"])) for r in rows]


def test_a_dry_run_leaves_the_store_as_it_was_and_counts_what_the_real_run_does(
    site: SiteStore, tmp_path: Path
) -> None:
    runner = ImportRunner(site, rule_paths=[RULES], user_id="officer")
    first = tmp_path / "first.csv"
    first.write_text(FACILITIES, encoding="utf-8")
    assert runner.run(ImportRequest("asset", "test-facilities", first))["status"] == "COMPLETE"
    before = _state(site)
    second = tmp_path / "second.csv"
    second.write_text(
        FACILITIES.replace("Town Hall", "City Hall") + "F4,Library,Hall,30,Dee,POINT (1 2)\n",
        encoding="utf-8",
    )

    dry = runner.run(ImportRequest("asset", "test-facilities", second, dry_run=True))
    assert _state(site) == before
    real = runner.run(ImportRequest("asset", "test-facilities", second))

    assert dry["status"] == real["status"] == "COMPLETE"
    assert dry["summary"]["counts"] == real["summary"]["counts"]
    assert real["summary"]["counts"]["inserted"] == 1
    assert real["summary"]["counts"]["updated"] == 1
    assert _state(site) != before
