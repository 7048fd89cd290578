"""Imports over real HTTP that a client cannot trust the server with, unless it is hardened:
huge values, rows without a usable geometry, files the server reads from a temporary folder,
and a server killed in the middle of a job.

One module-scoped server (in a thread, with a body limit large enough for a 20 MB value)
serves a real site file; the killed-server test runs ``toolkit serve`` as a process of its own.
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from serving import free_port, running

from toolkit.cli import cli
from toolkit.server import ServerSettings, create_app
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
DEVICE = {"uuid": "https://ci.example.org", "platform": "python", "version": "0.1", "name": "ci"}
MIB = 1024 * 1024


@dataclass
class Server:
    url: str
    path: Path
    api_key: str


def _site_with_an_api_user(path: Path) -> str:
    """A site ``alpha`` with an API user; its API key."""
    with LocalSite(path, "alpha", user_id="admin") as site:
        site.add_user("api", positions=["API User"], approved=True, terms_accepted=True)
        return str(site.issue_api_key("api", "ci")["key"])


def _client(url: str, api_key: str) -> httpx.Client:
    headers = {"X-Site": "alpha", "Accept": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as anonymous:
        answer = anonymous.post("/api/json/auth", json={**DEVICE, "apiKey": api_key})
    assert answer.status_code == 200, answer.text
    headers["Authorization"] = f"Bearer {answer.json()['token']}"
    return httpx.Client(base_url=url, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    path = tmp_path_factory.mktemp("imports") / "site.sqlite"
    key = _site_with_an_api_user(path)
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None, max_body_bytes=64 * MIB)
    with running(create_app(path, settings=settings)) as url:
        yield Server(url, path, key)


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[httpx.Client]:
    with _client(server.url, server.api_key) as client:
        yield client


def _schedule(api: httpx.Client, **body: Any) -> int:
    fields = {"mode": "schedule", "importType": "asset", "importRule": "assets-csv"}
    answer = api.post("/api/json/import", json={**fields, **body})
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


def _status(api: httpx.Client, job_id: int) -> dict[str, Any]:
    answer = api.post("/api/json/import", json={"mode": "status", "id": job_id})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _finished(api: httpx.Client, job_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        job = _status(api, job_id)
        if job["status"] in ("COMPLETE", "FAILED") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def _no_server_paths(job: dict[str, Any]) -> None:
    """Nothing of the job tells where the server keeps its files."""
    text = json.dumps(job)
    for secret in ("/tmp", "toolkit-import-", "import-data.", os.sep + "var" + os.sep):
        assert secret not in text, (secret, text)


def test_a_20_mb_value_leaves_its_row_out_and_is_listed(api: httpx.Client) -> None:
    data = (
        "code,name,wkt\n"
        "B1,one,POINT (143.85 -37.56)\n"
        f"B2,{'x' * (20 * MIB)},POINT (143.86 -37.57)\n"
        "B3,three,POINT (143.87 -37.58)\n"
    )
    job = _finished(api, _schedule(api, data=data, dataType="csv"))
    assert job["status"] == "COMPLETE", job["summary"]
    counts = job["summary"]["counts"]
    assert (counts["inserted"], counts["rejected"]) == (2, 1)
    (error,) = job["summary"]["errors"]
    assert (error["row"], error["column"]) == (2, "name")
    assert error["value"] == "x" * 40 + "..."
    assert error["reason"] == "the value is longer than 8388608 bytes; row left out"
    assert "internal error" not in job["result"]


def test_rows_without_a_usable_geometry_are_rejected(api: httpx.Client) -> None:
    data = (
        "code,name,wkt\n"
        "G1,good,POINT (143.85 -37.56)\n"
        "G2,broken,POLYGON ((143 -37\n"
        "G3,far,POINT (999 999)\n"
        "G4,nan,POINT (nan nan)\n"
    )
    job = _finished(api, _schedule(api, data=data))
    assert job["status"] == "COMPLETE"
    assert (job["summary"]["counts"]["inserted"], job["summary"]["counts"]["rejected"]) == (1, 3)
    assert [(e["row"], e["column"], e["value"], e["reason"]) for e in job["summary"]["errors"]] == [
        (2, "wkt", "POLYGON ((143 -37", "not valid WKT"),
        (
            3,
            "wkt",
            "POINT (999 999)",
            "coordinates outside longitude -180..180, latitude -90..90 (EPSG:4326)",
        ),
        (4, "wkt", "POINT (nan nan)", "a coordinate is not a finite number"),
    ]
    found = api.get("/api/json/asset", params={"limit": 1000}).json()
    assert sorted(a["code"] for a in found["models"].values() if a["code"][0] == "G") == ["G1"]


def _parcels_zip(change: dict[str, bytes]) -> str:
    """The sample parcels with some parts replaced, base64 for the schedule body."""
    out = io.BytesIO()
    with zipfile.ZipFile(SAMPLE / "parcels.zip") as original, zipfile.ZipFile(out, "w") as copy:
        for name in original.namelist():
            suffix = Path(name).suffix
            copy.writestr(name, change.get(suffix, original.read(name)))
    return base64.b64encode(out.getvalue()).decode()


def test_reasons_name_the_data_as_the_client_sent_it_never_a_server_path(
    api: httpx.Client,
) -> None:
    empty = _finished(api, _schedule(api, data="\n\n", dataType="csv"))
    assert empty["status"] == "FAILED"
    assert empty["summary"]["reason"] == "import data (csv): the file is empty (no header, no data)"
    _no_server_paths(empty)

    garbled = _finished(
        api,
        _schedule(
            api,
            importRule="property-assets",
            data=_parcels_zip({".prj": b"PROJCS[nonsense"}),
            encoding="base64",
            dataType="zip",
        ),
    )
    assert garbled["status"] == "FAILED"
    assert garbled["summary"]["reason"].startswith(
        "import data (zip): the .prj could not be understood: parcels.prj: "
    )
    _no_server_paths(garbled)

    broken = _finished(
        api,
        _schedule(
            api,
            importRule="property-assets",
            data=_parcels_zip({".shp": b"not a shapefile"}),
            encoding="base64",
        ),
    )
    assert broken["status"] == "FAILED"
    assert broken["summary"]["reason"].startswith("import data (zip): parcels.shp: cannot read")
    _no_server_paths(broken)


# --- a full disk ----------------------------------------------------------------------------


def test_a_write_on_a_full_disk_is_a_500_that_says_so(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    key = _site_with_an_api_user(path)
    app = create_app(path, settings=ServerSettings(rate_limit=None, auth_rate_limit=None))
    with running(app) as url, _client(url, key) as api:
        assert api.get("/api/json/asset-type").status_code == 200  # the site is open
        # Every connection the server opened may grow the file by a page or two only:
        # SQLite answers as on a full disk (SQLITE_FULL).
        for db in app.state.server.sites._databases:
            pages = db.connection.execute("PRAGMA page_count").fetchone()[0]
            db.connection.execute(f"PRAGMA max_page_count = {pages + 2}")
        answer = api.post(
            "/api/binary/file",
            data={"name": "scan.pdf"},
            files={"file": ("scan.pdf", os.urandom(256 * 1024), "application/pdf")},
        )
        assert answer.status_code == 500
        assert answer.json()["message"].startswith("the disk is full:")
        assert str(tmp_path) not in answer.text
    with LocalSite(path, "alpha") as site:
        assert site.db.connection.execute("SELECT count(*) FROM media").fetchone()[0] == 0


# --- a server killed in the middle of a job ----------------------------------------------------


def _poles_csv(rows: int) -> str:
    codes = pd.Series(np.arange(rows)).map("K{:07d}".format)
    frame = pd.DataFrame(
        {"code": codes, "name": codes + " SMITH ST", "wkt": "POINT (143.85 -37.56)"}
    )
    return str(frame.to_csv(index=False))


@pytest.mark.slow
def test_jobs_of_a_killed_server_still_say_what_they_were(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    key = _site_with_an_api_user(path)
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "toolkit", "--store", str(path), "--quiet", "serve"),
            *("--port", str(port), "--rate-limit", "none", "--auth-rate-limit", "none"),
            *("--workers", "1"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/api/json/ping", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.05)
        with _client(url, key) as api:
            big = _schedule(api, data=_poles_csv(100_000), message="poles")
            queued = _schedule(api, data=_poles_csv(10), overwriteRule="insertOnly")
            while _status(api, big)["status"] == "NOT_STARTED":
                time.sleep(0.005)
            assert _status(api, big)["status"] == "RUNNING", "the job ended before the kill"
            os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()

    # The next server on the file finds both jobs orphaned.
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
    with running(create_app(path, settings=settings)) as url, _client(url, key) as api:
        killed, never_run = _status(api, big), _status(api, queued)
        assert api.get("/api/json/asset").json()["total"] == "0"
        runner = CliRunner(env={"TOOLKIT_API_KEY": key})
        shown = runner.invoke(cli, ["--url", url, "--site", "alpha", "import-status", str(big)])
    assert (killed["status"], killed["code"]) == ("FAILED", 500)
    assert (killed["importType"], killed["importRule"]) == ("asset", "assets-csv")
    assert killed["params"]["source"] == "import data (csv)"
    assert killed["params"]["message"] == "poles"
    summary = killed["summary"]
    assert summary["status"] == "FAILED"
    assert "stopped before it finished" in summary["reason"]
    assert (summary["importRule"], summary["importType"], summary["source"]) == (
        "assets-csv",
        "asset",
        "import data (csv)",
    )
    assert (summary["overwriteRule"], summary["matchingId"]) == ("updateAndInsert", "code")
    assert never_run["status"] == "FAILED"
    assert "stopped before it started" in never_run["summary"]["reason"]
    assert never_run["summary"]["overwriteRule"] == "insertOnly"
    assert shown.exit_code == 0, shown.output
    assert "rule assets-csv (asset), overwrite rule updateAndInsert, matching on code" in (
        shown.output
    )
    assert "source: import data (csv)" in shown.output
    assert "reason: the process running this job stopped before it finished" in shown.output
