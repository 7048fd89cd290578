"""The main job on the committed sample data, twice: the second run changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def test_the_demo_builds_a_site_and_is_safe_to_repeat(tmp_path: Path) -> None:
    args = [
        "--store",
        str(tmp_path / "demo.sqlite"),
        "--json",
        "demo",
        "--sample-dir",
        str(SAMPLE),
        "--out",
        str(tmp_path / "out"),
    ]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.stderr
    result = json.loads(first.stdout)
    jobs = {job["summary"]["source"]: job["summary"] for job in result["jobs"]}
    assert [job["status"] for job in result["jobs"]] == ["COMPLETE"] * 4
    assert jobs["parcels.zip"]["counts"]["inserted"] == 3000
    items = jobs["damage_assessments.csv"]
    assert items["counts"]["inserted"] + items["counts"]["rejected"] == 1000
    # Linked rows are all right (checked against the truth file below) and most rows link.
    assert items["linking"]["unlinked"] < 150
    assert Path(result["outputs"]["damage_assessments.csv rejected rows"]).exists()
    html = Path(result["outputs"]["report damage_assessments (html)"]).read_text(encoding="utf-8")
    assert "DA-000001" in html
    assert Path(result["outputs"]["report matching_quality (xlsx)"]).stat().st_size > 10_000

    second = json.loads(CliRunner().invoke(cli, args).stdout)
    for job in second["jobs"]:
        counts = job["summary"]["counts"]
        assert (counts["inserted"], counts["updated"]) == (0, 0), job["summary"]["source"]


def test_every_link_the_demo_makes_is_the_true_parcel(tmp_path: Path) -> None:
    import pandas as pd

    from toolkit.site import LocalSite

    store = tmp_path / "demo.sqlite"
    CliRunner().invoke(
        cli,
        [
            "--store",
            str(store),
            "--quiet",
            "demo",
            "--sample-dir",
            str(SAMPLE),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    with LocalSite(store, "default") as site:
        job = site.import_status()[-1]["id"]  # type: ignore[index]
        links = site.store.jobs.links(job)
    truth = pd.read_csv(SAMPLE / "damage_assessments_truth.csv", dtype=str)
    merged = links.merge(truth, left_on="reference", right_on="Reference")
    linked = merged[merged["asset_id_x"].notna()]
    wrong = linked[linked["asset_id_x"].astype("int64").astype(str) != linked["asset_id_y"]]
    assert len(linked) > 850
    assert wrong.empty, wrong[["reference", "query", "mode"]].to_string()
