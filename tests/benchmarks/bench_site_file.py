"""Benchmark: a site in one file, beside the side files it replaced, in the same run.

Report snapshots and the matching-index cache live inside the SQLite site file (issue 13);
they used to be files in folders beside it. This times each piece of work done on the site
file beside the same work done on plain files, as before (the "side file" column):

- index load: ``site_asset_index`` with a current cache (read from the file, Parquet
  decoded, spatial tree built) vs ``AssetIndex.load`` of the same index saved as Parquet
  files in a folder (the old cache beside the file);
- report run: report 1 (the items of the event) and 4 (matching quality of the item
  import), run inline (queued, gathered, metadata, stored with its COMPLETED status) vs the
  report's own gather written by pyarrow to a plain Parquet file with the same metadata;
- report fetch: CSV of each report rendered from the snapshot in the file vs the same
  renderer reading the same snapshot from a plain file; and, for scale, pyarrow alone
  (``pyarrow.csv`` of the table read from the plain file).

    python tests/benchmarks/bench_site_file.py                    # demo-sized: the sample data
    python tests/benchmarks/bench_site_file.py --assets 200000 --items 100000
    python tests/benchmarks/bench_site_file.py --work /tmp/bench-site   # keep and reuse the site

The ratio (in file / side file) is the figure; the machine's load moves both sides alike.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from toolkit.importing.pipeline import ImportRequest
from toolkit.matching import AssetIndex
from toolkit.reports import CATALOGUE
from toolkit.reports.catalogue import Field
from toolkit.reports.csv_file import write_csv
from toolkit.reports.snapshot import Snapshot, SnapshotWriter
from toolkit.sample.demo import packaged_sample_dir
from toolkit.sample.generate import generate
from toolkit.site import LocalSite
from toolkit.site.index_cache import site_asset_index


def best(work: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def build_site(folder: Path, assets: int, items: int) -> tuple[Path, int]:
    """A site of the sample (``assets`` 0) or of a generated workload; (file, item job)."""
    store = folder / "site.sqlite"
    if assets:
        data = folder / "data"
        if not (data / "items.csv").exists():
            generate(data, assets=assets, items=items, seed=1, overwrite=True)
        parcels, rows = data / "parcels.zip", data / "items.csv"
    else:
        sample = packaged_sample_dir()
        parcels, rows = sample / "parcels.zip", sample / "damage_assessments.csv"
    with LocalSite(store, "default") as site:
        jobs = site.import_status()
        if isinstance(jobs, list) and len(jobs) >= 2:
            return store, int(jobs[-1]["id"])
        started = time.perf_counter()
        site.run_import(ImportRequest("asset", "property-assets", parcels))
        event = site.create_event({"name": "Bench flood"})["id"]
        job = site.run_import(
            ImportRequest(
                "item", "damage-assessments", rows, event_id=event, region_id=1, message="bench"
            )
        )
        print(f"site built in {time.perf_counter() - started:.1f} s")
        return store, int(job["id"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=0, help="0: the packaged sample data")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, help="a folder to keep the site in (reused)")
    args = parser.parse_args()
    temporary = None
    if args.work is None:
        temporary = tempfile.TemporaryDirectory(prefix="bench-site-file-")
        args.work = Path(temporary.name)
    args.work.mkdir(parents=True, exist_ok=True)
    store, item_job = build_site(args.work, args.assets, args.items)
    plain = args.work / "plain"
    shutil.rmtree(plain, ignore_errors=True)
    plain.mkdir()
    # (work, in the site file, on a side file, pyarrow alone)
    rows: list[tuple[str, float, float, float | None]] = []
    with LocalSite(store, "default") as site:
        assets = len(site_asset_index(site.store))  # builds and caches it when stale
        site_asset_index(site.store).save(plain / "index")
        rows.append(
            (
                "index load",
                best(lambda: site_asset_index(site.store), args.repeat),
                # As the old cache did: the assets' stamp, then the folder.
                best(
                    lambda: (site.store.assets.stamp(), AssetIndex.load(plain / "index")),
                    args.repeat,
                ),
                None,
            )
        )
        event = site.list_events({})["models"]
        event_id = int(next(iter(event.values()))["id"])
        for report, params in ((1, {"eventId": event_id}), (4, {"jobId": item_job})):
            instance = ""

            def run(report: int = report, params: dict[str, int] = params) -> None:
                nonlocal instance
                instance = site.report_run({"reportId": report, "params": params})["id"]

            def side_run(
                report: int = report, params: dict[str, int] = params, name: str = f"run{report}"
            ) -> None:
                definition = CATALOGUE.get(report)
                gathered = definition.gather(site.store, definition.parse_params(params), None)
                with SnapshotWriter(plain / name, gathered.spec) as writer:
                    for frame in gathered.chunks:
                        writer.write(frame)
                with Snapshot(plain / name, gathered.spec) as snapshot:
                    gathered.meta(snapshot)

            rows.append(
                (f"report {report} run", best(run, args.repeat), best(side_run, args.repeat), None)
            )
            stored = site.store.reports.snapshot(int(instance))
            assert stored is not None
            with stored:
                snapshot_file = plain / f"snapshot{report}.parquet"
                snapshot_file.write_bytes(stored.read())
            header = json.loads(site.store.reports.get(int(instance))["header"])
            spec = [Field(f["key"], f["label"], f["type"]) for f in header["spec"]]

            def fetch(instance: str = instance) -> None:
                site.report_write(instance, "csv", io.BytesIO())

            def side_fetch(
                path: Path = snapshot_file, spec: list[Field] = spec, header: Any = header
            ) -> None:
                with Snapshot(path, spec) as snapshot:
                    write_csv(snapshot, header, io.BytesIO())

            def pyarrow_fetch(path: Path = snapshot_file) -> None:
                pacsv.write_csv(pq.read_table(path), io.BytesIO())

            count = site.report_status(instance)["rowCount"]
            rows.append(
                (
                    f"report {report} fetch csv ({count} rows)",
                    best(fetch, args.repeat),
                    best(side_fetch, args.repeat),
                    best(pyarrow_fetch, args.repeat),
                )
            )
    size = store.stat().st_size / 2**20
    print(f"site of {assets:,} assets, item job {item_job}: site file {size:.1f} MiB")
    print(f"{'':<34} {'in file':>9} {'side file':>10} {'ratio':>6} {'pyarrow':>9}")
    for label, in_file, side_file, alone in rows:
        scale = "" if alone is None else f"{alone:8.3f}s"
        print(f"{label:<34} {in_file:8.3f}s {side_file:9.3f}s {in_file / side_file:6.2f} {scale}")
    if temporary is not None:
        temporary.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
