"""`toolkit serve` against clients that are not to be trusted: brute force and slow clients.

Every server here is the real one, started the way ``toolkit serve`` starts it
(``tests/serving.py`` builds uvicorn's settings with ``uvicorn_config``), over
real sockets on loopback. "Different addresses" are real too: Linux routes all
of 127.0.0.0/8 to loopback, so a client can connect from 127.0.0.2. The server's
clock is injected and held still, so limits never depend on when the test runs.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import free_port, running

from toolkit.server import ServerSettings, create_app
from toolkit.server.limits import Backoff, client_key
from toolkit.site import LocalSite
from toolkit.store import now_ms

PASSWORD = "correct horse battery"
DEVICE = {"uuid": "https://ci.example.org", "platform": "python", "version": "0.1", "name": "ci"}


class Clock:
    """A server clock that stands still until the test moves it."""

    def __init__(self) -> None:
        self.ms = now_ms()

    def __call__(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.ms += int(seconds * 1000)


@pytest.fixture(scope="module")
def site_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sites alpha (users api, other) and beta (user api), no data."""
    path = tmp_path_factory.mktemp("limits") / "site.sqlite"
    for site_name, users in (("alpha", ("api", "other")), ("beta", ("api",))):
        with LocalSite(path, site_name, user_id="admin") as site:
            for name in users:
                site.add_user(name, positions=["API User"], approved=True, terms_accepted=True)
                site.set_password(name, PASSWORD)
    return path


def _serve(path: Path, **settings: Any) -> Any:
    options: dict[str, Any] = {"rate_limit": None, "auth_rate_limit": None, "clock": Clock()}
    return running(create_app(path, settings=ServerSettings(**(options | settings))))


def _client(url: str, site: str = "alpha", source: str = "127.0.0.1", **headers: str) -> Any:
    """A client connecting from the loopback address ``source``."""
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(
        base_url=url, headers={"X-Site": site, **headers}, transport=transport, timeout=10
    )


def _login(url: str, username: str = "api", password: str = PASSWORD, **kw: Any) -> httpx.Response:
    with _client(url, **kw) as client:
        return client.post(
            "/api/json/auth", json={**DEVICE, "username": username, "password": password}
        )


def _token(url: str, site: str = "alpha", username: str = "api") -> str:
    answer = _login(url, username, site=site)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def _get(url: str, token: str, site: str = "alpha", **kw: Any) -> httpx.Response:
    with _client(url, site, Authorization=f"Bearer {token}", **kw) as client:
        return client.get("/api/json/asset-type")


# --- rate limits ----------------------------------------------------------------------------


def test_two_tokens_of_one_user_share_one_budget(site_file: Path) -> None:
    clock = Clock()
    with _serve(site_file, rate_limit="4/minute", clock=clock) as url:
        tokens = []
        for _ in range(3):  # a second apart, so that the tokens differ
            tokens.append(_token(url))
            clock.advance(1)
        first, second, third = tokens
        assert len(set(tokens)) == 3
        statuses = [_get(url, t).status_code for t in (first, second, first, second)]
        assert statuses == [200, 200, 200, 200]
        # A fresh token is not a fresh budget.
        for token in (first, second, third):
            limited = _get(url, token)
            assert limited.status_code == 429
            assert limited.json() == {
                "status": 429,
                "message": "rate limit reached; retry after 15 s",
            }
            assert limited.headers["Retry-After"] == "15"  # 4/minute: one more every 15 s
        # Other users, and the same username in another site, have budgets of their own.
        assert _get(url, _token(url, username="other")).status_code == 200
        assert _get(url, _token(url, "beta"), "beta").status_code == 200
        # The budget refills steadily: 15 s later exactly one more request.
        clock.advance(15)
        assert [_get(url, third).status_code for _ in range(2)] == [200, 429]


def test_refused_tokens_are_limited_per_address(site_file: Path) -> None:
    with _serve(site_file, auth_rate_limit="3/minute") as url:
        token = _token(url)
        answers = [_get(url, "garbage").status_code for _ in range(4)]
        assert answers == [401, 401, 401, 429]
        # The address is refused before its token is looked at; another address is not.
        assert _get(url, token).status_code == 429
        assert _get(url, token, source="127.0.0.2").status_code == 200


def _knock(url: str, source: str = "127.0.0.1", **headers: str) -> int:
    """An auth call that counts against the address's limit but skips the slow password hash."""
    with _client(url, source=source, **headers) as client:
        return client.post("/api/json/auth", json=DEVICE).status_code  # 400: no credentials


def test_x_forwarded_for_is_not_believed_unless_the_proxy_is_named(
    site_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO, logger="toolkit.server.access"),
        _serve(site_file, auth_rate_limit="3/minute") as url,
    ):
        statuses = [_knock(url, **{"X-Forwarded-For": f"10.0.0.{n}"}) for n in range(1, 5)]
    assert statuses == [400, 400, 400, 429]
    lines = [r.getMessage() for r in caplog.records if r.name == "toolkit.server.access"]
    assert len(lines) == 4
    assert all(line.startswith("127.0.0.1 POST /api/json/auth ") for line in lines), lines
    caplog.clear()

    # Named with --forwarded-allow-ips, the proxy's X-Forwarded-For is the client.
    with (
        caplog.at_level(logging.INFO, logger="toolkit.server.access"),
        _serve(site_file, auth_rate_limit="3/minute", forwarded_allow_ips="127.0.0.1") as url,
    ):
        statuses = [_knock(url, **{"X-Forwarded-For": f"10.0.0.{n}"}) for n in range(1, 5)]
        # Another peer is not a named proxy: its header is ignored.
        spoofed = [
            _knock(url, "127.0.0.2", **{"X-Forwarded-For": f"10.0.1.{n}"}) for n in range(1, 5)
        ]
    assert statuses == [400, 400, 400, 400]
    assert spoofed == [400, 400, 400, 429]
    lines = [r.getMessage().split()[0] for r in caplog.records if r.name == "toolkit.server.access"]
    assert lines == [f"10.0.0.{n}" for n in range(1, 5)] + ["127.0.0.2"] * 4


def test_failed_logins_back_off_per_account_and_unknown_names_look_the_same(
    site_file: Path,
) -> None:
    clock = Clock()
    backoff = Backoff(free=3, base_s=10, max_s=30)
    with _serve(site_file, login_backoff=backoff, clock=clock) as url:

        def attempt(username: str, password: str, n: int) -> tuple[int, str, str | None]:
            # Every attempt from a different address: the lock is per account, not per address.
            answer = _login(url, username, password, source=f"127.0.0.{n}")
            body = answer.json()
            return answer.status_code, body.get("message"), answer.headers.get("Retry-After")

        def story(username: str) -> list[tuple[int, str, str | None]]:
            seen = [attempt(username, "wrong", n) for n in range(2, 5)]  # three failures
            seen.append(attempt(username, PASSWORD, 5))  # locked: the right password too
            clock.advance(9)
            seen.append(attempt(username, PASSWORD, 6))  # still locked, 1 s left
            clock.advance(1)
            seen.append(attempt(username, "wrong", 7))  # lock over; a 4th failure: 20 s
            seen.append(attempt(username, PASSWORD, 8))
            clock.advance(20)
            seen.append(attempt(username, "wrong", 9))  # a 5th: 40 s, capped at 30
            seen.append(attempt(username, PASSWORD, 10))
            clock.advance(30)
            return seen

        known = story("api")
        unknown = story("nobody")
        # Once the lock is over, the right password works and forgets the failures.
        assert attempt("api", PASSWORD, 11)[0] == 200
        assert attempt("api", "wrong", 12)[0] == 401
        assert attempt("api", PASSWORD, 13)[0] == 200
        # Another account was never locked.
        assert attempt("other", PASSWORD, 14)[0] == 200

    bad = (401, "invalid credentials", None)

    def locked(seconds: int) -> tuple[int, str, str]:
        message = f"too many failed logins for this account; retry after {seconds} s"
        return 429, message, str(seconds)

    assert known == [bad, bad, bad, locked(10), locked(1), bad, locked(20), bad, locked(30)]
    # Unknown usernames answer exactly the same: the answers never tell whether one exists.
    assert unknown == known


def test_an_unknown_site_locks_like_a_known_one(site_file: Path) -> None:
    with _serve(site_file, login_backoff=Backoff(free=2, base_s=10)) as url:
        answers = {
            site: [_login(url, "api", "wrong", site=site).status_code for _ in range(3)]
            for site in ("alpha", "gamma")
        }
    assert answers == {"alpha": [401, 401, 429], "gamma": [401, 401, 429]}


# --- slow clients ---------------------------------------------------------------------------

HEAD = b"POST /api/json/auth HTTP/1.1\r\nHost: x\r\nX-Site: alpha\r\nContent-Length: 120\r\n"


def _connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    sock.setblocking(False)
    return sock


def _answer_of(sock: socket.socket) -> bytes:
    """Everything the server sent before closing (the socket must be closed by the server)."""
    sock.setblocking(True)
    sock.settimeout(5)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _json_of(answer: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_slowloris_connections_are_closed_and_others_are_served(site_file: Path) -> None:
    with _serve(site_file, header_timeout_s=1.5) as url:
        socks = [_connect(url) for _ in range(20)]
        opened = time.monotonic()
        closed_after: dict[int, float] = {}
        served_meanwhile: list[int] = []
        step = 0
        while len(closed_after) < len(socks) and time.monotonic() - opened < 10:
            for n, sock in enumerate(socks):
                if n in closed_after:
                    continue
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:  # the server answered and closed
                    closed_after[n] = time.monotonic() - opened
                    continue
                try:
                    sock.send(HEAD[step : step + 1])  # one byte of the head at a time
                except OSError:
                    closed_after[n] = time.monotonic() - opened
            if step == 2:  # while all 20 are held open, a normal client is served at once
                with httpx.Client(base_url=url, timeout=5) as client:
                    started = time.monotonic()
                    served_meanwhile.append(client.get("/api/json/ping").status_code)
                    assert time.monotonic() - started < 1
            step += 1
            time.sleep(0.25)
        answers = [_answer_of(sock) for sock in socks]
        for sock in socks:
            sock.close()
    assert served_meanwhile == [200]
    assert sorted(closed_after) == list(range(20))
    # Closed at the timeout (1.5 s), not before and not much later.
    assert all(1.2 < t < 3.0 for t in closed_after.values()), closed_after
    for answer in answers:
        assert _json_of(answer) == (
            408,
            {"status": 408, "message": "the request headers did not arrive within 1.5 s"},
        )


def test_a_silent_connection_and_a_slow_body_are_cut_off(
    site_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO),
        _serve(site_file, header_timeout_s=1, body_timeout_s=1) as url,
    ):
        silent = _connect(url)
        slow = _connect(url)
        slow.send(HEAD + b"\r\n" + b'{"uuid": ')  # the head whole, the body begun
        started = time.monotonic()
        time.sleep(0.5)
        slow.send(b'"a')  # trickling does not extend the deadline
        silent_answer, slow_answer = _answer_of(silent), _answer_of(slow)
        elapsed = time.monotonic() - started
        # A kept-alive connection may wait between requests; its next head is timed afresh.
        with httpx.Client(base_url=url, timeout=5) as client:
            assert client.get("/api/json/ping").status_code == 200
            time.sleep(0.7)
            assert client.get("/api/json/ping").status_code == 200
            time.sleep(0.7)
            assert client.get("/api/json/ping").status_code == 200
    assert _json_of(silent_answer)[0] == 408
    assert _json_of(slow_answer) == (
        408,
        {"status": 408, "message": "the request body did not arrive within 1 s"},
    )
    assert 0.8 < elapsed < 3
    # The app saw a disconnect, not an error: no traceback, no 500.
    assert not [r for r in caplog.records if r.exc_info or " 500 " in r.getMessage()]


def test_connections_over_the_caps_are_refused_with_503(site_file: Path) -> None:
    with _serve(site_file, max_connections_per_client=4, max_connections=6) as url:
        held = [_connect(url) for _ in range(4)]
        time.sleep(0.2)
        refused = _answer_of(_connect(url))  # a 5th from the same address
        status, body = _json_of(refused)
        assert (status, body["message"]) == (503, "too many connections; retry later")
        assert b"retry-after: 5" in refused.lower()
        # Another address still gets in, up to the total cap.
        assert _get(url, "x", source="127.0.0.2").status_code == 401
        time.sleep(0.2)
        more = [_connect(url, "127.0.0.3") for _ in range(2)]
        time.sleep(0.2)
        assert _json_of(_answer_of(_connect(url, "127.0.0.4")))[0] == 503
        for sock in held + more:
            sock.close()
        time.sleep(0.2)
        # Closed connections are no longer counted.
        assert _get(url, "x").status_code == 401


@pytest.fixture(autouse=True)
def _loopback_aliases() -> Iterator[None]:
    """The tests connect from 127.0.0.2 and up: Linux routes all of 127/8 to loopback."""
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError:
        pytest.skip("this system does not route 127.0.0.2 to loopback")
    yield


def test_a_client_that_stops_reading_its_answers_is_cut_off(site_file: Path) -> None:
    with _serve(site_file, body_timeout_s=1) as url:
        sock = _connect(url)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        many = 200  # pipelined requests for a 77 kB document: far more than the buffers hold
        sock.setblocking(True)
        sock.sendall(b"GET /api/json/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * many)
        time.sleep(2.5)  # not reading: the server's writes stall, then it gives up
        received, reset = 0, False
        sock.settimeout(5)
        try:
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            reset = True  # what the server held for this reader was dropped, not trickled out
        sock.close()
        with httpx.Client(base_url=url, timeout=5) as client:
            assert client.get("/api/json/ping").status_code == 200
    assert reset and 0 < received < many * 70_000


def test_ipv6_clients_are_counted_by_their_64_network() -> None:
    # One IPv6 host is given a whole /64: counting its addresses one by one would give it
    # billions of budgets. IPv4 addresses, and IPv4 mapped into IPv6, count alone.
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff:1") == "2001:db8::/64"
    assert client_key("2001:db8:0:1::1") == "2001:db8:0:1::/64"
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert client_key("10.0.0.1") == "10.0.0.1" and client_key("-") == "-"


def test_the_serve_command_applies_the_same_guards(site_file: Path, tmp_path: Path) -> None:
    """`toolkit serve` itself: its options reach the transport, X-Forwarded-For is ignored."""
    port = free_port()
    log = tmp_path / "serve.log"
    options = ["--port", str(port), "--header-timeout", "1", "--auth-rate-limit", "2/minute"]
    with log.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "toolkit", "--store", str(site_file), "serve", *options],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/api/json/ping", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        silent = _connect(url)
        started = time.monotonic()
        assert _json_of(_answer_of(silent))[0] == 408
        assert 0.7 < time.monotonic() - started < 3
        forged = [_knock(url, **{"X-Forwarded-For": f"10.0.0.{n}"}) for n in range(3)]
        assert forged == [400, 400, 429]
    finally:
        server.terminate()
        server.wait(10)
    text = log.read_text()
    assert "127.0.0.1 POST /api/json/auth 429" in text and "10.0.0." not in text
