"""The transport of ``toolkit serve``: uvicorn's config, and a guard against slow clients.

uvicorn (h11) reads a request head for as long as the client keeps the
connection open, and a connection that never sends a byte is never closed.
:class:`GuardedH11Protocol` adds, per connection:

- a head timeout: the request line and headers must arrive within
  ``header_timeout_s`` of the connection opening, or of the first byte of a
  later request on a kept-alive connection (the idle time between requests is
  uvicorn's keep-alive timeout);
- a body timeout: the whole body must arrive within ``body_timeout_s`` of the
  end of the head (not counted while the server itself has paused reading);
- a write timeout: a client that stops reading its answer is cut off after
  ``body_timeout_s`` of being unable to take more;
- connection caps: at most ``max_connections`` open at once, and
  ``max_connections_per_client`` per peer address (proxies the operator trusts
  with ``forwarded_allow_ips`` are exempt; they carry everyone's connections).

A timed-out request is answered ``408 {status, message}`` (when no answer has
started) and the connection closed; a connection over a cap is answered 503
with ``Retry-After`` and closed before its request is read.

:func:`uvicorn_config` is the one place the server's uvicorn settings are made,
for ``toolkit serve`` and for the tests alike.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import threading
from typing import Any, Protocol

import h11
import uvicorn
from uvicorn.middleware.proxy_headers import _TrustedHosts
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolkit.server.limits import client_key
from toolkit.server.state import ServerSettings

log = logging.getLogger("toolkit.server")

HEAD_TIMEOUT_MESSAGE = "the request headers did not arrive within {seconds:g} s"
BODY_TIMEOUT_MESSAGE = "the request body did not arrive within {seconds:g} s"
BUSY_MESSAGE = "too many connections; retry later"
BUSY_RETRY_AFTER_S = 5


class Hosts(Protocol):
    """Peer addresses that are exempt: a tuple, or uvicorn's reading of trusted proxies
    (whose ``__contains__`` takes only text, so it is no ``Container[str]``)."""

    def __contains__(self, host: str, /) -> bool: ...


class ConnectionBook:
    """Open connections, in total and per peer address, of one server."""

    def __init__(self, total: int, per_client: int, exempt: Hosts) -> None:
        self.total = total
        self.per_client = per_client
        self.exempt = exempt
        self._lock = threading.Lock()
        self._open = 0
        self._by_peer: dict[str, int] = {}

    def opened(self, peer: str) -> bool:
        """Count a new connection; False when it is over a cap (it is counted all the same)."""
        key = client_key(peer)
        with self._lock:
            self._open += 1
            count = self._by_peer[key] = self._by_peer.get(key, 0) + 1
            if self._open > self.total:
                return False
            return count <= self.per_client or peer in self.exempt

    def closed(self, peer: str) -> None:
        key = client_key(peer)
        with self._lock:
            self._open -= 1
            left = self._by_peer.get(key, 1) - 1
            if left > 0:
                self._by_peer[key] = left
            else:
                self._by_peer.pop(key, None)


def _raw_answer(status: int, reason: str, message: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 answer closing the connection, written outside h11's state machine."""
    body = json.dumps({"status": status, "message": message}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with head, body and write timeouts and connection caps."""

    settings: ServerSettings  # set on the per-server subclass made by :func:`protocol_class`
    book: ConnectionBook

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: str | None = None  # "head" or "body": what the timer waits for
        self._timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._peer = "-"

    # --- connection caps ------------------------------------------------------------------

    # As uvicorn's own (ignored there too): asyncio's base protocol takes any BaseTransport.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = self.client[0] if self.client else "-"
        if not self.book.opened(self._peer):
            log.info("refused a connection from %s: too many connections", self._peer)
            transport.write(
                _raw_answer(
                    503,
                    "Service Unavailable",
                    BUSY_MESSAGE,
                    f"retry-after: {BUSY_RETRY_AFTER_S}\r\n",
                )
            )
            transport.close()
            return
        self._update_guard()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self.book.closed(self._peer)
        super().connection_lost(exc)

    # --- read timeouts --------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._update_guard()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._update_guard()

    def _update_guard(self) -> None:
        """Arm the timer for what the connection now waits for from the client, if anything."""
        if self.transport.is_closing():
            self._cancel_timer()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            # A fresh connection (no head yet), or bytes of a next request: a head is on its way.
            fresh = self.scope is None
            phase = "head" if fresh or self.conn.trailing_data[0] else None
        elif state is h11.SEND_BODY:
            phase = "body"
        else:
            phase = None
        if phase == self._phase:
            return
        self._cancel_timer()
        self._phase = phase
        if phase is not None:
            self._arm(phase)

    def _arm(self, phase: str) -> None:
        settings = self.settings
        timeout = settings.header_timeout_s if phase == "head" else settings.body_timeout_s
        self._timer = self.loop.call_later(timeout, self._timed_out, phase)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._phase = None

    def _timed_out(self, phase: str) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:
            # The server stopped reading (the app has not taken the body yet): not the client's
            # fault; wait another period.
            self._arm(phase)
            return
        if phase == "head":
            seconds = self.settings.header_timeout_s
            message = HEAD_TIMEOUT_MESSAGE.format(seconds=seconds)
        else:
            seconds = self.settings.body_timeout_s
            message = BODY_TIMEOUT_MESSAGE.format(seconds=seconds)
        log.info("closed a connection from %s: %s", self._peer, message)
        cycle = self.cycle
        if phase == "head" or (cycle is not None and not cycle.response_started):
            self.transport.write(_raw_answer(408, "Request Timeout", message))
        if cycle is not None and not cycle.response_complete:
            # The app waiting for the body gets http.disconnect; it must not answer too.
            cycle.disconnected = True
            cycle.message_event.set()
        self._phase = None
        self.transport.close()

    # --- write timeout --------------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(
                self.settings.body_timeout_s, self._write_timed_out
            )

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_timed_out(self) -> None:
        self._write_timer = None
        log.warning("closed a connection from %s: it stopped reading the answer", self._peer)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            # Linger 0: the kernel drops what it still holds for this reader and resets the
            # connection, instead of trickling it out after we let go.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()  # close() would wait for a buffer that never drains


def protocol_class(settings: ServerSettings) -> type[GuardedH11Protocol]:
    """The protocol of one server: its settings and its own connection counts."""
    # uvicorn's own reading of forwarded_allow_ips (addresses, networks, "*"), so the proxies
    # exempt from the per-client cap are exactly those whose X-Forwarded-For is believed.
    exempt: Hosts = (
        _TrustedHosts(settings.forwarded_allow_ips) if settings.forwarded_allow_ips else ()
    )
    book = ConnectionBook(settings.max_connections, settings.max_connections_per_client, exempt)
    return type("ServerH11Protocol", (GuardedH11Protocol,), {"settings": settings, "book": book})


def uvicorn_config(
    app: Any, *, host: str, port: int, settings: ServerSettings | None = None
) -> uvicorn.Config:
    """uvicorn's settings for ``toolkit serve`` (``settings`` default: the app's own)."""
    if settings is None:
        state = getattr(getattr(app, "state", None), "server", None)
        settings = state.settings if state is not None else ServerSettings()
    trusted = settings.forwarded_allow_ips
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(settings),
        ws="none",  # no WebSocket routes; an upgrade would also leave the connection caps
        lifespan="on",
        # Our own access log replaces uvicorn's, which would print query strings.
        access_log=False,
        log_level="warning",
        # X-Forwarded-For/-Proto are believed only from the proxies the operator names;
        # uvicorn's default (trust 127.0.0.1) would let any local client forge its address.
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or "",
        timeout_keep_alive=settings.keep_alive_s,  # type: ignore[arg-type]  # call_later takes a float
        h11_max_incomplete_event_size=settings.max_head_bytes,
    )
