"""`toolkit serve` over real HTTP: the real server on 127.0.0.1, a real site file, httpx.

One module-scoped server holds two sites: ``alpha`` (the sample parcels, an event
with damage assessments the API user is on duty in, and an event it is not) and
``beta`` (a few assets, an event, an item), so cross-site isolation is checked on
real records. The server's clock is injected, so tokens expire without waiting.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pyotp
import pytest
from serving import running

from toolkit.importing.pipeline import ImportRequest
from toolkit.server import ServerSettings, create_app, openapi_document
from toolkit.site import LocalSite
from toolkit.store import now_ms

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PASSWORD = "correct horse battery"
DEVICE = {"uuid": "https://ci.example.org", "platform": "python", "version": "0.1", "name": "ci"}
ASSET_FIELDS = [
    "id",
    "type",
    "code",
    "regionId",
    "geo",
    "source",
    "accuracy",
    "friendly",
    "name",
    "friendlyType",
    "extraInfo",
    "infoLabel",
    "infoUrl",
    "regionName",
]
JOB_FIELDS = ["code", "id", "status", "dateCreated", "dateCompleted", "userId", "result"]


class Clock:
    """The server's clock: real time plus a shift the tests move."""

    def __init__(self) -> None:
        self.shift_ms = 0

    def __call__(self) -> int:
        return now_ms() + self.shift_ms


@dataclass
class World:
    url: str
    clock: Clock
    path: Path
    event: int  # alpha: the API user is on duty here
    other_event: int  # alpha: not on duty
    beta_event: int
    beta_item: int
    beta_asset: str
    api_key: str
    totp_secret: str
    item_ids: list[int]

    def client(self, site: str = "alpha", token: str | None = None) -> httpx.Client:
        headers = {"X-Site": site, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def token(self, site: str = "alpha", **credentials: str) -> str:
        body = {**DEVICE, **(credentials or {"username": "api", "password": PASSWORD})}
        with self.client(site) as client:
            answer = client.post("/api/json/auth", json=body)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["token"])


def _account(site: LocalSite, name: str, *, duty: int | None = None, **flags: Any) -> None:
    options = {"positions": ["API User"], "approved": True, "terms_accepted": True} | flags
    site.add_user(name, **options)
    site.set_password(name, PASSWORD)
    if duty is not None:
        site.put_on_duty(name, duty, "Field Inspector")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("server")
    path = folder / "site.sqlite"
    items_csv = folder / "items.csv"
    lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    items_csv.write_text("\n".join(lines[:41]) + "\n", encoding="utf-8")
    with LocalSite(path, "alpha", user_id="admin") as alpha:
        job = alpha.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        assert job["status"] == "COMPLETE", job["result"]
        event = alpha.create_event({"name": "Flood 2026", "tags": ["flood"]})["id"]
        other = alpha.create_event({"name": "Storm 2025"})["id"]
        for target in (event, other):
            job = alpha.run_import(
                ImportRequest("item", "damage-assessments", items_csv, event_id=target, region_id=1)
            )
            assert job["status"] == "COMPLETE", job["result"]
        _account(alpha, "api", duty=event)
        _account(alpha, "mfa", duty=event)
        totp = alpha.register_totp("mfa")["secret"]
        _account(alpha, "unapproved", approved=False)
        _account(alpha, "noterms", terms_accepted=False)
        _account(alpha, "inspector", positions=["Field Inspector"])
        key = alpha.issue_api_key("api", "ci")["key"]
        item_ids = [
            int(i)
            for i in alpha.list_items({"registerId": "damage-assessment", "eventId": str(event)})[
                "models"
            ]
        ]
    with LocalSite(path, "beta", user_id="admin") as beta:
        job = beta.run_import(ImportRequest("asset", "assets-csv", SAMPLE / "assets.csv"))
        assert job["status"] == "COMPLETE", job["result"]
        beta_event = beta.create_event({"name": "Beta fire"})["id"]
        job = beta.run_import(
            ImportRequest("item", "damage-assessments", items_csv, event_id=beta_event, region_id=1)
        )
        assert job["status"] == "COMPLETE", job["result"]
        beta_item = int(next(iter(beta.list_items({"registerId": "damage-assessment"})["models"])))
        beta_asset = next(iter(beta.list_assets({"limit": "1"})["models"]))
        _account(beta, "api", duty=beta_event)
    clock = Clock()
    settings = ServerSettings(clock=clock, rate_limit="100000/minute", auth_rate_limit="none")
    with running(create_app(path, settings=settings)) as url:
        yield World(
            url, clock, path, event, other, beta_event, beta_item, beta_asset, key, totp, item_ids
        )


@pytest.fixture(scope="module")
def api(world: World) -> Iterator[httpx.Client]:
    """A client logged in as the API user of alpha."""
    with world.client(token=world.token()) as client:
        yield client


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"status", "message"}
    assert body["status"] == status and isinstance(body["message"], str) and body["message"]
    return str(body["message"])


def _envelope(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"models", "count", "total"}
    assert isinstance(body["count"], int) and isinstance(body["total"], str)
    assert body["total"].isdigit() and body["count"] == len(body["models"])
    for key, model in body["models"].items():
        assert key == str(model["id"])
    return body


# --- ping and auth --------------------------------------------------------------------------


def test_ping_is_the_object_form_without_a_token(world: World) -> None:
    with httpx.Client(base_url=world.url) as client:
        body = client.get("/api/json/ping").json()
    assert set(body) == {"status", "timestamp", "auth"}
    assert body["status"] == 200 and body["auth"] is None
    assert body["timestamp"].endswith("+00:00") and body["timestamp"][:2] == "20"


def test_auth_with_username_and_password_gives_a_one_hour_token(world: World) -> None:
    with world.client() as client:
        answer = client.post(
            "/api/json/auth", json={**DEVICE, "username": "api", "password": PASSWORD}
        )
    body = answer.json()
    assert answer.status_code == 200 and set(body) == {"status", "token", "type"}
    assert (body["status"], body["type"]) == (200, "accessToken")
    claims = jwt.decode(body["token"], options={"verify_signature": False})
    assert claims["usr"] == "api" and claims["site"] == "alpha"
    assert claims["exp"] - claims["iat"] == 3600
    assert abs(claims["iat"] - time.time()) < 60


@pytest.mark.parametrize("missing", ["uuid", "platform", "version", "name"])
def test_auth_without_a_device_field_is_400(world: World, missing: str) -> None:
    body = {**DEVICE, "username": "api", "password": PASSWORD}
    del body[missing]
    with world.client() as client:
        assert missing in _error(client.post("/api/json/auth", json=body), 400)


def test_auth_input_errors_are_400(world: World) -> None:
    with world.client() as client:
        assert "username and password" in _error(
            client.post("/api/json/auth", json={**DEVICE, "username": "api"}), 400
        )
        assert "unknown auth field" in _error(
            client.post("/api/json/auth", json={**DEVICE, "apiKey": "x", "colour": "red"}), 400
        )
        assert "not both" in _error(
            client.post(
                "/api/json/auth", json={**DEVICE, "apiKey": "x", "username": "a", "password": "b"}
            ),
            400,
        )
        assert "JSON" in _error(client.post("/api/json/auth", content=b"{not json"), 400)


def test_bad_credentials_are_401_without_saying_which_part(world: World) -> None:
    attempts = [
        {"username": "api", "password": "wrong password"},
        {"username": "nobody", "password": PASSWORD},
        {"apiKey": world.api_key[:-2] + "xx"},
        {"apiKey": "not-a-key"},
    ]
    with world.client() as client:
        messages = {
            _error(client.post("/api/json/auth", json={**DEVICE, **a}), 401) for a in attempts
        }
        # A site the file does not hold answers the same as bad credentials.
        with world.client("gamma") as other:
            messages.add(
                _error(
                    other.post(
                        "/api/json/auth", json={**DEVICE, "username": "api", "password": PASSWORD}
                    ),
                    401,
                )
            )
    assert len(messages) == 1
    (message,) = messages
    assert "password" not in message and "username" not in message


def test_accounts_not_allowed_the_api_are_403(world: World) -> None:
    expected = {
        "unapproved": "approval",
        "noterms": "terms",
        "inspector": "API User",
    }
    with world.client() as client:
        for name, reason in expected.items():
            answer = client.post(
                "/api/json/auth", json={**DEVICE, "username": name, "password": PASSWORD}
            )
            assert reason in _error(answer, 403)


def test_totp_is_needed_and_checked(world: World) -> None:
    body = {**DEVICE, "username": "mfa", "password": PASSWORD}
    code = pyotp.TOTP(world.totp_secret).now()
    wrong = f"{(int(code) + 500_000) % 1_000_000:06d}"
    with world.client() as client:
        _error(client.post("/api/json/auth", json=body), 401)
        _error(client.post("/api/json/auth", json={**body, "mfaCode": wrong}), 401)
        _error(client.post("/api/json/auth", json={**body, "mfaCode": code[:5]}), 401)
        answer = client.post("/api/json/auth", json={**body, "mfaCode": code})
    assert answer.status_code == 200 and answer.json()["type"] == "accessToken"


def test_machine_auth_with_an_api_key_and_its_revocation(world: World) -> None:
    token = world.token(apiKey=world.api_key)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["usr"] == "api" and isinstance(claims["key"], int)
    with world.client(token=token) as client:
        assert client.get("/api/json/asset-type").status_code == 200
    with LocalSite(world.path, "alpha") as alpha:
        spare = alpha.issue_api_key("api", "spare")
    spare_token = world.token(apiKey=spare["key"])
    with LocalSite(world.path, "alpha") as alpha:
        alpha.revoke_api_key(spare["id"])
    with world.client(token=spare_token) as client:
        assert "revoked" in _error(client.get("/api/json/asset-type"), 401)
    with world.client() as client:
        _error(client.post("/api/json/auth", json={**DEVICE, "apiKey": spare["key"]}), 401)


def test_tokens_missing_forged_expired_or_of_another_site_are_401(world: World) -> None:
    token = world.token()
    claims = jwt.decode(token, options={"verify_signature": False})
    forged = jwt.encode(claims, "not the site's secret, but long enough", algorithm="HS256")
    unsigned = jwt.encode(claims, key=None, algorithm="none")
    with world.client() as client:
        assert "access token is required" in _error(client.get("/api/json/asset-type"), 401)
        for bad in (forged, unsigned, "garbage", token[:-4]):
            answer = client.get("/api/json/asset-type", headers={"Authorization": f"Bearer {bad}"})
            assert _error(answer, 401)
            assert answer.headers["WWW-Authenticate"] == "Bearer"
        # The spec's example scripts send the bare token: accepted.
        bare = client.get("/api/json/asset-type", headers={"Authorization": token})
        assert bare.status_code == 200
    with world.client("beta", token=token) as client:
        assert "not valid for this site" in _error(client.get("/api/json/asset-type"), 401)
    beta_token = world.token("beta")
    with world.client("alpha", token=beta_token) as client:
        _error(client.get("/api/json/asset-type"), 401)
    with httpx.Client(base_url=world.url, headers={"Authorization": f"Bearer {token}"}) as client:
        assert "X-Site" in _error(client.get("/api/json/asset-type"), 400)
    world.clock.shift_ms = 3601 * 1000
    try:
        with world.client(token=token) as client:
            assert "expired" in _error(client.get("/api/json/asset-type"), 401)
        fresh = world.token()
        with world.client(token=fresh) as client:
            assert client.get("/api/json/asset-type").status_code == 200
    finally:
        world.clock.shift_ms = 0
    with world.client(token=token) as client:
        assert client.get("/api/json/asset-type").status_code == 200


def test_secrets_never_reach_the_log(world: World, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        token = world.token()
        world.token(apiKey=world.api_key)
        with world.client() as client:
            client.post("/api/json/auth", json={**DEVICE, "username": "api", "password": "bad-x1"})
        with world.client(token=token) as client:
            client.get("/api/json/asset-type")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "/api/json/auth" in text  # the access log saw the calls
    for secret in (PASSWORD, "bad-x1", world.api_key, token, world.totp_secret):
        assert secret not in text


# --- asset lookup ---------------------------------------------------------------------------


def _check_asset(asset: dict[str, Any]) -> None:
    assert list(asset)[: len(ASSET_FIELDS)] == ASSET_FIELDS
    assert isinstance(asset["id"], str) and isinstance(asset["accuracy"], str | None)
    assert set(asset["geo"]) == {"points", "polygons", "linestrings"}
    for ring in asset["geo"]["polygons"][0]:
        for pair in ring:
            assert set(pair) == {"longitude", "latitude"}
            assert isinstance(pair["longitude"], str)
    for entry in asset["extraInfo"]:
        assert set(entry) == {"key", "value"}


def test_asset_lookup_single_query(api: httpx.Client) -> None:
    answer = api.get(
        "/api/json/asset-lookup",
        params={"query": "1 SMITH STREET BALLARAT CENTRAL 3350", "output": "asset", "maxRank": 3},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert list(body) == ["1"]
    entry = body["1"]
    assert set(entry) == {"reference", "query", "asset", "err"}
    assert entry["reference"] == 1 and entry["err"] is None
    assert entry["query"] == "1 SMITH STREET BALLARAT CENTRAL 3350"
    _check_asset(entry["asset"])
    assert entry["asset"]["name"] == "1 SMITH STREET BALLARAT CENTRAL 3350"
    by_id = api.get(
        "/api/json/asset-lookup",
        params={"query": "1 SMITH STREET BALLARAT CENTRAL 3350", "output": "id"},
    ).json()["1"]
    assert by_id["asset"] == entry["asset"]["id"]
    assert "query is required" in _error(api.get("/api/json/asset-lookup"), 400)
    assert "unknown lookup option" in _error(
        api.get("/api/json/asset-lookup", params={"query": "x", "colour": "red"}), 400
    )
    assert "mode" in _error(
        api.get("/api/json/asset-lookup", params={"query": "x", "mode": "telepathy"}), 400
    )


def test_asset_lookup_batch_as_the_spec_example(api: httpx.Client) -> None:
    asset = next(iter(api.get("/api/json/asset", params={"limit": 1}).json()["models"].values()))
    propnum = next(e["value"] for e in asset["extraInfo"] if e["key"] == "propnum")
    body = {
        "options": {"mode": "code", "codeField": "propnum", "useExternalLookups": False},
        "query": [
            {"code": "A1", "str": propnum},
            {"code": 7, "str": "NO SUCH CODE"},
        ],
    }
    result = api.post("/api/json/asset-lookup", json=body).json()
    assert set(result) == {"A1", "7"}
    assert result["A1"]["reference"] == "A1" and result["A1"]["asset"]["id"] == asset["id"]
    assert result["7"]["reference"] == 7 and result["7"]["asset"] is None
    assert isinstance(result["7"]["err"], str) and result["7"]["err"]
    no_codes = api.post(
        "/api/json/asset-lookup",
        json={"options": {"mode": "code"}, "query": [{"str": propnum}], "output": "id"},
    ).json()
    assert no_codes["1"]["asset"] == asset["id"]
    assert "unknown asset-lookup field" in _error(
        api.post("/api/json/asset-lookup", json={"query": [], "colour": 1}), 400
    )
    assert "must be unique" in _error(
        api.post(
            "/api/json/asset-lookup",
            json={"query": [{"code": 1, "str": "a"}, {"code": 1, "str": "b"}]},
        ),
        400,
    )


# --- imports --------------------------------------------------------------------------------


def _wait_for_job(api: httpx.Client, job_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        job = api.post("/api/json/import", json={"mode": "status", "id": job_id}).json()
        if job["status"] in ("COMPLETE", "FAILED") or time.monotonic() > deadline:
            return dict(job)
        time.sleep(0.05)


def test_import_schedule_runs_in_the_background_and_is_polled(
    world: World, api: httpx.Client
) -> None:
    csv = (
        "Reference,Address,Suburb,Property Number,Damage Level\n"
        "NEW-1,,,,Minor\nNEW-2,,,,Severe\nBAD-3,,,,Apocalyptic\n"
    )
    scheduled = api.post(
        "/api/json/import",
        json={
            "mode": "schedule",
            "importType": "item",
            "importRule": "damage-assessments",
            "data": csv,
            "dataType": "csv",
            "encoding": "plain",
            "eventId": world.event,
            "regionId": 1,
            "overwriteRule": "updateAndInsert",
            "message": "from the API test",
        },
    )
    assert scheduled.status_code == 200, scheduled.text
    job = scheduled.json()
    assert list(job)[: len(JOB_FIELDS)] == JOB_FIELDS
    assert job["code"] == 200 and isinstance(job["id"], int)
    assert job["status"] in ("NOT_STARTED", "RUNNING", "COMPLETE")
    done = _wait_for_job(api, job["id"])
    assert done["status"] == "COMPLETE" and done["userId"] == "api"
    assert done["summary"]["counts"]["inserted"] == 2
    assert done["summary"]["counts"]["rejected"] == 1
    assert "<" in done["result"]  # an HTML-formatted string
    every = api.post("/api/json/import", json={"mode": "status"}).json()
    assert isinstance(every, list) and job["id"] in [j["id"] for j in every]
    assert all(list(j)[: len(JOB_FIELDS)] == JOB_FIELDS for j in every)


def test_import_of_a_base64_zip_and_import_errors(world: World, api: httpx.Client) -> None:
    data = base64.b64encode((SAMPLE / "parcels.zip").read_bytes()).decode()
    job = api.post(
        "/api/json/import",
        json={
            "mode": "schedule",
            "importType": "asset",
            "importRule": "property-assets",
            "data": data,
            "dataType": "zip",
            "encoding": "base64",
            "dryRun": 1,
        },
    ).json()
    done = _wait_for_job(api, job["id"])
    assert done["status"] == "COMPLETE", done["result"]
    assert done["summary"]["counts"]["unchanged"] == 3000
    assert "needs duty" in _error(
        api.post(
            "/api/json/import",
            json={
                "mode": "schedule",
                "importType": "item",
                "importRule": "damage-assessments",
                "data": "Reference\nX\n",
                "eventId": world.other_event,
                "regionId": 1,
            },
        ),
        403,
    )
    assert "unknown import field" in _error(
        api.post(
            "/api/json/import",
            json={
                "mode": "schedule",
                "importType": "asset",
                "importRule": "assets-csv",
                "data": "a",
                "zap": 1,
            },
        ),
        400,
    )
    assert "not valid base64" in _error(
        api.post(
            "/api/json/import",
            json={
                "mode": "schedule",
                "importType": "asset",
                "importRule": "assets-csv",
                "data": "%%%",
                "encoding": "base64",
            },
        ),
        400,
    )
    assert "mode" in _error(api.post("/api/json/import", json={"mode": "cancel"}), 400)
    _error(api.post("/api/json/import", json={"mode": "status", "id": 999_999}), 404)
    _error(api.post("/api/json/import", json=[1, 2]), 400)


# --- register items -------------------------------------------------------------------------


def test_item_collection_filters_and_envelope(world: World, api: httpx.Client) -> None:
    register = {"registerId": "damage-assessment"}
    page = _envelope(api.get("/api/json/item", params={**register, "limit": 5, "offset": 2}))
    assert page["count"] == 5 and int(page["total"]) >= 40
    assert [int(k) for k in page["models"]] == sorted(world.item_ids)[2:7]
    # Only the events the user is on duty in: the other event's items are not listed.
    assert {m["eventId"] for m in page["models"].values()} == {world.event}
    by_type = _envelope(
        api.get(
            "/api/json/item",
            params={"type": "damage-assessment", "eventId": world.event, "limit": 1},
        )
    )
    assert by_type["total"] == page["total"]
    cql = _envelope(api.get("/api/json/item", params={**register, "cql": "damageLevel:Destroyed"}))
    assert cql["count"] > 0
    assert {m["damageLevel"] for m in cql["models"].values()} == {"Destroyed"}
    templates = _envelope(api.get("/api/json/item", params={**register, "isTemplate": "true"}))
    assert templates["count"] == 0
    future = _envelope(api.get("/api/json/item", params={**register, "since": "2100-01-01"}))
    assert future["total"] == "0"
    past = _envelope(
        api.get(
            "/api/json/item", params={**register, "until": "2000-01-01", "until_operator": "lt"}
        )
    )
    assert past["total"] == "0"
    newest = _envelope(
        api.get(
            "/api/json/item", params={**register, "order": "id", "direction": "desc", "limit": 1}
        )
    )
    assert int(next(iter(newest["models"]))) == max(
        int(k)
        for k in _envelope(api.get("/api/json/item", params={**register, "limit": 1000}))["models"]
    )
    assert "registerId" in _error(api.get("/api/json/item"), 400)
    assert "maximum of 1000" in _error(
        api.get("/api/json/item", params={**register, "limit": 5000}), 400
    )
    assert "unknown parameter 'colour'" in _error(
        api.get("/api/json/item", params={**register, "colour": "red"}), 400
    )
    assert "needs duty" in _error(
        api.get("/api/json/item", params={**register, "eventId": world.other_event}), 403
    )


def test_items_are_created_with_asset_resolution_and_media(world: World, api: httpx.Client) -> None:
    asset = api.get("/api/json/asset", params={"limit": 1, "offset": 10}).json()
    asset = next(iter(asset["models"].values()))
    propnum = next(e["value"] for e in asset["extraInfo"] if e["key"] == "propnum")
    photo = api.post(
        "/api/binary/file",
        data={"name": "front.jpg"},
        files={"file": ("front.jpg", b"\xff\xd8\xff fake jpeg", "image/jpeg")},
    ).json()
    created = api.post(
        "/api/json/item",
        json={
            "registerId": "damage-assessment",
            "eventId": world.event,
            "reference": "API-1",
            "damageLevel": "Moderate",
            "habitable": False,
            "occupants": 3,
            "asset_lookup": propnum,
            "asset_codefield": "propnum",
            "photos": [photo["id"]],
        },
    )
    assert created.status_code == 200, created.text
    item = created.json()
    assert item["assetId"] == asset["id"] and item["photos"] == [photo["id"]]
    assert (item["status"], item["isTemplate"], item["eventId"]) == (1, False, world.event)
    assert item["address"] is None and item["occupants"] == 3
    assert api.get(f"/api/json/item/id/{item['id']}").json() == item
    friendly = api.post(
        "/api/json/item",
        json={
            "type": "damage-assessment",
            "eventId": world.event,
            "reference": "API-2",
            "asset_friendly": asset["name"],
        },
    ).json()
    assert friendly["assetId"] == asset["id"]
    assert "matches no asset" in _error(
        api.post(
            "/api/json/item",
            json={
                "registerId": "damage-assessment",
                "eventId": world.event,
                "reference": "API-3",
                "asset_lookup": "000000000",
            },
        ),
        400,
    )
    assert "unknown item field(s) colour" in _error(
        api.post(
            "/api/json/item",
            json={"registerId": "damage-assessment", "eventId": world.event, "colour": "red"},
        ),
        400,
    )
    assert "do not exist" in _error(
        api.post(
            "/api/json/item",
            json={"registerId": "damage-assessment", "eventId": world.event, "photos": [987654]},
        ),
        400,
    )
    assert "is not one of" in _error(
        api.post(
            "/api/json/item",
            json={"registerId": "damage-assessment", "eventId": world.event, "damageLevel": "Huge"},
        ),
        400,
    )
    assert "needs duty" in _error(
        api.post(
            "/api/json/item", json={"registerId": "damage-assessment", "eventId": world.other_event}
        ),
        403,
    )
    audit = _envelope(api.get("/api/json/audit-log", params={"itemId": item["id"]}))
    (entry,) = audit["models"].values()
    assert (entry["action"], entry["userId"], entry["itemId"]) == ("create", "api", item["id"])


def test_items_put_nulls_missing_fields_and_patch_changes_only_some(
    world: World, api: httpx.Client
) -> None:
    item_id = world.item_ids[0]
    before = api.get(f"/api/json/item/id/{item_id}").json()
    patched = api.patch(f"/api/json/item/id/{item_id}", json={"notes": "checked", "status": 2})
    assert patched.status_code == 200, patched.text
    after = patched.json()
    assert (after["notes"], after["status"]) == ("checked", 2)
    unchanged = {k for k in before if k not in ("notes", "status", "dateModified")}
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
    put = api.put(
        f"/api/json/item/id/{item_id}",
        json={"eventId": world.event, "status": 0, "reference": before["reference"]},
    ).json()
    assert put["status"] == 0 and put["reference"] == before["reference"]
    assert put["damageLevel"] is None and put["notes"] is None and put["assetId"] is None
    assert "needs eventId and status" in _error(
        api.put(f"/api/json/item/id/{item_id}", json={"reference": "x"}), 400
    )
    entries = _envelope(api.get("/api/json/audit-log", params={"itemId": item_id}))
    actions = [e["action"] for e in entries["models"].values()]
    assert actions[-2:] == ["update", "retire"]  # the PUT set an inactive status
    # The same PUT again changes nothing: no entry.
    again = api.put(
        f"/api/json/item/id/{item_id}",
        json={"eventId": world.event, "status": 0, "reference": before["reference"]},
    )
    assert again.json() == put
    entries = _envelope(api.get("/api/json/audit-log", params={"itemId": item_id}))
    assert [e["action"] for e in entries["models"].values()] == actions
    assert _error(api.delete(f"/api/json/item/id/{item_id}"), 405)
    other_item = _envelope(
        api.get("/api/json/audit-log", params={"limit": 1000})
    )  # within duty: no entry of the other event
    assert world.other_event not in {e["eventId"] for e in other_item["models"].values()}


# --- cross-site isolation -------------------------------------------------------------------


def test_records_of_another_site_are_404(world: World, api: httpx.Client) -> None:
    for path in (
        f"/api/json/item/id/{world.beta_item}",
        f"/api/json/asset/id/{world.beta_asset}",
        f"/api/json/event/id/{world.beta_event}",
        "/api/json/audit-log/id/1",
    ):
        answer = api.get(path)
        if path.endswith("/audit-log/id/1"):
            # Entry 1 is alpha's first (the parcels import); it is not another site's.
            assert answer.status_code == 200
            continue
        _error(answer, 404)
    _error(api.patch(f"/api/json/item/id/{world.beta_item}", json={"notes": "x"}), 404)
    _error(api.patch(f"/api/json/event/id/{world.beta_event}", json={"status": 0}), 404)
    with world.client("beta", token=world.token("beta")) as beta:
        alpha_item = world.item_ids[1]
        _error(beta.get(f"/api/json/item/id/{alpha_item}"), 404)
        mine = _envelope(beta.get("/api/json/item", params={"registerId": "damage-assessment"}))
        assert next(int(k) for k in mine["models"]) == world.beta_item
        assert set(mine["models"]).isdisjoint({str(i) for i in world.item_ids})
        _error(beta.get("/api/json/audit-log/id/1"), 404)


# --- assets, events, audit logs, media --------------------------------------------------------


def test_assets_and_asset_types(api: httpx.Client) -> None:
    page = _envelope(api.get("/api/json/asset", params={"limit": 3, "type": "Property"}))
    assert page["count"] == 3 and page["total"] == "3000"
    one = next(iter(page["models"].values()))
    _check_asset(one)
    assert api.get(f"/api/json/asset/id/{one['id']}").json() == one
    near = _envelope(
        api.get(
            "/api/json/asset",
            params={
                "latitude": one["geo"]["polygons"][0][0][0]["latitude"],
                "longitude": one["geo"]["polygons"][0][0][0]["longitude"],
                "range": 5,
            },
        )
    )
    assert one["id"] in near["models"]
    impacted = _envelope(api.get("/api/json/asset", params={"isImpacted": "true", "limit": 1000}))
    assert all(m["isImpacted"] for m in impacted["models"].values())
    assert "latitude and longitude" in _error(
        api.get("/api/json/asset", params={"latitude": 1}), 400
    )
    types = api.get("/api/json/asset-type").json()
    assert {"name": "Property", "friendly": "Property"} in types or any(
        t["name"] == "Property" for t in types
    )
    _error(api.get("/api/json/asset/id/abc"), 400)


def test_events_fetch_search_and_update(world: World, api: httpx.Client) -> None:
    found = _envelope(api.get("/api/json/event", params={"fulltext": "flood", "active": "true"}))
    assert list(found["models"]) == [str(world.event)]
    assert _envelope(api.get("/api/json/event", params={"tag": "flood"}))["count"] == 1
    event = api.get(f"/api/json/event/id/{world.event}").json()
    assert event["name"] == "Flood 2026"
    closed = api.patch(
        f"/api/json/event/id/{world.event}", json={"description": "Recovery under way"}
    ).json()
    assert closed["description"] == "Recovery under way" and closed["status"] == 1
    assert "needs name" in _error(
        api.put(f"/api/json/event/id/{world.event}", json={"status": 1}), 400
    )
    assert "needs duty" in _error(
        api.patch(f"/api/json/event/id/{world.other_event}", json={"status": 0}), 403
    )
    assert "unknown event field" in _error(
        api.patch(f"/api/json/event/id/{world.event}", json={"colour": "red"}), 400
    )


def test_media_upload_and_download(world: World, api: httpx.Client) -> None:
    content = bytes(range(256)) * 40
    stored = api.post(
        "/api/binary/file",
        data={"name": "scan.pdf"},
        files={"file": ("ignored.bin", content, "application/pdf")},
    )
    assert stored.status_code == 200, stored.text
    meta = stored.json()
    assert meta["name"] == "scan.pdf" and meta["size"] == len(content)
    assert isinstance(meta["id"], int)
    download = api.get(f"/api/binary/file/id/{meta['id']}")
    assert download.status_code == 200 and download.content == content
    assert download.headers["content-type"] == "application/pdf"
    with world.client("beta", token=world.token("beta")) as beta:
        _error(beta.get(f"/api/binary/file/id/{meta['id']}"), 404)
    assert "multipart" in _error(api.post("/api/binary/file", json={"name": "x"}), 400)
    assert "'file'" in _error(
        api.post("/api/binary/file", data={"name": "x"}, files={"other": ("a", b"a")}), 400
    )


# --- limits and robustness ------------------------------------------------------------------


def test_a_body_over_10_mb_is_413_before_it_is_read(world: World, api: httpx.Client) -> None:
    big = b"x" * (10 * 1024 * 1024 + 1)
    assert "limit" in _error(api.post("/api/json/import", content=big), 413)

    def chunks() -> Iterator[bytes]:
        # No Content-Length: the body is counted as it streams in.
        for _ in range(11):
            yield b" " * (1024 * 1024)

    answer = api.post("/api/json/import", content=chunks())
    _error(answer, 413)
    # The server still answers afterwards.
    assert api.get("/api/json/asset-type").status_code == 200


def test_malformed_json_and_wrong_shapes_are_400(api: httpx.Client) -> None:
    assert "not valid JSON" in _error(api.post("/api/json/item", content=b'{"a": '), 400)
    assert "empty" in _error(api.post("/api/json/item", content=b""), 400)
    assert "JSON object" in _error(api.post("/api/json/item", json=["not", "an", "object"]), 400)
    assert "UTF-8" in _error(api.post("/api/json/item", content=b'{"a": "\xff"}'), 400)
    assert "more than once" in _error(api.get("/api/json/asset?limit=1&limit=2"), 400)
    _error(api.get("/api/json/no-such-command"), 404)


def test_a_burst_of_concurrent_requests(world: World, api: httpx.Client) -> None:
    token = api.headers["Authorization"].split()[1]
    expected = api.get(
        "/api/json/item", params={"registerId": "damage-assessment", "limit": 10}
    ).json()

    def one(n: int) -> tuple[int, Any]:
        with world.client(token=token) as client:
            if n % 2:
                answer = client.get(
                    "/api/json/item", params={"registerId": "damage-assessment", "limit": 10}
                )
                return answer.status_code, answer.json()
            answer = client.post(
                "/api/json/asset-lookup",
                json={
                    "options": {"mode": "soundex", "maxRank": 3},
                    "query": [{"code": n, "str": "1 SMITH STREET BALLARAT CENTRAL"}],
                },
            )
            return answer.status_code, answer.json()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(96)))
    assert {status for status, _ in results} == {200}
    for n, (_, body) in enumerate(results):
        if n % 2:
            assert body == expected
        else:
            assert body[str(n)]["asset"]["name"] == "1 SMITH STREET BALLARAT CENTRAL 3350"


def test_rate_limit_answers_429_with_retry_after(world: World) -> None:
    frozen = now_ms()  # the limits never depend on when the test runs
    settings = ServerSettings(
        rate_limit="3/minute", auth_rate_limit="2/minute", clock=lambda: frozen
    )
    with (
        running(create_app(world.path, settings=settings)) as url,
        httpx.Client(base_url=url, headers={"X-Site": "alpha"}) as client,
    ):
        body = {**DEVICE, "username": "api", "password": PASSWORD}
        token = client.post("/api/json/auth", json=body).json()["token"]
        client.post("/api/json/auth", json=body)
        answer = client.post("/api/json/auth", json=body)
        _error(answer, 429)
        statuses = [
            client.get("/api/json/asset-type", headers={"Authorization": token}).status_code
            for _ in range(4)
        ]
        assert statuses == [200, 200, 200, 429]
        limited = client.get("/api/json/asset-type", headers={"Authorization": token})
        assert limited.headers["Retry-After"] == "20"  # 3/minute: one more every 20 s
        assert limited.json() == {"status": 429, "message": "rate limit reached; retry after 20 s"}


# --- the OpenAPI document -------------------------------------------------------------------


def test_openapi_document_lists_exactly_the_routes(world: World, api: httpx.Client) -> None:
    served = api.get("/api/json/openapi.json").json()
    document = openapi_document()
    assert served == document and document["openapi"].startswith("3.")
    app = create_app(world.path)
    routes = {
        (route.path, method.lower())
        for route in app.routes
        for method in (route.methods or ())  # type: ignore[attr-defined]
        if method != "HEAD"
    }
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert routes == documented
    json.dumps(document)  # plain JSON


REPORT_FIELDS = [
    "code",
    "id",
    "status",
    "dateRun",
    "dateCompleted",
    "userId",
    "result",
    "timeTaken",
    "rowCount",
    "params",
]


def _wait_for_report(api: httpx.Client, instance: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        status = api.post("/api/json/report", json={"mode": "status", "id": int(instance)}).json()
        if status["status"] in ("COMPLETED", "FAILED") or time.monotonic() > deadline:
            return dict(status)
        time.sleep(0.05)


def test_reports_run_in_the_background_and_are_fetched(world: World, api: httpx.Client) -> None:
    import jsonschema

    queued = api.post(
        "/api/json/report", json={"mode": "run", "reportId": 1, "params": {"eventId": world.event}}
    )
    assert queued.status_code == 200, queued.text
    run = queued.json()
    assert set(run) == {"code", "result", "id"} and run["code"] == 200
    assert isinstance(run["id"], str) and run["id"].isdigit()
    done = _wait_for_report(api, run["id"])
    assert list(done)[: len(REPORT_FIELDS)] == REPORT_FIELDS
    assert done["status"] == "COMPLETED" and done["userId"] == "api"
    assert done["rowCount"].isdigit() and int(done["rowCount"]) >= 40
    fetched = api.post(
        "/api/json/report",
        json={"mode": "fetch", "reportInstanceId": int(run["id"]), "format": "json"},
    ).json()
    contents = fetched["contents"]
    assert set(contents) >= {"$schema", "name", "meta", "filter", "spec", "data"}
    assert contents["$schema"] == f"{world.url}/api/json/schemas/report-contents.v1.json"
    schema = api.get("/api/json/schemas/report-contents.v1.json")
    assert schema.status_code == 200
    jsonschema.validate(contents, schema.json())
    assert len(contents["data"]) == int(done["rowCount"])
    csv = api.post(
        "/api/json/report",
        json={"mode": "fetch", "reportInstanceId": int(run["id"]), "format": "csv"},
    ).json()
    assert csv["format"] == "csv"
    assert base64.b64decode(csv["contents"]).decode("utf-8-sig").count("\n") >= 40
    assert "needs duty" in _error(
        api.post(
            "/api/json/report",
            json={"mode": "run", "reportId": 1, "params": {"eventId": world.other_event}},
        ),
        403,
    )
    assert "mode" in _error(api.post("/api/json/report", json={"mode": "cancel"}), 400)
    _error(api.post("/api/json/report", json={"mode": "status", "id": 987654}), 404)
    with world.client("beta", token=world.token("beta")) as beta:
        _error(beta.post("/api/json/report", json={"mode": "status", "id": int(run["id"])}), 404)


# --- the toolkit's own client against this server -------------------------------------------


def test_the_remote_client_reads_what_the_local_site_reads(world: World) -> None:
    from toolkit.remote import RemoteSite
    from toolkit.remote.client import Credentials, Profile

    profile = Profile(world.url, "alpha", Credentials(api_key=world.api_key))
    params = {"registerId": "damage-assessment", "eventId": str(world.event), "limit": "7"}
    with RemoteSite(profile) as remote, LocalSite(world.path, "alpha") as local:
        assert remote.list_items(params) == local.list_items(params)
        assert remote.get_item(world.item_ids[3]) == local.get_item(world.item_ids[3])
        assert remote.list_assets({"limit": "3"}) == local.list_assets({"limit": "3"})
        assert remote.get_event(world.event) == local.get_event(world.event)
        assert remote.asset_types() == local.asset_types()
        queries = [{"code": "a", "str": "1 SMITH STREET BALLARAT CENTRAL"}]
        options = {"mode": "soundex", "maxRank": 3}
        assert remote.asset_lookup(queries, options, "id") == local.asset_lookup(
            queries, options, "id"
        )
        uploaded = remote.upload_media("note.txt", b"remote bytes", "text/plain")
        assert remote.download_media(uploaded["id"]) == local.download_media(uploaded["id"])
