"""Benchmark: the same item import and lookup on the local engine and on Dask.

Generates parcels and damage items, imports the parcels, then runs the item import (a
dry run: every stage, the write rolled back) and a file lookup on the local engine and on
a ``distributed.LocalCluster`` of 2 worker processes, stage by stage, as a ratio. Then a
scaling run: the per-partition stages on 1, 2 and 4 worker processes, with the compute
time of each partition on its worker (from the task stream), so the curve toward a real
cluster can be read; the plan and the write stay serial in the calling process.

The rule is the sample's damage rule without its fuzzy fallback: with it, Dask makes a
first pass over the partitions to fit mode fuzzy's model once per job, and the local engine
reads the file as one part, so the two would not be doing the same work.

    python tests/benchmarks/bench_engine.py                       # 200,000 and 200,000
    python tests/benchmarks/bench_engine.py --assets 1000000 --items 1000000
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from distributed import Client, LocalCluster, get_task_stream

from toolkit.engine import DaskEngine
from toolkit.importing.pipeline import ImportRequest, PartitionWork
from toolkit.importing.rules import load_rule
from toolkit.matching.lookup import queries_from_file, run_lookup
from toolkit.sample.generate import generate
from toolkit.site import LocalSite
from toolkit.sources import read_source

RULES = Path(__file__).resolve().parents[2] / "pipelines"
LOOKUP = {"mode": "soundex", "maxRank": 3, "useExternalLookups": False}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rule_folder(folder: Path) -> Path:
    text = (RULES / "damage_assessments.py").read_text(encoding="utf-8")
    text = text.replace('name="damage-assessments"', 'name="damage-soundex"')
    (folder / "rules").mkdir()
    (folder / "rules" / "damage_soundex.py").write_text(
        text.replace('"fallbackMode": "fuzzy",', ""), encoding="utf-8"
    )
    return folder / "rules"


def compute_seconds(task: dict[str, Any]) -> float:
    """Seconds a task computed on its worker (its task-stream record)."""
    return float(
        sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
    )


def cluster(workers: int) -> LocalCluster:
    return LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )


def item_import(site: LocalSite, data: Path, event: int, engine: Any) -> tuple[float, Any]:
    request = ImportRequest(
        "item", "damage-soundex", data / "items.csv", event_id=event, region_id=1, dry_run=True
    )
    started = time.perf_counter()
    job = site.run_import(request, engine=engine)
    return time.perf_counter() - started, job["summary"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=200_000)
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--partition-rows", type=int, default=50_000)
    parser.add_argument("--scaling", default="1,2,4", help="worker counts of the scaling run")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; partitions of {args.partition_rows:,} rows")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = folder / "data"
        started = time.perf_counter()
        generate(data, assets=args.assets, items=args.items, seed=args.seed)
        print(
            f"generated {args.assets:,} parcels and {args.items:,} items "
            f"in {time.perf_counter() - started:.1f} s"
        )
        with LocalSite(folder / "site.sqlite", "bench", rule_paths=[rule_folder(folder)]) as site:
            parcels = site.run_import(
                ImportRequest("asset", "property-assets", data / "parcels.zip")
            )
            assert parcels["status"] == "COMPLETE", parcels
            event = int(site.create_event({"name": "Benchmark"})["id"])
            index = site.asset_index()

            local_s, local = item_import(site, data, event, None)
            with cluster(2) as local_cluster, Client(local_cluster) as client:
                engine = DaskEngine(client, folder, partition_rows=args.partition_rows)
                cold_s, _ = item_import(site, data, event, engine)
                dask_s, dask = item_import(site, data, event, engine)
                queries = queries_from_file(
                    data / "items.csv", column="Address", code_column="Reference"
                )
                started = time.perf_counter()
                lookup_local = run_lookup(index, queries, LOOKUP)
                lookup_local_s = time.perf_counter() - started
                started = time.perf_counter()
                lookup_dask = engine.lookup(index, queries, LOOKUP)
                lookup_dask_s = time.perf_counter() - started
            same = local["counts"] == dask["counts"] and local["linking"] == dask["linking"]
            same_lookup = lookup_local.resolved.equals(lookup_dask.resolved)
            print(f"\nitem import (dry run), {args.items:,} rows, identical results: {same}")
            print(f"  counts  {local['counts']}")
            print(f"  {'stage':<28} {'local':>8} {'dask x2':>8} {'ratio':>6}")
            lt, dt = local["timings"], dask["timings"]
            per_partition = lt["validate"] + lt["link"] + lt["prepare"]
            rows = [
                ("read (serial, both)", lt["read"], dt["read"]),
                ("validate+link+prepare", per_partition, dt["partitions"]),
                ("plan (serial)", lt["plan"], dt["plan"]),
                ("store, rolled back (serial)", lt["store"], dt["store"]),
                ("whole job", local_s, dask_s),
            ]
            for label, a, b in rows:
                print(f"  {label:<28} {a:8.2f} {b:8.2f} {b / a if a else float('nan'):6.2f}")
            print(f"  first Dask run (workers load the index): {cold_s:.2f} s")
            print(
                f"lookup soundex maxRank 3, {len(queries):,} queries: local "
                f"{lookup_local_s:.2f} s, dask x2 {lookup_dask_s:.2f} s, ratio "
                f"{lookup_dask_s / lookup_local_s:.2f}; identical results: {same_lookup}"
            )

            frame, report = read_source(data / "items.csv")
            rule = load_rule("damage-soundex", [folder / "rules"])
            work = PartitionWork(
                rule=rule,
                path="items.csv",
                geometry_columns=tuple(report.geometry_columns),
                decisions=None,
                may_update=False,
                links=True,
            )
            print(f"\nscaling: validate+link+prepare of {len(frame):,} rows per worker count")
            print(
                f"  {'workers':>7} {'wall s':>8} {'parts':>6} {'cpu s/part':>11} {'sum cpu s':>10}"
            )
            for workers in (int(w) for w in args.scaling.split(",")):
                with cluster(workers) as scaled, Client(scaled) as client:
                    engine = DaskEngine(client, folder, partition_rows=args.partition_rows)
                    engine.run_partitions(work, frame.iloc[:1000], index, lambda *a, **k: None)
                    with get_task_stream(client) as stream:
                        started = time.perf_counter()
                        engine.run_partitions(work, frame, index, lambda *a, **k: None)
                        wall = time.perf_counter() - started
                    compute = pd.Series(
                        [compute_seconds(t) for t in stream.data if "_import_part" in str(t["key"])]
                    )
                    print(
                        f"  {workers:>7} {wall:8.2f} {len(compute):>6} {compute.mean():11.2f} "
                        f"{compute.sum():10.2f}"
                    )
    print(f"\npeak memory of this process {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
