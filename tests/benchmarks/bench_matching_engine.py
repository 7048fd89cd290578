"""Benchmark of the asset matching engine on a synthetic workload.

    python tests/benchmarks/bench_matching_engine.py [--assets N] [--queries M] [--fuzzy F]

Builds N parcels (small boxes on a grid) with synthetic addresses and property numbers,
and M queries with the errors real data has (abbreviated street types, a missing suburb,
one typo, the first two words swapped, lower case, leading zeros dropped). Prints the time
of index build and of modes ``code``,
``soundex`` (maxRank 3, with normalisation), ``geo`` beside a bare ``geopandas.sjoin`` doing
the same point-in-polygon join, and ``fuzzy`` in queries/second (on F queries), with the
precision and recall of each against the known answer, and peak memory. The project's
data generator will replace ``synthetic_assets``/``synthetic_queries``.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from toolkit.matching import AssetIndex, resolve
from toolkit.matching.address import STREET_TYPES

SYLLABLES = np.array(
    [
        "BAR",
        "BEL",
        "CAR",
        "DAL",
        "FEN",
        "GAR",
        "HAL",
        "KEN",
        "LAN",
        "MAR",
        "NOR",
        "PEN",
        "RAN",
        "SAL",
        "TAR",
        "VAL",
        "WIL",
        "ASH",
        "BRO",
        "CLI",
        "DUN",
        "EAS",
        "FAR",
        "GLEN",
        "HIL",
        "KIN",
        "LOCK",
        "MON",
        "OAK",
        "PAR",
        "ROS",
        "SHER",
        "THOR",
        "WAT",
        "WES",
        "YAR",
        "ALB",
        "BEX",
        "CRO",
    ]
)
TYPES = np.array(["STREET", "ROAD", "AVENUE", "COURT", "CRESCENT", "DRIVE", "PLACE", "PARADE"])
ABBREVIATION = {full: STREET_TYPES[full][0] for full in TYPES}


def _words(rng: np.random.Generator, n: int, parts: int) -> np.ndarray:
    pieces = [rng.choice(SYLLABLES, n).astype(object) for _ in range(parts)]
    word = pieces[0]
    for piece in pieces[1:]:
        word = word + piece
    return word


def synthetic_assets(n: int, seed: int = 1) -> gpd.GeoDataFrame:
    """N parcels: 50 houses per street, streets unique by (name, type, locality)."""
    rng = np.random.default_rng(seed)
    n_streets = max(1, n // 50)
    names = _words(rng, n_streets * 2, 3)
    types = rng.choice(TYPES, n_streets * 2)
    localities = _words(rng, n_streets * 2, 2)
    streets = pd.DataFrame({"name": names, "type": types, "locality": localities})
    streets = streets.drop_duplicates().head(n_streets).reset_index(drop=True)
    street = np.arange(n) % len(streets)
    number = np.arange(n) // len(streets) + 1
    address = (
        pd.Series(number).astype(str).to_numpy(dtype=object)
        + " "
        + streets["name"].to_numpy(dtype=object)[street]
        + " "
        + streets["type"].to_numpy(dtype=object)[street]
        + " "
        + streets["locality"].to_numpy(dtype=object)[street]
    )
    side = int(np.ceil(np.sqrt(n)))
    x = (np.arange(n) % side) * 0.001 + 144.0
    y = (np.arange(n) // side) * 0.001 - 38.0
    return gpd.GeoDataFrame(
        {
            "id": pd.array(np.char.add("P", np.arange(n).astype(str)), dtype="str"),
            "type": "Property",
            "name": pd.array(address, dtype="str"),
            "propnum": pd.array(np.char.zfill(np.arange(1, n + 1).astype(str), 8), dtype="str"),
            "street_index": street,
        },
        geometry=shapely.box(x, y, x + 0.001, y + 0.001),
        crs=4326,
    )


def synthetic_queries(assets: gpd.GeoDataFrame, m: int, seed: int = 2) -> pd.DataFrame:
    """M corrupted queries with the asset each one means (``truth``)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, len(assets), m)
    words = assets["name"].to_numpy(dtype=object)[truth]
    text = pd.Series(words, dtype="str")
    abbreviate = rng.random(m) < 0.5
    for full, short in ABBREVIATION.items():
        text = text.where(~abbreviate, text.str.replace(f" {full} ", f" {short} ", regex=False))
    drop_locality = rng.random(m) < 0.3
    text = text.where(~drop_locality, text.str.replace(r" [A-Z]+$", "", regex=True))
    typo = rng.random(m) < 0.2
    text = text.where(~typo, text.str.replace(r"([A-Z])([AEIOU])", r"\1\2\2", n=1, regex=True))
    swap = rng.random(m) < 0.1
    text = text.where(~swap, text.str.replace(r"^(\S+) (\S+)", r"\2 \1", regex=True))
    lower = rng.random(m) < 0.3
    text = text.where(~lower, text.str.lower())
    bounds = shapely.bounds(assets.geometry.array[truth])
    points = shapely.points(
        bounds[:, 0] + rng.random(m) * (bounds[:, 2] - bounds[:, 0]),
        bounds[:, 1] + rng.random(m) * (bounds[:, 3] - bounds[:, 1]),
    )
    propnum = assets["propnum"].to_numpy(dtype=object)[truth]
    stripped = pd.Series(propnum, dtype="str").str.lstrip("0")
    code = stripped.where(rng.random(m) < 0.5, pd.Series(propnum, dtype="str"))
    return pd.DataFrame({"query": text, "code": code, "geometry": points, "truth": truth})


def timed(label: str, work: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = work()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:8.2f} s", flush=True)
    return seconds, value


def quality(label: str, resolved: pd.DataFrame, truth: np.ndarray) -> None:
    asset = resolved["asset_position"].to_numpy()
    matched = asset >= 0
    correct = matched & (asset == truth)
    precision = correct.sum() / max(matched.sum(), 1)
    recall = correct.sum() / len(truth)
    print(f"  {label}: precision {precision:.4%}  recall {recall:.2%}")


def peak_memory_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--fuzzy", type=int, default=None, help="fuzzy queries (default all)")
    args = parser.parse_args()
    n, m = args.assets, args.queries
    print(f"assets {n:,}  queries {m:,}")
    _, assets = timed("generate assets", lambda: synthetic_assets(n))
    _, queries = timed("generate queries", lambda: synthetic_queries(assets, m))
    truth = queries["truth"].to_numpy()
    frame = assets.drop(columns=["street_index"])
    _, index = timed("index build", lambda: AssetIndex.from_frame(frame))
    offline = {"useExternalLookups": False}

    _, res = timed(
        "code (propnum, leading zeros dropped)",
        lambda: resolve(
            index,
            queries[["code"]].rename(columns={"code": "query"}),
            {"mode": "code", "codeField": "propnum", **offline},
        ),
    )
    quality("code", res, truth)
    _, res = timed(
        "soundex maxRank 3 (with normalisation)",
        lambda: resolve(index, queries[["query"]], {"mode": "soundex", "maxRank": 3, **offline}),
    )
    quality("soundex", res, truth)
    unmatched = res["asset_position"].to_numpy() < 0
    print(f"  unmatched after soundex: {unmatched.sum():,}")

    point_array = gpd.GeoSeries(queries["geometry"].to_numpy(dtype=object), crs=4326)
    points = gpd.GeoDataFrame({"truth": truth}, geometry=point_array)
    parcels = gpd.GeoDataFrame(geometry=assets.geometry.array, crs=4326)
    bare, joined = timed(
        "bare geopandas.sjoin(points, parcels, within)",
        lambda: gpd.sjoin(points, parcels, predicate="within"),
    )
    geo_q = pd.DataFrame({"query": "", "geometry": queries["geometry"]})
    ours, res = timed("geo", lambda: resolve(index, geo_q, {"mode": "geo", **offline}))
    print(f"  geo / sjoin ratio: {ours / bare:.2f}  (sjoin pairs {len(joined):,})")
    quality("geo", res, truth)

    k = m if args.fuzzy is None else min(args.fuzzy, m)
    fq = queries[["query"]].head(k)
    seconds, res = timed(
        f"fuzzy on {k:,} queries", lambda: resolve(index, fq, {"mode": "fuzzy", **offline})
    )
    print(f"  fuzzy: {k / seconds:,.0f} queries/s")
    quality("fuzzy", res, truth[:k])
    _, res = timed(
        "soundex maxRank 3 + fallbackMode fuzzy",
        lambda: resolve(
            index,
            queries[["query"]],
            {"mode": "soundex", "maxRank": 3, "fallbackMode": "fuzzy", **offline},
        ),
    )
    quality("soundex+fuzzy", res, truth)
    print(f"peak memory {peak_memory_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
