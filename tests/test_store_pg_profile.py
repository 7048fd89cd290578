"""A config profile naming a PostgreSQL store (issue 16): ``toolkit --profile P ...`` works
on it with the password the profile holds, and that password is on no command line, in no
output or error, and in no report worker's arguments or environment. A real server: the
session's cluster, with a role that must give its password (scram-sha-256)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from pg_cluster import Cluster

from toolkit.model.location import PostgresURL
from toolkit.remote.profiles import store_profile
from toolkit.reports import DetachedProcessExecutor
from toolkit.reports.waiting import wait_for_report
from toolkit.site import LocalSite

RULES = Path(__file__).resolve().parent / "fixtures_rules"
PASSWORD = "c0rrect horse-battery staple"
WRONG = "Tr0ub4dor and 3"


def _config(path: Path, store: str, password: str | None, *, mode: int = 0o600) -> Path:
    lines = ["[profiles.shared]", f"store = {json.dumps(store)}", 'site = "north"']
    if password is not None:
        lines.append(f"password = {json.dumps(password)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.fixture
def officer(
    pg_cluster: Cluster, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The URL (no password) by which a role that must give its password owns a new
    database; the profile ``shared`` of TOOLKIT_CONFIG names it with that password, and
    libpq has no other source of one."""
    url = pg_cluster.password_login(pg_url, f"officer_{uuid.uuid4().hex[:12]}", PASSWORD)
    monkeypatch.setenv("TOOLKIT_CONFIG", str(_config(tmp_path / "config.toml", url, PASSWORD)))
    for name in ("PGPASSWORD", "PGPASSFILE", "PGSERVICE", "TOOLKIT_STORE", "TOOLKIT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))  # not ~/.pgpass either
    return url


def _toolkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolkit", *args]
    assert not any(PASSWORD in a for a in command)
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=cwd)


def _no_secret(result: subprocess.CompletedProcess[str], *secrets: str) -> None:
    for secret in (PASSWORD, WRONG, *secrets):
        assert secret not in result.stdout and secret not in result.stderr


def test_a_profile_names_the_store_and_its_password(officer: str, tmp_path: Path) -> None:
    # Without the profile the role cannot log in: the server asks for a password.
    refused = _toolkit("--store", officer, "event", "list", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: postgresql://officer_")
    assert "no password supplied" in refused.stderr
    made = _toolkit("--profile", "shared", "--json", "init", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["sites"] == ["north"]  # the profile's site
    event = _toolkit("--profile", "shared", "--json", "event", "create", "Flood", cwd=tmp_path)
    assert event.returncode == 0, event.stderr
    source = tmp_path / "obs.csv"
    source.write_text("reference,level\nR1,High\nR2,Low\n", encoding="utf-8")
    imported = _toolkit(
        "--profile", "shared", "--rules", str(RULES), "--json", "import", str(source),
        "--type", "item", "--rule", "test-observations", "--event-id", "1",
        "--region-id", "1", cwd=tmp_path,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["summary"]["counts"]["inserted"] == 2
    for result in (refused, made, event, imported):
        _no_secret(result)
    # Written as the officer, into the profile's store and site.
    role = officer.split("//", 1)[1].split("@", 1)[0]
    superuser = officer.replace(f"{role}@", "toolkit@")
    with psycopg.connect(superuser) as conn:
        rows = conn.execute(
            "SELECT s.name, i.fields ->> 'reference', c.relowner::regrole::text "
            "FROM item i JOIN site s ON s.id = i.site_id "
            "CROSS JOIN pg_class c WHERE c.relname = 'item' ORDER BY 2"
        ).fetchall()
    assert rows == [("north", "R1", role), ("north", "R2", role)]


def test_a_wrong_password_is_a_clear_error_without_it(officer: str, tmp_path: Path) -> None:
    _config(Path(os.environ["TOOLKIT_CONFIG"]), officer, WRONG)
    wrong = _toolkit("--profile", "shared", "ping", cwd=tmp_path)
    assert wrong.returncode == 1
    assert "Error: postgresql://officer_" in wrong.stderr
    assert "password authentication failed for user" in wrong.stderr
    # A password written into the URL itself: used, and shown nowhere.
    role = officer.split("//", 1)[1].split("@", 1)[0]
    for password, code in ((WRONG, 1), (PASSWORD, 0)):
        in_url = officer.replace(f"{role}@", f"{role}:{password.replace(' ', '%20')}@")
        _config(Path(os.environ["TOOLKIT_CONFIG"]), in_url, None)
        result = _toolkit("--profile", "shared", "--json", "init", cwd=tmp_path)
        assert result.returncode == code, result.stderr
        _no_secret(result, password.replace(" ", "%20"))
        if code == 0:
            assert json.loads(result.stdout)["store"] == officer
        ping = _toolkit("--profile", "shared", "ping", cwd=tmp_path)
        assert ping.returncode == code
        _no_secret(ping, password.replace(" ", "%20"))
    _no_secret(wrong)


def test_a_password_in_a_file_others_may_read_is_refused(officer: str, tmp_path: Path) -> None:
    _config(Path(os.environ["TOOLKIT_CONFIG"]), officer, PASSWORD, mode=0o644)
    result = _toolkit("--profile", "shared", "init", cwd=tmp_path)
    assert result.returncode == 1
    assert "holds a store's password and other users may read it; chmod 600" in result.stderr
    _no_secret(result)
    both = Path(os.environ["TOOLKIT_CONFIG"])
    both.write_text(both.read_text() + 'base_url = "http://127.0.0.1:1"\n', encoding="utf-8")
    both.chmod(0o600)
    mixed = _toolkit("--profile", "shared", "ping", cwd=tmp_path)
    assert mixed.returncode == 1
    assert "names a server (base_url) and a store; a profile names one of them" in mixed.stderr
    _no_secret(mixed)


def test_a_report_worker_reads_the_profile_not_the_password(officer: str, tmp_path: Path) -> None:
    # The worker is started through a script that writes down its arguments and
    # environment, then runs the real interpreter.
    seen = tmp_path / "seen.txt"
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\nenv >> {seen}\nexec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    python.chmod(0o700)
    profile = store_profile("shared")
    assert profile is not None and isinstance(profile.store, PostgresURL)
    assert str(profile.store) == officer  # the password is beside the text, not in it
    with LocalSite(profile.store, "north", create=True) as site:
        event = site.create_event({"name": "Flood"})["id"]
        site.report_executor = DetachedProcessExecutor(python=str(python))
        queued = site.report_run({"reportId": 1, "params": {"eventId": event}})
        done = wait_for_report(lambda: site.report_status(queued["id"]), timeout_s=120)
    assert done["status"] == "COMPLETED", done
    text = seen.read_text(encoding="utf-8")
    assert PASSWORD not in text and "PGPASSWORD" not in text
    assert "TOOLKIT_PROFILE=shared\n" in text and f"TOOLKIT_STORE={officer}\n" in text


def test_serve_runs_on_the_profiles_store(officer: str, tmp_path: Path) -> None:
    import httpx
    from serving import free_port

    made = _toolkit("--profile", "shared", "init", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    # This time the password is written into the profile's URL: serve's note shows the
    # URL without it.
    role = officer.split("//", 1)[1].split("@", 1)[0]
    in_url = officer.replace(f"{role}@", f"{role}:{PASSWORD.replace(' ', '%20')}@")
    _config(Path(os.environ["TOOLKIT_CONFIG"]), in_url, None)
    port = free_port()
    environment = {**os.environ, "TOOLKIT_SERVER_SECRET": "s" * 40}
    command = [sys.executable, "-m", "toolkit", "--profile", "shared", "serve",
               "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        answer = None
        for _ in range(300):
            try:
                # The server answers from the store: an unknown user of the site is 401.
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/api/json/auth",
                    headers={"X-Site": "north"},
                    json={
                        "uuid": "u",
                        "platform": "p",
                        "version": "1",
                        "name": "n",
                        "username": "nobody",
                        "password": "nothing",
                    },
                )
                break
            except httpx.TransportError:
                assert server.poll() is None, server.communicate()[1]
                time.sleep(0.1)
        assert answer is not None and answer.status_code == 401, answer
    finally:
        server.terminate()
        _out, err = server.communicate(timeout=30)
    assert f"serving {officer} at http://127.0.0.1:{port}/api/json/" in err
    assert PASSWORD.replace(" ", "%20") not in err
