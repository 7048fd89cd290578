"""Checkpointing a SQLite site file's write-ahead log after a bulk write, off the writer.

A committed import of a million rows leaves some 400 MiB of pages in the log. SQLite's
automatic checkpoint would copy them into the file inside the COMMIT, first syncing the
log it has just written: 2-3 s of the import spent waiting on the disk (bench_import:
commit 3.2-3.6 s, against 0.7-1.1 s with the checkpoint left to later, and 1 s for that
checkpoint once the log's pages have gone to the disk). A bulk transaction turns the
automatic checkpoint off (:meth:`WalCheckpointer.hold`) and, once committed, this copies
the log in a thread of its own on a connection of its own (SQLite's own advice for large
writes: a checkpoint runs beside readers and writers). The commit is durable either way:
the log holds it. A large read waits for the copy (``Database.log_copied``).

The automatic checkpoint of the store's connection stays off until that copy is done: a
small commit just after the import would otherwise make the same copy inside itself.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger(__name__)


class WalCheckpointer:
    """Checkpoints one site file's log in a background thread when asked; :meth:`wait`
    returns once nothing asked of it is left (the store's close waits, so a command's
    process ends with the log copied, as SQLite's close of the last connection would)."""

    def __init__(self, path: Path, *, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False  # a commit came while a checkpoint ran: one more after it
        # The connection's automatic checkpoint (pages) while it is held off, else None.
        self._held: int | None = None

    def hold(self, connection: sqlite3.Connection) -> None:
        """No automatic checkpoint at ``connection``'s commits (a bulk write's) until
        :meth:`release` finds this idle."""
        if self._held is None:
            (self._held,) = connection.execute("PRAGMA wal_autocheckpoint").fetchone()
            connection.execute("PRAGMA wal_autocheckpoint = 0")

    def release(self, connection: sqlite3.Connection) -> None:
        """``connection``'s automatic checkpoint as before :meth:`hold`, once no
        checkpoint runs here (called as each of its transactions begins)."""
        if self._held is not None and not self.running():
            connection.execute(f"PRAGMA wal_autocheckpoint = {int(self._held)}")
            self._held = None

    def request(self) -> None:
        """Checkpoint the log soon, in the background (again, if one is under way)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._again = True
                return
            # Not a daemon: a process that ends meanwhile lets the copy finish first.
            self._thread = threading.Thread(
                target=self._run, name="toolkit-checkpoint", daemon=False
            )
            self._thread.start()

    def running(self) -> bool:
        """Whether a checkpoint is under way or asked for."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def wait(self) -> None:
        """Return once every checkpoint asked for has run."""
        while True:
            with self._lock:
                thread = self._thread
            if thread is None or not thread.is_alive():
                return
            thread.join()

    def _run(self) -> None:
        while True:
            self._checkpoint()
            with self._lock:
                if not self._again:
                    return
                self._again = False

    def _checkpoint(self) -> None:
        """One PASSIVE checkpoint: it copies what no reader still needs and never waits
        for the write lock; what it leaves, a later checkpoint copies."""
        try:
            connection = sqlite3.connect(self.path, timeout=self.timeout_s)
            try:
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            finally:
                connection.close()
        except sqlite3.Error as exc:
            # The commit is in the log and stays readable; the next checkpoint copies it.
            log.warning("checkpoint of %s left for later: %s", self.path.name, exc)
