"""Who may call what: every route and RPC mode × every kind of caller, from one table.

The rows are keyed by (method, path, mode); the routes and modes are read from the app
at test time, and a route or mode without a row fails ``test_every_route_and_mode_has_a_row``,
so a new endpoint cannot be added without deciding who may call it. Each row builds a
request that is allowed for a caller who may make it (so the status tells the decision,
not a validation error) and gives the status expected for each caller:

- ``none``: no token; ``other``: a valid token of site beta sent to alpha;
- ``offduty``: an approved API user on duty nowhere; ``duty``: on duty in the event the
  request names; ``admin``: the ``Administrator`` position, on duty in that event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, get_args

import httpx
import pytest
from server_world import DEVICE, PASSWORD, SAMPLE, ServedWorld, served_world

from toolkit.importing.rules import ImportType
from toolkit.server import create_app
from toolkit.server.routes_rpc import IMPORT_MODES, REPORT_MODES
from toolkit.server.routing import PathRoute

CALLERS = ("none", "other", "offduty", "duty", "admin")

Request = Callable[[ServedWorld, httpx.Client], dict[str, Any]]


@dataclass(frozen=True)
class Row:
    request: Request
    none: int
    other: int
    offduty: int
    duty: int
    admin: int
    # Callers whose expected status needs a fix not yet on main: caller -> branch.
    pending: dict[str, str] = field(default_factory=dict)

    def expected(self, caller: str) -> int:
        return int(getattr(self, caller))


def _get(path: str, **params: Any) -> Request:
    return lambda _w, _c: {"method": "GET", "url": path, "params": params}


def _post(path: str, body: Any) -> Request:
    return lambda _w, _c: {"method": "POST", "url": path, "json": body}


def _items_csv(lines: int = 3) -> str:
    text = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    return "\n".join(text[:lines]) + "\n"


def _assets_csv() -> str:
    return "\n".join((SAMPLE / "assets.csv").read_text(encoding="utf-8").splitlines()[:3]) + "\n"


def _users_csv() -> str:
    return "\n".join((SAMPLE / "users.csv").read_text(encoding="utf-8").splitlines()[:2]) + "\n"


def _schedule(import_type: str) -> Request:
    def build(w: ServedWorld, _c: httpx.Client) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": "schedule", "importType": import_type, "dryRun": 1}
        if import_type == "item":
            body |= {"importRule": "damage-assessments", "data": _items_csv()}
            body |= {"eventId": w.event, "regionId": 1, "dataType": "csv"}
        elif import_type == "asset":
            body |= {"importRule": "assets-csv", "data": _assets_csv(), "dataType": "csv"}
        else:
            body |= {"importRule": "users", "data": _users_csv(), "dataType": "csv"}
        return {"method": "POST", "url": "/api/json/import", "json": body}

    return build


def _item_record(w: ServedWorld, client: httpx.Client) -> dict[str, Any]:
    """The item as an allowed caller reads it, to send back whole (PUT)."""
    headers = {"Authorization": f"Bearer {w.tokens['admin']}"}
    answer = client.get(f"/api/json/item/id/{w.item}", headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _event_audit_entry(w: ServedWorld, client: httpx.Client) -> int:
    headers = {"Authorization": f"Bearer {w.tokens['admin']}"}
    answer = client.get("/api/json/audit-log", params={"itemId": w.item}, headers=headers)
    assert answer.status_code == 200, answer.text
    return int(next(iter(answer.json()["models"])))


def _upload(_w: ServedWorld, _c: httpx.Client) -> dict[str, Any]:
    files = {"file": ("note.txt", b"hello", "text/plain")}
    return {"method": "POST", "url": "/api/binary/file", "files": files, "data": {"name": "n"}}


OPEN = (200, 200, 200, 200, 200)  # no token needed
SIGNED_IN = (401, 401, 200, 200, 200)  # any approved API user of the site
ON_DUTY = (401, 401, 403, 200, 200)  # register data of an event: duty in it
ADMIN_ONLY = (401, 401, 403, 403, 200)
# A report instance is its runner's (``duty`` ran it): another user's is not found, not 403.
OWN_INSTANCE = (401, 401, 404, 200, 404)

MATRIX: dict[tuple[str, str, str | None], Row] = {
    ("GET", "/api/json/ping", None): Row(_get("/api/json/ping"), *OPEN),
    ("POST", "/api/json/auth", None): Row(
        _post("/api/json/auth", {**DEVICE, "username": "duty", "password": PASSWORD}), *OPEN
    ),
    ("GET", "/api/json/openapi.json", None): Row(_get("/api/json/openapi.json"), *OPEN),
    ("GET", "/api/json/schemas/report-contents.v1.json", None): Row(
        _get("/api/json/schemas/report-contents.v1.json"), *OPEN
    ),
    ("GET", "/api/json/asset-lookup", None): Row(
        _get("/api/json/asset-lookup", query="1 Main Street"), *SIGNED_IN
    ),
    ("POST", "/api/json/asset-lookup", None): Row(
        _post("/api/json/asset-lookup", {"query": [{"code": "a", "str": "1 Main Street"}]}),
        *SIGNED_IN,
    ),
    ("POST", "/api/json/import", "schedule item"): Row(_schedule("item"), *ON_DUTY),
    ("POST", "/api/json/import", "schedule asset"): Row(_schedule("asset"), *SIGNED_IN),
    ("POST", "/api/json/import", "schedule user"): Row(_schedule("user"), *ADMIN_ONLY),
    ("POST", "/api/json/import", "status"): Row(
        lambda w, _c: {
            "method": "POST",
            "url": "/api/json/import",
            "json": {"mode": "status", "id": w.item_job},
        },
        *ON_DUTY,
    ),
    ("POST", "/api/json/report", "run"): Row(
        lambda w, _c: {
            "method": "POST",
            "url": "/api/json/report",
            "json": {"mode": "run", "reportId": 1, "params": {"eventId": w.event}},
        },
        *ON_DUTY,
    ),
    ("POST", "/api/json/report", "status"): Row(
        lambda w, _c: {
            "method": "POST",
            "url": "/api/json/report",
            "json": {"mode": "status", "id": int(w.report)},
        },
        *OWN_INSTANCE,
    ),
    ("POST", "/api/json/report", "fetch"): Row(
        lambda w, _c: {
            "method": "POST",
            "url": "/api/json/report",
            "json": {"mode": "fetch", "reportInstanceId": int(w.report), "format": "csv"},
        },
        *OWN_INSTANCE,
    ),
    ("GET", "/api/json/item", None): Row(
        lambda w, _c: {
            "method": "GET",
            "url": "/api/json/item",
            "params": {"registerId": "damage-assessment", "eventId": w.event},
        },
        *ON_DUTY,
    ),
    ("POST", "/api/json/item", None): Row(
        lambda w, _c: {
            "method": "POST",
            "url": "/api/json/item",
            "json": {"registerId": "damage-assessment", "eventId": w.event, "notes": "matrix"},
        },
        *ON_DUTY,
    ),
    ("GET", "/api/json/item/id/{id}", None): Row(
        lambda w, _c: {"method": "GET", "url": f"/api/json/item/id/{w.item}"}, *ON_DUTY
    ),
    ("PUT", "/api/json/item/id/{id}", None): Row(
        lambda w, c: {
            "method": "PUT",
            "url": f"/api/json/item/id/{w.item}",
            "json": _item_record(w, c),
        },
        *ON_DUTY,
    ),
    ("PATCH", "/api/json/item/id/{id}", None): Row(
        lambda w, _c: {
            "method": "PATCH",
            "url": f"/api/json/item/id/{w.item}",
            "json": {"notes": "patched"},
        },
        *ON_DUTY,
    ),
    ("GET", "/api/json/register", None): Row(_get("/api/json/register"), *SIGNED_IN),
    ("GET", "/api/json/asset", None): Row(_get("/api/json/asset", limit=2), *SIGNED_IN),
    ("GET", "/api/json/asset/id/{id}", None): Row(
        lambda w, _c: {"method": "GET", "url": f"/api/json/asset/id/{w.asset}"}, *SIGNED_IN
    ),
    ("GET", "/api/json/asset-type", None): Row(_get("/api/json/asset-type"), *SIGNED_IN),
    ("GET", "/api/json/event", None): Row(_get("/api/json/event"), *SIGNED_IN),
    ("GET", "/api/json/event/id/{id}", None): Row(
        lambda w, _c: {"method": "GET", "url": f"/api/json/event/id/{w.event}"}, *SIGNED_IN
    ),
    ("PUT", "/api/json/event/id/{id}", None): Row(
        lambda w, _c: {
            "method": "PUT",
            "url": f"/api/json/event/id/{w.event}",
            "json": {"name": "Flood 2026", "status": 1, "tags": ["flood"]},
        },
        *ON_DUTY,
    ),
    ("PATCH", "/api/json/event/id/{id}", None): Row(
        lambda w, _c: {
            "method": "PATCH",
            "url": f"/api/json/event/id/{w.event}",
            "json": {"description": "matrix"},
        },
        *ON_DUTY,
    ),
    ("GET", "/api/json/audit-log", None): Row(
        lambda w, _c: {
            "method": "GET",
            "url": "/api/json/audit-log",
            "params": {"eventId": w.event},
        },
        *ON_DUTY,
    ),
    ("GET", "/api/json/audit-log/id/{id}", None): Row(
        lambda w, c: {"method": "GET", "url": f"/api/json/audit-log/id/{_event_audit_entry(w, c)}"},
        *ON_DUTY,
    ),
    ("POST", "/api/binary/file", None): Row(_upload, *SIGNED_IN),
    ("GET", "/api/binary/file/id/{id}", None): Row(
        lambda w, _c: {"method": "GET", "url": f"/api/binary/file/id/{w.media}"}, *SIGNED_IN
    ),
}


def served_operations() -> set[tuple[str, str, str | None]]:
    """Every (method, path, mode) the app serves; OPTIONS is the same everywhere (routing tests)."""
    app = create_app(_empty_site())
    keys: set[tuple[str, str, str | None]] = set()
    for route in app.routes:
        assert isinstance(route, PathRoute), route
        for method in set(route.handlers) - {"HEAD"}:
            keys.add((method, route.path, None))
    modes = {
        "/api/json/import": [
            *(f"schedule {t}" for t in get_args(ImportType)),
            *(m for m in IMPORT_MODES if m != "schedule"),
        ],
        "/api/json/report": list(REPORT_MODES),
    }
    for path, names in modes.items():
        assert ("POST", path, None) in keys, path
        keys.remove(("POST", path, None))
        keys |= {("POST", path, name) for name in names}
    return keys


_EMPTY: list[Any] = []


def _empty_site() -> Any:
    """A site file to build an app over (the app opens it once at start)."""
    if not _EMPTY:
        import tempfile
        from pathlib import Path

        from toolkit.site import LocalSite

        path = Path(tempfile.mkdtemp()) / "site.sqlite"
        LocalSite(path, "alpha").close()
        _EMPTY.append(path)
    return _EMPTY[0]


def test_every_route_and_mode_has_a_row() -> None:
    served = served_operations()
    assert sorted(served - set(MATRIX), key=str) == [], "routes or modes without a row"
    assert sorted(set(MATRIX) - served, key=str) == [], "rows for routes or modes not served"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedWorld]:
    with served_world(tmp_path_factory.mktemp("authz")) as served:
        yield served


def _cases() -> Iterator[Any]:
    for key, row in MATRIX.items():
        for caller in CALLERS:
            marks = []
            if caller in row.pending:
                marks.append(
                    pytest.mark.xfail(strict=True, reason=f"fixed on branch {row.pending[caller]}")
                )
            label = f"{key[0]} {key[1]}{' ' + key[2] if key[2] else ''} as {caller}"
            yield pytest.param(key, caller, marks=marks, id=label)


@pytest.mark.parametrize(("key", "caller"), list(_cases()))
def test_authorisation(world: ServedWorld, key: tuple[str, str, str | None], caller: str) -> None:
    row = MATRIX[key]
    headers = {"X-Site": "alpha"}
    token = {"none": None, "other": world.tokens["beta"]}.get(caller, world.tokens.get(caller))
    with httpx.Client(base_url=world.url, headers=headers, timeout=60) as client:
        request = row.request(world, client)
        if token:
            request.setdefault("headers", {})["Authorization"] = f"Bearer {token}"
        answer = client.request(**request)
    assert answer.status_code == row.expected(caller), answer.text[:500]
    if answer.status_code >= 400:
        assert answer.json()["status"] == answer.status_code
