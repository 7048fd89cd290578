"""The C heap's freed memory kept for reuse while bulk work runs (glibc only).

An import makes and drops arrays of a million values many times over (8 MB each, tens of
them per stage). With glibc's defaults each freed block at the top of the heap goes back
to the kernel at once, and the next array of the same size takes it again page by page:
at 1,000,000 item rows that was 3.4 million page faults and 15-19 s of system CPU beside
32 s of user CPU. Keeping up to ``TRIM_THRESHOLD`` free at the top, growing the heap
``TOP_PAD`` at a time, and serving arrays below ``MMAP_THRESHOLD`` from the heap rather
than from fresh mappings halves the faults and saves about 8 s of its ~50 s of CPU, for
~80 MiB more at the peak (``tests/benchmarks/bench_import.py``, 1,000,000 item rows).
The import's threads (reading ahead, recording links, scoring) share the main heap
(``ARENA_MAX``): each of glibc's per-thread heaps would keep its own freed memory, so
with the above every thread that made a few big lists held on to a hundred MiB or more
(peak of the 1,000,000-row import: 2,381 -> 2,224 MiB). Elsewhere (musl, macOS,
Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

# mallopt(3) parameters.
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -2, -3, -8

TRIM_THRESHOLD = 512 * 1024 * 1024
TOP_PAD = 64 * 1024 * 1024
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest on 64-bit (HEAP_MAX_SIZE / 2)
BULK = {M_TRIM_THRESHOLD: TRIM_THRESHOLD, M_TOP_PAD: TOP_PAD, M_MMAP_THRESHOLD: MMAP_THRESHOLD}
# After the work. Setting any parameter ends glibc's own adjustment of the thresholds for
# good, so these are where that adjustment ends after freeing big arrays (mmap threshold
# up to 32 MiB, trim threshold twice it) with the top pad at its default.
AFTER = {M_TRIM_THRESHOLD: 2 * MMAP_THRESHOLD, M_TOP_PAD: 128 * 1024}

# Heaps for the process's threads, set with the first bulk work and kept: glibc fixes its
# limit on heaps the first time it looks, and allows no return to its default (8 a core).
# Threads other than the one that made them already keep theirs. Threads that wait for
# the GIL seldom allocate at the same moment, so one heap costs them little.
ARENA_MAX = 1

_lock = threading.Lock()
_holders = 0


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (whose ``mallopt`` does something)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


_LIBC = _glibc()


def _set(values: dict[int, int]) -> bool:
    """Every parameter set (``mallopt`` returns 1 on success)."""
    if _LIBC is None:
        return False
    return all(_LIBC.mallopt(ctypes.c_int(k), ctypes.c_int(v)) == 1 for k, v in values.items())


@contextmanager
def heap_kept_for_reuse() -> Iterator[bool]:
    """Inside the block (nested or in several threads at once, the outermost counts) freed
    memory stays in the heap for the next array; after it the heap keeps less (``AFTER``)
    and its free memory returns to the system (``malloc_trim``). Yields whether it applies."""
    global _holders
    with _lock:
        _holders += 1
        applied = _set({**BULK, M_ARENA_MAX: ARENA_MAX}) if _holders == 1 else _LIBC is not None
    try:
        yield applied
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _LIBC is not None:
                if not _set(AFTER):
                    log.debug("mallopt refused the settings after bulk work")
                trim_heap()


def trim_heap() -> None:
    """Give the heap's free memory back to the system now (``malloc_trim``; glibc only)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(ctypes.c_size_t(0))
