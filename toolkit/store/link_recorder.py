"""Recording an import's links behind its linking: :class:`LinkRecorder`."""

from __future__ import annotations

import contextlib
import logging
import pickle
import sqlite3
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from toolkit.errors import StoreError
from toolkit.own_process import end, start_main

if TYPE_CHECKING:
    from toolkit.store.site_store import SiteStore

log = logging.getLogger(__name__)

# From this many rows an import's links are recorded by a process of its own
# (``own_process``): its start costs ~0.5 s of CPU on the other core, and it saves about
# 0.1 s a 125,000-row part.
OWN_PROCESS_ROWS = 500_000


class LinkRecorder:
    """Records the links of an import's parts with the job in a thread of its own, on a
    connection of its own, while the caller links the next part: SQLite steps through
    the rows without the GIL (a million links: ~3 s that the link stage waited for). The
    parts are recorded in the order given, each in its own transaction as before; at
    most one waits. :meth:`finish` waits for the last and raises a failure of any.

    With ``own_process`` (a SQLite site), that thread hands each part to a process of
    its own (:mod:`toolkit.store.link_process`), begun by :meth:`start` (by the first
    part at the latest; earlier, it is ready by then): turning a million links into
    SQLite's values holds a GIL for ~1.5 s, which in this process the linking of the
    next part waited for (the second pass of a 1,000,000-row import: 4.7 s, 3.2 s with
    no links recorded, 3.9 s with them recorded by that process)."""

    def __init__(self, store: SiteStore, *, own_process: bool = False) -> None:
        self._store = store
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="toolkit-links")
        self._pending: Future[None] | None = None
        self._conn: sqlite3.Connection | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._own_process = own_process and store.db.dialect == "sqlite"
        self._ready = False  # the process has said it is ready

    def start(self) -> None:
        """Begin the recording process now (``own_process``), if it has not begun."""
        if self._own_process and self._process is None:
            self._process = _start(Path(self._store.db.path), self._store.site_id)

    def record(self, job_id: int, links: pd.DataFrame, *, append: bool) -> None:
        """Record ``links`` (``JobStore.record_links``) once the part before is recorded."""
        self._wait()
        self.start()
        write = self._write if self._process is None else self._send
        self._pending = self._writer.submit(write, job_id, links, append)

    def _write(self, job_id: int, links: pd.DataFrame, append: bool) -> None:
        db = self._store.db
        if self._conn is None:
            self._conn = db.connect_again()
        with db.transaction_on(self._conn) as conn:
            self._store.jobs.record_links(job_id, links, conn=conn, append=append)

    def _send(self, job_id: int, links: pd.DataFrame, append: bool) -> None:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        if not self._ready:
            problem = _unready(process)
            if problem is not None:
                # Where this interpreter cannot run the toolkit as a program (embedded, or
                # frozen), the links are recorded here, as a smaller import's are.
                log.warning("an import's links are recorded in this process: %s", problem)
                self._process = None
                _stop(process)
                self._write(job_id, links, append)
                return
            self._ready = True
        try:
            pickle.dump((job_id, append, links), process.stdin, protocol=5)
            process.stdin.flush()
            failure = pickle.load(process.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            status = process.poll()
            raise StoreError(
                "the process recording the import's links ended"
                + ("" if status is None else f" (exit status {status})")
            ) from exc
        if failure is not None:
            raise failure

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def finish(self) -> None:
        """Wait for every part's links; raises the failure of one that failed."""
        try:
            self._wait()
        finally:
            self.close()

    def close(self) -> None:
        """Wait for the writer and let it go (a failure, the caller's own error already
        on its way, is logged); the links recorded so far stay, as they would have."""
        try:
            self._wait()
        except Exception:
            log.warning("recording an import's links failed", exc_info=True)
        conn, self._conn = self._conn, None
        if conn is not None:
            # Closed in the thread that opened it (sqlite3's rule for its connections).
            self._writer.submit(conn.close).result()
        self._writer.shutdown(wait=True)
        process, self._process = self._process, None
        self._own_process = False  # nothing is recorded once closed
        if process is not None:
            _stop(process)


def _start(path: Path, site_id: int) -> subprocess.Popen[bytes]:
    """The recording process of the site file ``path``, told which file and site."""
    process = start_main("toolkit.store.link_process")
    assert process.stdin is not None
    with contextlib.suppress(OSError):  # it has ended already: the first part says so
        pickle.dump((str(path.resolve()), site_id), process.stdin)
        process.stdin.flush()
    return process


def _unready(process: subprocess.Popen[bytes]) -> str | None:
    """Why the recording process cannot record (it ended, or could not open the site
    file), or None once it has said it is ready."""
    assert process.stdout is not None
    try:
        ready = pickle.load(process.stdout)
    except (OSError, EOFError, pickle.UnpicklingError):
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        return f"its own process could not start (exit status {process.poll()})"
    if ready is not None:
        return f"its own process could not open the site file: {ready}"
    return None


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the recording process: the end of its input ends it (each part it recorded
    is committed: between parts it holds no transaction)."""
    if not end(process, wait_s=30):
        log.warning("the process recording an import's links did not end: stopped")
