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
