"""`toolkit lookup` against the sample parcels: text, codes, files, saved indexes, the site."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PARCELS = SAMPLE / "parcels.zip"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_one_query_gives_the_spec_object() -> None:
    code, out, err = _run(
        "--json", "lookup", "55 SMITH ROAD BUNINYONG 3357", "--assets", str(PARCELS)
    )
    assert code == 0, err
    entry = json.loads(out)["1"]
    assert (entry["reference"], entry["query"], entry["err"]) == (
        1,
        "55 SMITH ROAD BUNINYONG 3357",
        None,
    )
    asset = entry["asset"]
    assert (asset["id"], asset["type"], asset["name"]) == (
        "102559",
        "Property",
        "55 SMITH ROAD BUNINYONG 3357",
    )
    assert {"key": "propnum", "value": asset["extraInfo"][0]["value"]} in asset["extraInfo"]
    assert asset["geo"]["polygons"] and asset["geo"]["points"] == []
    assert float(asset["accuracy"]) == 100.0
    assert "1 queries: 1 matched (soundex 1)" in err


def test_a_tie_is_never_guessed_and_candidates_are_listed() -> None:
    code, out, err = _run(
        "--json",
        "lookup",
        "55 SMITH RD",
        "--assets",
        str(PARCELS),
        "--candidates",
        "3",
        "--output",
        "id",
    )
    entry = json.loads(out)["1"]
    assert code == 0
    assert entry["asset"] is None
    assert "2 assets tied" in entry["err"]
    assert entry["candidates"].count(":100.0") == 2
    assert "1 ambiguous" in err


def test_a_file_resolves_to_a_csv_and_the_saved_index_is_reused(tmp_path: Path) -> None:
    out_file, index_dir = tmp_path / "matches.csv", tmp_path / "parcels.idx"
    args = [
        "lookup",
        "--file",
        str(SAMPLE / "damage_assessments.csv"),
        "--column",
        "Address",
        "--code-column",
        "Reference",
        "--assets",
        str(PARCELS),
        "--index",
        str(index_dir),
        "--max-rank",
        "3",
        "--fallback-mode",
        "fuzzy",
        "-o",
        str(out_file),
    ]
    code, _, err = _run(*args)
    assert code == 0, err
    assert (index_dir / "index.json").exists()
    built = (index_dir / "index.json").stat().st_mtime_ns
    with out_file.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 1000
    truth = {
        r["Reference"]: r["asset_id"]
        for r in csv.DictReader((SAMPLE / "damage_assessments_truth.csv").open(encoding="utf-8"))
    }
    matched = [r for r in rows if r["asset_id"]]
    assert len(matched) > 650
    assert all(truth[r["reference"]] == r["asset_id"] for r in matched)
    code, _, _ = _run(*args)
    assert code == 0
    assert (index_dir / "index.json").stat().st_mtime_ns == built  # reloaded, not rebuilt


def test_without_assets_the_sites_assets_are_used(tmp_path: Path) -> None:
    store = str(tmp_path / "site.sqlite")
    code, _, err = _run(
        "--store", store, "import", str(PARCELS), "--type", "asset", "--rule", "property-assets"
    )
    assert code == 0, err
    code, out, _ = _run(
        "--store", store, "--json", "lookup", "102559", "--mode", "id", "--output", "id"
    )
    assert json.loads(out)["1"]["asset"] == "102559"


def test_queries_and_file_are_one_or_the_other() -> None:
    code, _, err = _run("lookup", "--assets", str(PARCELS))
    assert code == 2
    assert "give QUERIES or --file" in err
    code, _, err = _run("lookup", "x", "--file", str(PARCELS), "--column", "name")
    assert code == 2


def test_fuzzy_explains_its_links_in_json_and_with_explain() -> None:
    code, out, err = _run(
        "--json",
        "lookup",
        "78 WADR COURT BALLARAT CENTRAL",
        "55 SMITH RD",
        "--assets",
        str(PARCELS),
        "--mode",
        "fuzzy",
        "--output",
        "id",
    )
    assert code == 0, err
    linked, tied = json.loads(out)["1"], json.loads(out)["2"]
    # The spec's keys are unchanged; the explanation sits beside them.
    assert list(linked)[:4] == ["reference", "query", "asset", "err"]
    assert linked["asset"] == "100441" and linked["explain"]["assetId"] == "100441"
    evidence = linked["explain"]["evidence"]
    assert set(evidence) == {"number", "street", "type", "locality", "postcode", "unit", "state"}
    assert evidence["number"] > 0 and evidence["street"] > 0 and evidence["locality"] > 0
    assert linked["explain"]["probability"] >= 0.8
    # A tie is explained too: its best candidate is below the link threshold.
    assert tied["asset"] is None and tied["explain"]["probability"] < 0.5
    assert "about equally likely" in tied["err"]
    code, out, _ = _run(
        "lookup", "78 WADR COURT BALLARAT CENTRAL", "--assets", str(PARCELS), "--mode", "fuzzy",
        "--explain",
    )  # fmt: skip
    assert code == 0
    assert "best candidate 100441: probability 0.9" in out
    assert "evidence in bits: number +5.4" in out
