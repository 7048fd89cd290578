"""Limits of the server: the 10 MB request size, rate limits, and the access log.

The size limit is a pure ASGI middleware: a ``Content-Length`` over the limit
is answered 413 before any of the body is read, and a streamed body is counted
as it arrives and answered 413 as soon as the count passes the limit.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkit.errors import AuthenticationError, OptionError
from toolkit.server.errors import BodyTooLarge, RateLimited
from toolkit.server.tables import MemoryTable, Table

access_log = logging.getLogger("toolkit.server.access")

MAX_BODY_BYTES = 10 * 1024 * 1024
_PERIODS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with 413 without reading them whole."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _send_json(send, BodyTooLarge(self.max_bytes))
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLarge as exc:
            if started:
                raise
            await _send_json(send, exc)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_json(send: Send, exc: BodyTooLarge) -> None:
    body = json.dumps({"status": exc.status, "message": exc.message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": exc.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # The rest of the body is never read; the connection cannot be reused.
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@functools.lru_cache(maxsize=4096)  # asked on every request; parsing an address is not free
def client_key(host: str) -> str:
    """The address limits count by: an IPv4 address, or an IPv6 address's /64 network.

    One IPv6 host is usually given a whole /64, so counting its addresses one by
    one would give it billions of budgets.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if not isinstance(address, ipaddress.IPv6Address):
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


@dataclass(frozen=True)
class Rate:
    """``count`` requests per ``period_s`` seconds."""

    count: int
    period_s: float


def parse_rate(text: str | None) -> Rate | None:
    """``600/minute``, ``10/second``, ``5000/hour``; ``none`` or empty for no limit."""
    if text is None or text.strip().lower() in ("", "none", "0"):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(second|minute|hour)\s*", text.lower())
    if not match or int(match.group(1)) == 0:
        raise OptionError(
            f"rate limit {text!r} is not COUNT/PERIOD with PERIOD one of: second, minute, hour "
            "(e.g. 600/minute), or none"
        )
    return Rate(int(match.group(1)), _PERIODS[match.group(2)])


class RateLimiter:
    """``rate.count`` requests per ``rate.period_s`` per key, as a token bucket (GCRA).

    A key may use its whole budget in a burst, then one request per
    ``period_s / count`` seconds; there is no window edge at which the budget
    doubles. The clock is injectable so that tests do not depend on the time. The
    counts are kept in ``table``: this process's own, or one every process of the
    server shares (:mod:`toolkit.server.tables`).
    """

    def __init__(
        self,
        rate: Rate | None,
        clock_s: Callable[[], float] = time.time,
        table: Table | None = None,
    ) -> None:
        self.rate = rate
        self.clock_s = clock_s
        # key -> the theoretical arrival time of the next request; in the past = full bucket.
        self.table: Table = MemoryTable(width=1) if table is None else table
        self._prune_at = min(100_000, self.table.max_rows)

    def check(self, key: str) -> None:
        """Count one request for ``key``; raise :class:`RateLimited` when over the rate."""
        self._take(key, count=True, refuse=True)

    def peek(self, key: str) -> None:
        """Raise :class:`RateLimited` if one more request of ``key`` is over; count nothing."""
        self._take(key, count=False, refuse=True)

    def count(self, key: str) -> None:
        """Count one request of ``key`` that has already been served (e.g. a refused token)."""
        self._take(key, count=True, refuse=False)

    def _take(self, key: str, *, count: bool, refuse: bool) -> None:
        if self.rate is None:
            return
        now = self.clock_s()
        step = self.rate.period_s / self.rate.count
        table = self.table
        with table.locked():
            if len(table) > self._prune_at:  # forget full buckets; keeps memory bounded
                table.keep(table.max_rows // 2, 0, now)
                # Not again until the table has doubled: a flood of keys costs O(1) a request.
                self._prune_at = min(max(100_000, 2 * len(table)), table.max_rows - 1)
            row = table.get(key)
            after = now if row is None else row[0]
            if after - now > self.rate.period_s + step:  # the clock went back: start afresh
                after = now
            after = max(after, now) + step
            if after - now > self.rate.period_s:
                if refuse:
                    raise RateLimited(after - self.rate.period_s - now)
                after = now + self.rate.period_s + step  # a flood keeps the key just over
            if count:
                table.put(key, (after,))


@dataclass(frozen=True)
class Backoff:
    """Lock an account after ``free`` failed logins in a row: ``base_s``, doubling to ``max_s``."""

    free: int = 5
    base_s: float = 2.0
    max_s: float = 900.0
    forget_s: float = 86_400.0  # a day without failures forgets the count


LOCKED_MESSAGE = "too many failed logins for this account; retry after {seconds} s"


class LoginBackoff:
    """Failed logins per account name, with an exponential lockout.

    Keyed by the name as given (an unknown name is counted like a known one, so
    the answers never tell whether an account exists). A success forgets the
    count. A lock refuses every attempt, the right password too, with 429. The
    counts are kept in ``table`` (this process's, or shared by the server's
    processes), at most 100,000 accounts: past that the oldest failures are forgotten.
    """

    def __init__(
        self, policy: Backoff, clock_s: Callable[[], float] = time.time, table: Table | None = None
    ) -> None:
        self.policy = policy
        self.clock_s = clock_s
        # key -> (failures in a row, locked until, last failure).
        self.table: Table = MemoryTable(width=3) if table is None else table
        self.max_accounts = min(100_000, self.table.max_rows - 1)

    def check(self, key: str) -> None:
        """Raise :class:`RateLimited` while ``key`` is locked."""
        now = self.clock_s()
        with self.table.locked():
            entry = self.table.get(key)
            if entry is not None and entry[1] - now > self.policy.max_s:
                # The clock went back: no lock lasts longer than the longest.
                entry = (entry[0], now + self.policy.max_s, now)
                self.table.put(key, entry)
        if entry is not None and entry[1] > now:
            raise RateLimited(entry[1] - now, LOCKED_MESSAGE)

    def failed(self, key: str) -> None:
        now = self.clock_s()
        policy = self.policy
        table = self.table
        with table.locked():
            failures, _, last = table.get(key) or (0, 0.0, now)
            if now - last > policy.forget_s:
                failures = 0
            failures += 1
            until = 0.0
            if failures >= policy.free:
                until = now + min(policy.max_s, policy.base_s * 2 ** (failures - policy.free))
            table.put(key, (failures, until, now))
            if len(table) > self.max_accounts:
                # Bounded memory: forget the oldest failures (down to nine tenths, so that a
                # flood of names costs a sort now and then, not one on every failure).
                table.keep(self.max_accounts * 9 // 10, 2, float("-inf"))

    @contextmanager
    def attempt(self, key: str | None) -> Iterator[None]:
        """Refuse a locked ``key``; count an :class:`AuthenticationError` as a failure, else reset.

        ``None`` (a login by API key) is not counted: keys are long random secrets.
        """
        if key is None:
            yield
            return
        self.check(key)
        try:
            yield
        except AuthenticationError:
            self.failed(key)
            raise
        self.succeeded(key)

    def succeeded(self, key: str) -> None:
        with self.table.locked():
            self.table.pop(key)


class AccessLogMiddleware:
    """One log line per request: method, path, status, time. Never headers, query or body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        finally:
            client = scope.get("client") or ("-", 0)
            access_log.info(
                "%s %s %s %d %.1fms",
                client[0],
                scope["method"],
                scope["path"],
                status,
                (time.perf_counter() - started) * 1000,
            )
