"""The peak memory of the processes of a large import: the one that records its links and
the one that pairs its fuzzy texts (shared by the import benchmarks, each of which
imports in a process of its own)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from toolkit.matching import pairing_process
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


def watch_pairing() -> list[float]:
    """A list that holds, once an import's pairing process has answered, its peak (VmHWM,
    MiB), as it tells it. Empty when the import had no such process."""
    peaks: list[float] = []
    answers = pairing_process.ProcessPairing.answers

    def noted_answers(pairing: pairing_process.ProcessPairing) -> Any:
        given = answers(pairing)
        if pairing.peak_mib is not None:
            peaks.append(pairing.peak_mib)
        return given

    pairing_process.ProcessPairing.answers = noted_answers  # type: ignore[method-assign]
    return peaks
