"""The one interface, in-process: events, items, assets, audit logs, in the spec's shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.errors import NoSiteError, NotFoundError, OptionError
from toolkit.importing.pipeline import ImportRequest
from toolkit.site import LocalSite
from toolkit.store.reports import analyst_rows

RULES = Path(__file__).resolve().parent / "fixtures_rules"


@pytest.fixture
def local(tmp_path: Path) -> LocalSite:
    site = LocalSite(tmp_path / "site.sqlite", "demo", user_id="officer", rule_paths=[RULES])
    yield site
    site.close()


def _load(local: LocalSite, tmp_path: Path) -> dict:
    event = local.create_event(
        {
            "name": "Flood",
            "description": "River flood",
            "startDate": "2026-02-01T08:00:00+11:00",
            "tags": ["flood"],
        }
    )
    source = tmp_path / "obs.csv"
    source.write_text("Reference,Level,Count,Notes\nR1,High,3,roof leak\nR2,Low,1,\n")
    job = local.run_import(
        ImportRequest("item", "test-observations", source, event_id=event["id"], region_id=2)
    )
    assert job["status"] == "COMPLETE", job["result"]
    return event


def test_events_are_created_searched_and_updated(local, tmp_path) -> None:  # type: ignore[no-untyped-def]
    event = _load(local, tmp_path)
    assert event["startDate"] == "2026-01-31T21:00:00.000+00:00"
    assert event["tags"] == ["flood"]
    assert event["active"] is True
    found = local.list_events({"fulltext": "river"})
    assert (found["count"], found["total"], list(found["models"])) == (1, "1", [str(event["id"])])
    assert local.list_events({"tag": "fire"})["count"] == 0
    closed = local.update_event(event["id"], {"status": 0, "description": "Closed"})
    assert (closed["active"], closed["description"], closed["name"]) == (False, "Closed", "Flood")
    with pytest.raises(OptionError, match="a full update \\(PUT\\) of an event needs status"):
        local.update_event(event["id"], {"name": "Flood 2026"}, replace=True)
    replaced = local.update_event(event["id"], {"name": "Flood 2026", "status": 1}, replace=True)
    assert (replaced["name"], replaced["description"], replaced["tags"]) == ("Flood 2026", None, [])
    with pytest.raises(OptionError, match=r"unknown event field.*colour"):
        local.update_event(event["id"], {"colour": "red"})
    # The same PUT again changes nothing: no audit entry, no new dateModified.
    again = local.update_event(event["id"], {"name": "Flood 2026", "status": 1}, replace=True)
    assert again == replaced
    entries = local.list_audit_logs({"eventId": str(event["id"]), "limit": "1000"})["models"]
    mine = [e for e in entries.values() if e["recordType"] == "event"]
    # Setting an inactive status is how a record is retired, and is audited as that.
    assert [e["action"] for e in mine] == ["create", "retire", "update"]
    with pytest.raises(OptionError, match="fulltext_operator 'like' is not one of"):
        local.list_events({"fulltext": "x", "fulltext_operator": "like"})


def test_items_in_the_spec_envelope_with_register_fields(local, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _load(local, tmp_path)
    page = local.list_items(
        {"registerId": "observation", "limit": "1", "order": "id", "direction": "desc"}
    )
    assert (page["count"], page["total"]) == (1, "2")
    item = next(iter(page["models"].values()))
    assert item["reference"] == "R2"
    assert item["notes"] is None  # defined by the register, empty in this item
    assert item["registerId"] == item["type"] == "observation"
    assert (item["status"], item["isTemplate"], item["regionId"]) == (1, False, 2)
    assert local.get_item(item["id"]) == item
    assert local.list_items({"type": "observation", "cql": "notes:*leak*"})["count"] == 1
    with pytest.raises(OptionError, match="registerId \\(alias type\\) is required"):
        local.list_items({})
    with pytest.raises(OptionError, match="limit 5000 is over the maximum of 1000"):
        local.list_items({"registerId": "observation", "limit": "5000"})
    registers = local.list_registers()
    assert [(r["id"], r["itemCount"]) for r in registers] == [("observation", 2)]


def test_audit_log_follows_every_record(local, tmp_path) -> None:  # type: ignore[no-untyped-def]
    event = _load(local, tmp_path)
    logs = local.list_audit_logs({"eventId": str(event["id"]), "limit": "10"})
    actions = sorted((m["recordType"], m["action"]) for m in logs["models"].values())
    assert actions == [("event", "create"), ("item", "create"), ("item", "create")]
    item_log = local.list_audit_logs({"itemId": "1"})
    entry = next(iter(item_log["models"].values()))
    assert entry["userId"] == "officer"
    assert entry["changes"]["fields"]["reference"] == "R1"
    assert local.get_audit_log(entry["id"]) == entry


def test_an_imports_creation_entries_show_the_values_the_records_were_made_with(
    store_location: str | Path, tmp_path: Path
) -> None:
    local = LocalSite(store_location, "demo", user_id="officer", rule_paths=[RULES])
    try:
        _creation_entries_read_back(local, tmp_path, sqlite=isinstance(store_location, Path))
    finally:
        local.close()


def _creation_entries_read_back(local: LocalSite, tmp_path: Path, *, sqlite: bool) -> None:
    # An import's creation entries do not copy the records (issue 17): they are read back
    # as the record with its later audited changes undone, so they say what they said.
    def run(text: str, overwrite: str | None = None) -> int:
        source = tmp_path / "facilities.csv"
        source.write_text(text)
        request = ImportRequest("asset", "test-facilities", source, overwrite_rule=overwrite)
        job = local.run_import(request)
        assert job["status"] == "COMPLETE", job["result"]
        return int(job["id"])

    def creations(job_id: int) -> dict[int, dict[str, object]]:
        page = local.list_audit_logs({"importJobId": str(job_id), "order": "id", "limit": "10"})
        return {e["recordId"]: e["changes"] for e in page["models"].values()}

    first = run("Code,Name,Type,Capacity\nF1,Town Hall,Hall,200\nF2,Pool,Pool,\n")
    made = creations(first)
    town_hall, pool = sorted(made)
    assert made[town_hall] == {
        "extra_info": {"capacity": 200},
        "name": "Town Hall",
        "code": "F1",
        "type": "Hall",
        "friendly": None,
        "status": 1,
    }
    assert (made[pool]["name"], made[pool]["status"]) == ("Pool", 1)
    stored = local.db.connection.execute(
        "SELECT count(*), count(changes) FROM audit_log WHERE import_job_id = ?", (first,)
    ).fetchone()
    assert tuple(stored) == (2, 0)  # written without the values

    # F1 renamed and recounted, then both retired by a deleteAndInsert of F3.
    run("Code,Name,Capacity\nF1,Town Hall (main),250\n", "updateOnly")
    run("Code,Name\nF3,Depot\n", "deleteAndInsert")
    statuses = local.db.connection.execute("SELECT code, name, status FROM asset ORDER BY id")
    assert [tuple(r) for r in statuses] == [
        ("F1", "Town Hall (main)", 0),
        ("F2", "Pool", 0),
        ("F3", "Depot", 1),
    ]
    assert creations(first) == made
    entry = next(iter(local.list_audit_logs({"importJobId": str(first)})["models"].values()))
    assert local.get_audit_log(entry["id"]) == entry
    # The audit report and the analysts' audit view read the same values.
    (frame,) = local.store.reports.audit_rows(
        event_id=None,
        item_id=None,
        import_job_id=first,
        record_type=None,
        action=None,
        created_from=None,
        created_to=None,
    )
    changes = [c if isinstance(c, dict) else json.loads(c) for c in frame["changes"]]
    assert dict(zip(frame["record_id"], changes, strict=True)) == made
    if sqlite:  # the analysts' views are SQLite's (read-only SQL over the file)
        (frame,) = analyst_rows(
            local.db,
            local.store.site_id,
            "SELECT recordId, changes FROM audit WHERE importJobId = :job",
            {"job": first},
        )
        analysed = map(json.loads, frame["changes"])
        assert dict(zip(frame["recordId"], analysed, strict=True)) == made

    # An item import's entries too, after a PATCH of one item.
    _load(local, tmp_path)
    local.patch_item(1, {"notes": "fixed"})
    item_log = local.list_audit_logs({"itemId": "1", "order": "id"})["models"].values()
    created, updated = (e for e in item_log)
    assert created["action"] == "create"
    assert created["changes"]["fields"]["notes"] == "roof leak"
    assert updated["changes"]["before"] == created["changes"]
    assert local.get_item(1)["notes"] == "fixed"


def test_another_sites_records_are_not_found(local, tmp_path) -> None:  # type: ignore[no-untyped-def]
    event = _load(local, tmp_path)
    other = LocalSite(tmp_path / "site.sqlite", "other")
    try:
        with pytest.raises(NotFoundError, match="item 1 does not exist"):
            other.get_item(1)
        with pytest.raises(NotFoundError, match=f"event {event['id']} does not exist"):
            other.get_event(event["id"])
        # Registers are per site: the other site has none, and says so.
        with pytest.raises(OptionError, match=r"'observation' is not a register.*none yet"):
            other.list_items({"registerId": "observation"})
    finally:
        other.close()


def test_a_missing_site_is_not_made_up_when_create_is_off(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.sqlite"
    with pytest.raises(NoSiteError, match=f"no site at {path}"):
        LocalSite(path, "ghost", create=False)
    assert not path.exists()
    LocalSite(path, "real").close()
    with pytest.raises(NotFoundError, match=r"site 'ghost' does not exist.*its sites: real"):
        LocalSite(path, "ghost", create=False)


def test_lookup_and_rest_give_the_same_asset_object(tmp_path) -> None:  # type: ignore[no-untyped-def]
    parcels = Path(__file__).resolve().parent.parent / "sample_data" / "parcels.zip"
    with LocalSite(tmp_path / "s.sqlite", "demo") as site:
        site.run_import(ImportRequest("asset", "property-assets", parcels))
        found = site.asset_lookup("102559", {"mode": "id"})["1"]["asset"]
        stored = site.get_asset("102559")
        batch = site.asset_lookup([{"code": "A", "str": "102559"}], {"mode": "id"}, "id")
    spec_fields = (
        "id",
        "type",
        "code",
        "regionId",
        "geo",
        "source",
        "friendly",
        "name",
        "friendlyType",
        "extraInfo",
        "infoLabel",
        "infoUrl",
        "regionName",
    )
    assert {k: found[k] for k in spec_fields} == {k: stored[k] for k in spec_fields}
    assert found["accuracy"] == "100"
    assert batch == {"A": {"reference": "A", "query": "102559", "asset": "102559", "err": None}}
