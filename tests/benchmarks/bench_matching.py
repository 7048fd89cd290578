"""Benchmark: matching quality and speed on the generated workload, whose truth is known.

For each mode, on the rows of the kinds it is meant for, prints precision (right
links / links made) and recall (right links / rows that have a true parcel),
the time taken, and, for ``geo``, a bare ``geopandas.sjoin`` doing the same
point-in-polygon join in the same run. Also the index build time and peak memory.

    python tests/benchmarks/bench_matching.py                      # 1,000,000 and 1,000,000
    python tests/benchmarks/bench_matching.py --assets 100000 --items 100000
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd

from toolkit.importing.linking import join_address
from toolkit.matching import AssetIndex, resolve
from toolkit.matching.lookup import queries_from_file
from toolkit.sample.generate import generate
from toolkit.sample.items import KINDS
from toolkit.sources import read_source

# Rows whose only way to an asset is their address.
ADDRESS_KINDS = tuple(
    k
    for k in KINDS
    if not k.startswith("bad_") and k not in ("propnum_only", "coords_only", "wkt_only")
)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def score(resolved: pd.DataFrame, truth: pd.Series) -> tuple[float, float, int]:
    """Precision, recall and number of links of ``resolved`` against ``truth`` (asset ids)."""
    got = resolved["asset_id"].astype("string").reset_index(drop=True)
    expected = truth.astype("string").reset_index(drop=True)
    linked = got.notna().to_numpy()
    right = (got == expected).fillna(False).to_numpy(dtype=bool) & linked
    answerable = expected.notna().to_numpy()
    precision = right.sum() / linked.sum() if linked.any() else 1.0
    recall = right.sum() / answerable.sum() if answerable.any() else 1.0
    return float(precision), float(recall), int(linked.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--fuzzy-sample",
        type=int,
        default=100_000,
        help="queries for the fuzzy-only run (it is timed as queries/second)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        generate(folder, assets=args.assets, items=args.items, seed=args.seed)
        print(f"generated in {time.perf_counter() - started:.1f} s")

        parcels, _ = read_source(folder / "parcels.zip")
        parcels = parcels.reset_index(drop=True)
        started = time.perf_counter()
        index = AssetIndex.from_frame(parcels)
        print(
            f"index build: {time.perf_counter() - started:.2f} s for {len(parcels):,} assets "
            "(target <= 15 s)"
        )

        items = queries_from_file(folder / "items.csv", column="Address", code_column="Reference")
        raw, _ = read_source(folder / "items.csv")
        raw = raw.reset_index(drop=True)
        truth = pd.read_csv(folder / "items_truth.csv", dtype=str, keep_default_na=False)
        truth = truth.set_index("Reference").reindex(items["reference"].astype(str))
        kinds = truth["kind"].to_numpy()
        true_ids = truth["asset_id"].replace("", pd.NA).reset_index(drop=True)
        # The address as an import builds it from the Address and Suburb columns.
        address = join_address([raw["Address"].astype("string"), raw["Suburb"].astype("string")])
        address = address.fillna("")

        def run(
            label: str,
            mask: np.ndarray,
            texts: pd.Series,
            options: dict[str, object],
            geometry: np.ndarray | None = None,
            target: str = "",
        ) -> None:
            queries = pd.DataFrame({"query": texts[mask].astype("str").to_numpy()})
            if geometry is not None:
                queries["geometry"] = geometry[mask]
            started = time.perf_counter()
            resolved = resolve(index, queries, options)
            elapsed = time.perf_counter() - started
            precision, recall, _ = score(resolved, true_ids[mask].reset_index(drop=True))
            print(
                f"{label:<34} {mask.sum():>9,} queries {elapsed:7.2f} s  precision "
                f"{precision:7.2%}  recall {recall:7.2%}  {target}"
            )

        on_address = np.isin(kinds, ADDRESS_KINDS)
        no_geocoder = {"useExternalLookups": False}
        print(f"{'mode':<34} {'rows':>9}")
        run(
            "code (propnum_only rows)",
            kinds == "propnum_only",
            raw["Property Number"],
            {"mode": "code", "codeField": "propnum", **no_geocoder},
            target="(target <= 3 s)",
        )
        for rank in (1, 2, 3):
            run(
                f"soundex maxRank {rank}",
                on_address,
                address,
                {"mode": "soundex", "maxRank": rank, **no_geocoder},
                target="(target <= 10 s)" if rank == 3 else "",
            )
        run(
            "soundex maxRank 3 + fallback fuzzy",
            on_address,
            address,
            {"mode": "soundex", "maxRank": 3, "fallbackMode": "fuzzy", **no_geocoder},
            target="(recall target >= 90%)",
        )
        run("name", on_address, address, {"mode": "name", **no_geocoder})
        run(
            "auto",
            on_address | (kinds == "propnum_only"),
            address.where(kinds != "propnum_only", raw["Property Number"]),
            {"mode": "auto", "codeField": "propnum", **no_geocoder},
        )
        sample = on_address & (np.cumsum(on_address) <= args.fuzzy_sample)
        started = time.perf_counter()
        run("fuzzy", sample, address, {"mode": "fuzzy", **no_geocoder})
        rate = sample.sum() / (time.perf_counter() - started)
        print(f"  fuzzy: {rate:,.0f} queries/second (target >= 20,000)")

        points = np.asarray(raw.geometry.values, dtype=object)
        on_point = np.isin(kinds, ("coords_only", "wkt_only"))
        run(
            "geo (coords_only, wkt_only rows)",
            on_point,
            pd.Series([""] * len(raw)),
            {"mode": "geo", **no_geocoder},
            geometry=points,
        )
        # Geo speed, beside a bare sjoin of the same number of points against every parcel.
        all_points = gpd.GeoDataFrame(
            geometry=gpd.points_from_xy(
                np.resize(parcels.geometry.representative_point().x.to_numpy(), args.items),
                np.resize(parcels.geometry.representative_point().y.to_numpy(), args.items),
            ),
            crs=4326,
        )
        started = time.perf_counter()
        resolve(
            index,
            pd.DataFrame(
                {
                    "query": [""] * len(all_points),
                    "geometry": np.asarray(all_points.geometry.values),
                }
            ),
            {"mode": "geo", **no_geocoder},
        )
        toolkit_geo = time.perf_counter() - started
        started = time.perf_counter()
        gpd.sjoin(all_points, parcels[["geometry"]], predicate="within", how="left")
        bare = time.perf_counter() - started
        print(
            f"geo on {len(all_points):,} points: toolkit {toolkit_geo:.2f} s, bare "
            f"geopandas.sjoin {bare:.2f} s, ratio {toolkit_geo / bare:.2f} (target <= 1.3)"
        )
        print(f"peak memory {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
