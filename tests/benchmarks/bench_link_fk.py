"""Benchmark: what the ``import_link.job_id`` foreign key costs when a job's links are
copied into PostgreSQL (``JobStore.record_links``: COPY, one trigger call per row).

The toolkit's ``record_links`` of ``--links`` links into ``import_link`` beside the same
COPY into a table of the same columns and primary key without the foreign key, run
alternately ``--repeat`` times in one process on one throwaway cluster; then EXPLAIN
ANALYZE of the same rows inserted into ``import_link`` reports the foreign key's trigger
time and calls as PostgreSQL counts them.

Starts its own throwaway PostgreSQL cluster (tests/pg_cluster.py).

    python tests/benchmarks/bench_link_fk.py [--links 200000] [--repeat 3]
    python tests/benchmarks/bench_link_fk.py --links 2000 --repeat 1  # smoke
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from pg_cluster import start_cluster  # noqa: E402

from toolkit.store import Database, SiteStore  # noqa: E402
from toolkit.store.dialect import copy_rows  # noqa: E402
from toolkit.store.jobs import _LINK_KINDS, _link_values  # noqa: E402

BARE = (
    "CREATE TABLE bare_link (LIKE import_link INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
    "PRIMARY KEY (job_id, row))"
)


def links_frame(rows: int) -> pd.DataFrame:
    """Links as an item import's link stage gives them: most rows linked, some not."""
    rng = np.random.default_rng(0)
    linked = rng.random(rows) < 0.9
    return pd.DataFrame(
        {
            "row": np.arange(1, rows + 1),
            "reference": [f"P{i:07d}" for i in range(rows)],
            "query": [f"{i} SMITH STREET BALLARAT" for i in range(rows)],
            # As linking.py gives them: float, NaN where no asset was found.
            "asset_id": pd.Series(np.arange(rows) + 1, dtype="Int64").where(linked).to_numpy(),
            "mode": pd.Series("reference", index=range(rows)).where(linked),
            "accuracy": np.where(linked, 1.0, np.nan),
            "candidates": np.ones(rows, dtype=np.int64),
            "err": pd.Series("no asset was found", index=range(rows)).where(~linked),
        }
    )


def timed(work: Callable[[], None]) -> tuple[float, float]:
    """(wall, CPU of this process and its children) seconds of ``work``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    work()
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return wall, usage.ru_utime + usage.ru_stime - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cluster = start_cluster()
    try:
        url = cluster.new_database()
        db = Database(url)
        store = SiteStore(db, "bench")
        job_id = store.jobs.create(import_type="item", import_rule="bench", user_id=None, params={})
        links = links_frame(args.links)
        names = [c for c in store.jobs.LINK_COLUMNS if c in links.columns]
        with db.transaction() as conn:
            conn.execute(BARE)

        def toolkit() -> None:
            with db.transaction() as conn:
                store.jobs.record_links(job_id, links, conn=conn, append=True)

        def copy_into(table: str) -> Callable[[], None]:
            def copy() -> None:
                # The values built as record_links builds them, copied as it copied them
                # before its key was checked once (import_link: a trigger a row), or into
                # a table without the key.
                with db.transaction() as conn:
                    columns = [_link_values(links[c], _LINK_KINDS[c], None) for c in names]
                    rows = zip(repeat(job_id), *columns)
                    copy_rows(conn, table, ["job_id", *names], rows)

            return copy

        works = {
            "toolkit": toolkit,
            "per row": copy_into("import_link"),
            "bare": copy_into("bare_link"),
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in works}
        for _ in range(args.repeat):
            for name, work in works.items():
                with db.transaction() as conn:
                    conn.execute("TRUNCATE import_link, bare_link")
                runs[name].append(timed(work))
        with db.transaction() as conn:
            conn.execute("TRUNCATE import_link")
            plan = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) INSERT INTO import_link SELECT * FROM bare_link"
            ).fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        top = plan[0] if isinstance(plan, list) else plan
        triggers = top.get("Triggers", [])
        total = float(top["Execution Time"]) / 1000
        db.close()
    finally:
        cluster.stop()
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    print(f"links: {args.links:,}, repeats: {args.repeat} (medians; CPU is this process's)")
    print(
        f"record_links COPY, job_id checked once {wall['toolkit']:.3f} s "
        f"(CPU {cpu['toolkit']:.3f} s) vs bare COPY of the same rows without the key "
        f"{wall['bare']:.3f} s (CPU {cpu['bare']:.3f} s): ratio "
        f"{wall['toolkit'] / wall['bare']:.2f}"
    )
    print(
        f"COPY into import_link with a check a row (before) {wall['per row']:.3f} s "
        f"(CPU {cpu['per row']:.3f} s): ratio {wall['per row'] / wall['bare']:.2f} to bare, "
        f"{wall['per row'] / wall['toolkit']:.2f} to record_links"
    )
    for trigger in triggers:
        print(
            f"EXPLAIN ANALYZE INSERT of the same rows: {trigger['Trigger Name']} "
            f"{float(trigger['Time']) / 1000:.3f} s, calls {trigger['Calls']:,} "
            f"(of {total:.3f} s for the statement)"
        )


if __name__ == "__main__":
    main()
