# ruff: noqa: F811 (the fixtures world and api are test_server's, imported by name)
"""Bad input over real HTTP: every request here once answered 500 or was silently
misread; each must be a 400 (or 401 for a token) naming the parameter, or be honoured.

The server and its sites are ``test_server``'s (a module-scoped world of its own here).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import jwt
import pytest
import shapely
from test_server import World, _envelope, _error, api, world  # noqa: F401

from toolkit.server.auth import TokenService, server_secret

BIG = str(2**63)  # one past SQLite's largest integer
REGISTER = {"registerId": "damage-assessment"}


def _item(world: World, **fields: Any) -> dict[str, Any]:
    return {**REGISTER, "eventId": world.event, "reference": "INPUT-1", **fields}


# --- integers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        f"/api/json/item/id/{BIG}",
        f"/api/json/event/id/{BIG}",
        f"/api/json/asset/id/{BIG}",
        f"/api/json/audit-log/id/{BIG}",
        f"/api/binary/file/id/{BIG}",
        "/api/json/item/id/%C2%B2",  # '²' passes str.isdigit()
        "/api/json/event/id/%D9%A3",  # Arabic-Indic three
    ],
)
def test_path_ids_beyond_64_bits_or_not_ascii_digits_are_400(api: httpx.Client, path: str) -> None:
    message = _error(api.get(path), 400)
    assert message.startswith("id ")
    assert "whole number" in message or "out of range" in message


@pytest.mark.parametrize(
    ("path", "params", "name"),
    [
        ("/api/json/item", {**REGISTER, "offset": BIG}, "offset"),
        ("/api/json/item", {**REGISTER, "limit": "٣"}, "limit"),  # int() reads it as 3
        ("/api/json/item", {**REGISTER, "eventId": BIG}, "eventId"),
        ("/api/json/item", {**REGISTER, "eventId": "²"}, "eventId"),
        ("/api/json/event", {"offset": BIG}, "offset"),
        ("/api/json/asset", {"id": BIG}, "id"),
        ("/api/json/audit-log", {"itemId": BIG}, "itemId"),
        ("/api/json/audit-log", {"itemId": "²"}, "itemId"),
        ("/api/json/audit-log", {"eventId": BIG}, "eventId"),
        ("/api/json/event", {"since": "9" * 30}, "since"),
        ("/api/json/asset", {"latitude": "-37.8", "longitude": "145", "range": "inf"}, "range"),
    ],
)
def test_parameters_beyond_64_bits_or_not_numbers_are_400(
    api: httpx.Client, path: str, params: dict[str, str], name: str
) -> None:
    assert _error(api.get(path, params=params), 400).startswith(f"{name} ")


def test_body_ids_beyond_64_bits_are_400(world: World, api: httpx.Client) -> None:
    status = api.post("/api/json/import", json={"mode": "status", "id": 2**63})
    assert "$.id" in _error(status, 400)
    assert "id '²'" in _error(api.post("/api/json/import", json={"mode": "status", "id": "²"}), 400)
    report = api.post("/api/json/report", json={"mode": "status", "id": BIG})
    assert "id" in _error(report, 400)
    item = api.post("/api/json/item", json=_item(world, status=2**63))
    assert "$.status" in _error(item, 400) and "out of range" in _error(item, 400)
    patch = api.patch(f"/api/json/item/id/{world.item_ids[0]}", json={"assetId": 2**64})
    assert "$.assetId" in _error(patch, 400)


# --- JSON bodies ----------------------------------------------------------------------------


def test_json_nested_too_deep_is_400(world: World, api: httpx.Client) -> None:
    deep = b"[" * 1000 + b"]" * 1000
    assert "nested more than 64 deep" in _error(api.post("/api/json/item", content=deep), 400)
    body = {**_item(world), "notes": json.loads("[" * 70 + "]" * 70)}
    message = _error(api.post("/api/json/item", json=body), 400)
    assert "nested more than 64 deep at $.notes" in message


@pytest.mark.parametrize(
    "number",
    [b"1" * 5000, b"1." + b"1" * 5000, b"NaN", b"Infinity", b"-Infinity", b"1e999"],
)
def test_json_numbers_too_long_or_not_finite_are_400(
    world: World, api: httpx.Client, number: bytes
) -> None:
    body = b'{"registerId": "damage-assessment", "eventId": %d, "occupants": %s}' % (
        world.event,
        number,
    )
    message = _error(api.post("/api/json/item", content=body), 400)
    assert "$.occupants" in message and len(message) < 300


def test_a_lone_surrogate_is_400_and_nothing_is_stored(world: World, api: httpx.Client) -> None:
    before = api.get(f"/api/json/event/id/{world.event}").json()
    for body in (b'{"description": "\\ud800"}', b'{"name": "ok", "\\udfff": 1}'):
        answer = api.patch(f"/api/json/event/id/{world.event}", content=body)
        assert "lone surrogate" in _error(answer, 400)
    after = api.get(f"/api/json/event/id/{world.event}")
    assert after.status_code == 200 and after.json() == before


# --- CQL ------------------------------------------------------------------------------------


def test_cql_with_too_many_terms_or_too_deep_is_400(api: httpx.Client) -> None:
    for query in (" OR ".join(["flood"] * 2000), "(" * 3000 + "a" + ")" * 3000, "NOT " * 500 + "a"):
        message = _error(api.get("/api/json/item", params={**REGISTER, "cql": query}), 400)
        assert message.startswith("cql") and len(message) < 300
    # The bounds leave room for real queries: 200 terms, 32 levels.
    wide = " OR ".join(f"reference:R{i}" for i in range(200))
    _envelope(api.get("/api/json/item", params={**REGISTER, "cql": wide}))
    deep = "(" * 32 + "is:active" + ")" * 32
    _envelope(api.get("/api/json/item", params={**REGISTER, "cql": deep}))


# --- tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [{"sub": "abc"}, {"sub": "²"}, {"sub": "1.5"}, {"sub": str(2**64)}, {"key": [1]}, {"exp": "x"}],
)
def test_a_signed_token_with_malformed_claims_is_401(world: World, change: dict[str, Any]) -> None:
    claims = jwt.decode(world.token(), options={"verify_signature": False}) | change
    # The server's key for the site, from its key file beside the site file.
    secret = TokenService(lambda: 0.0, server_secret=server_secret(world.path)).secret("alpha")
    token = jwt.encode(claims, secret, algorithm="HS256")
    with world.client(token=token) as client:
        assert _error(client.get("/api/json/asset-type"), 401)


# --- events ---------------------------------------------------------------------------------


def test_event_writes_are_typed_and_required_fields_kept(world: World, api: httpx.Client) -> None:
    path = f"/api/json/event/id/{world.event}"
    assert "name cannot be null" in _error(api.patch(path, json={"name": None}), 400)
    assert "status cannot be null" in _error(api.patch(path, json={"status": None}), 400)
    assert "isGlobal 'abc' must be true or false" in _error(
        api.patch(path, json={"isGlobal": "abc"}), 400
    )
    assert "isTemplate 1" in _error(api.patch(path, json={"isTemplate": 1}), 400)
    assert "tags 'flood'" in _error(api.patch(path, json={"tags": "flood"}), 400)
    assert "name 5 must be text" in _error(api.patch(path, json={"name": 5}), 400)
    event = api.get(path).json()
    assert event["name"] == "Flood 2026" and event["isGlobal"] is False
    assert api.patch(path, json={"isGlobal": True}).json()["isGlobal"] is True
    assert api.patch(path, json={"isGlobal": False}).json()["isGlobal"] is False


# --- register field types -------------------------------------------------------------------


def test_item_writes_check_register_field_types(world: World, api: httpx.Client) -> None:
    bad = {
        "inspectionDate": "31/31/2026",
        "habitable": "abc",
        "occupants": 2.5,
        "damageLevel": "Catastrophic",
        "notes": 5,
    }
    for name, value in bad.items():
        message = _error(api.post("/api/json/item", json=_item(world, **{name: value})), 400)
        assert message.startswith(f"{name} ")
    item_id = world.item_ids[1]
    answer = api.patch(f"/api/json/item/id/{item_id}", json={"inspectionDate": "2026-02-30"})
    assert "inspectionDate '2026-02-30' is not a date" in _error(answer, 400)
    # What an import accepts, REST accepts, and stores the same way.
    created = api.post(
        "/api/json/item",
        json=_item(
            world,
            inspectionDate="14/02/2026",
            habitable="yes",
            occupants="3",
            damageLevel="moderate",
        ),
    )
    assert created.status_code == 200, created.text
    item = created.json()
    assert item["inspectionDate"] == "2026-02-14" and item["habitable"] is True
    assert item["occupants"] == 3 and item["damageLevel"] == "Moderate"


@pytest.mark.parametrize("event", [None, "abc", "²", True])
def test_item_writes_without_a_whole_event_id_are_400(
    world: World, api: httpx.Client, event: Any
) -> None:
    body = {**REGISTER, "reference": "X"} | ({} if event is None else {"eventId": event})
    assert "eventId" in _error(api.post("/api/json/item", json=body), 400)
    schedule = {
        "mode": "schedule",
        "importType": "item",
        "importRule": "damage-assessments",
        "data": "Reference\nX\n",
        "dataType": "csv",
    } | ({} if event is None else {"eventId": event})
    assert "eventId" in _error(api.post("/api/json/import", json=schedule), 400)


# --- collections ----------------------------------------------------------------------------


def test_audit_log_orders_by_date_modified_which_is_date_created(api: httpx.Client) -> None:
    for direction in ("asc", "desc"):
        params = {"order": "dateModified", "direction": direction, "limit": "50"}
        by_modified = _envelope(api.get("/api/json/audit-log", params=params))["models"]
        params["order"] = "dateCreated"
        by_created = _envelope(api.get("/api/json/audit-log", params=params))["models"]
        assert list(by_modified) == list(by_created) and by_modified


@pytest.mark.parametrize("path", ["/api/json/asset", "/api/json/event", "/api/json/audit-log"])
def test_since_and_until_are_honoured(api: httpx.Client, path: str) -> None:
    everything = int(_envelope(api.get(path))["total"])
    assert everything > 0
    assert _envelope(api.get(path, params={"since": "2999-01-01"}))["total"] == "0"
    assert _envelope(api.get(path, params={"until": "2000-01-01"}))["total"] == "0"
    assert _envelope(api.get(path, params={"since": "2000-01-01"}))["total"] == str(everything)
    assert _envelope(api.get(path, params={"until": "2000-01-01", "until_operator": "gt"}))[
        "total"
    ] == str(everything)
    assert "since_operator" in _error(
        api.get(path, params={"since": "2000-01-01", "since_operator": "after"}), 400
    )


# --- asset lookup ---------------------------------------------------------------------------


def test_asset_lookup_in_the_spec_batch_geo_form(api: httpx.Client) -> None:
    asset = next(iter(api.get("/api/json/asset", params={"limit": 1}).json()["models"].values()))
    ring = [(float(p["longitude"]), float(p["latitude"])) for p in asset["geo"]["polygons"][0][0]]
    inside = shapely.Polygon(ring).representative_point()
    body = {
        "options": {"mode": "geo", "useExternalLookups": False},
        "query": [
            {"code": "P1", "geo": {"points": [{"longitude": inside.x, "latitude": inside.y}]}},
            {"code": "P2", "geo": {"points": [{"longitude": "0.5", "latitude": "0.5"}]}},
        ],
        "output": "id",
    }
    result = api.post("/api/json/asset-lookup", json=body)
    assert result.status_code == 200, result.text
    answers = result.json()
    assert answers["P1"]["asset"] == asset["id"] and answers["P2"]["asset"] is None
    body["query"] = [{"code": "P3", "geo": {"points": [{"longitude": 500, "latitude": 0}]}}]
    assert "query[0].geo.points[0]" in _error(api.post("/api/json/asset-lookup", json=body), 400)


@pytest.mark.parametrize("code", [{"a": 1}, [1], True])
def test_asset_lookup_codes_are_text_or_numbers(api: httpx.Client, code: Any) -> None:
    body = {"options": {"mode": "code"}, "query": [{"code": code, "str": "x"}]}
    assert "query[0].code" in _error(api.post("/api/json/asset-lookup", json=body), 400)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("maxRank", "²"),
        ("geocoderOptions", "[" * 1000 + "]" * 1000),
        ("geocoderOptions", '{"a": NaN}'),
    ],
)
def test_asset_lookup_options_are_parsed_as_strictly_as_bodies(
    api: httpx.Client, option: str, value: str
) -> None:
    answer = api.get("/api/json/asset-lookup", params={"query": "x", option: value})
    assert f"option {option}" in _error(answer, 400)
