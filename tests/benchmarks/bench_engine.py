"""Benchmark: the same item import and lookup on the local engine and on Dask.

Generates parcels and damage items, imports the parcels, then runs the item import (a
dry run: every stage, the write rolled back) and a file lookup on the local engine and on
a ``distributed.LocalCluster`` of 2 worker processes, stage by stage, as a ratio. Then a
scaling run: the same import on 1, 2 and 4 worker processes, with the CPU seconds of each
partition on its worker (``time.process_time`` around each task, by a worker plugin: CPU
seconds survive a shared machine, wall seconds do not), per stage; and the serial part
(the plan and a committed write, in the calling process) of a real import.

The rule is the sample's damage rule without its fuzzy fallback (``--rule fuzzy`` keeps
it: then both engines first pass over the parts to fit mode fuzzy's model once per job).

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
from dask.utils import key_split
from distributed import Client, LocalCluster, WorkerPlugin

from toolkit.engine import DaskEngine, IndexRef, loaded_index
from toolkit.importing.pipeline import ImportRequest
from toolkit.matching import AssetIndex
from toolkit.matching.lookup import queries_from_file, run_lookup
from toolkit.sample.generate import generate
from toolkit.site import LocalSite

RULES = Path(__file__).resolve().parents[2] / "pipelines"
LOOKUP = {"mode": "soundex", "maxRank": 3, "useExternalLookups": False}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rule_folder(folder: Path) -> Path:
    text = (RULES / "damage_assessments.py").read_text(encoding="utf-8")
    (folder / "rules").mkdir()
    (folder / "rules" / "damage_soundex.py").write_text(
        text.replace('name="damage-assessments"', 'name="damage-soundex"').replace(
            '"fallbackMode": "fuzzy",', ""
        ),
        encoding="utf-8",
    )
    (folder / "rules" / "damage_fuzzy.py").write_text(
        text.replace('name="damage-assessments"', 'name="damage-fuzzy"'), encoding="utf-8"
    )
    return folder / "rules"


class TaskCpu(WorkerPlugin):
    """On each worker: the CPU seconds of the worker process while each task executed
    (one thread per worker, so that is the task's), with its wall start and end."""

    name = "bench-task-cpu"

    def setup(self, worker: Any) -> None:
        self.running: dict[Any, tuple[float, float]] = {}
        self.done: list[tuple[str, float, float, float]] = []

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish == "executing":
            self.running[key] = (time.process_time(), time.time())
        elif start == "executing" and key in self.running:
            cpu, began = self.running.pop(key)
            self.done.append((key_split(key), time.process_time() - cpu, began, time.time()))


def _taken(dask_worker: Any) -> list[tuple[str, float, float, float]]:
    plugin = dask_worker.plugins[TaskCpu.name]
    done, plugin.done = plugin.done, []
    return list(done)


def task_cpu(client: Client) -> pd.DataFrame:
    """Every task run since the last call: stage (the task's function), CPU s, start, end."""
    rows = [row for done in client.run(_taken).values() for row in done]
    return pd.DataFrame(rows, columns=["stage", "cpu", "start", "end"])


def _time_links() -> None:
    """In a worker: the CPU seconds spent linking (``link_rows``, and a fuzzy first pass's
    ``draft_links``, as the partitions' stages call them), per function, until
    ``_link_seconds`` takes them."""
    import toolkit.importing.partitions as partitions

    module = vars(partitions)
    spent: dict[str, float] = module.setdefault("_bench_link_cpu", {})
    for name in ("link_rows", "draft_links"):
        function = module.get(name)
        if function is None or getattr(function, "_bench_timed", False):
            continue

        def timed(*args: Any, _name: str = name, _function: Any = function, **kwargs: Any) -> Any:
            cpu = time.process_time()
            try:
                return _function(*args, **kwargs)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.process_time() - cpu

        timed._bench_timed = True  # type: ignore[attr-defined]  # installed once per worker
        module[name] = timed


def _link_seconds() -> dict[str, float]:
    import toolkit.importing.partitions as partitions

    spent: dict[str, float] = vars(partitions).get("_bench_link_cpu", {})
    taken = dict(spent)
    spent.clear()
    return taken


def link_cpu(client: Client) -> dict[str, float]:
    """CPU seconds the workers spent linking since the last call, per function."""
    total: dict[str, float] = {}
    for spent in client.run(_link_seconds).values():
        for name, seconds in spent.items():
            total[name] = total.get(name, 0.0) + seconds
    return total


def _load(ref: IndexRef) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    loaded_index(ref)
    return time.perf_counter() - wall, time.process_time() - cpu


def publish(client: Client, engine: DaskEngine, index: AssetIndex) -> tuple[float, float, float]:
    """Save the index for the workers and have each load it: client seconds (fingerprint
    and save), and the slowest worker's load in wall and CPU seconds."""
    started = time.perf_counter()
    ref = engine.index_ref(index)
    published = time.perf_counter() - started
    loads = client.run(_load, ref).values()
    return published, max(w for w, _ in loads), max(c for _, c in loads)


def print_stages(tasks: pd.DataFrame) -> None:
    """Per stage: partitions, total CPU, mean and max CPU per partition, wall."""
    print(f"    {'stage':<18} {'parts':>5} {'cpu s':>8} {'mean':>6} {'max':>6} {'wall s':>7}")
    for stage, done in tasks.groupby("stage", sort=False):
        cpu = done["cpu"]
        wall = done["end"].max() - done["start"].min()
        print(
            f"    {stage!s:<18} {len(done):>5} {cpu.sum():8.2f} {cpu.mean():6.2f} "
            f"{cpu.max():6.2f} {wall:7.2f}"
        )


def cluster(workers: int) -> LocalCluster:
    return LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )


def item_import(
    site: LocalSite, data: Path, event: int, engine: Any, rule: str, *, dry_run: bool = True
) -> tuple[float, float, Any]:
    """Wall and this process's CPU seconds of the import, and its summary."""
    request = ImportRequest(
        "item", rule, data / "items.csv", event_id=event, region_id=1, dry_run=dry_run
    )
    cpu, started = time.process_time(), time.perf_counter()
    job = site.run_import(request, engine=engine)
    assert job["status"] == "COMPLETE", job
    return time.perf_counter() - started, time.process_time() - cpu, job["summary"]


def _peak_mib() -> float:
    """A worker's own peak (VmHWM). Not ru_maxrss: a spawned worker inherits its parent's,
    so every worker reported the client's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_peak_mib(client: Client) -> float:
    """The largest peak resident memory of the cluster's worker processes."""
    return float(max(client.run(_peak_mib).values()))


def compare(
    site: LocalSite,
    data: Path,
    event: int,
    index: AssetIndex,
    folder: Path,
    partition_rows: int,
    rule: str,
    items: int,
) -> None:
    """The item import and a lookup on the local engine and on dask x2, stage by stage."""
    local_s, local_cpu, local = item_import(site, data, event, None, rule)
    with cluster(2) as local_cluster, Client(local_cluster) as client:
        client.register_plugin(TaskCpu())
        engine = DaskEngine(client, folder, partition_rows=partition_rows)
        published, load_wall, load_cpu = publish(client, engine, index)
        cold_s, _, _ = item_import(site, data, event, engine, rule)
        task_cpu(client)
        client.run(_time_links)
        link_cpu(client)
        dask_s, dask_cpu, dask = item_import(site, data, event, engine, rule)
        dask_tasks = task_cpu(client)
        dask_links = link_cpu(client)
        queries = queries_from_file(data / "items.csv", column="Address", code_column="Reference")
        started = time.perf_counter()
        lookup_local = run_lookup(index, queries, LOOKUP)
        lookup_local_s = time.perf_counter() - started
        started = time.perf_counter()
        lookup_dask = engine.lookup(index, queries, LOOKUP)
        lookup_dask_s = time.perf_counter() - started
        lookup_tasks = task_cpu(client)
        worker_peak = worker_peak_mib(client)
    same = local["counts"] == dask["counts"] and local["linking"] == dask["linking"]
    same_lookup = lookup_local.resolved.equals(lookup_dask.resolved)
    print(f"\nitem import (dry run), {items:,} rows, identical results: {same}")
    print(f"  counts  {local['counts']}")
    print(f"  {'stage':<28} {'local':>8} {'dask x2':>8} {'ratio':>6}")
    lt, dt = local["timings"], dask["timings"]
    # The local engine's fuzzy first pass is timed as read and link (its parts
    # are read and linked once more); on Dask it is part of "partitions".
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
    first = published + load_wall + cold_s
    print(f"  first Dask run (workers load the index): {first:.2f} s")
    print(
        f"  index to the workers: publish {published:.2f} s (fingerprint and save, "
        f"client), load {load_wall:.2f} s wall / {load_cpu:.2f} s CPU per worker; "
        f"first import after it {cold_s:.2f} s"
    )
    print(
        f"  this process's CPU in the job: local {local_cpu:.2f} s, "
        f"dask x2 {dask_cpu:.2f} s (the client's share: reading, links, plan, store)"
    )
    print("  dask x2, CPU per partition on the workers (second run):")
    print_stages(dask_tasks)
    whole = lt["read"] + per_partition
    print(
        f"  link stage: local {lt['link']:.2f} s of read+validate+link+prepare "
        f"{whole:.2f} s ({lt['link'] / whole if whole else 0:.0%}); dask x2, CPU linking on "
        f"the workers {sum(dask_links.values()):.2f} s of the partitions' "
        f"{dask_tasks['cpu'].sum():.2f} s ("
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in sorted(dask_links.items()))
        + ")"
    )
    print(f"  peak memory of a worker: {worker_peak:,.0f} MiB")
    print(
        f"lookup soundex maxRank 3, {len(queries):,} queries: local "
        f"{lookup_local_s:.2f} s, dask x2 {lookup_dask_s:.2f} s, ratio "
        f"{lookup_dask_s / lookup_local_s:.2f}; identical results: {same_lookup}"
    )
    print_stages(lookup_tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=200_000)
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--partition-rows", type=int, default=50_000)
    parser.add_argument("--scaling", default="1,2,4", help="worker counts of the scaling run")
    parser.add_argument("--rule", choices=["soundex", "fuzzy"], default="soundex")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scaling-only", action="store_true", help="skip the local engine vs dask x2 part"
    )
    args = parser.parse_args()
    rule = f"damage-{args.rule}"
    print(f"machine: {os.cpu_count()} cores; partitions of {args.partition_rows:,} rows")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; rule {rule}")
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

            if not args.scaling_only:
                compare(site, data, event, index, folder, args.partition_rows, rule, args.items)

            counts = [int(w) for w in args.scaling.split(",") if w]
            print(
                f"\nscaling: the item import (dry run) of {args.items:,} rows per worker count; "
                "CPU per partition on the workers"
            )
            print(
                f"  {'workers':>7} {'wall s':>8} {'parts':>6} {'cpu s/part':>11} {'sum cpu s':>10}"
            )
            for workers in counts:
                with cluster(workers) as scaled, Client(scaled) as client:
                    client.register_plugin(TaskCpu())
                    engine = DaskEngine(client, folder, partition_rows=args.partition_rows)
                    _, load_wall, load_cpu = publish(client, engine, index)
                    # No warming import (a run at a million rows costs everyone minutes):
                    # the caches a worker builds on first use show in "max".
                    task_cpu(client)
                    job_s, job_cpu, summary = item_import(site, data, event, engine, rule)
                    tasks = task_cpu(client)
                    # Each partition's (second) pass: read by the worker, or taken up from
                    # the fuzzy first pass.
                    parts = tasks[tasks["stage"].isin(["import_read_part", "import_staged_part"])]
                    timings = summary["timings"]
                    print(
                        f"  {workers:>7} {timings['partitions']:8.2f} {len(parts):>6} "
                        f"{parts['cpu'].mean():11.2f} {parts['cpu'].sum():10.2f}"
                    )
                    print_stages(tasks)
                    print(
                        f"    client: read {timings['read']:.2f} s, plan {timings['plan']:.2f} s, "
                        f"store (rolled back) {timings['store']:.2f} s; whole job {job_s:.2f} s, "
                        f"client CPU {job_cpu:.2f} s; index load per worker {load_wall:.2f} s "
                        f"wall / {load_cpu:.2f} s CPU; peak memory of a worker "
                        f"{worker_peak_mib(client):,.0f} MiB"
                    )
            # The serial part, committed: plan and write in one transaction in this
            # process, the same code whichever engine ran the partitions.
            job_s, job_cpu, summary = item_import(site, data, event, None, rule, dry_run=False)
            timings = summary["timings"]
            print(
                f"serial part of a committed import of {args.items:,} rows "
                f"(client, any worker count): plan {timings['plan']:.2f} s, "
                f"write {timings['store']:.2f} s, together "
                f"{timings['plan'] + timings['store']:.2f} s of {job_s:.2f} s"
            )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\npeak memory of this process {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
