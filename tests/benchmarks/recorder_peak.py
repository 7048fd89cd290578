"""The peak memory of the process that records a large import's links (shared by the
import benchmarks, each of which imports in a process of its own)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from toolkit.store import link_recorder


def watch_recorder() -> list[float]:
    """A list that holds, once an import's recording process has ended, its peak (VmHWM,
    MiB), read as it ends: its ru_maxrss would count the importing process's memory,
    shared until its exec. Empty when the import had no such process."""
    peaks: list[float] = []
    stop = link_recorder._stop

    def noted_stop(process: subprocess.Popen[bytes]) -> None:
        status = Path(f"/proc/{process.pid}/status").read_text().splitlines()
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        peaks.append(int(fields["VmHWM"].split()[0]) / 1024)
        stop(process)

    link_recorder._stop = noted_stop
    return peaks
