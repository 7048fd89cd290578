"""Running the real server on loopback for tests and benchmarks: uvicorn in a thread.

The uvicorn settings are those of ``toolkit serve`` (:func:`uvicorn_config`), with the
app's own :class:`ServerSettings` (timeouts, connection caps, trusted proxies).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from toolkit.server.transport import uvicorn_config


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (at a free port unless given); yields the base URL."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
