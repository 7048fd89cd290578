"""Remote mode through the CLI: waited report runs, and every way a server can fail to answer.

A real `toolkit serve` runs on loopback (one report worker, which a test may keep busy
to hold a run QUEUED); the failures are real too: a closed port, a name DNS does not
know, a listener that never answers, TLS spoken to plain HTTP, a web page that is not
the API, a redirect. Each must end in ``Error: ...`` naming the server, exit status 1,
never an internal error and never a secret.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from serving import free_port, running
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from toolkit.cli import cli
from toolkit.server.app import create_app
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite

KEY_MARK = "tk_"  # every API key starts so; none may show in any output


@dataclass
class World:
    path: Path
    url: str
    app: Any
    event: int
    key: str

    def busy_worker(self) -> threading.Event:
        """Keep the server's one report worker busy until the returned event is set."""
        release = threading.Event()
        self.app.state.server.reports.pool.submit(release.wait, 60)
        return release


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    path = tmp_path_factory.mktemp("remote") / "site.sqlite"
    with LocalSite(path, "default", user_id="operator") as site:
        event = site.create_event({"name": "Flood 2026"})["id"]
        site.add_user("analyst", positions=["API User"], approved=True, terms_accepted=True)
        site.put_on_duty("analyst", event, "Recovery Officer")
        key = site.issue_api_key("analyst")["key"]
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None, workers=1)
    app = create_app(path, settings=settings)
    with running(app) as url:
        yield World(path, url, app, event, key)


def remote(world: World, *args: str, url: str | None = None, **env: str) -> Result:
    runner = CliRunner(env={"TOOLKIT_API_KEY": world.key, **env})
    return runner.invoke(cli, [*args, "--url", url or world.url])


def failed_cleanly(result: Result, *expected: str) -> str:
    """The stderr of a command that failed as the README promises; checks it says each of
    ``expected`` and nothing secret."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.startswith("Error: "), result.stderr
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert KEY_MARK not in result.output
    for text in expected:
        assert text in result.stderr, result.stderr
    return result.stderr


# --- report run --wait against a server --------------------------------------------------------


def test_a_waited_run_on_a_server_polls_until_it_has_completed(world: World) -> None:
    release = world.busy_worker()  # the run is QUEUED when first asked, whatever the timing
    timer = threading.Timer(1.0, release.set)
    timer.start()
    try:
        args = ["--json", "report", "run", "1", "--param", f"eventId={world.event}", "--wait"]
        result = remote(world, *args)
    finally:
        timer.cancel()
        release.set()
    assert result.exit_code == 0, result.output
    instance = json.loads(result.stdout)
    assert (instance["status"], instance["rowCount"], instance["reportId"]) == ("COMPLETED", "0", 1)
    assert instance["dateCompleted"] is not None


def test_a_waited_run_that_fails_on_a_server_says_why_on_stderr(world: World) -> None:
    result = remote(world, "report", "run", "4", "--param", "jobId=999", "--wait")
    stderr = failed_cleanly(result, " FAILED: ", "import job 999 does not exist")
    assert stderr.startswith("Error: report instance ")
    assert "FAILED" in result.stdout  # the final state is printed before the error


def test_a_waited_run_gives_up_after_its_timeout_and_the_run_goes_on(world: World) -> None:
    release = world.busy_worker()
    try:
        started = time.monotonic()
        result = remote(
            world,
            "--json",
            "report",
            "run",
            "1",
            "--param",
            f"eventId={world.event}",
            "--wait",
            "--timeout",
            "0.5",
        )
        took = time.monotonic() - started
        stderr = failed_cleanly(result, "did not finish within 0.5 s: it is QUEUED")
        assert took < 10
        instance = json.loads(result.stdout)  # the last state seen, for a script to keep
        assert instance["status"] == "QUEUED"
        assert f"toolkit report status {instance['id']}" in stderr
    finally:
        release.set()
    later = remote(world, "--json", "report", "run", "--instance", instance["id"], "--wait")
    assert later.exit_code == 0, later.output  # a repeat of it completes once the worker is free
    status = remote(world, "--json", "report", "status", instance["id"])
    assert json.loads(status.stdout)["status"] == "COMPLETED"  # and so did the first run


def test_a_waited_run_with_a_timeout_on_the_embedded_site(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    with LocalSite(store, "default") as site:
        event = site.create_event({"name": "Flood"})["id"]
    args = ["--store", str(store), "--json", "report", "run", "1", "--param", f"eventId={event}"]
    # A worker process of its own cannot even start within 10 ms: the wait times out.
    timed_out = CliRunner().invoke(cli, [*args, "--wait", "--timeout", "0.01"])
    failed_cleanly(timed_out, "did not finish within 0.01 s")
    instance_id = json.loads(timed_out.stdout)["id"]
    deadline = time.monotonic() + 120
    while True:  # the run goes on in its worker and completes
        status = CliRunner().invoke(
            cli, ["--store", str(store), "--json", "report", "status", instance_id]
        )
        if json.loads(status.stdout)["status"] == "COMPLETED":
            break
        assert time.monotonic() < deadline, status.stdout
        time.sleep(0.2)
    waited = CliRunner().invoke(cli, [*args, "--wait", "--timeout", "600"])
    assert waited.exit_code == 0, waited.output
    assert json.loads(waited.stdout)["status"] == "COMPLETED"
    usage = CliRunner().invoke(cli, [*args, "--timeout", "5"])
    assert usage.exit_code == 2 and "give --wait too" in usage.stderr


# --- the client boundary: every failure a clear error ------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://example.org", "the API is served over http:// or https://, not ftp://"),
        ("localhost:8080", "does not start with http:// or https://"),
        ("not a url", "does not start with http:// or https://"),
        ("http://[::1", "is not a URL"),
        ("http://127.0.0.1:99999", "port 99999 does not exist"),
        ("https://", "names no host"),
    ],
)
def test_a_url_that_cannot_name_a_server_is_refused_before_any_request(
    world: World, url: str, expected: str
) -> None:
    failed_cleanly(remote(world, "ping", url=url), expected)


def test_a_url_holding_a_password_is_refused_without_showing_it(world: World) -> None:
    url = world.url.replace("http://", "http://analyst:hunter2-secret@")
    stderr = failed_cleanly(remote(world, "ping", url=url), "holds a user name or password")
    assert "hunter2" not in stderr


def test_ftp_from_a_real_shell_is_an_error_not_an_internal_one() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkit", "--url", "ftp://example.org", "item", "get", "1"],
        capture_output=True,
        text=True,
        env={"TOOLKIT_API_KEY": "tk_x_y", "PATH": ""},
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "Error: server URL 'ftp://example.org': the API is served over http:// or https://, "
        "not ftp://\n"
    )


def test_a_closed_port_says_the_connection_was_refused(world: World) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    failed_cleanly(
        remote(world, "item", "get", "1", url=url),
        f"cannot reach {url}: the connection was refused",
        "5 attempts",
    )


def test_a_host_dns_does_not_know(world: World) -> None:
    url = "http://no-such-host.invalid:8080"
    failed_cleanly(
        remote(world, "ping", url=url),
        f"cannot reach {url}: the host name 'no-such-host.invalid' does not resolve",
    )


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for connection in accepted:
        connection.close()
    server.close()


def test_a_server_that_never_answers_times_out_as_toolkit_timeout_says(
    world: World, silent_listener: str
) -> None:
    started = time.monotonic()
    result = remote(world, "ping", url=silent_listener, TOOLKIT_TIMEOUT="0.3")
    failed_cleanly(result, f"{silent_listener} did not answer within 0.3 s", "TOOLKIT_TIMEOUT")
    assert time.monotonic() - started < 30
    bad = remote(world, "ping", url=silent_listener, TOOLKIT_TIMEOUT="soon")
    failed_cleanly(bad, "TOOLKIT_TIMEOUT 'soon' is not a number of seconds")


def test_tls_spoken_to_a_plain_http_server(world: World) -> None:
    url = world.url.replace("http://", "https://")
    failed_cleanly(
        remote(world, "ping", url=url), f"the TLS handshake with {url} failed", "https://"
    )


def _not_the_api(request: Request) -> Response:
    if request.url.path == "/moved/api/json/ping":
        return HTMLResponse("<p>a web page</p>")
    if request.url.path.startswith("/old"):
        return RedirectResponse("https://new.example.org/api/json/ping", status_code=301)
    return HTMLResponse("<html><body>Welcome to our web site</body></html>")


@pytest.fixture(scope="module")
def web_site() -> Iterator[str]:
    app = Starlette(routes=[Route("/{path:path}", _not_the_api, methods=["GET", "POST"])])
    with running(app) as url:
        yield url


def test_a_web_page_that_is_not_the_api(world: World, web_site: str) -> None:
    failed_cleanly(
        remote(world, "ping", url=web_site),
        f"{web_site} answered HTTP 200 with text/html",
        "not JSON; is it a server of the API?",
    )
    # An authenticated call: the auth answer itself is the web page.
    failed_cleanly(
        remote(world, "item", "get", "1", url=web_site),
        f"authentication at {web_site} answered without a token",
    )


def test_a_redirect_is_reported_not_followed(world: World, web_site: str) -> None:
    failed_cleanly(
        remote(world, "ping", url=f"{web_site}/old"),
        "answered HTTP 301, a redirect to https://new.example.org/api/json/ping",
        "give that address as --url",
    )


def test_a_refused_key_names_the_server_and_never_the_key(world: World) -> None:
    result = CliRunner(env={"TOOLKIT_API_KEY": "tk_1_notavalidsecret"}).invoke(
        cli, ["item", "get", "1", "--url", world.url]
    )
    failed_cleanly(result, f"authentication at {world.url} failed: HTTP 401")
