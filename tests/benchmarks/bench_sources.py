"""Benchmark: read_source against the raw libraries on the same files, in the same run.

    python tests/benchmarks/bench_sources.py [--rows N] [--repeat R]

Builds, in a temporary folder, a CSV of N address-like rows (text, codes with leading
zeros, latitude/longitude, some empty and [NULL] cells) and a zipped Shapefile of N small
parcels in GDA2020 / MGA zone 55. Then times, each in a fresh forked process (so peak RSS
is per reader):

- CSV: ``read_source`` (text columns, points from lat/lon, pandas frame) vs
  ``pyarrow.csv.read_csv`` with the same options (all columns string, same nulls,
  newlines in values, same block size).
- Shapefile: ``read_source`` (safe unzip, encoding check, validity check, reprojection)
  vs ``pyogrio.read_dataframe(zip, use_arrow=True).to_crs(4326)``.

Targets: CSV within 1.5x, Shapefile within 1.3x of the raw side.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

STREETS = np.array(["HIGH", "SMITH", "VICTORIA", "CHURCH", "STATION", "MAIN", "KING", "QUEEN"])
TYPES = np.array(["ST", "STREET", "RD", "ROAD", "AVE", "CRES", "CT", "PDE"])
SUBURBS = np.array(["CARLTON", "FITZROY", "RICHMOND", "BRUNSWICK", "COLLINGWOOD", "KEW", ""])


def make_csv(path: Path, rows: int, rng: np.random.Generator) -> None:
    """Address-like rows with codes that keep leading zeros, and coordinates."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    ids = np.arange(1, rows + 1)
    units = rng.integers(0, 30, rows)
    number = rng.integers(1, 400, rows).astype(str)
    unit_text = np.where(units > 20, units.astype(str), "")
    street = np.char.add(
        np.char.add(STREETS[rng.integers(0, 8, rows)], " "), TYPES[rng.integers(0, 8, rows)]
    )
    notes = np.where(
        rng.random(rows) < 0.1, "[NULL]", np.where(rng.random(rows) < 0.5, "", "checked")
    )
    table = pa.table(
        {
            "id": pa.array(ids.astype(str)),
            "propnum": pa.array(np.char.zfill(ids.astype(str), 8)),
            "unit": pa.array(unit_text),
            "number": pa.array(number),
            "street": pa.array(street),
            "suburb": pa.array(SUBURBS[rng.integers(0, len(SUBURBS), rows)]),
            "postcode": pa.array(np.char.zfill(rng.integers(800, 3999, rows).astype(str), 4)),
            "latitude": pa.array(np.round(-37.9 + rng.random(rows) * 0.3, 6).astype(str)),
            "longitude": pa.array(np.round(144.8 + rng.random(rows) * 0.4, 6).astype(str)),
            "notes": pa.array(notes),
        }
    )
    pacsv.write_csv(table, path)


def make_shapefile_zip(path: Path, rows: int, rng: np.random.Generator) -> None:
    """N 25 m parcels on a grid in GDA2020 / MGA 55, zipped with their sidecars."""
    import geopandas as gpd
    import pyogrio
    import shapely

    i = np.arange(rows)
    x = 320_000 + (i % 1000) * 30.0
    y = 5_800_000 + (i // 1000) * 30.0
    frame = gpd.GeoDataFrame(
        {
            "propnum": np.char.zfill((i + 1).astype(str), 8),
            "address": np.char.add(rng.integers(1, 400, rows).astype(str), " HIGH ST"),
            "area": np.full(rows, 625.0),
        },
        geometry=shapely.box(x, y, x + 25, y + 25),
        crs="EPSG:7855",
    )
    folder = path.parent / "shp"
    folder.mkdir()
    pyogrio.write_dataframe(frame, folder / "parcels.shp", encoding="UTF-8")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for file in sorted(folder.iterdir()):
            archive.write(file, file.name)


def _child(fn: Callable[[], Any], queue: Any) -> None:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((elapsed, peak_kib / 1024))


def measure(fn: Callable[[], Any]) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of ``fn`` run in a fresh forked process."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(fn, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def csv_raw(path: Path) -> Callable[[], Any]:
    def run() -> Any:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        from toolkit.sources.report import ReadLimits

        names = csv_raw_names(path)
        block = max(16 * 1024 * 1024, 2 * ReadLimits().max_field_bytes)
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=block),
            parse_options=pacsv.ParseOptions(delimiter=",", newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=True,
                null_values=[""],
            ),
        )

    return run


def csv_raw_names(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return handle.readline().strip().replace('"', "").split(",")


def toolkit_read(path: Path) -> Callable[[], Any]:
    def run() -> Any:
        from toolkit.sources import read_source

        return read_source(path)

    return run


def shapefile_raw(path: Path) -> Callable[[], Any]:
    def run() -> Any:
        import pyogrio

        return pyogrio.read_dataframe(path, use_arrow=True).to_crs("EPSG:4326")

    return run


def compare(
    label: str, raw: Callable[[], Any], ours: Callable[[], Any], repeat: int, target: float
) -> bool:
    raw_runs = []
    our_runs = []
    for _ in range(repeat):
        raw_runs.append(measure(raw))
        our_runs.append(measure(ours))
    raw_time = min(t for t, _ in raw_runs)
    our_time = min(t for t, _ in our_runs)
    ratio = our_time / raw_time
    print(
        f"{label:<10} raw {raw_time:7.2f} s (peak {max(m for _, m in raw_runs):7.0f} MiB)   "
        f"toolkit {our_time:7.2f} s (peak {max(m for _, m in our_runs):7.0f} MiB)   "
        f"ratio {ratio:4.2f} (target {target})  {'OK' if ratio <= target else 'MISSED'}"
    )
    return ratio <= target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", "--size", type=int, default=1_000_000, dest="rows")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    with tempfile.TemporaryDirectory(prefix="bench-sources-") as tmp:
        folder = Path(tmp)
        csv_path = folder / "items.csv"
        zip_path = folder / "parcels.zip"
        start = time.perf_counter()
        make_csv(csv_path, args.rows, rng)
        make_shapefile_zip(zip_path, args.rows, rng)
        print(
            f"rows {args.rows:,}: CSV {csv_path.stat().st_size / 2**20:.0f} MiB, "
            f"zip {zip_path.stat().st_size / 2**20:.0f} MiB (built in "
            f"{time.perf_counter() - start:.1f} s)"
        )
        ok = compare("CSV", csv_raw(csv_path), toolkit_read(csv_path), args.repeat, 1.5)
        ok &= compare(
            "Shapefile", shapefile_raw(zip_path), toolkit_read(zip_path), args.repeat, 1.3
        )
    pd.options.display.width = 120
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
