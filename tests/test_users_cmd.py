"""The admin commands that set up API users: accounts, passwords, TOTP, API keys, duty."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyotp
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.errors import AuthenticationError, PermissionDeniedError
from toolkit.site import LocalSite

DEVICE = {"uuid": "u", "platform": "p", "version": "1", "name": "n"}


def _run(store: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(
        cli, ["--store", str(store), "--site", "demo", *args], env=env, input=stdin
    )
    return result


def test_set_up_an_api_user_from_the_command_line(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    with LocalSite(store, "demo") as site:
        event = site.create_event({"name": "Flood"})["id"]
    added = _run(
        store,
        "--json",
        "user",
        "add",
        "apiuser",
        "--position",
        "API User",
        "--approved",
        "--terms-accepted",
    )
    assert added.exit_code == 0, added.output
    user = json.loads(added.output)
    assert (user["username"], user["positions"], user["approved"]) == (
        "apiuser",
        ["API User"],
        True,
    )
    assert user["hasPassword"] is False
    secret = "a long enough secret"
    assert (
        _run(store, "user", "password", "apiuser", env={"TOOLKIT_PASSWORD": secret}).exit_code == 0
    )
    with LocalSite(store, "demo") as site:
        assert (
            site.authenticate(
                {**DEVICE, "username": "apiuser", "password": secret}, now_s=time.time()
            )["username"]
            == "apiuser"
        )
    # From stdin, off a terminal.
    piped = _run(store, "user", "password", "apiuser", stdin="another good one\n")
    assert piped.exit_code == 0, piped.output
    with LocalSite(store, "demo") as site, pytest.raises(AuthenticationError):
        site.authenticate({**DEVICE, "username": "apiuser", "password": secret}, now_s=time.time())
    short = _run(store, "user", "password", "apiuser", env={"TOOLKIT_PASSWORD": "short"})
    assert short.exit_code == 1 and "at least 8 characters" in short.output

    issued = _run(store, "--json", "api-key", "issue", "apiuser", "--label", "ci")
    key = json.loads(issued.output)
    assert key["key"].startswith(f"tk_{key['prefix']}_") and key["label"] == "ci"
    listed = json.loads(_run(store, "--json", "api-key", "list").output)
    assert "key" not in listed[0] and listed[0]["prefix"] == key["prefix"]
    with LocalSite(store, "demo") as site:
        assert (
            site.authenticate({**DEVICE, "apiKey": key["key"]}, now_s=time.time())["keyId"]
            == key["id"]
        )
    assert _run(store, "api-key", "revoke", str(key["id"])).exit_code == 0
    with LocalSite(store, "demo") as site, pytest.raises(AuthenticationError):
        site.authenticate({**DEVICE, "apiKey": key["key"]}, now_s=time.time())

    device = json.loads(_run(store, "--json", "user", "totp", "apiuser").output)
    assert device["uri"].startswith("otpauth://totp/")
    with LocalSite(store, "demo") as site:
        body = {**DEVICE, "username": "apiuser", "password": "another good one"}
        with pytest.raises(AuthenticationError):
            site.authenticate(body, now_s=time.time())
        code = pyotp.TOTP(device["secret"]).now()
        assert site.authenticate({**body, "mfaCode": code}, now_s=time.time())["hasTotp"]

    on_duty = _run(
        store,
        "--json",
        "duty",
        "add",
        "apiuser",
        "--event-id",
        str(event),
        "--position",
        "Field Inspector",
    )
    assert json.loads(on_duty.output)["duty"] == [{"eventId": event, "position": "Field Inspector"}]
    missing = _run(store, "duty", "add", "apiuser", "--event-id", "99", "--position", "X")
    assert missing.exit_code == 1 and "event 99 does not exist" in missing.output

    revoked = _run(store, "--json", "user", "update", "apiuser", "--not-approved")
    assert json.loads(revoked.output)["approved"] is False
    with LocalSite(store, "demo") as site, pytest.raises(PermissionDeniedError, match="approval"):
        site.api_user(user["id"])

    # Secrets are audited as replaced, never as values or hashes.
    with LocalSite(store, "demo") as site:
        log = json.dumps(site.list_audit_logs({"limit": "1000"}))
    assert secret not in log and "argon2" not in log and device["secret"] not in log
    assert "replaced" in log
    table = _run(store, "user", "list")
    assert table.exit_code == 0 and "apiuser" in table.output


def test_a_password_is_never_an_argument() -> None:
    result = CliRunner().invoke(cli, ["user", "password", "apiuser", "hunter22"])
    assert result.exit_code == 2 and "unexpected extra argument" in result.output.lower()


def test_serve_refuses_bad_settings_before_starting(tmp_path: Path) -> None:
    missing = subprocess.run(
        [sys.executable, "-m", "toolkit", "--store", str(tmp_path / "none.sqlite"), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and f"no site at {tmp_path / 'none.sqlite'}" in missing.stderr
    bad = CliRunner().invoke(cli, ["serve", "--rate-limit", "lots"])
    assert bad.exit_code == 1 and "COUNT/PERIOD" in bad.output
    helped = CliRunner().invoke(cli, ["serve", "--help"])
    assert helped.exit_code == 0 and "toolkit serve --workers 4" in helped.output
