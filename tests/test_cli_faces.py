"""Every command on both faces: the embedded site (``--store``) and ``--url`` to a server
this module starts, each site file set up the same way.

Each command either behaves the same on both (same exit status, same JSON, times aside),
or is an operation of the embedded site, which the server face refuses with exit status 1
and an ``Error:`` saying the API has no route for it. A command added without a case here
fails :func:`test_every_command_has_a_case_on_both_faces`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from click.testing import CliRunner, Result
from serving import free_port, running

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.server.app import create_app
from toolkit.server.auth import SERVER_SECRET_ENV
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
GAZETTEER = Path(__file__).resolve().parent / "fixtures_geocoding" / "openaddresses_au_vic.csv"
SITE = "faces"
USER = "officer"
PASSWORD = "a long enough password"
# Values that differ by when or where a command ran, not by what it did: times, and who
# ran it (the account of this process on the embedded site, the API user over --url).
VOLATILE = {
    "dateCreated",
    "dateModified",
    "dateCompleted",
    "dateRun",
    "dateRevoked",
    "timestamp",
    "timeTaken",
    "startDate",
    "timings",
    "userId",
}


@dataclass
class Faces:
    root: Path
    local: str | Path  # the embedded site's file (or PostgreSQL URL)
    scratch: str | Path  # a third store, set up the same: embedded-only commands change it
    url: str  # the server over the other file
    key: str  # the API user's key on the server
    event: int


def _set_up(path: str | Path, items: Path) -> tuple[int, str]:
    """Parcels, an event, an API user on duty, five items, one finished report, a file."""
    with LocalSite(path, SITE, user_id=USER) as site:
        site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        event = int(site.create_event({"name": "Flood", "tags": ["flood"]})["id"])
        site.add_user(USER, positions=["API User"], approved=True, terms_accepted=True)
        site.put_on_duty(USER, event, "Recovery Officer")
        key = str(site.issue_api_key(USER)["key"])
        request = ImportRequest("item", "damage-assessments", items, event_id=event, region_id=1)
        assert site.run_import(request)["status"] == "COMPLETE"
        site.report_run({"reportId": 2, "params": {"eventId": event}})
        site.upload_media("note.txt", b"faces", "text/plain")
        return event, key


def _first_rows(source: Path, target: Path, rows: int) -> Path:
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    target.write_text("".join(lines[: rows + 1]), encoding="utf-8")
    return target


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def faces(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Faces]:
    """Three sites set up alike, in SQLite files or PostgreSQL databases: the contract
    holds on both stores."""
    root = tmp_path_factory.mktemp("faces")
    stores: list[str | Path] = []
    for side in ("local", "remote", "scratch"):
        (root / side).mkdir()
        if request.param == "sqlite":
            stores.append(root / side / "site.sqlite")
        else:
            stores.append(request.getfixturevalue("pg_cluster").new_database())
    keys = []
    for side, store in zip(("local", "remote", "scratch"), stores, strict=True):
        items = _first_rows(SAMPLE / "damage_assessments.csv", root / side / "items.csv", 5)
        keys.append(_set_up(store, items))
    (event, _), (remote_event, key), _ = keys
    assert event == remote_event
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
    # A PostgreSQL store has no folder for the server's key file: the secret comes from
    # the environment (for the server here and the one `serve` starts).
    saved = os.environ.get(SERVER_SECRET_ENV)
    os.environ[SERVER_SECRET_ENV] = "faces-" + "s" * 40
    try:
        with running(create_app(stores[1], settings=settings)) as url:
            yield Faces(root, stores[0], stores[2], url, key, event)
    finally:
        if saved is None:
            os.environ.pop(SERVER_SECRET_ENV, None)
        else:
            os.environ[SERVER_SECRET_ENV] = saved


@dataclass(frozen=True)
class Case:
    """A command line (``{event}``, ``{dir}`` and ``{file}`` filled per face) and what
    both faces must show."""

    args: tuple[str, ...]
    embedded_only: bool = False
    # What of the JSON answer must agree, when not all of it (e.g. a push and a local job
    # have different shapes but the same counts).
    compare: Callable[[Any], Any] = field(default=lambda document: document)
    stdin: str | None = None
    own_store: bool = False  # the embedded face works on a file of its own (demo)


def _counts(document: Any) -> Any:
    """An import's counts: a local job's summary, or a push's total."""
    return document["counts"] if "counts" in document else document["summary"]["counts"]


def _instance(document: Any) -> Any:
    return {k: document[k] for k in ("id", "status", "reportId", "rowCount", "params")}


def _written(document: Any) -> Any:
    """A download's answer, with the file it wrote by name and content (each face writes
    into a folder of its own)."""
    path = Path(document["file"])
    return {**document, "file": path.name, "content": path.read_bytes()}


def _files(document: Any) -> Any:
    return sorted(Path(path).name for path in document["files"].values())


CASES: dict[str, Case] = {
    "init": Case(("init",), embedded_only=True),
    "demo": Case(("demo", "--out", "{dir}/demo"), embedded_only=True, own_store=True),
    "serve": Case(("serve",), embedded_only=True),  # the embedded face: a real process
    "inspect": Case(("inspect", "{sample}/users.csv")),
    "sample generate": Case(
        ("sample", "generate", "--assets", "20", "--items", "10", "--out", "{dir}/sample"),
        compare=_files,
    ),
    "lookup": Case(("lookup", "55 SMITH ROAD BUNINYONG 3357", "55 SMITH ROAD")),
    "import": Case(
        (
            *("import", "{file}", "--type", "item", "--rule", "damage-assessments"),
            *("--event-id", "{event}", "--region-id", "1", "--poll-interval", "0.05"),
        ),
        compare=_counts,
    ),
    "import-status": Case(("import-status", "1")),
    "rules list": Case(("rules", "list")),
    "rules show": Case(("rules", "show", "damage-assessments")),
    "ping": Case(("ping",)),
    "event create": Case(("event", "create", "Storm"), embedded_only=True),
    "event list": Case(("event", "list", "--fulltext", "flood")),
    "event get": Case(("event", "get", "{event}")),
    "event update": Case(("event", "update", "{event}", "--description", "North bank")),
    "register list": Case(("register", "list")),
    "item list": Case(("item", "list", "--register", "damage-assessment", "--limit", "3")),
    "item get": Case(("item", "get", "3")),
    "item add": Case(
        (
            *("item", "add", "--register", "damage-assessment", "--event-id", "{event}"),
            *("--field", "damageLevel=Severe"),
        )
    ),
    "item update": Case(("item", "update", "3", "--status", "2")),
    "item retire": Case(("item", "retire", "4")),
    "media upload": Case(("media", "upload", "{sample}/users.csv")),
    "media get": Case(("media", "get", "1", "-o", "{dir}/note.txt"), compare=_written),
    "asset list": Case(("asset", "list", "--impacted", "--limit", "3")),
    "asset get": Case(("asset", "get", "102559")),
    "asset types": Case(("asset", "types")),
    "audit-log list": Case(("audit-log", "list", "--limit", "2")),
    "audit-log get": Case(("audit-log", "get", "1")),
    "report list": Case(("report", "list"), embedded_only=True),
    "report run": Case(
        ("report", "run", "2", "--param", "eventId={event}", "--wait"), compare=_instance
    ),
    "report status": Case(("report", "status", "1"), compare=_instance),
    "report fetch": Case(("report", "fetch", "1", "--format", "json"), compare=_instance),
    "report work": Case(("report", "work", "1"), embedded_only=True),
    "user add": Case(("user", "add", "clerk"), embedded_only=True),
    "user update": Case(("user", "update", USER, "--approved"), embedded_only=True),
    "user password": Case(("user", "password", USER), embedded_only=True, stdin=PASSWORD),
    "user totp": Case(("user", "totp", USER), embedded_only=True),
    "user list": Case(("user", "list"), embedded_only=True),
    "api-key issue": Case(("api-key", "issue", USER), embedded_only=True),
    "api-key revoke": Case(("api-key", "revoke", "1"), embedded_only=True),
    "api-key list": Case(("api-key", "list"), embedded_only=True),
    "duty add": Case(
        ("duty", "add", USER, "--event-id", "{event}", "--position", "Assessor"),
        embedded_only=True,
    ),
    "duty remove": Case(("duty", "remove", USER, "--event-id", "{event}"), embedded_only=True),
    "gazetteer load": Case(("gazetteer", "load", str(GAZETTEER)), embedded_only=True),
    "gazetteer info": Case(("gazetteer", "info"), embedded_only=True),
    "gazetteer remove": Case(("gazetteer", "remove"), embedded_only=True),
    "site copy": Case(("site", "copy", "{store}", "{dir}/copy.sqlite"), embedded_only=True),
}


def _commands(command: click.Command, path: str = "") -> Iterator[str]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, f"{path} {name}".strip())
    else:
        yield path


def test_every_command_has_a_case_on_both_faces() -> None:
    commands = set(_commands(cli))
    assert sorted(commands - CASES.keys()) == [], "commands without a case on both faces"
    assert sorted(CASES.keys() - commands) == [], "cases of no command"


def _stable(value: Any) -> Any:
    """``value`` without what differs by when or by whom it was run."""
    if isinstance(value, dict):
        return {k: "<volatile>" if k in VOLATILE else _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _run(faces: Faces, case: Case, face: str) -> Result:
    folder = faces.root / f"run-{face}-{time.monotonic_ns()}"
    folder.mkdir()
    items = _first_rows(SAMPLE / "damage_assessments.csv", folder / "items.csv", 5)
    fill = {
        "event": faces.event,
        "dir": folder,
        "file": items,
        "sample": SAMPLE,
        "store": faces.scratch,
    }
    args = [a.format(**fill) for a in ("--json", *case.args)]
    env = {"TOOLKIT_MIN_POLL_INTERVAL": "0.05"}
    if face == "local":
        # What only the embedded face does must not make the two sites differ.
        store = faces.scratch if case.embedded_only else faces.local
        store = folder / "own.sqlite" if case.own_store else store
        where = ["--store", str(store), "--site", SITE]
    else:
        where = ["--url", faces.url, "--site", SITE]
        env["TOOLKIT_API_KEY"] = faces.key
    return CliRunner(env=env).invoke(cli, [*where, *args], input=case.stdin)


def _document(result: Result) -> Any:
    return json.loads(result.stdout) if result.stdout.strip() else None


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_command_behaves_the_same_on_both_faces_or_says_why_not(
    faces: Faces, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[command]
    # No toolkit.sqlite of the folder the tests run in may stand in for a site.
    monkeypatch.chdir(faces.root)
    if command == "serve":
        _serves_the_embedded_file(faces)
    else:
        local = _run(faces, case, "local")
        assert local.exit_code in (0, 3), (command, local.stderr)  # 3: lookup, some unmatched
    remote = _run(faces, case, "remote")
    if case.embedded_only:
        assert remote.exit_code == 1, (command, remote.stderr)
        assert remote.stdout == ""
        assert remote.stderr.startswith("Error: "), remote.stderr
        # "... is an operation of the embedded site; the API has no route for it ..." or
        # "the service's API has no way to ...": either names the API's limit.
        assert "API has no route" in remote.stderr or "API has no way" in remote.stderr
        assert "unexpected internal error" not in remote.stderr
        return
    assert remote.exit_code == local.exit_code, (command, local.stderr, remote.stderr)
    assert _stable(case.compare(_document(local))) == _stable(case.compare(_document(remote)))


def _serves_the_embedded_file(faces: Faces) -> None:
    """``toolkit --store FILE serve`` serves the file: its ping answers, then it stops."""
    port = free_port()
    command = ["--store", str(faces.scratch), "serve", "-q", "--port", str(port)]
    log = faces.root / f"serve-{port}.log"
    with log.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "toolkit", *command], stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/json/ping", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert answer.status_code == 200 and answer.json()["status"] == 200
    finally:
        server.terminate()
        server.wait(10)
