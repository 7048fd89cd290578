"""Scratch folders for one job's temporary files, and the sweeping of those left behind.

An import stages its parts in a folder of the system's temporary folder (or
``TOOLKIT_WORK_DIR``) and removes it when it ends. A process that is killed (the
out-of-memory killer, a second Ctrl+C, a scheduler's time limit) cannot: at 5M rows
that is gigabytes left in /tmp on every such run. So each folder holds a lock for as
long as its job lives (``flock`` on a file inside it, let go by the system when the
process ends, however it ends), and every new folder first removes its older siblings
whose lock nobody holds.

Only folders made on this machine are swept (the lock file names it): with a folder
shared by several machines (a Dask cluster's ``TOOLKIT_WORK_DIR``) another machine's
lock may not be visible here, and its live folder must not be taken for a dead one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: folders are still removed when done, just not swept
    fcntl = None  # type: ignore[assignment]  # the module or nothing

log = logging.getLogger("toolkit")

OWNER_FILE = ".toolkit-owner"
# A folder is this old at least before it can be swept: its maker takes the lock a moment
# after making it, and must not lose it in between.
SWEEP_AFTER_S = 60.0


def work_base() -> Path:
    """Where scratch folders go: ``TOOLKIT_WORK_DIR`` if set, else the temporary folder."""
    return Path(os.environ.get("TOOLKIT_WORK_DIR") or tempfile.gettempdir())


class ScratchFolder:
    """A folder that holds its lock until :meth:`remove` (or its process ends)."""

    def __init__(self, prefix: str, base: Path | None = None) -> None:
        base = base if base is not None else work_base()
        sweep(base, prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        self._lock: int | None = None
        if fcntl is not None:
            lock = os.open(self.path / OWNER_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and ours: cannot be held
            os.write(lock, f"{socket.gethostname()}\n{os.getpid()}\n".encode())
            self._lock = lock

    def remove(self) -> None:
        """Remove the folder and everything in it, then let go of its lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


@contextlib.contextmanager
def scratch_folder(prefix: str, base: Path | None = None) -> Iterator[Path]:
    """A :class:`ScratchFolder`'s path for the ``with`` block, removed on leaving it."""
    folder = ScratchFolder(prefix, base)
    try:
        yield folder.path
    finally:
        folder.remove()


def sweep(base: Path, prefix: str) -> list[Path]:
    """Remove the folders ``prefix*`` in ``base`` left by processes of this machine that
    ended without removing them; the ones removed."""
    if fcntl is None:
        return []
    host = socket.gethostname()
    removed: list[Path] = []
    try:
        candidates = list(base.glob(f"{prefix}*"))
    except OSError:
        return []
    for folder in candidates:
        if _abandoned(folder, host):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            log.info("removed %s, left by a process that ended without removing it", folder)
    return removed


def _abandoned(folder: Path, host: str) -> bool:
    """Whether ``folder`` was made here by a process that no longer holds its lock."""
    owner = folder / OWNER_FILE
    try:
        if time.time() - folder.stat().st_mtime < SWEEP_AFTER_S:
            return False
        lock = os.open(owner, os.O_RDONLY)
    except OSError:  # not ours (no owner file), or gone meanwhile
        return False
    try:
        made_on = os.read(lock, 4096).decode(errors="replace").split("\n", 1)[0]
        if made_on != host:
            return False
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its job is running
            return False
        return True
    finally:
        os.close(lock)
