"""Time `toolkit sample generate` at the standard scale and its two writers beside the raw ones.

A generator has no raw-library equivalent as a whole, so this prints the whole run with the
time of each stage, then the Shapefile write and the CSV write by themselves: the toolkit's
(fields sized to their values, zipped; spreadsheet-style quoting) beside pyogrio's and
pyarrow's plain writers on the same data.

    python tests/benchmarks/bench_generate.py [--assets 1000000] [--items 1000000] [--seed 1]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyogrio
import shapely

from toolkit.sample.columns import write_csv
from toolkit.sample.generate import generate
from toolkit.sample.items import build_items
from toolkit.sample.parcels import PARCEL_CRS, geometries, layout, write_parcels


def peak_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    stage_names = ["lay out parcels", "write parcels.zip", "build item rows", "write CSVs"]
    marks: list[float] = []

    def progress(label: str, done: int, total: int | None) -> None:
        marks.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "workload"
        start = time.perf_counter()
        result = generate(
            out, assets=args.assets, items=args.items, seed=args.seed, progress=progress
        )
        whole = time.perf_counter() - start
        print(f"toolkit sample generate --assets {args.assets} --items {args.items}")
        print(f"  whole run            {whole:8.2f} s   peak RSS {peak_mib():,.0f} MiB")
        for name, begin, end in zip(stage_names, marks, marks[1:], strict=False):
            print(f"  {name:<20} {end - begin:8.2f} s")
        for path in result.files.values():
            print(f"  {path.name:<20} {path.stat().st_size / 2**20:8.1f} MiB")

        # The writers alone, on the same data.
        parcels = layout(args.assets, np.random.default_rng(args.seed))
        items, _truth = build_items(parcels, args.items, np.random.default_rng(args.seed))
        raw_dir = Path(tmp) / "raw"
        raw_dir.mkdir()

        t = time.perf_counter()
        write_parcels(parcels, raw_dir / "parcels.zip", raw_dir / "shp")
        toolkit_shp = time.perf_counter() - t
        table = parcels.table.append_column(
            "geometry", pa.array(shapely.to_wkb(geometries(parcels)))
        )
        t = time.perf_counter()
        pyogrio.write_arrow(
            table,
            raw_dir / "plain.shp",
            driver="ESRI Shapefile",
            geometry_name="geometry",
            geometry_type="Polygon",
            crs=PARCEL_CRS,
            encoding="UTF-8",
        )
        raw_shp = time.perf_counter() - t

        t = time.perf_counter()
        write_csv(items, raw_dir / "items.csv")
        toolkit_csv = time.perf_counter() - t
        t = time.perf_counter()
        pa_csv.write_csv(items, raw_dir / "plain.csv")
        raw_csv = time.perf_counter() - t

    print("writers alone (toolkit vs raw library, same data)")
    print(
        f"  shapefile  toolkit {toolkit_shp:7.2f} s (sized fields + geometry + zip)   "
        f"pyogrio.write_arrow {raw_shp:7.2f} s (80-byte fields, no zip)   "
        f"ratio {toolkit_shp / raw_shp:5.2f}"
    )
    print(
        f"  items CSV  toolkit {toolkit_csv:7.2f} s (quote only where needed)          "
        f"pyarrow.csv.write_csv {raw_csv:7.2f} s (quotes every string) "
        f"ratio {toolkit_csv / raw_csv:5.2f}"
    )
    print(f"peak RSS {peak_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
