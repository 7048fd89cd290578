"""``toolkit serve --processes N``: N server processes on one listening socket.

One process serves requests with one event loop and one GIL, so on a machine
with several cores ``--processes`` runs that many, each a whole server (its own
threads, SQLite connections and matching index) accepting connections from the
same socket, which the kernel shares out. The parent process only binds the
socket, starts the workers (spawned, not forked: nothing of the parent's threads
or connections is copied), starts one again if it dies, and stops them all on
Ctrl+C or SIGTERM (each finishes its requests and its background jobs first).

What the processes share, and what each keeps (so what a client sees):

- Shared: the site file (SQLite in WAL mode: readers never wait for each other;
  a write waits for the one before it), and so every record, import job and
  report instance (its status reads the same from any process); the token key
  (tokens of one process are good in all); the limits' counts (a user's rate,
  auth calls and refused tokens per address, failed logins per account), which
  live in one file every process maps (:mod:`toolkit.server.tables`).
- Per process: the connection caps (``--max-connections`` and
  ``--max-connections-per-client`` count each process's own connections); the
  background workers (``--workers`` imports and report runs at once, each);
  the matching index and gazetteer in memory (a process that did not run an
  asset import sees the new assets when it next checks the site file's stamp,
  within 2 s); the geocoding service's rate and answer cache (N processes may
  ask it up to N times the rate).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import tempfile
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType

import uvicorn

from toolkit.errors import ToolkitError
from toolkit.model.location import StoreLocation
from toolkit.server.state import LIMIT_TABLES, ServerSettings
from toolkit.server.tables import SharedFile
from toolkit.server.transport import uvicorn_config

log = logging.getLogger("toolkit.server")

RESTART_DELAY_S = 1.0  # before a worker that died is started again
# A worker that keeps ending this soon after its start (a bad file, a full disk) is not
# started again and again: the server stops with an error.
EARLY_END_S = 30.0
MAX_EARLY_ENDS = 3


def log_requests(*, process_ids: bool = False) -> None:
    """Log the server's notes and one line per request to stderr (``toolkit serve``);
    ``process_ids``: each line names its process (with ``--processes``)."""
    logging.getLogger("toolkit.server").setLevel(logging.INFO)
    logging.getLogger("toolkit.server.access").setLevel(logging.INFO)
    if not logging.getLogger().handlers:
        name = "%(name)s[%(process)d]" if process_ids else "%(name)s"
        logging.basicConfig(format=f"%(asctime)s %(levelname)s {name}: %(message)s")


def _shared_folder() -> Path:
    """Memory-backed when the system has it: the limits' file is written on every request."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def _worker(
    store: StoreLocation,
    settings: ServerSettings,
    shared: SharedFile,
    sock: socket.socket,
    quiet: bool,
) -> None:
    """One server process: the app over the shared limits, serving the parent's socket."""
    from toolkit.server.app import create_app

    if not quiet:
        log_requests(process_ids=True)
    app = create_app(store, settings=settings, shared_limits=shared)
    sock = tcp_socket(sock)
    host, port = sock.getsockname()[:2]
    uvicorn.Server(uvicorn_config(app, host=host, port=port)).run(sockets=[sock])


def tcp_socket(sock: socket.socket) -> socket.socket:
    """``sock`` as a socket that knows its protocol is TCP.

    A socket made without naming its protocol (uvicorn's, and so the one a worker is
    handed) says protocol 0, and so do the connections it accepts; asyncio sets
    TCP_NODELAY only on those saying TCP, and without it every small answer waits for
    the client's delayed ACK: 40 ms a request on a kept-alive connection. Made again
    from its descriptor, the socket asks the system, which says TCP.
    """
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
        return socket.socket(fileno=sock.detach())
    return sock


def serve_processes(
    store: StoreLocation,
    settings: ServerSettings,
    *,
    host: str,
    port: int,
    processes: int,
    quiet: bool = False,
) -> None:
    """Serve with ``processes`` worker processes until SIGINT or SIGTERM."""
    if not hasattr(socket, "SO_REUSEADDR") or os.name != "posix":
        raise OSError("--processes needs a POSIX system")
    # uvicorn binds it as it binds its own (address reuse, IPv6); the app is never loaded.
    sock = uvicorn.Config(app="unused:app", host=host, port=port, log_level="warning").bind_socket()
    shared = SharedFile.create(_shared_folder(), LIMIT_TABLES)
    context = multiprocessing.get_context("spawn")
    workers: list[BaseProcess] = []
    stopping = False

    def start() -> BaseProcess:
        worker = context.Process(
            target=_worker,
            args=(store, settings, shared, sock, quiet),
            name="toolkit-serve-worker",
        )
        worker.start()
        return worker

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signal.SIGTERM)  # uvicorn's graceful shutdown

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    started: dict[BaseProcess, float] = {}
    early_ends = 0  # workers in a row that ended soon after starting
    try:
        for _ in range(processes):
            workers.append(start())
            started[workers[-1]] = time.monotonic()
        while workers:
            wait([w.sentinel for w in workers], timeout=1.0)
            for worker in [w for w in workers if not w.is_alive()]:
                worker.join()
                workers.remove(worker)
                if stopping:
                    continue
                early = time.monotonic() - started.pop(worker) < EARLY_END_S
                early_ends = early_ends + 1 if early else 0
                if early_ends >= MAX_EARLY_ENDS:
                    stop(signal.SIGTERM, None)
                    raise ToolkitError(
                        f"server workers ended {early_ends} times in a row within "
                        f"{EARLY_END_S:g} s of starting (exit code {worker.exitcode}); "
                        "see the log above"
                    )
                log.warning(
                    "server worker %s ended (exit code %s); starting another",
                    worker.pid,
                    worker.exitcode,
                )
                time.sleep(RESTART_DELAY_S)
                workers.append(start())
                started[workers[-1]] = time.monotonic()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for worker in workers:
            worker.terminate()
            worker.join(30)
        sock.close()
        shared.path.unlink(missing_ok=True)
