"""Limits of the server: the 10 MB request size, rate limits, and the access log.

The size limit is a pure ASGI middleware: a ``Content-Length`` over the limit
is answered 413 before any of the body is read, and a streamed body is counted
as it arrives and answered 413 as soon as the count passes the limit.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkit.errors import OptionError
from toolkit.server.errors import BodyTooLarge, RateLimited

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
    """Fixed windows per key (a token, or a client address for ``auth``)."""

    def __init__(self, rate: Rate | None, clock_s: Callable[[], float] = time.time) -> None:
        self.rate = rate
        self.clock_s = clock_s
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[int, int]] = {}

    def check(self, key: str) -> None:
        """Count one request for ``key``; raise :class:`RateLimited` when over the rate."""
        if self.rate is None:
            return
        now = self.clock_s()
        window = int(now // self.rate.period_s)
        with self._lock:
            if len(self._windows) > 100_000:  # forget old windows; keeps memory bounded
                self._windows = {k: v for k, v in self._windows.items() if v[0] == window}
            start, count = self._windows.get(key, (window, 0))
            if start != window:
                start, count = window, 0
            if count >= self.rate.count:
                raise RateLimited((window + 1) * self.rate.period_s - now)
            self._windows[key] = (start, count + 1)


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
