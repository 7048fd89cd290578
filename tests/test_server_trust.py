"""`toolkit serve` trusts no client (issue 10), over real HTTP on 127.0.0.1.

One site file with two sites: ``A`` holds the sample parcels, an ordinary API
user, an account administrator, a TOTP user and bystanders; ``B`` has an API
user and no assets yet, and imports the same parcels (their ids collide with
A's). Each test also says what the old code did wrong.
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import stat
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyotp
import pytest
from click.testing import CliRunner
from serving import running

from toolkit.cli import cli
from toolkit.errors import OptionError
from toolkit.importing.pipeline import ImportRequest
from toolkit.remote import RemoteSite
from toolkit.remote.client import ApiClient, Credentials, Profile
from toolkit.remote.push import Pusher
from toolkit.server import ServerSettings, create_app
from toolkit.server.auth import SERVER_SECRET_ENV, key_file
from toolkit.site import LocalSite
from toolkit.store import Database
from toolkit.store.schema import MIGRATIONS

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
RULES = Path(__file__).resolve().parent / "fixtures_rules"
PASSWORD = "correct horse battery"
DEVICE = {"uuid": "https://ci.example.org", "platform": "python", "version": "0.1", "name": "ci"}
USERS_CSV = "Username,First Name,Last Name,Email,Position\n"


@dataclass
class Trust:
    url: str
    path: Path
    folder: Path
    totp_secret: str
    client_totp_secret: str

    def client(self, site: str = "A", token: str | None = None) -> httpx.Client:
        headers = {"X-Site": site, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def token(self, site: str = "A", username: str = "api", **extra: str) -> str:
        body = {**DEVICE, "username": username, "password": PASSWORD, **extra}
        with self.client(site) as client:
            answer = client.post("/api/json/auth", json=body)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["token"])


def _account(site: LocalSite, name: str, **flags: Any) -> None:
    options = {"positions": ["API User"], "approved": True, "terms_accepted": True} | flags
    site.add_user(name, email=f"{name}@example.org", **options)
    site.set_password(name, PASSWORD)


@pytest.fixture(scope="module")
def trust(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trust]:
    folder = tmp_path_factory.mktemp("trust")
    path = folder / "site.sqlite"
    with LocalSite(path, "A") as a:
        job = a.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        assert job["status"] == "COMPLETE", job["result"]
        event = a.create_event({"name": "Flood"})["id"]
        items = folder / "items.csv"
        lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
        items.write_text("\n".join(lines[:21]) + "\n", encoding="utf-8")
        job = a.run_import(
            ImportRequest("item", "damage-assessments", items, event_id=event, region_id=1)
        )
        assert job["status"] == "COMPLETE", job["result"]
        for name in ("api", "boss", "victim", "bystander", "mfa", "mfa2"):
            _account(a, name, admin=name == "boss")
        totp = a.register_totp("mfa")["secret"]
        totp2 = a.register_totp("mfa2")["secret"]
    with LocalSite(path, "B") as b:
        _account(b, "api")
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None, rule_paths=(RULES,))
    with running(create_app(path, settings=settings)) as url:
        yield Trust(url, path, folder, totp, totp2)


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["status"] == status
    return str(body["message"])


def _schedule(client: httpx.Client, **fields: Any) -> httpx.Response:
    return client.post("/api/json/import", json={"mode": "schedule", **fields})


def _wait(client: httpx.Client, job_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = client.post("/api/json/import", json={"mode": "status", "id": job_id}).json()
        if job["status"] in ("COMPLETE", "FAILED"):
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


# --- 1. rules are names of the server's catalogue, never paths -------------------------


def test_an_import_rule_path_is_never_run_and_paths_are_not_told(trust: Trust) -> None:
    marker = trust.folder / "ran.txt"
    evil = trust.folder / "evil.py"
    evil.write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('pwned')\n"
        "from toolkit.importing.rules import FieldRule, ImportRule\n"
        "RULE = ImportRule(name='evil', import_type='asset', description='x',\n"
        "    fields=(FieldRule('name', 'Name', required=True),))\n",
        encoding="utf-8",
    )
    missing = trust.folder / "nowhere" / "evil.py"
    data = "Name\nx\n"
    with trust.client(token=trust.token()) as client:
        given = _error(_schedule(client, importType="asset", importRule=str(evil), data=data), 400)
        absent = _error(
            _schedule(client, importType="asset", importRule=str(missing), data=data), 400
        )
        jobs = client.post("/api/json/import", json={"mode": "status"}).json()
    assert not marker.exists()  # the old code executed the file
    # Same answer whether the path exists or not: the known names, nothing of the disk.
    assert given.replace(str(evil), "X") == absent.replace(str(missing), "X")
    assert "is not one of:" in given and "property-assets" in given and "test-users" in given
    assert "no such" not in absent and "cannot load" not in given
    assert not any(job["importRule"] in (str(evil), "evil") for job in jobs)


def test_the_operators_rule_folder_is_in_the_catalogue_by_name(trust: Trust) -> None:
    csv = "Name,Code\nPool,P1\n"
    with trust.client(token=trust.token()) as client:
        # facilities.py of the operator's --rules folder: usable by its name, not its path.
        job = _schedule(client, importType="asset", importRule="test-facilities", data=csv)
        by_path = _schedule(
            client, importType="asset", importRule=str(RULES / "facilities.py"), data=csv
        )
    assert job.status_code == 200, job.text
    assert "is not one of:" in _error(by_path, 400)


def test_a_push_with_a_local_rule_file_sends_the_rules_name(trust: Trust, tmp_path: Path) -> None:
    source = tmp_path / "facilities.csv"
    source.write_text("Name,Code\nHall,H1\nDepot,D1\n", encoding="utf-8")
    profile = Profile(trust.url, "A", Credentials(username="api", password=PASSWORD))
    with RemoteSite(profile) as remote:
        pusher = Pusher(remote, rule_paths=(RULES,), poll_interval_s=0.05)
        result = pusher.push(ImportRequest("asset", str(RULES / "facilities.py"), source))
    assert [c["status"] for c in result.chunks] == ["COMPLETE"], result.chunks
    assert result.offline["importRule"] == "test-facilities"


def test_the_embedded_site_cli_still_takes_a_rule_file(tmp_path: Path) -> None:
    with LocalSite(tmp_path / "s.sqlite", "x") as site:
        source = tmp_path / "f.csv"
        source.write_text("Name,Code\nPool,P1\n", encoding="utf-8")
        job = site.run_import(ImportRequest("asset", str(RULES / "facilities.py"), source))
    assert job["status"] == "COMPLETE", job["result"]


# --- 2. accounts are changed by account administrators only -----------------------------


def _users(path: Path, site: str = "A") -> dict[str, dict[str, Any]]:
    with LocalSite(path, site, create=False) as local:
        return {u["username"]: u for u in local.list_users()}


def test_a_user_import_by_an_ordinary_api_user_is_403(trust: Trust) -> None:
    csv = USERS_CSV + "victim,Vic,Tim,attacker@evil.example,Administrator;API User\n"
    with trust.client(token=trust.token()) as client:
        message = _error(_schedule(client, importType="user", importRule="users", data=csv), 403)
        retire = _error(
            _schedule(
                client,
                importType="user",
                importRule="users",
                data=USERS_CSV + "newcomer,N,C,n@example.org,API User\n",
                overwriteRule="deleteAndInsert",
            ),
            403,
        )
    assert "account administrator" in message and "'api'" in message and "--admin" in message
    assert "account administrator" in retire
    victim = _users(trust.path)["victim"]
    assert victim["email"] == "victim@example.org" and victim["positions"] == ["API User"]
    assert all(u["active"] for u in _users(trust.path).values())


def test_delete_and_insert_by_an_admin_keeps_the_admin_and_is_audited(trust: Trust) -> None:
    csv = USERS_CSV + "fresh1,F,One,f1@example.org,Field Inspector\n"
    with trust.client(token=trust.token(username="boss")) as client:
        answer = _schedule(
            client,
            importType="user",
            importRule="users",
            data=csv,
            overwriteRule="deleteAndInsert",
            message="yearly roll-over",
        )
        assert answer.status_code == 200, answer.text
        job = _wait(client, answer.json()["id"])
    assert job["status"] == "COMPLETE", job["result"]
    users = _users(trust.path)
    assert users["boss"]["active"] and users["fresh1"]["active"]
    assert not users["victim"]["active"] and not users["bystander"]["active"]
    assert any("boss" in note for note in job["summary"]["notes"])
    trust.token(username="boss")  # the admin can still log in
    with LocalSite(trust.path, "A", create=False) as a:
        entries = [
            e
            for e in a.list_audit_logs({"importJobId": str(job["id"]), "limit": "1000"})[
                "models"
            ].values()
            if e["recordType"] == "user"
        ]
        # Put the bystanders back for the other tests (the operator may, at the CLI).
        for name in ("victim", "bystander", "api", "mfa", "mfa2"):
            a.update_user(name, status=1)
    assert {e["action"] for e in entries} == {"retire", "create"}
    assert {e["userId"] for e in entries} == {"boss"}
    assert {e["message"] for e in entries} == {"yearly roll-over"}
    assert job["userId"] == "boss"


def test_the_admin_flag_is_the_operators_and_shown(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    runner = CliRunner()
    added = runner.invoke(cli, ["--store", store, "--json", "user", "add", "ops"])
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["admin"] is False
    made = runner.invoke(cli, ["--store", store, "--json", "user", "update", "ops", "--admin"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["admin"] is True


# --- 4. each site owns its asset ids ----------------------------------------------------


def test_site_b_imports_parcels_whose_ids_site_a_uses(trust: Trust) -> None:
    data = base64.b64encode((SAMPLE / "parcels.zip").read_bytes()).decode("ascii")
    with trust.client("B", token=trust.token("B")) as client:
        answer = _schedule(
            client,
            importType="asset",
            importRule="property-assets",
            data=data,
            encoding="base64",
            dataType="zip",
        )
        assert answer.status_code == 200, answer.text
        job = _wait(client, answer.json()["id"])
        assert job["status"] == "COMPLETE", job["result"]  # old: FAILED naming A's ids
        assert job["summary"]["counts"]["inserted"] == 3000
        b_asset = client.get("/api/json/asset/id/100001").json()
        b_impacted = client.get("/api/json/asset", params={"isImpacted": "true"}).json()
    with trust.client("A", token=trust.token("A")) as client:
        a_asset = client.get("/api/json/asset/id/100001").json()
        a_impacted = client.get("/api/json/asset", params={"isImpacted": "true"}).json()
    assert str(b_asset["id"]) == str(a_asset["id"]) == "100001"
    assert b_asset["name"] == a_asset["name"]
    # A's items make A's parcels impacted, never B's parcels of the same id.
    assert a_impacted["count"] > 0 and b_impacted["count"] == 0


def test_the_demo_runs_on_a_second_site_of_the_same_file(tmp_path: Path) -> None:
    store = str(tmp_path / "demo.sqlite")
    for site in ("default", "B"):
        args = ["--store", store, "--site", site, "--json", "demo", "--sample-dir", str(SAMPLE)]
        result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / site)])
        assert result.exit_code == 0, result.output
        jobs = json.loads(result.stdout)["jobs"]
        assert [j["status"] for j in jobs] == ["COMPLETE"] * 4, [j["result"] for j in jobs]


def test_a_file_of_the_first_schema_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    conn.executescript(
        "PRAGMA user_version = 1;"
        "INSERT INTO site (id, name, date_created) VALUES (1, 'A', 0), (2, 'B', 0);"
        "INSERT INTO asset (id, site_id, type, name, date_created, date_modified) "
        "VALUES (7, 1, 'Parcel', 'Seven', 0, 0), (8, 2, 'Parcel', 'Eight', 0, 0);"
        "INSERT INTO item (id, site_id, register_id, asset_id, date_created, date_modified) "
        "VALUES (1, 1, 'r', 7, 0, 0);"
        "INSERT INTO user (id, site_id, username, positions, approved, terms_accepted, "
        "date_created, date_modified) VALUES (1, 1, 'old', '[\"API User\"]', 1, 1, 0, 0);"
        "INSERT INTO site_secret VALUES (1, 'token-signing-key', 'in-the-file', 0);"
    )
    conn.commit()
    conn.close()
    with LocalSite(path, "A", create=False) as a:
        assert a.get_asset(7)["name"] == "Seven" and a.get_asset(7)["isImpacted"] is True
        assert a.list_users()[0]["admin"] is False
        assert a.db.connection.execute("SELECT count(*) FROM site_secret").fetchone()[0] == 0
    with LocalSite(path, "B", create=False) as b:
        # B may now take id 7 too; A's asset 7 is untouched.
        source = tmp_path / "a.csv"
        source.write_text("id,code,name,type\n7,C7,B seven,Parcel\n", encoding="utf-8")
        job = b.run_import(
            ImportRequest("asset", "assets-csv", source, overwrite_rule="insertOnly")
        )
        assert job["status"] == "COMPLETE", job["result"]
        assert b.get_asset(7)["name"] == "B seven" and b.get_asset(7)["isImpacted"] is False
        # An id taken in B itself is refused, naming B's id only.
        source.write_text("id,code,name,type\n8,C8,Other,Parcel\n", encoding="utf-8")
        job = b.run_import(
            ImportRequest("asset", "assets-csv", source, overwrite_rule="insertOnly")
        )
        assert job["status"] == "FAILED" and "already used: 8;" in job["result"]
    with LocalSite(path, "A", create=False) as a:
        assert a.get_asset(7)["name"] == "Seven"
    assert Database(path).connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


# --- 5. a TOTP code logs in once --------------------------------------------------------


def test_a_totp_code_cannot_be_replayed(trust: Trust) -> None:
    totp = pyotp.TOTP(trust.totp_secret)
    code = totp.now()
    first = trust.client().post(
        "/api/json/auth", json={**DEVICE, "username": "mfa", "password": PASSWORD, "mfaCode": code}
    )
    again = trust.client().post(
        "/api/json/auth", json={**DEVICE, "username": "mfa", "password": PASSWORD, "mfaCode": code}
    )
    assert first.status_code == 200, first.text
    assert _error(again, 401) == "invalid credentials"


def test_the_client_waits_for_a_fresh_code_to_log_in_again(trust: Trust) -> None:
    credentials = Credentials(
        username="mfa2", password=PASSWORD, totp_secret=trust.client_totp_secret
    )
    with ApiClient(Profile(trust.url, "A", credentials), max_attempts=1) as client:
        assert client.request("GET", "/api/json/asset-type").status_code == 200
        client.auth.token = None  # as after a server restart: log in again at once
        started = time.monotonic()
        assert client.request("GET", "/api/json/asset-type").status_code == 200
    assert time.monotonic() - started <= 31


# --- low: the signing key is not in the site file ---------------------------------------


def _copy_site(trust: Trust, folder: Path) -> Path:
    folder.mkdir()
    copy = folder / "copy.sqlite"
    with Database(trust.path) as db:  # a consistent copy of the WAL-mode file
        db.connection.execute("VACUUM INTO ?", (str(copy),))
    return copy


def test_a_copied_site_file_cannot_mint_tokens(trust: Trust, tmp_path: Path) -> None:
    token = trust.token()
    made = key_file(trust.path)
    assert made.exists() and stat.S_IMODE(made.stat().st_mode) == 0o600
    copy = _copy_site(trust, tmp_path / "elsewhere")
    with Database(copy) as db:
        assert db.connection.execute("SELECT count(*) FROM site_secret").fetchone()[0] == 0
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
    with running(create_app(copy, settings=settings)) as url:
        headers = {"X-Site": "A", "Authorization": f"Bearer {token}"}
        answer = httpx.get(f"{url}/api/json/asset", headers=headers, timeout=30)
    assert answer.status_code == 401, answer.text  # the old code signed with the file's key


def test_servers_sharing_the_environment_secret_share_tokens(
    trust: Trust, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copy_site(trust, tmp_path / "shared")
    monkeypatch.setenv(SERVER_SECRET_ENV, "s" * 40)
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
    first_copy = tmp_path / "second.sqlite"
    shutil.copy(copy, first_copy)
    with running(create_app(copy, settings=settings)) as one:
        body = {**DEVICE, "username": "api", "password": PASSWORD}
        token = httpx.post(f"{one}/api/json/auth", json=body, headers={"X-Site": "A"}).json()
    with running(create_app(first_copy, settings=settings)) as two:
        headers = {"X-Site": "A", "Authorization": f"Bearer {token['token']}"}
        answer = httpx.get(f"{two}/api/json/asset", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert not key_file(copy).exists() and not key_file(first_copy).exists()
    monkeypatch.setenv(SERVER_SECRET_ENV, "short")
    with pytest.raises(OptionError, match="too short") as refused:
        create_app(copy, settings=settings)
    assert "short" not in str(refused.value).replace("too short", "")


def test_two_processes_opening_an_old_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # as every site file is
    conn.executescript(MIGRATIONS[0] + "; PRAGMA user_version = 1;")
    conn.close()
    first = sqlite3.connect(path, isolation_level=None)
    first.execute("BEGIN IMMEDIATE")  # a second opener holds the lock, then migrates
    try:
        with ThreadPoolExecutor(1) as pool:
            opening = pool.submit(Database, path)
            time.sleep(0.3)
            for statement in MIGRATIONS[1].split(";"):
                lines = [x for x in statement.splitlines() if not x.strip().startswith("--")]
                if "\n".join(lines).strip():
                    first.execute("\n".join(lines))
            first.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
            first.execute("COMMIT")
            opened = opening.result(timeout=30)
        assert opened.connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        opened.close()
    finally:
        first.close()
