"""The matching-quality report of a real fuzzy import: each row's match probability and
evidence per component, the distribution of probabilities, a sample explained, a chart."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from toolkit.importing.pipeline import ImportRequest
from toolkit.matching.probabilistic import COMPONENTS, LINK_PROBABILITY
from toolkit.reports import load_schema
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
EVIDENCE_KEYS = [f"evidence{c.title()}" for c in COMPONENTS]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalSite, int, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("matching_report")
    site = LocalSite(tmp / "site.sqlite", "default", user_id="officer")
    job = site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
    assert job["status"] == "COMPLETE", job["result"]
    event = site.create_event({"name": "Storm"})["id"]
    job = site.run_import(
        ImportRequest(
            "item",
            "damage-assessments",
            SAMPLE / "damage_assessments.csv",
            event_id=event,
            region_id=1,
        )
    )
    assert job["status"] == "COMPLETE", job["result"]
    queued = site.report_run({"reportId": 4, "params": {"jobId": job["id"]}})
    instance = site.report_status(queued["id"])
    assert instance["status"] == "COMPLETED", instance["result"]
    contents = site.report_fetch(instance["id"], "json")["contents"]
    jsonschema.Draft202012Validator(load_schema()).validate(contents)
    yield site, instance["id"], contents
    site.close()


def test_every_fuzzy_scored_row_carries_its_probability_and_evidence(
    imported: tuple[LocalSite, int, dict[str, Any]],
) -> None:
    _, _, contents = imported
    rows = contents["data"]
    fuzzy_linked = [r for r in rows if r["mode"] == "fuzzy" and r["assetId"] is not None]
    assert len(fuzzy_linked) >= 20
    for row in fuzzy_linked:
        assert row["probability"] >= LINK_PROBABILITY
        # The accuracy of a fuzzy link is its probability x 100.
        assert row["accuracy"] == pytest.approx(round(100 * row["probability"], 1))
        assert all(row[key] is not None for key in EVIDENCE_KEYS)
        assert sum(row[key] for key in EVIDENCE_KEYS) > 0
    # Rows linked by other modes were never scored by fuzzy matching.
    for row in rows:
        if row["mode"] in ("id", "code", "geo"):
            assert row["probability"] is None
            assert all(row[key] is None for key in EVIDENCE_KEYS)


def test_the_distribution_counts_every_scored_row_once(
    imported: tuple[LocalSite, int, dict[str, Any]],
) -> None:
    _, _, contents = imported
    meta = {m["key"]: m["value"] for m in contents["meta"]}
    scored = [r["probability"] for r in contents["data"] if r["probability"] is not None]
    bands = meta["probabilityBands"]
    assert list(bands) == [f"{i / 10:.1f}-{(i + 1) / 10:.1f}" for i in range(10)]
    assert sum(bands.values()) == len(scored)
    fuzzy_linked = sum(
        1 for r in contents["data"] if r["mode"] == "fuzzy" and r["assetId"] is not None
    )
    # Links need 0.8, so every fuzzy link is in the top two bands (with unlinked near-ties).
    assert bands["0.8-0.9"] + bands["0.9-1.0"] >= fuzzy_linked
    assert sum(bands[f"{i / 10:.1f}-{(i + 1) / 10:.1f}"] for i in range(8)) == sum(
        1 for p in scored if p < 0.8
    )
    quantiles = meta["probabilityQuantiles"]
    assert quantiles["min"] == pytest.approx(min(scored), abs=1e-4)
    assert quantiles["max"] == pytest.approx(max(scored), abs=1e-4)
    assert quantiles["min"] <= quantiles["median"] <= quantiles["max"]


def test_a_sample_is_explained_component_by_component(
    imported: tuple[LocalSite, int, dict[str, Any]],
) -> None:
    _, _, contents = imported
    meta = {m["key"]: m["value"] for m in contents["meta"]}
    sample = meta["evidenceSample"]
    assert len(sample) == 5
    by_row = {r["row"]: r for r in contents["data"]}
    probabilities = [s["probability"] for s in sample]
    assert probabilities == sorted(probabilities)
    scored = [r["probability"] for r in contents["data"] if r["probability"] is not None]
    assert (probabilities[0], probabilities[-1]) == (min(scored), max(scored))
    for entry in sample:
        row = by_row[entry["row"]]
        assert entry["probability"] == row["probability"]
        assert list(entry["evidence"]) == list(COMPONENTS)
        for component, key in zip(COMPONENTS, EVIDENCE_KEYS, strict=True):
            assert entry["evidence"][component] == row[key]
        # The components' evidence adds up to the pair's log2 Bayes factor.
        assert entry["bits"] == pytest.approx(sum(row[key] for key in EVIDENCE_KEYS), abs=1e-3)
    # More evidence, more probable: the least and the most probable of the sample.
    assert sample[0]["bits"] < sample[-1]["bits"]
    display = next(m["display"] for m in contents["meta"] if m["key"] == "evidenceSample")
    assert f"row {sample[-1]['row']}: p " in display and " bits" in display


def test_the_html_page_charts_the_distribution(
    imported: tuple[LocalSite, int, dict[str, Any]],
) -> None:
    site, instance_id, contents = imported
    fetched = site.report_fetch(instance_id, "html")
    page = base64.b64decode(fetched["contents"]).decode("utf-8")
    assert "Rows per matching mode" in page
    assert "Rows per match probability (fuzzy)" in page
    bands = {m["key"]: m["value"] for m in contents["meta"]}["probabilityBands"]
    for band, count in bands.items():
        assert f"<title>{band}: {count:,}</title>" in page
