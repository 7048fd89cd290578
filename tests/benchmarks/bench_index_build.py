"""Benchmark: building a site's asset index (issue 17: <= 8 s at 1,000,000 parcels).

Times the build ``site_asset_index`` does (``build_index``: a second thread reads and
analyses the names while the first reads the other columns) beside the same build in one
thread (``build_in_turn``: the build before issue 17's change), both with the cache write,
alternating, each in a fresh process (peak memory is a process's), on copies of one site
file. Prints each run, then the medians, their ratio and whether both wrote the same
cache bytes. Two cores are what the threads need: on a busy machine the ratio tends to 1.
A third build reads the store with the sqlite3 module instead of in a process apart (the
ADBC driver's, ``toolkit.store.arrow_read``); the CPU figures include that process's.

    python tests/benchmarks/bench_index_build.py                       # 1,000,000 parcels
    python tests/benchmarks/bench_index_build.py --site /tmp/mt/h1000000/assets.sqlite
    python tests/benchmarks/bench_index_build.py --parcels 300 --repeat 1   # smoke
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 8.0  # issue 17: the asset index of 1,000,000 parcels
MODES = ("two threads", "in turn", "sqlite3 read")


def one(mode: str, path: Path, name: str) -> dict[str, object]:
    """Drop the site's cached index, build and cache it (``mode``); time and peak."""
    import geopandas  # noqa: F401  (imported before the clock, as a running toolkit has)

    from toolkit.allocator import heap_kept_for_reuse
    from toolkit.site import LocalSite
    from toolkit.site.index_build import build_in_turn, build_index

    with LocalSite(path, name) as site:
        store = site.store
        with site.db.transaction() as conn:
            conn.execute("DELETE FROM asset_index_part")
            conn.execute("DELETE FROM asset_index_cache")
        stamp = store.assets.stamp()
        if mode == "sqlite3 read":
            store.assets.path = None  # no read in a process apart
        started, cpu = time.perf_counter(), cpu_seconds()
        # As site_asset_index builds and caches it.
        with heap_kept_for_reuse():
            build = build_in_turn if mode == "in turn" else build_index
            index, dump = build(store)
            store.index_cache.put(stamp, dump)
        wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        cached = store.index_cache.get(stamp)
        assert cached is not None, "the index was not cached"
    return {
        "wall": wall,
        "cpu": cpu,
        "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "assets": len(index),
        "sha256": hashlib.sha256(cached).hexdigest(),
        "load": os.getloadavg()[0],
    }


def cpu_seconds() -> float:
    """CPU used by this process and its ended child processes (the reads apart)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def site_of(parcels: int, folder: Path) -> Path:
    """A site file of ``parcels`` generated parcels."""
    from toolkit.importing.pipeline import ImportRequest
    from toolkit.sample.generate import generate
    from toolkit.site import LocalSite

    generate(folder / "data", assets=parcels, items=0, seed=1)
    path = folder / "site.sqlite"
    with LocalSite(path, "default") as site:
        job = site.run_import(
            ImportRequest("asset", "property-assets", folder / "data" / "parcels.zip")
        )
        assert job["status"] == "COMPLETE", job
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parcels", type=int, default=1_000_000, help="parcels generated")
    parser.add_argument("--site", type=Path, help="a site file to copy instead")
    parser.add_argument("--name", default="default", help="the site's name in --site")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each build")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # mode, site file, name
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], Path(args.one[1]), args.one[2])))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-index-") as work:
        folder = Path(work)
        started = time.perf_counter()
        source = args.site if args.site else site_of(args.parcels, folder / "made")
        name = args.name if args.site else "default"
        copies = {}
        for n, mode in enumerate(MODES):
            copies[mode] = folder / f"site-{n}.sqlite"
            shutil.copy(source, copies[mode])
        print(f"site ready in {time.perf_counter() - started:.1f} s")
        runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
        digests = set()
        for _ in range(args.repeat):
            for mode in MODES:
                command = [sys.executable, __file__, "--one", mode, str(copies[mode]), name]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(done.stdout, done.stderr, file=sys.stderr)
                    return 2
                run = json.loads(done.stdout.strip().splitlines()[-1])
                digests.add(run.pop("sha256"))
                runs[mode].append(run)
                print(
                    f"  {mode:<11} {run['wall']:6.2f} s, CPU {run['cpu']:6.2f} s, peak "
                    f"{run['peak']:,.0f} MiB ({run['assets']:,.0f} assets; load {run['load']:.2f})"
                )
    median = {
        mode: {k: statistics.median(r[k] for r in runs[mode]) for k in ("wall", "cpu", "peak")}
        for mode in MODES
    }
    new, old, plain = (median[mode] for mode in MODES)
    print(
        f"asset index build {new['wall']:.2f} s (CPU {new['cpu']:.2f} s, target "
        f"{TARGET_S:g} s at 1,000,000) vs in turn {old['wall']:.2f} s (CPU {old['cpu']:.2f} s): "
        f"ratio {new['wall'] / old['wall']:.2f}; peak {new['peak']:,.0f} MiB vs "
        f"{old['peak']:,.0f} MiB; the same cache bytes: {'yes' if len(digests) == 1 else 'NO'}"
    )
    print(
        f"  read in a process apart {new['wall']:.2f} s vs with the sqlite3 module "
        f"{plain['wall']:.2f} s (CPU {new['cpu']:.2f} s vs {plain['cpu']:.2f} s): "
        f"ratio {new['wall'] / plain['wall']:.2f}"
    )
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
