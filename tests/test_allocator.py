"""The C heap keeps freed memory for reuse during bulk work, and gives it back after."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

from toolkit import allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Run in a process of its own: the heap's state and thresholds are the whole process's.
PROBE = textwrap.dedent(
    """
    import json, os, resource
    import numpy as np
    from toolkit.allocator import heap_kept_for_reuse

    PAGE = os.sysconf("SC_PAGE_SIZE")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def touched(n):
        a = np.empty(n, dtype=np.uint8)
        a[:: PAGE] = 1  # every page written: the kernel must give it
        return a

    out = {}
    with heap_kept_for_reuse() as applied:
        out["applied"] = applied
        # 12 arrays of 20 MiB, all held, then freed: the heap grows by ~240 MiB.
        held = [touched(20 << 20) for _ in range(12)]
        del held
        out["rss_freed_inside"] = rss()
        before = faults()
        again = [touched(20 << 20) for _ in range(12)]
        out["faults_again"] = faults() - before
        del again
        out["rss_freed_again"] = rss()
    out["rss_after"] = rss()
    print(json.dumps(out))
    """
)


@pytest.mark.skipif(not GLIBC, reason="mallopt's thresholds are glibc's")
def test_freed_arrays_are_reused_inside_and_returned_after() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    out = json.loads(done.stdout)
    assert out["applied"] is True
    # 240 MiB written again: 61,440 pages, nearly all from the heap kept (no new faults).
    assert out["faults_again"] < 500, out
    # Kept while the work runs...
    assert out["rss_freed_again"] - out["rss_after"] > 200 << 20, out


def test_nested_and_elsewhere_it_only_says_whether_it_applies() -> None:
    with allocator.heap_kept_for_reuse() as outer, allocator.heap_kept_for_reuse() as inner:
        assert inner == outer == GLIBC
    assert allocator._holders == 0


# Threads that allocate, inside the block or not; then glibc's own count of its heaps.
THREADS = textwrap.dedent(
    """
    import ctypes, sys, threading
    import numpy as np
    from contextlib import nullcontext
    from toolkit.allocator import heap_kept_for_reuse

    def work():
        kept = [np.ones(1 << 17) for _ in range(50)]  # 1 MiB each: from the thread's heap
        del kept

    with heap_kept_for_reuse() if sys.argv[1] == "bulk" else nullcontext():
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    sys.stderr.flush()
    ctypes.CDLL(None).malloc_stats()  # to the C stderr: "Arena 0:", "Arena 1:", ...
    """
)


@pytest.mark.skipif(not GLIBC, reason="heaps per thread are glibc's")
def test_the_threads_of_bulk_work_share_the_main_heap() -> None:
    def arenas(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", THREADS, mode],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))

    assert arenas("plain") > 1  # glibc's default: a heap of its own for a new thread
    assert arenas("bulk") == 1
