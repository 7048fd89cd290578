"""A served world for the tests that sweep the whole API: fuzzing and the authorisation matrix.

Two sites in one file: ``alpha`` (the sample parcels, an event with damage
assessments, a second event, a media file, a finished report instance) and
``beta`` (a few assets, an event, an item). Alpha's accounts are one per kind
of caller the API tells apart:

- ``duty``: an approved API user on duty in ``event``;
- ``offduty``: an approved API user on duty nowhere;
- ``admin``: an account administrator (the operator's flag), also in the
  ``Administrator`` position, on duty in ``event`` (so fuzzing as it reaches
  everything a duty user reaches, and more).

Beta's ``api`` user gives the token of another site.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from serving import running

from toolkit.importing.pipeline import ImportRequest
from toolkit.server import ServerSettings, create_app
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PASSWORD = "correct horse battery"
DEVICE = {"uuid": "https://ci.example.org", "platform": "python", "version": "0.1", "name": "ci"}
ADMIN_POSITION = "Administrator"


@dataclass
class ServedWorld:
    url: str
    path: Path
    event: int  # alpha: duty and admin are on duty here
    other_event: int  # alpha: nobody is on duty here
    item: int  # an item of ``event``
    other_item: int  # an item of ``other_event``
    asset: str
    media: int
    report: str  # a finished report instance of event's items
    item_job: int  # the import job that brought event's items
    beta_event: int
    beta_item: int
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, token: str | None = None, site: str = "alpha") -> httpx.Client:
        headers = {"X-Site": site, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def _account(site: LocalSite, name: str, *, duty: int | None = None, **flags: Any) -> None:
    options = {"positions": ["API User"], "approved": True, "terms_accepted": True} | flags
    site.add_user(name, **options)
    site.set_password(name, PASSWORD)
    if duty is not None:
        site.put_on_duty(name, duty, "Field Inspector")


def _token(url: str, site: str, username: str) -> str:
    with httpx.Client(base_url=url, headers={"X-Site": site}, timeout=60) as client:
        answer = client.post(
            "/api/json/auth", json={**DEVICE, "username": username, "password": PASSWORD}
        )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def build_site(folder: Path) -> dict[str, Any]:
    """Write the two sites into ``folder/site.sqlite``; the ids the tests need."""
    path = folder / "site.sqlite"
    items_csv = folder / "items.csv"
    lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    items_csv.write_text("\n".join(lines[:21]) + "\n", encoding="utf-8")
    ids: dict[str, Any] = {"path": path}
    with LocalSite(path, "alpha", user_id="admin") as alpha:
        job = alpha.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        assert job["status"] == "COMPLETE", job["result"]
        ids["event"] = alpha.create_event({"name": "Flood 2026", "tags": ["flood"]})["id"]
        ids["other_event"] = alpha.create_event({"name": "Storm 2025"})["id"]
        for key in ("event", "other_event"):
            job = alpha.run_import(
                ImportRequest(
                    "item", "damage-assessments", items_csv, event_id=ids[key], region_id=1
                )
            )
            assert job["status"] == "COMPLETE", job["result"]
            if key == "event":
                ids["item_job"] = int(job["id"])
            models = alpha.list_items(
                {"registerId": "damage-assessment", "eventId": str(ids[key]), "limit": "1"}
            )["models"]
            ids["item" if key == "event" else "other_item"] = int(next(iter(models)))
        ids["asset"] = next(iter(alpha.list_assets({"limit": "1"})["models"]))
        photo = alpha.upload_media("photo.jpg", b"\xff\xd8\xff\xe0 not really", "image/jpeg")
        ids["media"] = photo["id"]
        _account(alpha, "duty", duty=ids["event"])
        _account(alpha, "offduty")
        positions = ["API User", ADMIN_POSITION]
        _account(alpha, "admin", duty=ids["event"], positions=positions, admin=True)
    with LocalSite(path, "beta", user_id="admin") as beta:
        job = beta.run_import(ImportRequest("asset", "assets-csv", SAMPLE / "assets.csv"))
        assert job["status"] == "COMPLETE", job["result"]
        ids["beta_event"] = beta.create_event({"name": "Beta fire"})["id"]
        job = beta.run_import(
            ImportRequest(
                "item", "damage-assessments", items_csv, event_id=ids["beta_event"], region_id=1
            )
        )
        assert job["status"] == "COMPLETE", job["result"]
        ids["beta_item"] = int(
            next(iter(beta.list_items({"registerId": "damage-assessment", "limit": "1"})["models"]))
        )
        _account(beta, "api", duty=ids["beta_event"])
    return ids


@contextmanager
def served_world(folder: Path, **settings: Any) -> Iterator[ServedWorld]:
    """The world's file served on loopback, with a token for each kind of caller."""
    ids = build_site(folder)
    options = {"rate_limit": None, "auth_rate_limit": None} | settings
    with running(create_app(ids["path"], settings=ServerSettings(**options))) as url:
        tokens = {name: _token(url, "alpha", name) for name in ("duty", "offduty", "admin")}
        tokens["beta"] = _token(url, "beta", "api")
        report = _finished_report(url, tokens["duty"], ids["event"])
        yield ServedWorld(
            url=url,
            path=ids["path"],
            event=ids["event"],
            other_event=ids["other_event"],
            item=ids["item"],
            other_item=ids["other_item"],
            asset=str(ids["asset"]),
            media=int(ids["media"]),
            report=report,
            item_job=ids["item_job"],
            beta_event=ids["beta_event"],
            beta_item=ids["beta_item"],
            tokens=tokens,
        )


def _finished_report(url: str, token: str, event: int) -> str:
    headers = {"X-Site": "alpha", "Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        answer = client.post(
            "/api/json/report",
            json={"mode": "run", "reportId": 1, "params": {"eventId": event}},
        )
        assert answer.status_code == 200, answer.text
        instance = str(answer.json()["id"])
        deadline = time.monotonic() + 60
        while True:
            status = client.post("/api/json/report", json={"mode": "status", "id": int(instance)})
            if status.json()["status"] in ("COMPLETED", "FAILED"):
                assert status.json()["status"] == "COMPLETED", status.text
                return instance
            assert time.monotonic() < deadline, status.text
            time.sleep(0.05)
