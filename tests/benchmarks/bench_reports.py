"""Benchmark: rendering a report snapshot to each format, beside the raw writers, same run.

    python tests/benchmarks/bench_reports.py [--rows N] [--repeat R]

Builds a snapshot of N rows directly with pyarrow (ids, text, numbers, timestamps;
a few formula-looking and negative cells, some nulls), as a report run would leave
it. This measures rendering, not the SQL. Each side runs in a fresh forked process,
so peak RSS is its own:

- CSV: the toolkit's renderer (streams row groups, neutralises formulas, ISO times)
  vs ``pyarrow.csv.write_csv`` of the same table already in memory.
- XLSX: the toolkit's renderer (typed cells, styled header, widths, About sheet)
  vs xlsxwriter in constant-memory mode writing the same typed cells.
- JSON: the toolkit's renderer, which should be at least as fast as its CSV.
- HTML: the toolkit's page (capped table, chart over every row).

Targets: CSV and XLSX within 1.3x of raw; JSON no slower than the toolkit's CSV.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SPEC = (
    ("id", "Item id", "integer"),
    ("reference", "Reference", "text"),
    ("address", "Address", "text"),
    ("status", "Status", "integer"),
    ("accuracy", "Accuracy", "number"),
    ("occupants", "Occupants", "integer"),
    ("habitable", "Habitable", "boolean"),
    ("notes", "Notes", "text"),
    ("dateCreated", "Created", "timestamp"),
    ("dateModified", "Modified", "timestamp"),
    ("longitude", "Longitude", "number"),
    ("latitude", "Latitude", "number"),
)
STREETS = np.array(["HIGH ST", "SMITH STREET", "VICTORIA RD", "CHURCH AVE", "STATION PDE"])
NOTES = np.array(["roof leak", "", '=HYPERLINK("x")', "-2 levels flooded", "checked", "@sum"])


def build_snapshot(path: Path, rows: int) -> None:
    import pyarrow as pa

    from toolkit.reports.catalogue import Field
    from toolkit.reports.snapshot import ROW_GROUP_ROWS, SnapshotWriter

    rng = np.random.default_rng(7)
    spec = [Field(k, label, kind) for k, label, kind in SPEC]  # type: ignore[arg-type]
    with SnapshotWriter(path, spec) as writer:
        for start in range(0, rows, ROW_GROUP_ROWS):
            n = min(ROW_GROUP_ROWS, rows - start)
            ids = np.arange(start + 1, start + n + 1)
            created = 1_767_225_600_000 + rng.integers(0, 90 * 86_400_000, n)
            numbers = rng.integers(1, 400, n).astype(str)
            notes = NOTES[rng.integers(0, len(NOTES), n)]
            table = pa.table(
                {
                    "id": pa.array(ids),
                    "reference": pa.array(np.char.add("DA-", np.char.zfill(ids.astype(str), 8))),
                    "address": pa.array(
                        np.char.add(np.char.add(numbers, " "), STREETS[rng.integers(0, 5, n)])
                    ),
                    "status": pa.array(rng.integers(-1, 3, n)),
                    "accuracy": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
                    "occupants": pa.array(rng.integers(0, 8, n), mask=rng.random(n) < 0.2),
                    "habitable": pa.array(rng.random(n) < 0.7),
                    "notes": pa.array(notes, mask=notes == ""),
                    "dateCreated": pa.array(created, pa.int64()).cast(pa.timestamp("ms", "UTC")),
                    "dateModified": pa.array(created + 3_600_000, pa.int64()).cast(
                        pa.timestamp("ms", "UTC")
                    ),
                    "longitude": pa.array(143.8 + rng.random(n) * 0.2),
                    "latitude": pa.array(-37.6 + rng.random(n) * 0.2),
                }
            )
            writer.write_table(table)


def header() -> dict[str, Any]:
    return {
        "name": "Benchmark items",
        "filter": [{"key": "eventId", "label": "Event", "value": 1, "display": "1"}],
        "meta": [{"key": "rowCount", "label": "Rows", "value": 0, "display": "0"}],
        "spec": [{"key": k, "label": label, "type": kind} for k, label, kind in SPEC],
        "chart": {"kind": "bars", "title": "Items per status", "key": "status"},
    }


def _child(fn: Callable[[], Callable[[], Any]], queue: Any) -> None:
    work = fn()  # setup (e.g. loading the raw side's table) is not timed
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    queue.put((elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def measure(fn: Callable[[], Callable[[], Any]]) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of the work ``fn`` prepares, in a fresh forked process."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(fn, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def toolkit_render(snapshot: Path, format: str, out: Path) -> Callable[[], Callable[[], Any]]:
    def setup() -> Callable[[], Any]:
        from toolkit.reports.catalogue import Field
        from toolkit.reports.csv_file import write_csv
        from toolkit.reports.html_page import write_html
        from toolkit.reports.json_contents import write_json
        from toolkit.reports.schema import schema_url
        from toolkit.reports.snapshot import Snapshot
        from toolkit.reports.xlsx_file import write_xlsx

        def run() -> None:
            spec = [Field(k, label, kind) for k, label, kind in SPEC]  # type: ignore[arg-type]
            with Snapshot(snapshot, spec) as snap, out.open("wb") as handle:
                if format == "csv":
                    write_csv(snap, header(), handle)
                elif format == "json":
                    write_json(snap, header(), schema_url(), handle)
                elif format == "xlsx":
                    write_xlsx(snap, header(), handle)
                else:
                    handle.write(write_html(snap, header(), generated="now").encode())

        return run

    return setup


def raw_csv(snapshot: Path, out: Path) -> Callable[[], Callable[[], Any]]:
    def setup() -> Callable[[], Any]:
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        table = pq.read_table(snapshot)
        return lambda: pacsv.write_csv(table, out)

    return setup


def raw_xlsx(snapshot: Path, out: Path) -> Callable[[], Callable[[], Any]]:
    """xlsxwriter in constant-memory mode, writing the same typed cells the plain way."""

    def setup() -> Callable[[], Any]:
        import pyarrow.parquet as pq
        import xlsxwriter

        file = pq.ParquetFile(snapshot)

        def run() -> None:
            book = xlsxwriter.Workbook(str(out), {"constant_memory": True})
            sheet = book.add_worksheet("Data")
            dates = book.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"})
            bold = book.add_format({"bold": True})
            for position, (_, label, _) in enumerate(SPEC):
                sheet.write_string(0, position, label, bold)
            row = 1
            for batch in file.iter_batches(batch_size=65_536):
                columns = [c.to_pylist() for c in batch.columns]
                for values in zip(*columns, strict=True):
                    for position, value in enumerate(values):
                        if value is None:
                            continue
                        kind = SPEC[position][2]
                        if kind == "timestamp":
                            sheet.write_datetime(row, position, value.replace(tzinfo=None), dates)
                        elif kind == "text":
                            sheet.write_string(row, position, value)
                        elif kind == "boolean":
                            sheet.write_boolean(row, position, value)
                        else:
                            sheet.write_number(row, position, value)
                    row += 1
            book.close()

        return run

    return setup


def report(label: str, runs: list[tuple[float, float]]) -> tuple[float, float]:
    best = min(t for t, _ in runs)
    peak = max(m for _, m in runs)
    return best, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", "--size", type=int, default=1_000_000, dest="rows")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reports-") as tmp:
        folder = Path(tmp)
        snapshot = folder / "snapshot.parquet"
        start = time.perf_counter()
        build_snapshot(snapshot, args.rows)
        print(
            f"rows {args.rows:,}, {len(SPEC)} columns: snapshot "
            f"{snapshot.stat().st_size / 2**20:.0f} MiB (built in "
            f"{time.perf_counter() - start:.1f} s)"
        )
        results: dict[str, tuple[float, float]] = {}
        jobs = {
            "raw csv": raw_csv(snapshot, folder / "raw.csv"),
            "toolkit csv": toolkit_render(snapshot, "csv", folder / "out.csv"),
            "toolkit json": toolkit_render(snapshot, "json", folder / "out.json"),
            "toolkit html": toolkit_render(snapshot, "html", folder / "out.html"),
            "raw xlsx": raw_xlsx(snapshot, folder / "raw.xlsx"),
            "toolkit xlsx": toolkit_render(snapshot, "xlsx", folder / "out.xlsx"),
        }
        for label, job in jobs.items():
            results[label] = report(label, [measure(job) for _ in range(args.repeat)])
            seconds, peak = results[label]
            print(f"{label:<14} {seconds:8.2f} s   peak {peak:7.0f} MiB", flush=True)
        sizes = {
            name: (folder / name).stat().st_size / 2**20
            for name in ("raw.csv", "out.csv", "out.json", "out.html", "raw.xlsx", "out.xlsx")
        }
        print("sizes (MiB): " + ", ".join(f"{k} {v:.1f}" for k, v in sizes.items()))
    checks = [
        ("CSV vs pyarrow write_csv", results["toolkit csv"][0] / results["raw csv"][0], 1.3),
        ("XLSX vs xlsxwriter", results["toolkit xlsx"][0] / results["raw xlsx"][0], 1.3),
        ("JSON vs pyarrow write_csv", results["toolkit json"][0] / results["raw csv"][0], 1.0),
        ("JSON vs toolkit CSV", results["toolkit json"][0] / results["toolkit csv"][0], 1.0),
    ]
    ok = True
    for label, ratio, target in checks:
        met = ratio <= target
        ok &= met
        print(f"{label:<26} ratio {ratio:5.2f} (target <= {target})  {'OK' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
