"""Benchmark: import generated item rows linked to generated assets, stage by stage.

Beside the import's store stage it times, in the same run, a bare ``executemany``
of exactly the same item rows into an identical, empty table (same schema and
indexes), so the ratio is the figure. Also prints peak memory.

    python tests/benchmarks/bench_import.py                 # 1,000,000 assets and items
    python tests/benchmarks/bench_import.py --size 100000
"""

from __future__ import annotations

import argparse
import resource
import sqlite3
import tempfile
import time
from pathlib import Path

import pandas as pd

from toolkit.importing.pipeline import ImportRequest
from toolkit.sample.generate import generate
from toolkit.site import LocalSite
from toolkit.store.database import _statements
from toolkit.store.schema import MIGRATIONS


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bare_insert(rows: list[tuple[object, ...]], folder: Path) -> float:
    """executemany of ``rows`` into a new file with the site's schema; seconds taken."""
    connection = sqlite3.connect(folder / "bare.sqlite", isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    for statement in _statements(MIGRATIONS[0]):
        connection.execute(statement)
    started = time.perf_counter()
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany(
        "INSERT INTO item (id, site_id, register_id, event_id, region_id, asset_id, status, "
        "is_template, tags, fields, import_job_id, date_created, date_modified) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    connection.execute("COMMIT")
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="assets and item rows")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        generate(folder / "data", assets=args.size, items=args.size, seed=args.seed)
        print(
            f"generated {args.size:,} parcels and {args.size:,} items "
            f"in {time.perf_counter() - started:.1f} s"
        )

        with LocalSite(folder / "site.sqlite", "bench") as site:
            started = time.perf_counter()
            parcels = site.run_import(
                ImportRequest("asset", "property-assets", folder / "data" / "parcels.zip")
            )
            assets_s = time.perf_counter() - started
            print(
                f"asset import: {parcels['status']} in {assets_s:.1f} s "
                f"{parcels['summary']['timings']}"
            )
            event = site.create_event({"name": "Benchmark"})

            started = time.perf_counter()
            site.asset_index()
            print(f"asset index build (then cached): {time.perf_counter() - started:.1f} s")

            started = time.perf_counter()
            job = site.run_import(
                ImportRequest(
                    "item",
                    "damage-assessments",
                    folder / "data" / "items.csv",
                    event_id=event["id"],
                    region_id=1,
                )
            )
            whole = time.perf_counter() - started
            summary = job["summary"]
            print(f"item import: {job['status']} in {whole:.1f} s")
            print(f"  counts  {summary['counts']}")
            print(f"  linking {summary['linking']}")
            for stage, seconds in summary["timings"].items():
                print(f"  {stage:<9} {seconds:7.2f} s")
            links = site.store.jobs.links(int(job["id"]))
            rows = site.db.connection.execute(
                "SELECT id, site_id, register_id, event_id, region_id, asset_id, status, "
                "is_template, tags, fields, import_job_id, date_created, date_modified "
                "FROM item ORDER BY id"
            ).fetchall()
        rows = [tuple(r) for r in rows]
        bare = bare_insert(rows, folder)
        store = summary["timings"]["store"]
        print(
            f"store stage {store:.2f} s vs bare executemany of the same {len(rows):,} rows "
            f"{bare:.2f} s: ratio {store / bare:.2f} (target <= 1.5)"
        )
        truth = pd.read_csv(
            folder / "data" / "items_truth.csv", dtype=str, keep_default_na=False
        ).set_index("Reference")["asset_id"]
        wanted = truth.reindex(links["reference"].astype(str)).to_numpy(dtype=object)
        got = links["asset_id"].astype("Int64").astype("string").fillna("").to_numpy(dtype=object)
        linked = got != ""
        right = linked & (got == wanted)
        with_asset = wanted != ""
        print(
            f"link stage {summary['timings']['link']:.2f} s (target <= 10 s): precision "
            f"{right.sum() / max(linked.sum(), 1):.2%} of {int(linked.sum()):,} links (target "
            f">= 99.5%), recall {right.sum() / max(with_asset.sum(), 1):.2%} of "
            f"{int(with_asset.sum()):,} rows with a true asset"
        )
        print(
            f"whole item import {whole:.1f} s (target <= 45 s); "
            f"peak memory {peak_rss_mib():,.0f} MiB (target < 4096)"
        )


if __name__ == "__main__":
    main()
