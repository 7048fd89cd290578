"""``toolkit serve --processes 2``: two server processes on one port act as one server.

A real ``toolkit serve`` on 127.0.0.1 with two worker processes; every request
goes on a fresh connection, so the kernel hands them to either process (each
access-log line names its process, so the tests see that both served). The
answers are the same from both, a write through one is read through the other,
and the user's rate and an account's failed logins are counted over both.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from server_world import DEVICE, PASSWORD, build_site
from serving import free_port

from toolkit.server.limits import Backoff, LoginBackoff, RateLimiter, parse_rate
from toolkit.server.processes import tcp_socket
from toolkit.server.tables import SharedFile

RATE = 30  # per hour and user: one more every 2 minutes, so none comes back during a test


@dataclass
class Served:
    url: str
    log: Path
    ids: dict[str, object]
    server: subprocess.Popen[bytes]

    def fresh(
        self, method: str, path: str, token: str | None = None, **kwargs: object
    ) -> httpx.Response:
        """One request on a connection of its own (the kernel picks the process)."""
        headers = {"X-Site": "alpha", "Connection": "close"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        with httpx.Client(base_url=self.url, headers=headers, timeout=60) as client:
            return client.request(method, path, **kwargs)  # type: ignore[arg-type]  # httpx's own keywords

    def login(self, username: str, password: str = PASSWORD) -> httpx.Response:
        body = {**DEVICE, "username": username, "password": password}
        return self.fresh("POST", "/api/json/auth", json=body)

    def token(self, username: str) -> str:
        answer = self.login(username)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["token"])

    def mark(self) -> int:
        """Where the log ends now (for :meth:`pids` of later lines only)."""
        return len(self.log.read_text())

    def pids(self, line: str, since: int = 0) -> set[str]:
        """The processes whose access log has a line with ``line`` in it (after ``since``)."""
        text = self.log.read_text()[since:]
        found = re.findall(r"toolkit\.server\.access\[(\d+)\]: (.*)", text)
        return {pid for pid, logged in found if line in logged}

    def until_both(
        self, line: str, send: Callable[[], httpx.Response], since: int = 0, most: int = 200
    ) -> list[httpx.Response]:
        """``send()`` until both processes have logged ``line`` after ``since`` (at most
        ``most`` times).

        Which process accepts a connection is the kernel's choice; on a busy machine one
        process can take many in a row, so a fixed number of requests may all go to one.
        """
        answers: list[httpx.Response] = []
        while len(self.pids(line, since)) < 2:
            assert len(answers) < most, f"one process answered all {most} requests"
            answers.append(send())
        return answers


def start(ids: dict[str, object], log: Path) -> Served:
    """``toolkit serve --processes 2`` of the world's file, once both workers answer."""
    port = free_port()
    command = [sys.executable, "-m", "toolkit", "--store", str(ids["path"]), "serve"]
    command += ["--port", str(port), "--processes", "2", "--rate-limit", f"{RATE}/hour"]
    with log.open("w") as err:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    world = Served(f"http://127.0.0.1:{port}", log, ids, server)
    # Both workers up: pings on fresh connections until two processes have answered.
    deadline = time.monotonic() + 120
    while len(world.pids("GET /api/json/ping 200")) < 2:
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise AssertionError(log.read_text())
        try:
            world.fresh("GET", "/api/json/ping")
        except httpx.TransportError:
            time.sleep(0.2)
    return world


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("processes")
    world = start(build_site(folder), folder / "serve.log")
    try:
        yield world
    finally:
        if world.server.poll() is None:
            world.server.terminate()
            world.server.wait(60)


def test_both_processes_answer_alike_and_see_each_others_writes(served: Served) -> None:
    token = served.token("duty")  # a token made by one process is good in the other
    page = {"registerId": "damage-assessment", "eventId": str(served.ids["event"]), "limit": "5"}
    answers = [served.fresh("GET", "/api/json/item", token, params=page) for _ in range(8)]
    assert {a.status_code for a in answers} == {200}
    assert len({a.content for a in answers}) == 1
    assert len(answers[0].json()["models"]) == 5
    # A write through either process, then reads through both.
    item = served.ids["item"]
    since = served.mark()
    written = served.fresh(
        "PATCH", f"/api/json/item/id/{item}", token, json={"notes": "Seen by both"}
    )
    assert written.status_code == 200, written.text
    reads = served.until_both(
        f"GET /api/json/item/id/{item} 200",
        lambda: served.fresh("GET", f"/api/json/item/id/{item}", token),
        since,
    )
    assert {r.json()["notes"] for r in reads} == {"Seen by both"}


def test_a_users_rate_is_counted_over_both_processes(served: Served) -> None:
    token = served.token("offduty")
    since = served.mark()
    statuses = [served.fresh("GET", "/api/json/register", token).status_code for _ in range(40)]
    # More until both processes have answered one: counted in each process alone, the
    # one that saw fewer would let its own first ones through, so more than 30 in all.
    more = served.until_both(
        "GET /api/json/register", lambda: served.fresh("GET", "/api/json/register", token), since
    )
    statuses += [answer.status_code for answer in more]
    assert statuses.count(200) == RATE
    assert statuses.count(429) == len(statuses) - RATE


def test_failed_logins_lock_the_account_in_both_processes(served: Served) -> None:
    # Failed logins until the account is locked for 16 s (the 8th failure in a row: 5 free,
    # then 2, 4, 8 and 16 s), waiting out the shorter locks; in each process alone the
    # count would take more failures than that to get there.
    failures = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answer = served.login("admin", "wrong password")
        if answer.status_code == 401:
            failures += 1
            continue
        assert answer.status_code == 429, answer.text
        wait_s = int(answer.headers["retry-after"])
        if wait_s >= 10:
            break
        time.sleep(wait_s)
    assert failures == 8
    # Locked now, whichever process answers (both do, below): the right password is
    # refused too. Counted in each process alone, one would not have locked it yet.
    locked = served.until_both(
        "POST /api/json/auth 429", lambda: served.login("admin"), since=served.mark()
    )
    assert {answer.status_code for answer in locked} == {429}
    assert "too many failed logins for this account" in locked[0].json()["message"]


def test_stopping_the_server_stops_its_workers_and_removes_the_shared_file(
    served: Served, tmp_path: Path
) -> None:
    served = start(served.ids, tmp_path / "serve.log")  # a server of its own, to stop
    workers = {int(pid) for pid in served.pids("200")}
    assert len(workers) == 2
    # Each worker maps the limits' file (the links of its open files, on Linux).
    links = {fd.readlink() for pid in workers for fd in Path(f"/proc/{pid}/fd").iterdir()}
    shared = {link for link in links if link.name.startswith("toolkit-serve-limits-")}
    assert len(shared) == 1 and next(iter(shared)).exists()
    served.server.terminate()
    assert served.server.wait(60) == 0
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not next(iter(shared)).exists()


# --- the shared tables themselves, between two real processes ----------------------------


# Locked for 10 minutes after 5 failures: the lock outlasts a slow machine's process start.
SLOW_BACKOFF = Backoff(free=5, base_s=600.0)


def _fail_logins(shared: SharedFile, key: str, times: int) -> None:
    _, _, _, logins = shared.open()
    backoff = LoginBackoff(SLOW_BACKOFF, table=logins)
    for _ in range(times):
        backoff.failed(key)


def test_counts_made_in_another_process_are_seen_here(tmp_path: Path) -> None:
    shared = SharedFile.create(tmp_path, (1, 1, 1, 3))
    other = multiprocessing.get_context("spawn").Process(
        target=_fail_logins, args=(shared, "alpha\0admin", 5)
    )
    other.start()
    other.join(60)
    assert other.exitcode == 0
    user, _, _, logins = shared.open()
    backoff = LoginBackoff(SLOW_BACKOFF, table=logins)
    with pytest.raises(Exception, match="too many failed logins"):
        backoff.check("alpha\0admin")
    backoff.check("alpha\0someone else")  # other accounts are not locked
    backoff.succeeded("alpha\0admin")
    backoff.check("alpha\0admin")
    limiter = RateLimiter(parse_rate("2/minute"), clock_s=lambda: 1000.0, table=user)
    limiter.check("u")
    limiter.check("u")
    with pytest.raises(Exception, match=r"(?i)rate"):
        limiter.check("u")


def test_a_workers_socket_says_tcp_so_answers_are_not_delayed() -> None:
    """Without it asyncio leaves Nagle on: 40 ms a request on a kept-alive connection."""
    bound = uvicorn.Config(app="unused:app", host="127.0.0.1", port=0).bind_socket()
    handed = socket.socket(bound.family, bound.type, 0, fileno=os.dup(bound.fileno()))
    assert handed.proto == 0  # as a worker gets it from its parent
    sock = tcp_socket(handed)
    assert sock.proto == socket.IPPROTO_TCP and sock.getsockname() == bound.getsockname()
    sock.listen()
    with socket.create_connection(sock.getsockname()[:2]):
        accepted, _ = sock.accept()
        assert accepted.proto == socket.IPPROTO_TCP
        accepted.close()
    sock.close()
    bound.close()
