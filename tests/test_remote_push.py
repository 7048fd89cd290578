"""Pushing imports to a real `toolkit serve` on loopback: chunks, journal, faults.

The server runs in a thread over a real site file; between the client and it there is
real HTTP, and, for the fault tests, a small real proxy that answers 503 and 429.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pandas as pd
import pytest
from click.testing import CliRunner
from serving import free_port, running
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolkit.cli import cli
from toolkit.errors import RemoteError
from toolkit.importing.pipeline import ImportRequest
from toolkit.matching.lookup import index_from_file
from toolkit.names import JOB_COUNTS, ROW_OUTCOMES
from toolkit.remote import RemoteSite
from toolkit.remote.client import ApiClient, Credentials, Profile
from toolkit.remote.push import ENVELOPE_BYTES, Pusher
from toolkit.server.app import create_app
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
ITEMS = SAMPLE / "damage_assessments.csv"
SMALL_CHUNKS = ENVELOPE_BYTES + 25_000  # the 95 KB sample goes in several chunks


@pytest.fixture(autouse=True)
def _own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in a folder of its own: a push checks its rows against the default
    site file, ./toolkit.sqlite, and a checkout where the README's first command ran holds
    one (the demo's, without the site 'staging' these tests push from)."""
    monkeypatch.chdir(tmp_path)


@dataclass
class Staging:
    """A staging site: the parcels, an event, and an API user on duty with a key."""

    path: Path
    event: int
    api_key: str
    items: Path

    def settings(self, clock: Any = None) -> ServerSettings:
        extra = {"clock": clock} if clock is not None else {}
        return ServerSettings(rate_limit=None, auth_rate_limit=None, **extra)

    def site(self) -> LocalSite:
        return LocalSite(self.path, "staging")


@pytest.fixture
def staging(tmp_path: Path) -> Staging:
    path = tmp_path / "staging.sqlite"
    with LocalSite(path, "staging") as site:
        job = site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        assert job["status"] == "COMPLETE"
        event = site.create_event({"name": "Flood"})["id"]
        site.add_user("pusher", positions=["API User"], approved=True, terms_accepted=True)
        site.put_on_duty("pusher", event, "Recovery Officer")
        key = site.issue_api_key("pusher")["key"]
    items = tmp_path / "damage_assessments.csv"  # the journal is written beside the input
    items.write_bytes(ITEMS.read_bytes())
    return Staging(path, event, key, items)


def _remote(url: str, staging: Staging, **client: Any) -> RemoteSite:
    profile = Profile(url, "staging", Credentials(api_key=staging.api_key))
    return RemoteSite(profile, client=ApiClient(profile, **client))


def _request(staging: Staging) -> ImportRequest:
    return ImportRequest(
        "item", "damage-assessments", staging.items, event_id=staging.event, region_id=1
    )


def _pusher(site: RemoteSite, **kwargs: Any) -> Pusher:
    index = index_from_file(SAMPLE / "parcels.zip")
    return Pusher(
        site, asset_index=lambda: index, poll_interval_s=0.05, max_bytes=SMALL_CHUNKS, **kwargs
    )


def _push_jobs(remote: RemoteSite) -> list[dict[str, Any]]:
    """The server's jobs for the damage assessments (the fixture's parcels job aside)."""
    return [j for j in remote.import_status() if j["importRule"] == "damage-assessments"]


def _items_on_server(staging: Staging) -> pd.DataFrame:
    with staging.site() as site:
        if not site.list_registers():  # no item was ever written: not even the register
            return pd.DataFrame()
        page = site.list_items({"registerId": "damage-assessment", "limit": "1000"})
    return pd.DataFrame(page["models"].values())


def test_a_push_goes_in_chunks_and_a_second_run_sends_nothing(staging: Staging) -> None:
    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        result = _pusher(remote).push(_request(staging))
        assert result.ok, result.to_dict()
        chunks = result.to_dict()["chunks"]
        assert len(chunks) >= 3
        assert result.counts()["inserted"] == 992
        # The sample's 8 bad rows (dates, numbers, latitudes, WKT) are refused before sending.
        assert result.offline["rejectedRows"] == 8
        # The sample's field-spoilt rows include some no matcher can place (the number left
        # out on a long street); those stay unlinked, never guessed.
        assert result.offline["linking"]["unlinked"] < 75
        # Rows sent in order, none twice, none lost.
        spans = [tuple(c["rows"]) for c in chunks]
        assert spans[0][0] == 1 and spans[-1][1] == 1000
        assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
        jobs_before = len(_push_jobs(remote))

        again = _pusher(remote).push(_request(staging))
        assert again.already_done and again.ok
        assert len(_push_jobs(remote)) == jobs_before == len(chunks)

    items = _items_on_server(staging)
    assert len(items) == 992
    truth = pd.read_csv(SAMPLE / "damage_assessments_truth.csv", dtype=str)
    merged = items.merge(truth, left_on="reference", right_on="Reference")
    linked = merged[merged["assetId"].notna()]
    assert len(linked) > 900
    assert (linked["assetId"] == linked["asset_id"]).all()  # ids resolved offline, all right


def test_the_cli_pushes_with_url_and_a_dry_run_sends_nothing(staging: Staging) -> None:
    env = {"TOOLKIT_API_KEY": staging.api_key, "TOOLKIT_MIN_POLL_INTERVAL": "0.05"}
    with running(create_app(staging.path, settings=staging.settings())) as url:
        args = [
            "--url",
            url,
            "--site",
            "staging",
            "--json",
            "import",
            str(staging.items),
            "--type",
            "item",
            "--rule",
            "damage-assessments",
            "--event-id",
            str(staging.event),
            "--region-id",
            "1",
            "--assets",
            str(SAMPLE / "parcels.zip"),
            "--poll-interval",
            "0.05",
        ]
        dry = CliRunner(env=env).invoke(cli, [*args, "--dry-run"])
        assert dry.exit_code == 0, dry.stderr
        assert json.loads(dry.stdout)["dryRun"] is True
        assert _items_on_server(staging).empty
        real = CliRunner(env=env).invoke(cli, args)
        assert real.exit_code == 0, real.stderr
        document = json.loads(real.stdout)
        assert document["status"] == "COMPLETE"
        # The whole file's counts, the 8 rows refused offline among the rejected.
        counts = document["counts"]
        assert list(counts) == list(JOB_COUNTS)
        assert (counts["read"], counts["inserted"], counts["rejected"]) == (1000, 992, 8)
        assert sum(counts[name] for name in ROW_OUTCOMES) == counts["read"]
        refused = CliRunner(env={"TOOLKIT_API_KEY": staging.api_key}).invoke(
            cli, [*args[:-2], "--poll-interval", "1"]
        )
        assert refused.exit_code == 2
        assert "at most once every 60 seconds" in refused.stderr
    assert len(_items_on_server(staging)) == 992


def test_a_server_dry_run_plans_on_the_server_and_writes_nothing(staging: Staging) -> None:
    env = {"TOOLKIT_API_KEY": staging.api_key, "TOOLKIT_MIN_POLL_INTERVAL": "0.05"}
    args = [
        *("--site", "staging", "import", str(staging.items), "--type", "item"),
        *("--rule", "damage-assessments", "--event-id", str(staging.event), "--region-id", "1"),
        *("--assets", str(SAMPLE / "parcels.zip"), "--poll-interval", "0.05"),
    ]
    journal = staging.items.with_name(staging.items.name + ".push.json")
    with running(create_app(staging.path, settings=staging.settings())) as url:
        remote = [*args, "--url", url]
        dry = CliRunner(env=env).invoke(cli, ["--json", *remote, "--server-dry-run"])
        assert dry.exit_code == 0, dry.output
        planned = json.loads(dry.stdout)
        assert planned["serverDryRun"] is True and planned["status"] == "COMPLETE"
        assert (planned["counts"]["inserted"], planned["counts"]["rejected"]) == (992, 8)
        job = planned["chunks"][0]["job"]
        assert job["summary"]["dryRun"] is True and job["params"]["dryRun"] == 1
        assert _items_on_server(staging).empty  # the server wrote nothing
        assert not journal.exists()  # and nothing was recorded as pushed

        # The real push then sends everything, and does what the dry run said it would.
        real = CliRunner(env=env).invoke(cli, ["--json", *remote])
        assert real.exit_code == 0, real.output
        assert json.loads(real.stdout)["counts"] == planned["counts"]
        assert len(_items_on_server(staging)) == 992

        # Planned against the site as it is now: every row would be unchanged.
        again = CliRunner(env=env).invoke(cli, [*remote, "--server-dry-run"])
        assert again.exit_code == 0, again.output
        assert "(server dry run: the server checked and planned every chunk" in again.stdout
        assert "  would be: read 1000, inserted 0, updated 0, unchanged 992," in again.stdout

        # A limit the offline checks already break is told at once, nothing sent.
        limited = CliRunner(env=env).invoke(
            cli, [*remote, "--server-dry-run", "--max-rejects", "5"]
        )
        assert limited.exit_code == 1
        assert limited.stderr.startswith("Error: server dry run of damage_assessments.csv FAILED: ")
        # With room for the offline rejects, the server's plan is within the limit too.
        within = CliRunner(env=env).invoke(cli, [*remote, "--server-dry-run", "--max-rejects", "8"])
        assert within.exit_code == 0, within.output

        both = CliRunner(env=env).invoke(cli, [*remote, "--server-dry-run", "--dry-run"])
        assert both.exit_code == 2 and "not both" in both.stderr
    local = CliRunner().invoke(cli, [*args, "--store", str(staging.path), "--server-dry-run"])
    assert local.exit_code == 2 and "--server-dry-run asks a server (--url)" in local.stderr
    assert len(_items_on_server(staging)) == 992


def test_a_server_dry_run_in_chunks_sums_what_each_would_do(staging: Staging) -> None:
    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        result = _pusher(remote).push(_request(staging), server_dry_run=True)
        assert result.ok and result.server_dry_run
        assert len(result.chunks) >= 3
        assert all(c["job"]["summary"]["dryRun"] for c in result.chunks)
        assert result.counts()["inserted"] == 992
        # A real push afterwards is not taken for done: nothing was journalled.
        real = _pusher(remote).push(_request(staging))
        assert not real.already_done and real.counts() == result.counts()
    assert len(_items_on_server(staging)) == 992


def test_a_pushed_job_that_fails_says_why_on_stderr(staging: Staging, tmp_path: Path) -> None:
    # A key repeated in the file passes the offline checks; the server's plan refuses it,
    # and with --rollback-on-error its job FAILS.
    repeated = tmp_path / "repeated.csv"
    repeated.write_text("Reference,Address\nDA-1,1 MAIN ST\nDA-1,2 MAIN ST\n", encoding="utf-8")
    env = {"TOOLKIT_API_KEY": staging.api_key, "TOOLKIT_MIN_POLL_INTERVAL": "0.05"}
    with running(create_app(staging.path, settings=staging.settings())) as url:
        result = CliRunner(env=env).invoke(
            cli,
            [
                *("--url", url, "--site", "staging", "import", str(repeated)),
                *("--type", "item", "--rule", "damage-assessments", "--rollback-on-error"),
                *("--event-id", str(staging.event), "--region-id", "1", "--poll-interval", "0.05"),
            ],
        )
    assert result.exit_code == 1, result.output
    assert "Push of repeated.csv: FAILED" in result.stdout
    # The server's dry run found the rejected row before anything was sent.
    assert "server dry run of chunk 1: job " in result.stdout
    assert result.stderr == (
        "Error: push of repeated.csv FAILED: 1 row(s) rejected (0 offline and 1 by the "
        "server's dry run) and --rollback-on-error is set; nothing was sent\n"
    )
    with staging.site() as site:
        assert site.list_registers() == []  # nothing was written, not even the register


def _push_args(url: str, staging: Staging, source: Path, *extra: str) -> list[str]:
    return [
        *("--url", url, "--site", "staging", "import", str(source)),
        *("--type", "item", "--rule", "damage-assessments"),
        *("--event-id", str(staging.event), "--region-id", "1", "--poll-interval", "0.05"),
        *extra,
    ]


def test_max_rejects_refuses_a_push_whose_offline_rejects_are_too_many(staging: Staging) -> None:
    env = {"TOOLKIT_API_KEY": staging.api_key, "TOOLKIT_MIN_POLL_INTERVAL": "0.05"}
    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        for limit, shown in (("5", "5"), ("0.5%", "0.5% (5 of 1000 rows read)")):
            result = CliRunner(env=env).invoke(
                cli, _push_args(url, staging, staging.items, "--max-rejects", limit)
            )
            assert result.exit_code == 1, result.output
            assert result.stderr == (
                "Error: push of damage_assessments.csv FAILED: 8 row(s) rejected (offline), "
                f"more than --max-rejects {shown} allows; nothing was sent\n"
            )
            assert "Push of damage_assessments.csv: FAILED" in result.stdout
        assert _push_jobs(remote) == []  # not even a dry run was sent
    assert _items_on_server(staging).empty


def test_max_rejects_counts_the_rows_the_servers_dry_run_rejects(
    staging: Staging, tmp_path: Path
) -> None:
    # DA-1 twice: the offline checks pass it, the server's plan rejects the repeat.
    repeated = tmp_path / "repeated.csv"
    repeated.write_text(
        "Reference,Address\nDA-1,1 MAIN ST\nDA-1,2 MAIN ST\nDA-2,3 MAIN ST\n", encoding="utf-8"
    )
    env = {"TOOLKIT_API_KEY": staging.api_key, "TOOLKIT_MIN_POLL_INTERVAL": "0.05"}
    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        refused = CliRunner(env=env).invoke(
            cli, _push_args(url, staging, repeated, "--max-rejects", "0", "--json")
        )
        assert refused.exit_code == 1, refused.output
        document = json.loads(refused.stdout)
        assert (document["status"], document["chunks"]) == ("FAILED", [])
        [check] = document["serverCheck"]
        assert (check["status"], check["rejected"]) == ("COMPLETE", 1)
        assert refused.stderr == (
            "Error: push of repeated.csv FAILED: 1 row(s) rejected (0 offline and 1 by the "
            "server's dry run), more than --max-rejects 0 allows; nothing was sent\n"
        )
        [dry] = _push_jobs(remote)
        assert dry["summary"]["dryRun"] is True and dry["id"] == check["jobId"]
        assert _items_on_server(staging).empty

        allowed = CliRunner(env=env).invoke(
            cli, _push_args(url, staging, repeated, "--max-rejects", "1", "--json")
        )
        assert allowed.exit_code == 0, allowed.output
        document = json.loads(allowed.stdout)
        assert document["status"] == "COMPLETE"
        counts = document["counts"]
        assert (counts["read"], counts["rejected"]) == (3, 1)
        assert counts["inserted"] + counts["updated"] == 2
        # The chunk's job carried what is left of the limit, for the server to enforce.
        [chunk] = document["chunks"]
        job = remote.import_status(chunk["jobId"])
        assert job["params"]["maxRejects"] == "1"
    assert sorted(_items_on_server(staging)["reference"]) == ["DA-1", "DA-2"]


def test_the_server_honours_max_rejects_and_refuses_a_bad_one(staging: Staging) -> None:
    body = {
        "importType": "item",
        "importRule": "damage-assessments",
        "data": "Reference,Address\nDA-1,1 MAIN ST\nDA-1,2 MAIN ST\n",
        "eventId": staging.event,
        "regionId": 1,
    }
    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        job_id = remote.import_schedule({**body, "maxRejects": "0"})["id"]
        deadline = time.monotonic() + 30
        while (job := remote.import_status(job_id))["status"] not in ("COMPLETE", "FAILED"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert job["status"] == "FAILED"
        assert job["summary"]["reason"] == (
            "1 row(s) rejected, more than maxRejects 0 allows; nothing was written"
        )
        with pytest.raises(RemoteError, match="maxRejects '50 rows' is not a whole number") as bad:
            remote.import_schedule({**body, "maxRejects": "50 rows"})
        assert bad.value.status == 400
    assert _items_on_server(staging).empty


def test_a_push_interrupted_by_the_server_stopping_resumes_without_resending(
    staging: Staging,
) -> None:
    port = free_port()
    release = threading.Event()
    held = threading.Event()
    failure: list[BaseException] = []
    gate = {"hold_after": 2, "release": release, "held": held}
    app = create_app(staging.path, settings=staging.settings())
    target = f"http://127.0.0.1:{port}"
    with running(_proxy(target, {}, [], gate)) as proxied:
        with running(app, port=port):
            remote = _remote(proxied, staging, max_attempts=2, backoff_s=0.01)

            def push() -> None:
                try:
                    _pusher(remote).push(_request(staging))
                except BaseException as exc:
                    failure.append(exc)

            worker = threading.Thread(target=push)
            worker.start()
            # Two chunks are scheduled; the third is held in the proxy, on its way.
            assert held.wait(60)
        # The server has stopped; the held request now meets no server.
        release.set()
        worker.join(60)
        remote.close()
        assert failure and isinstance(failure[0], RemoteError), failure
        journal = json.loads(staging.items.with_name(staging.items.name + ".push.json").read_text())
        sent_before = sum(1 for c in journal["chunks"].values() if c.get("jobId") is not None)
        assert sent_before == 2
        gate["hold_after"] = None
        with (
            running(create_app(staging.path, settings=staging.settings()), port=port),
            _remote(proxied, staging) as remote,
        ):
            result = _pusher(remote).push(_request(staging))
            assert result.ok, result.to_dict()
            jobs = _push_jobs(remote)
    # Every chunk was scheduled exactly once, across both runs.
    assert len(jobs) == len(result.chunks) > 2
    assert len(_items_on_server(staging)) == 992


def _proxy(
    target: str, faults: dict[str, list[int]], seen: list[int], gate: dict[str, Any] | None = None
) -> Starlette:
    """A real HTTP proxy: answers the next planned fault status for a path, can hold a
    schedule request at a gate, and otherwise forwards; a dead target answers 502."""
    schedules = [0]

    async def forward(request: Request) -> Response:
        body = await request.body()
        planned = faults.get(request.url.path, [])
        if request.method == "POST" and planned:
            status = planned.pop(0)
            seen.append(status)
            headers = {"Retry-After": "0"} if status == 429 else {}
            return Response(
                json.dumps({"status": status, "message": "busy, try again"}),
                status_code=status,
                headers=headers,
                media_type="application/json",
            )
        if gate is not None and b'"mode":"schedule"' in body:
            schedules[0] += 1
            if gate["hold_after"] is not None and schedules[0] > gate["hold_after"]:
                gate["held"].set()
                await anyio.to_thread.run_sync(gate["release"].wait)
        try:
            async with httpx.AsyncClient(base_url=target, timeout=30) as upstream:
                answer = await upstream.request(
                    request.method,
                    request.url.path,
                    params=request.query_params,
                    content=body,
                    headers={k: v for k, v in request.headers.items() if k.lower() != "host"},
                )
        except httpx.TransportError:
            return Response(
                '{"status": 502, "message": "no server"}',
                status_code=502,
                media_type="application/json",
            )
        return Response(
            answer.content,
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
        )

    return Starlette(
        routes=[Route("/{path:path}", forward, methods=["GET", "POST", "PUT", "PATCH"])]
    )


def test_503_and_429_on_the_way_are_retried(staging: Staging) -> None:
    seen: list[int] = []
    faults = {"/api/json/import": [503, 429, 503], "/api/json/auth": [503]}
    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        running(_proxy(url, faults, seen)) as proxied,
        _remote(proxied, staging, backoff_s=0.01) as remote,
    ):
        result = _pusher(remote).push(_request(staging))
        assert result.ok, result.to_dict()
        jobs = _push_jobs(remote)
    assert sorted(seen) == [429, 503, 503, 503]
    assert len(jobs) == len(result.chunks)  # a refused schedule was not double-counted
    assert len(_items_on_server(staging)) == 992


def test_a_token_that_expires_mid_run_is_renewed(staging: Staging) -> None:
    now = [time.time_ns() // 1_000_000]

    def advance(seconds: float) -> None:
        now[0] += 2 * 3600 * 1000  # every poll pause passes two hours on the server
        time.sleep(min(seconds, 0.05))

    with (
        running(create_app(staging.path, settings=staging.settings(lambda: now[0]))) as url,
        _remote(url, staging) as remote,
    ):
        first_token: list[str | None] = []
        pusher = _pusher(remote, sleep=advance)
        original = remote.import_status

        def status(job_id: int | None = None) -> Any:
            first_token.append(remote.client.auth.token)
            return original(job_id)

        remote.import_status = status  # type: ignore[method-assign]
        result = pusher.push(_request(staging))
    assert result.ok, result.to_dict()
    # The server refused the first token after its hour; the client took a new one.
    assert len(set(first_token)) >= 2


def test_a_zipped_shapefile_is_pushed_as_zipped_shapefile_chunks(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite"
    with LocalSite(path, "staging") as site:
        site.add_user("pusher", positions=["API User"], approved=True, terms_accepted=True)
        key = site.issue_api_key("pusher")["key"]
    parcels = tmp_path / "parcels.zip"
    parcels.write_bytes((SAMPLE / "parcels.zip").read_bytes())
    staging = Staging(path, 0, key, parcels)
    request = ImportRequest("asset", "property-assets", parcels)
    with (
        running(create_app(path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        pusher = Pusher(remote, poll_interval_s=0.05, max_bytes=ENVELOPE_BYTES + 150_000)
        result = pusher.push(request)
        assert result.ok, result.to_dict()
        assert result.offline["dataType"] == "zip"
        assert len(result.chunks) >= 3
        assert result.counts()["inserted"] == 3000
        again = pusher.push(request)
        assert again.already_done
        pushed = remote.get_asset("102559")
    with LocalSite(tmp_path / "local.sqlite", "x") as local:
        local.run_import(request)
        here = local.get_asset("102559")
    assert pushed["geo"] == here["geo"]
    assert pushed["extraInfo"] == here["extraInfo"]
    assert pushed["name"] == here["name"] == "55 SMITH ROAD BUNINYONG 3357"


def test_a_push_says_which_jobs_it_waits_for_and_when_it_asks_next(staging: Staging) -> None:
    heard: list[tuple[str, int, int | None, str, str]] = []

    def progress(
        label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
    ) -> None:
        heard.append((label, done, total, unit, detail))

    now = [1000.0]

    def sleep(seconds: float) -> None:  # the minute between checks passes at once
        now[0] += seconds
        time.sleep(0.02)

    with (
        running(create_app(staging.path, settings=staging.settings())) as url,
        _remote(url, staging) as remote,
    ):
        index = index_from_file(SAMPLE / "parcels.zip")
        pusher = Pusher(
            remote,
            asset_index=lambda: index,
            poll_interval_s=60,
            max_bytes=SMALL_CHUNKS,
            progress=progress,
            sleep=sleep,
            clock=lambda: now[0],
        )
        result = pusher.push(_request(staging))
    assert result.ok
    chunks = len(result.to_dict()["chunks"])
    sends = [h for h in heard if h[0] == "send"]
    assert sends[-1][1:4] == (chunks, chunks, "chunks")
    assert sends[0][4] == "rows 1-" + str(result.to_dict()["chunks"][0]["rows"][1])
    waits = [h for h in heard if h[0] == "wait"]
    assert {w[2] for w in waits} == {chunks} and {w[3] for w in waits} == {"jobs"}
    # Before each check: the jobs still waited for, by id and status, and the time of the
    # check; a full minute ahead once the first check is done.
    job_ids = {str(c["jobId"]) for c in result.to_dict()["chunks"]}
    pattern = (
        r"server jobs: job (\d+) (NOT_STARTED|RUNNING)[^;]*; next status check at \d\d:\d\d:\d\d"
    )
    first = re.match(pattern, waits[0][4])
    assert first is not None and first.group(1) in job_ids, waits[0]
    assert any(w[4].endswith("(in 60 s)") for w in waits), waits
    assert waits[-1][1:] == (chunks, chunks, "jobs", "every job finished")


def test_the_cli_draws_the_push_waiting_for_its_jobs(staging: Staging) -> None:
    env = {
        "TOOLKIT_API_KEY": staging.api_key,
        "TOOLKIT_MIN_POLL_INTERVAL": "0.05",
        "TTY_COMPATIBLE": "1",
        "TTY_INTERACTIVE": "1",
        "COLUMNS": "240",
    }
    with running(create_app(staging.path, settings=staging.settings())) as url:
        result = CliRunner(env=env).invoke(
            cli,
            [
                *("--url", url, "--site", "staging", "import", str(staging.items)),
                *("--type", "item", "--rule", "damage-assessments"),
                *("--event-id", str(staging.event), "--region-id", "1"),
                *("--assets", str(SAMPLE / "parcels.zip"), "--poll-interval", "0.05"),
            ],
        )
    assert result.exit_code == 0, result.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stderr)
    lines = [line for line in re.split(r"[\r\n]", plain) if "━" in line]
    assert any(re.search(r"^\s*send\b.*\b1/1 chunks", line) for line in lines), lines
    assert any(re.search(r"^\s*wait\b.*\b1/1 jobs.*every job finished", line) for line in lines)
