"""Who executes a queued report instance: the caller chooses.

An executor is called with a :class:`ReportTask` right after the instance is
queued. It may run the task before returning (:func:`inline_executor`), in a
thread (:class:`ThreadExecutor`, for a server), or in a detached process that
outlives the caller (:class:`DetachedProcessExecutor`, for a command line that
returns at once). It returns the id of the process that now owns the instance,
when that is another process, so crash recovery watches the right process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.store import Database, SiteStore


@dataclass(frozen=True)
class ReportTask:
    """A queued instance, by the site file and site that hold it."""

    path: Path
    site: str
    instance_id: int
    user_id: str | None = None


ReportExecutor = Callable[[ReportTask], int | None]


def run_task(task: ReportTask) -> None:
    """Execute the task on a connection of its own (so any thread or process can)."""
    from toolkit.reports.runner import ReportRunner

    with Database(task.path) as db:
        store = SiteStore(db, task.site, create=False)
        ReportRunner(store, user_id=task.user_id).execute(task.instance_id)


def inline_executor(task: ReportTask) -> None:
    """Run the report now, before the run call returns."""
    run_task(task)


class ThreadExecutor:
    """Run each report in a daemon thread of this process; :meth:`join` waits for them."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def __call__(self, task: ReportTask) -> None:
        thread = threading.Thread(
            target=run_task, args=(task,), name=f"report-{task.instance_id}", daemon=True
        )
        thread.start()
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]

    def join(self, timeout: float | None = None) -> None:
        for thread in self.threads:
            thread.join(timeout)


class DetachedProcessExecutor:
    """Run each report in ``python -m toolkit ... report work ID``, in its own session,
    so it finishes even after the process that queued it has exited."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        # Kept so the child is never garbage-collected while running (no ResourceWarning).
        self.processes: list[subprocess.Popen[bytes]] = []

    def __call__(self, task: ReportTask) -> int:
        command = [
            self.python,
            "-m",
            "toolkit",
            "--store",
            str(Path(task.path).resolve()),
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
        )
        self.processes = [p for p in self.processes if p.poll() is None] + [process]
        return process.pid
