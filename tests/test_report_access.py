"""Reports and import-job status over real HTTP keep to the caller's duty (spec 5, rule 5),
and report runs never exceed the server's pool of workers.

The server runs with ``workers=1``. Site ``alpha`` holds the sample parcels and two
events with damage assessments: ``event`` (users ``api``, ``colleague`` and ``fickle``
are on duty in it) and ``other`` (nobody's). ``noduty`` is on duty nowhere. An item
import into ``other`` rejected a row whose value (``Apocalyptic``) its job keeps.
"""

from __future__ import annotations

import base64
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import running

from toolkit.importing.pipeline import ImportRequest
from toolkit.server import ServerSettings, create_app
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PASSWORD = "correct horse battery"
DEVICE = {"uuid": "https://ci.example.org", "platform": "python", "version": "0.1", "name": "ci"}
FORMATS = ("json", "csv", "xlsx", "html")
SECRET_VALUE = "Apocalyptic"


@dataclass
class World:
    url: str
    path: Path
    event: int
    other: int
    event_job: int  # the item import of ``event``
    other_job: int  # an item import of ``other`` with a rejected row
    asset_job: int
    other_item: int

    def client(self, username: str) -> httpx.Client:
        with httpx.Client(base_url=self.url, headers={"X-Site": "alpha"}, timeout=30) as login:
            answer = login.post(
                "/api/json/auth", json={**DEVICE, "username": username, "password": PASSWORD}
            )
        assert answer.status_code == 200, answer.text
        headers = {"X-Site": "alpha", "Authorization": f"Bearer {answer.json()['token']}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def local(self) -> LocalSite:
        return LocalSite(self.path, "alpha", user_id="admin")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("access")
    path = folder / "site.sqlite"
    lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    items_csv = folder / "items.csv"
    items_csv.write_text("\n".join(lines[:41]) + "\n", encoding="utf-8")
    bad_csv = folder / "bad.csv"
    bad_csv.write_text(
        "Reference,Address,Suburb,Property Number,Damage Level\n"
        f"NEW-1,,,,Minor\nBAD-2,,,,{SECRET_VALUE}\n",
        encoding="utf-8",
    )
    with LocalSite(path, "alpha", user_id="admin") as alpha:
        asset_job = alpha.run_import(
            ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip")
        )
        event = alpha.create_event({"name": "Flood 2026"})["id"]
        other = alpha.create_event({"name": "Storm 2025"})["id"]
        jobs = {}
        for target in (event, other):
            job = alpha.run_import(
                ImportRequest("item", "damage-assessments", items_csv, event_id=target, region_id=1)
            )
            assert job["status"] == "COMPLETE", job["result"]
            jobs[target] = job["id"]
        bad = alpha.run_import(
            ImportRequest("item", "damage-assessments", bad_csv, event_id=other, region_id=1)
        )
        assert bad["summary"]["errors"][0]["value"] == SECRET_VALUE
        duties = {"api": event, "colleague": event, "fickle": event, "noduty": None}
        for name, duty in duties.items():
            alpha.add_user(name, positions=["API User"], approved=True, terms_accepted=True)
            alpha.set_password(name, PASSWORD)
            if duty is not None:
                alpha.put_on_duty(name, duty, "Field Inspector")
        params = {"registerId": "damage-assessment", "eventId": str(other), "limit": "1"}
        other_item = int(next(iter(alpha.list_items(params)["models"])))
    settings = ServerSettings(rate_limit="100000/minute", auth_rate_limit="none", workers=1)
    with running(create_app(path, settings=settings)) as url:
        yield World(url, path, event, other, jobs[event], bad["id"], asset_job["id"], other_item)


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"status", "message"} and body["status"] == status
    return str(body["message"])


def _run(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/api/json/report", json={"mode": "run", **body})


def _status(client: httpx.Client, instance: str | int) -> httpx.Response:
    return client.post("/api/json/report", json={"mode": "status", "id": int(instance)})


def _fetch(client: httpx.Client, instance: str | int, format: str = "json") -> httpx.Response:
    return client.post(
        "/api/json/report",
        json={"mode": "fetch", "reportInstanceId": int(instance), "format": format},
    )


def _completed(client: httpx.Client, **body: Any) -> str:
    """Run a report and wait for it; the instance id of the COMPLETED run."""
    queued = _run(client, **body)
    assert queued.status_code == 200, queued.text
    instance = str(queued.json()["id"])
    deadline = time.monotonic() + 60
    while True:
        status = _status(client, instance).json()
        if status["status"] in ("COMPLETED", "FAILED") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status["status"] == "COMPLETED", status
    return instance


def _data(client: httpx.Client, instance: str) -> list[dict[str, Any]]:
    answer = _fetch(client, instance)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["contents"]["data"])


# --- (a), (b): another user's instance, and one made before duty ended ------------------------


def test_another_users_instance_is_not_found_on_any_path(world: World) -> None:
    with world.client("colleague") as colleague, world.client("api") as api:
        instance = _completed(colleague, reportId=1, params={"eventId": world.event})
        # The same duty does not make another user's instance one's own.
        for client in (api,):
            _error(_status(client, instance), 404)
            for format in FORMATS:
                _error(_fetch(client, instance, format), 404)
            _error(_run(client, reportInstanceId=int(instance)), 404)
            _error(_run(client, reportInstanceId=int(instance), params={"status": "all"}), 404)
        assert _status(colleague, instance).json()["userId"] == "colleague"
    with world.client("noduty") as noduty:
        _error(_fetch(noduty, instance), 404)
        _error(_run(noduty, reportInstanceId=int(instance)), 404)


def test_an_instance_made_on_duty_is_refused_once_the_duty_ends(world: World) -> None:
    with world.client("fickle") as fickle:
        items = _completed(fickle, reportId=1, params={"eventId": world.event})
        audit = _completed(fickle, reportId=5)
        assert len(_data(fickle, items)) == 40
        with world.local() as local:
            local.take_off_duty("fickle", world.event)
        try:
            for instance in (items, audit):
                assert "needs duty" in _error(_status(fickle, instance), 403)
                for format in FORMATS:
                    message = _error(_fetch(fickle, instance, format), 403)
                    assert f"event {world.event}" in message
            # Repeating the item report names the event again: refused, nothing queued.
            assert "needs duty" in _error(_run(fickle, reportInstanceId=int(items)), 403)
            # Repeating the audit log runs again, within today's (empty) duty.
            again = _completed(fickle, reportInstanceId=int(audit))
            assert {row["eventId"] for row in _data(fickle, again)} == {None}
        finally:
            with world.local() as local:
                local.put_on_duty("fickle", world.event, "Field Inspector")


# --- (c): rows of events off duty never reach the caller -----------------------------------


def test_the_audit_log_report_keeps_entries_of_events_on_duty(world: World) -> None:
    with world.local() as local:
        every = [
            e["eventId"]
            for e in local.list_audit_logs({"limit": "1000", "importJobId": str(world.asset_job)})[
                "models"
            ].values()
        ]
        event_entries = int(local.list_audit_logs({"eventId": str(world.event)})["total"])
        other_entries = int(local.list_audit_logs({"eventId": str(world.other)})["total"])
    assert set(every) == {None} and event_entries >= 40 and other_entries >= 41
    with world.client("noduty") as noduty:
        instance = _completed(noduty, reportId=5)
        rows = _data(noduty, instance)
        assert {row["eventId"] for row in rows} == {None}
        assert sum(row["importJobId"] == world.asset_job for row in rows) == 3000
        for format in ("csv", "html"):
            text = base64.b64decode(_fetch(noduty, instance, format).json()["contents"])
            assert SECRET_VALUE.encode() not in text and b"DA-000001" not in text
        meta = {m["key"]: m for m in _fetch(noduty, instance).json()["contents"]["meta"]}
        assert meta["dutyEvents"]["value"] == [] and meta["dutyEvents"]["display"] == "none"
    with world.client("api") as api:
        rows = _data(api, _completed(api, reportId=5))
        assert {row["eventId"] for row in rows} == {None, world.event}
        assert sum(row["eventId"] == world.event for row in rows) == event_entries
        for params in (
            {"eventId": world.other},
            {"itemId": world.other_item},
            {"importJobId": world.other_job},
        ):
            assert "needs duty" in _error(_run(api, reportId=5, params=params), 403)
        mine = _data(api, _completed(api, reportId=5, params={"eventId": world.event}))
        assert len(mine) == event_entries


def test_item_reports_refuse_or_filter_events_off_duty(world: World) -> None:
    with world.local() as local:
        items = local.list_items(
            {"registerId": "damage-assessment", "eventId": str(world.event), "limit": "1000"}
        )["models"].values()
        active = [i for i in items if i["assetId"] is not None and i["status"] > 0]
        linked = [int(i["assetId"]) for i in active]
        damaged = {int(i["assetId"]) for i in active if i["damageLevel"] not in (None, "None")}
    assert linked and damaged and len(damaged) < len(set(linked))
    with world.client("noduty") as noduty:
        for report, params in (
            (1, {"eventId": world.other}),
            (2, {"eventId": world.other}),
            (4, {"jobId": world.other_job}),
            (6, {"eventId": world.other}),
        ):
            message = _error(_run(noduty, reportId=report, params=params), 403)
            assert f"event {world.other}" in message and "needs duty" in message
        assert _data(noduty, _completed(noduty, reportId=2)) == []
        jobs = _data(noduty, _completed(noduty, reportId=3))
        assert [j["id"] for j in jobs] == [world.asset_job]
    with world.client("api") as api:
        impacted = _data(api, _completed(api, reportId=2, params={"impact": "any"}))
        assert {a["id"] for a in impacted} == set(linked)
        assert sum(a["activeItems"] for a in impacted) == len(linked)
        # By default impacted means damaged: an assessment saying None is not damage.
        impacted = _data(api, _completed(api, reportId=2))
        assert {a["id"] for a in impacted} == damaged
        jobs = _data(api, _completed(api, reportId=3))
        assert {j["id"] for j in jobs} == {world.asset_job, world.event_job}
        quality = _data(api, _completed(api, reportId=4, params={"jobId": world.event_job}))
        assert len(quality) == 40
        _error(_run(api, reportId=4, params={"jobId": world.other_job}), 403)


# --- (d): import-job status ---------------------------------------------------------------


def test_import_status_of_an_item_job_needs_duty_in_its_event(world: World) -> None:
    with world.client("noduty") as noduty, world.client("api") as api:
        for client in (noduty, api):
            answer = client.post("/api/json/import", json={"mode": "status", "id": world.other_job})
            message = _error(answer, 403)
            assert "needs duty" in message and SECRET_VALUE not in answer.text
            every = client.post("/api/json/import", json={"mode": "status"})
            assert every.status_code == 200 and SECRET_VALUE not in every.text
            listed = {job["id"] for job in every.json()}
            assert world.asset_job in listed and world.other_job not in listed
        assert world.event_job not in {
            j["id"] for j in noduty.post("/api/json/import", json={"mode": "status"}).json()
        }
        own = api.post("/api/json/import", json={"mode": "status", "id": world.event_job})
        assert own.status_code == 200 and own.json()["id"] == world.event_job
        asset = noduty.post("/api/json/import", json={"mode": "status", "id": world.asset_job})
        assert asset.status_code == 200 and asset.json()["importType"] == "asset"


# --- the pool: a burst of runs never exceeds the workers -------------------------------------


def _millis(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() * 1000


def test_a_burst_of_report_runs_waits_for_the_one_worker(world: World) -> None:
    with world.client("api") as api:
        burst = [str(_run(api, reportId=5).json()["id"]) for _ in range(6)]
        seen: set[str] = set()
        most_running = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            statuses = [_status(api, instance).json()["status"] for instance in burst]
            seen |= set(statuses)
            # Polls are one after another; an instance RUNNING at its poll and again after
            # the sweep ran throughout the end of the sweep (states only move forward).
            running = [i for i, s in zip(burst, statuses, strict=True) if s == "RUNNING"]
            still = [i for i in running if _status(api, i).json()["status"] == "RUNNING"]
            most_running = max(most_running, len(still))
            if all(s in ("COMPLETED", "FAILED") for s in statuses):
                break
            time.sleep(0.01)
        finished = [_status(api, instance).json() for instance in burst]
    assert [f["status"] for f in finished] == ["COMPLETED"] * 6
    # One at a time, in order: each run starts after the one before it completed.
    spans = sorted((_millis(f["dateRun"]), _millis(f["dateCompleted"])) for f in finished)
    for (_, completed), (started, _) in itertools.pairwise(spans):
        assert started >= completed
    assert most_running <= 1
    assert "QUEUED" in seen  # the waiting runs were seen waiting


def test_a_user_with_as_many_runs_unfinished_as_allowed_is_told_to_wait(world: World) -> None:
    cap = ServerSettings().max_unfinished_reports
    assert cap is not None
    # Runs of fickle's queued by another process that has not run them yet (this test's,
    # alive, so they are not taken for orphans): fickle has as many unfinished as allowed.
    with LocalSite(
        world.path, "alpha", user_id="fickle", report_executor=lambda _task: os.getpid()
    ) as site:
        queued = [site.report_run({"reportId": 5})["id"] for _ in range(cap)]
        with world.client("fickle") as fickle, world.client("api") as api:
            refused = _run(fickle, reportId=5)
            message = _error(refused, 429)
            assert message == (
                f"you have {cap} report runs not yet ended, as many as this server allows at "
                f"once ({cap}); retry after 10 s, or when one has ended"
            )
            assert refused.headers["retry-after"] == "10"
            assert _run(api, reportId=5).status_code == 200  # another user's runs are theirs
            # One of them ends: fickle may run one more.
            assert site.report_work(queued[0])["status"] == "COMPLETED"
            assert _run(fickle, reportId=5).status_code == 200
        for instance in queued[1:]:
            assert site.report_work(instance)["status"] == "COMPLETED"


# --- the report formats beyond the spec's, over HTTP ---------------------------------------


def test_the_gis_and_excel_formats_come_over_http(world: World, tmp_path: Path) -> None:
    import pyogrio

    with world.client("api") as api:
        damage = _completed(api, reportId=6, params={"eventId": world.event})
        summary = _data(api, damage)
        assert summary and all(r["event"] for r in summary)
        impacted = _completed(api, reportId=2, params={"eventId": world.event})
        rows = _data(api, impacted)
        answer = _fetch(api, impacted, "gpkg")
        assert answer.status_code == 200, answer.text
        assert answer.json()["format"] == "gpkg"
        layer_file = tmp_path / "impacted.gpkg"
        layer_file.write_bytes(base64.b64decode(answer.json()["contents"]))
        layer = pyogrio.read_dataframe(layer_file)
        assert layer.crs.to_epsg() == 4326 and sorted(layer["id"]) == sorted(r["id"] for r in rows)
        excel = _fetch(api, impacted, "csv-excel").json()
        assert base64.b64decode(excel["contents"]).startswith(b"\xef\xbb\xbf")
        jobs = _completed(api, reportId=3)
        refused = _fetch(api, jobs, "geojson")
        assert "has no asset geometry" in _error(refused, 400)
