"""Scratch folders: what a killed process leaves behind is removed by the next one.

Real processes hold and lose the locks (a child killed with SIGKILL, as the
out-of-memory killer does). A real ``toolkit import`` killed halfway, and the next
import removing its folder: tests/test_imports_durability.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.scratch import OWNER_FILE, SWEEP_AFTER_S, ScratchFolder, scratch_folder, sweep

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the locks are POSIX flock")

HOLD = """
import sys, time
from pathlib import Path
from toolkit.scratch import ScratchFolder
folder = ScratchFolder("toolkit-import-", Path(sys.argv[1]))
(folder.path / "part-0.arrow").write_bytes(b"x" * 1000)
print(folder.path, flush=True)
time.sleep(600)
"""


def _holder(base: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process that makes a scratch folder in ``base`` and keeps it."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(base)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def _age(folder: Path) -> None:
    """Make ``folder`` look older than the sweep's grace period."""
    past = time.time() - SWEEP_AFTER_S - 5
    os.utime(folder, (past, past))


def _let_go(folder: ScratchFolder) -> ScratchFolder:
    """``folder`` with its lock let go, as when its process ends, and its files kept."""
    assert folder._lock is not None
    os.close(folder._lock)
    folder._lock = None
    return folder


def test_a_killed_processs_folder_is_removed_by_the_next_one(tmp_path: Path) -> None:
    child, left = _holder(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert (left / "part-0.arrow").exists()  # nothing could remove it
    _age(left)
    with scratch_folder("toolkit-import-", tmp_path) as mine:
        assert not left.exists()
        assert mine.exists() and (mine / OWNER_FILE).exists()
    assert not mine.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_live_processs_folder_is_kept_however_old(tmp_path: Path) -> None:
    child, held = _holder(tmp_path)
    try:
        _age(held)
        assert sweep(tmp_path, "toolkit-import-") == []
        assert (held / "part-0.arrow").exists()
    finally:
        child.kill()
        child.wait(30)
    _age(held)
    assert sweep(tmp_path, "toolkit-import-") == [held]


def test_young_foreign_and_other_prefix_folders_are_kept(tmp_path: Path) -> None:
    # Abandoned but just made: its maker may not have taken the lock yet.
    young = _let_go(ScratchFolder("toolkit-import-", tmp_path))
    # Made on another machine sharing the folder: its lock may not be visible here.
    foreign = tmp_path / "toolkit-import-elsewhere"
    foreign.mkdir()
    (foreign / OWNER_FILE).write_text(f"not-{socket.gethostname()}\n4242\n")
    # Not made by the toolkit at all (no owner file), and another kind of folder.
    plain = tmp_path / "toolkit-import-plain"
    plain.mkdir()
    other = _let_go(ScratchFolder("toolkit-zip-", tmp_path))
    for folder in (foreign, plain, other.path):
        _age(folder)
    assert sweep(tmp_path, "toolkit-import-") == []
    assert all(f.exists() for f in (young.path, foreign, plain, other.path))
    _age(young.path)
    assert sweep(tmp_path, "toolkit-import-") == [young.path]
