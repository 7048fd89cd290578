"""Recording an import's links behind its linking: :class:`LinkRecorder`."""

from __future__ import annotations

import logging
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from toolkit.store.site_store import SiteStore

log = logging.getLogger(__name__)


class LinkRecorder:
    """Records the links of an import's parts with the job in a thread of its own, on a
    connection of its own, while the caller links the next part: SQLite steps through
    the rows without the GIL (a million links: ~3 s that the link stage waited for). The
    parts are recorded in the order given, each in its own transaction as before; at
    most one waits. :meth:`finish` waits for the last and raises a failure of any."""

    def __init__(self, store: SiteStore) -> None:
        self._store = store
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="toolkit-links")
        self._pending: Future[None] | None = None
        self._conn: sqlite3.Connection | None = None

    def record(self, job_id: int, links: pd.DataFrame, *, append: bool) -> None:
        """Record ``links`` (``JobStore.record_links``) once the part before is recorded."""
        self._wait()
        self._pending = self._writer.submit(self._write, job_id, links, append)

    def _write(self, job_id: int, links: pd.DataFrame, append: bool) -> None:
        db = self._store.db
        if self._conn is None:
            self._conn = db.connect_again()
        with db.transaction_on(self._conn) as conn:
            self._store.jobs.record_links(job_id, links, conn=conn, append=append)

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
