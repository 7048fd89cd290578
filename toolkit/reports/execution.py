"""Who executes a queued report instance: the caller chooses.

An executor is called with a :class:`ReportTask` right after the instance is
queued. It may run the task before returning (:func:`inline_executor`), in a
bounded pool of threads (:class:`ThreadExecutor`, for a server: runs beyond the
pool wait, visibly QUEUED), or in a detached process that outlives the caller
(:class:`DetachedProcessExecutor`, for a command line that returns at once). It
returns the id of the process that now owns the instance, when that is another
process, so crash recovery watches the right process.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass
from pathlib import Path

from toolkit.model.location import PostgresURL, StoreLocation, is_postgres
from toolkit.model.visibility import EVERYTHING, Visibility
from toolkit.store import Database, SiteStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportTask:
    """A queued instance, by the site file and site that hold it, and what its caller sees."""

    path: StoreLocation
    site: str
    instance_id: int
    user_id: str | None = None
    visibility: Visibility = EVERYTHING


ReportExecutor = Callable[[ReportTask], int | None]


def run_task(task: ReportTask) -> None:
    """Execute the task on a connection of its own (so any thread or process can)."""
    from toolkit.reports.runner import ReportRunner

    with Database(task.path) as db:
        store = SiteStore(db, task.site, create=False)
        ReportRunner(store, user_id=task.user_id, visibility=task.visibility).execute(
            task.instance_id
        )


def inline_executor(task: ReportTask) -> None:
    """Run the report now, before the run call returns."""
    run_task(task)


def _run_logged(task: ReportTask) -> None:
    try:
        run_task(task)
    except Exception:  # a pool thread has no caller to tell; the instance stays as it was
        log.exception("report instance %s could not be run", task.instance_id)


class ThreadExecutor:
    """Run reports in a pool of ``workers`` threads of this process, so a burst of runs
    never runs more at once; the others wait in order, their instances QUEUED."""

    def __init__(self, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError(f"workers {workers} must be at least 1")
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="report")
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()

    def __call__(self, task: ReportTask) -> None:
        future = self.pool.submit(_run_logged, task)
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()] + [future]

    def join(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for every run handed over so far."""
        with self._lock:
            pending = list(self._futures)
        wait_all(pending, timeout)

    def shutdown(self, wait: bool = True) -> None:
        """Let running and queued runs finish (``wait``), then stop the threads."""
        self.pool.shutdown(wait=wait, cancel_futures=not wait)


class DetachedProcessExecutor:
    """Run each report in ``python -m toolkit ... report work ID``, in its own session,
    so it finishes even after the process that queued it has exited."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        # Kept so the child is never garbage-collected while running (no ResourceWarning).
        self.processes: list[subprocess.Popen[bytes]] = []

    def __call__(self, task: ReportTask) -> int:
        if not task.visibility.everything:
            # The worker acts for the operator; a run limited by duty runs in-process.
            raise ValueError("a detached report worker cannot run a run limited by duty")
        # A PostgreSQL URL goes by the environment: what it holds stays off command lines;
        # a password a config profile gave goes as that profile's name, for the worker to
        # read the profile itself (never as an argument or an environment variable).
        environment = {**os.environ, "TOOLKIT_STORE": str(task.path)}
        if isinstance(task.path, PostgresURL):
            environment.update(task.path.worker_environment())
        store = [] if is_postgres(task.path) else ["--store", str(Path(task.path).resolve())]
        command = [
            self.python,
            "-m",
            "toolkit",
            *store,
            "--site",
            task.site,
            "--quiet",
            "report",
            "work",
            str(task.instance_id),
        ]
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=environment,
        )
        self.processes = [p for p in self.processes if p.poll() is None] + [process]
        return process.pid
