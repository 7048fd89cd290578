"""The damage summary (report 6) and impacted assets (report 2) on the demo site built
from sample_data/: every number is checked against the items and assets themselves,
counted here independently with pandas; unknown names make a run FAILED."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_demo import contents as _contents
from report_demo import demo_site
from report_demo import failed as _failed
from report_demo import file as _file
from report_demo import run as _run

from toolkit.site import LocalSite

LEVELS = ["None", "Minor", "Moderate", "Severe", "Destroyed"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    site, result = demo_site(tmp_path_factory.mktemp("demo"))
    yield site, result
    site.close()


def _all(site: LocalSite, method: str, params: dict[str, str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    while True:
        page = getattr(site, method)({**params, "limit": "1000", "offset": str(len(records))})
        models = list(page["models"].values())
        records += models
        if not models or len(records) >= int(page["total"]):
            return records


@pytest.fixture(scope="module")
def items(demo: Any) -> pd.DataFrame:
    """The event's active items with their parcel's locality, counted independently."""
    site, result = demo
    event = str(result.event["id"])
    records = _all(site, "list_items", {"registerId": "damage-assessment", "eventId": event})
    frame = pd.DataFrame(records)
    frame = frame[frame["status"] > 0]
    assets = pd.DataFrame(_all(site, "list_assets", {"type": "Property"}))
    locality = {
        int(a["id"]): {e["key"]: e["value"] for e in a["extraInfo"]}.get("locality")
        for a in assets.to_dict("records")
    }
    frame["locality"] = [
        "(no parcel)" if pd.isna(a) else locality[int(a)] for a in frame["assetId"]
    ]
    frame["rank"] = frame["damageLevel"].map({lv: n for n, lv in enumerate(LEVELS)})
    return frame


def test_summary_counts_match_the_items(demo: Any, items: pd.DataFrame) -> None:
    site, result = demo
    contents = _contents(site, 6, eventId=result.event["id"])
    rows = {r["locality"]: r for r in contents["data"]}
    assert set(rows) == set(items["locality"])
    for locality, group in items.groupby("locality"):
        row = rows[locality]
        counts = group["damageLevel"].value_counts()
        for level in LEVELS:
            assert row[f"level{level}"] == counts.get(level, 0), (locality, level)
        assert row["items"] == len(group)
        assert row["damagedItems"] == int((group["rank"] > 0).sum())
        unhoused = group["habitable"].eq(False)
        assert row["uninhabitable"] == int(unhoused.sum())
        assert row["occupantsDisplaced"] == int(group.loc[unhoused, "occupants"].fillna(0).sum())
        parcels = group.dropna(subset=["assetId"]).groupby("assetId")["rank"].max()
        assert row["assessedParcels"] == len(parcels)
        assert row["damagedParcels"] == int((parcels > 0).sum())
        assert row["event"] == "Sample flood 2026"
    meta = {m["key"]: m["value"] for m in contents["meta"]}
    assert meta["items"] == len(items)
    assert meta["byLevel"] == {lv: int((items["damageLevel"] == lv).sum()) for lv in LEVELS}
    assert meta["uninhabitable"] == int(items["habitable"].eq(False).sum())
    parcels = items.dropna(subset=["assetId"]).groupby("assetId")["rank"].max()
    assert (meta["assessedParcels"], meta["damagedParcels"]) == (
        len(parcels),
        int((parcels > 0).sum()),
    )
    by_date = pd.DataFrame(meta["byInspectionDate"]).set_index("date")
    expected = items.groupby(["inspectionDate", "damageLevel"]).size().unstack(fill_value=0)
    for day, row in expected.iterrows():
        for level in LEVELS:
            assert by_date.loc[day, f"level{level}"] == row.get(level, 0)
    assert by_date[[f"level{lv}" for lv in LEVELS]].to_numpy().sum() == len(items)


def test_summary_filters_on_inspection_date(demo: Any, items: pd.DataFrame) -> None:
    site, result = demo
    contents = _contents(
        site, 6, eventId=result.event["id"], inspectedFrom="2026-02-10", inspectedTo="2026-02-20"
    )
    inside = items["inspectionDate"].between("2026-02-10", "2026-02-20")
    assert sum(r["items"] for r in contents["data"]) == int(inside.sum()) > 0
    assert int(inside.sum()) < len(items)


def test_impacted_assets_are_the_damaged_ones_with_address_and_worst_level(
    demo: Any, items: pd.DataFrame
) -> None:
    site, result = demo
    contents = _contents(site, 2, eventId=result.event["id"])
    linked = items.dropna(subset=["assetId"])
    worst = linked.groupby("assetId")["rank"].max()
    damaged = worst[worst > 0]
    rows = {r["id"]: r for r in contents["data"]}
    assert set(rows) == {int(a) for a in damaged.index}
    for asset_id, rank in damaged.items():
        row = rows[int(asset_id)]
        assert row["worstLevel"] == LEVELS[int(rank)]
        assert row["address"] and row["locality"] and row["regionId"] == 1
    meta = {m["key"]: m["value"] for m in contents["meta"]}
    assert (meta["assessedAssets"], meta["damagedAssets"]) == (len(worst), len(damaged))
    assert meta["impactMeans"] is True
    every = _contents(site, 2, eventId=result.event["id"], impact="any")
    assert len(every["data"]) == len(worst) > len(damaged)


def test_register_fields_are_columns_and_names_replace_codes(demo: Any) -> None:
    site, result = demo
    contents = _contents(site, 1, eventId=result.event["id"])  # no registerId: the only one
    spec = {f["key"]: f["type"] for f in contents["spec"]}
    assert spec["damageLevel"] == "text" and spec["inspectionDate"] == "date"
    assert "fields" not in spec
    first = contents["data"][0]
    assert (first["event"], first["register"], first["status"]) == (
        "Sample flood 2026",
        "Damage assessments",
        "active",
    )
    assert first["inspectionDate"] == "2026-02-17"


def test_unknown_names_make_the_run_failed(demo: Any) -> None:
    site, result = demo
    event = result.event["id"]
    reason = _failed(site, 1, eventId=event, registerId="damage-assesment")
    assert "registerId 'damage-assesment': no such register" in reason
    assert "damage-assessment" in reason
    assert "import job 999 does not exist" in _failed(site, 4, jobId=999)
    assert "no such register" in _failed(site, 6, registerId="nope")
    assert "no such register" in _failed(site, 2, registerId="nope")
    assert "no such asset class; classes:" in _failed(site, 2, type="Parcel")
    assert "import job 999 does not exist" in _failed(site, 5, importJobId=999)
    assert "no such item" in _failed(site, 5, itemId=99999)
    assert "event 77 does not exist" in _failed(site, 6, eventId=77)


# --- dates, times and the site's time zone ---------------------------------------------


def test_times_are_in_the_sites_zone_and_dates_are_typed(
    demo: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import csv
    import io
    from datetime import date, datetime, timedelta

    import openpyxl

    site, result = demo
    monkeypatch.setenv("TOOLKIT_TIMEZONE", "Australia/Melbourne")
    instance = _run(site, 1, eventId=result.event["id"])
    item = site.get_item(1)
    utc = datetime.fromisoformat(item["dateCreated"])
    text = _file(site, instance, "csv").decode("utf-8")
    row = next(csv.DictReader(io.StringIO(text)))
    local = datetime.fromisoformat(row["Created (Australia/Melbourne)"])
    assert local == utc and local.utcoffset() in (timedelta(hours=10), timedelta(hours=11))
    assert row["Inspection Date"] == "2026-02-17"
    path = tmp_path / "items.xlsx"
    path.write_bytes(_file(site, instance, "xlsx"))
    sheet = openpyxl.load_workbook(path)["Data"]
    heads = [c.value for c in sheet[1]]
    first = [c.value for c in sheet[2]]
    assert first[heads.index("Inspection Date")] == datetime(2026, 2, 17)
    assert sheet.cell(2, heads.index("Inspection Date") + 1).number_format == "yyyy-mm-dd"
    created = first[heads.index("Created (Australia/Melbourne)")]
    assert abs(created - local.replace(tzinfo=None)) < timedelta(milliseconds=1)
    contents = site.report_fetch(instance)["contents"]
    meta = {m["key"]: m["value"] for m in contents["meta"]}
    assert meta["timeZone"] == "Australia/Melbourne"
    assert contents["data"][0]["dateCreated"] == int(utc.timestamp())  # JSON: epoch seconds
    assert date.fromisoformat(contents["data"][0]["inspectionDate"]) == date(2026, 2, 17)
    page = _file(site, instance, "html").decode()
    assert "Created (Australia/Melbourne)" in page and local.strftime("%Y-%m-%d %H:%M") in page


def test_an_unknown_time_zone_is_an_error_naming_the_variable(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, _result = demo
    monkeypatch.setenv("TOOLKIT_TIMEZONE", "Melbourne")
    queued = site.report_run({"reportId": 3})
    instance = site.report_status(queued["id"])
    assert instance["status"] == "FAILED"
    assert "TOOLKIT_TIMEZONE 'Melbourne' is not an IANA time zone" in instance["result"]
    assert "Australia/Melbourne" in instance["result"]  # the close names are offered


def test_audit_changes_read_as_before_and_after() -> None:
    from toolkit.reports.audit_text import describe_change

    update = (
        '{"before": {"fields": {"damageLevel": "Minor", "occupants": 2, "notes": "x"}, '
        '"assetId": 7, "status": 1}, "patch": {"fields": {"damageLevel": "Severe", '
        '"notes": null, "occupants": 2}, "status": 1}}'
    )
    assert describe_change("update", update) == "damageLevel: Minor → Severe; notes: x → (empty)"
    assert describe_change("retire", '{"status": [1, 0]}') == "status: 1 → 0"
    event = '{"before": {"name": "Flood", "status": 1}, "after": {"name": "Flood 2026"}}'
    assert describe_change("update", event) == "name: Flood → Flood 2026"
    assert describe_change("create", '{"after": {"name": "Flood"}}') == "name: Flood"
    created = describe_change("create", '{"fields": {"habitable": false}, "status": 1}')
    assert created == "habitable: no; status: 1"
    assert describe_change("update", "not json") == "not json"
