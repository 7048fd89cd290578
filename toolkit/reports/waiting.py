"""Waiting for a report run to end: status checks spaced out, within an optional time limit.

A run is queued and executed elsewhere (a server's workers, a detached process), so
the caller asks its status until it is ``COMPLETED`` or ``FAILED``: soon at first,
then less often (short reports answer at once, long ones are not asked every
quarter of a second).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.progress import Progress, no_progress

FINAL_STATES = ("COMPLETED", "FAILED")
FIRST_INTERVAL_S = 0.25
MAX_INTERVAL_S = 5.0


class ReportWaitTimedOut(ToolkitError):
    """The run did not end within the time limit; carries its last known instance."""

    def __init__(self, message: str, instance: dict[str, Any]) -> None:
        super().__init__(message)
        self.instance = instance


def wait_for_report(
    status: Callable[[], dict[str, Any]],
    *,
    timeout_s: float | None = None,
    progress: Progress = no_progress,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    first_interval_s: float = FIRST_INTERVAL_S,
    max_interval_s: float = MAX_INTERVAL_S,
) -> dict[str, Any]:
    """Ask ``status()`` until the instance is COMPLETED or FAILED; the final instance.

    With ``timeout_s``, :class:`ReportWaitTimedOut` once that long has passed without an
    end (the run goes on where it runs).
    """
    started = clock()
    interval = first_interval_s
    while True:
        instance = status()
        state = str(instance.get("status"))
        if state in FINAL_STATES:
            progress("wait", 1, 1, unit="runs", detail=f"instance {instance.get('id')} {state}")
            return instance
        waited = clock() - started
        if timeout_s is not None and waited >= timeout_s:
            raise ReportWaitTimedOut(
                f"report instance {instance.get('id')} did not finish within {timeout_s:g} s: "
                f"it is {state}; it goes on running, follow it with "
                f"`toolkit report status {instance.get('id')}`",
                instance,
            )
        pause = interval if timeout_s is None else min(interval, timeout_s - waited)
        progress(
            "wait",
            0,
            1,
            unit="runs",
            detail=f"instance {instance.get('id')} {state}; next status check in {pause:.1f} s",
        )
        sleep(max(pause, 0.0))
        interval = min(interval * 2, max_interval_s)
