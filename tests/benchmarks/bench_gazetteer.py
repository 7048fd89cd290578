"""Benchmark: the address gazetteer at scale, beside the raw libraries doing comparable work.

Generates G-NAF-style address points (``tests/gazetteer_data.py``) as a pipe-separated
file, then in the same run:

- build: ``toolkit.geocoding.load_files`` (read, index with asset matching's index and
  probabilistic matcher, write into the site file) beside pyarrow reading the same file
  and pandas hashing its normalised addresses (an exact-match index), and the time to
  read the stored gazetteer back from the site file;
- lookup: noisy queries (abbreviated types, typos, no postcode, unit forms, lower case)
  through ``Gazetteer.geocode`` beside a bare rapidfuzz ``cdist`` of a sample of the same
  queries against every address (brute-force best match) and a bare pandas exact lookup,
  with how many each found and how many of those were right.

    python tests/benchmarks/bench_gazetteer.py                      # 1,000,000 points
    python tests/benchmarks/bench_gazetteer.py --points 100000 --queries 2000
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from rapidfuzz import fuzz, process

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gazetteer_data import gnaf_points, noisy_queries, write_psv

from toolkit.geocoding import load_files, read_gazetteer
from toolkit.store import Database, SiteStore


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def score(found: pd.Series, truth: pd.Series) -> tuple[float, float]:
    """Share of queries given a place, and share of those that are the right one."""
    got = found.astype("string").reset_index(drop=True)
    expected = truth.astype("string").reset_index(drop=True)
    answered = got.notna().to_numpy()
    right = (got == expected).fillna(False).to_numpy(dtype=bool)
    return float(answered.mean()), float(right.sum() / max(answered.sum(), 1))


def raw_addresses(path: Path) -> tuple[pd.Series, pd.Series]:
    """pyarrow reads the file; the address of each row, normalised, and its PID."""
    table = pa_csv.read_csv(path, parse_options=pa_csv.ParseOptions(delimiter="|"))
    parts = [
        pc.fill_null(table[c].cast("string"), "")
        for c in (
            "NUMBER_FIRST",
            "STREET_NAME",
            "STREET_TYPE",
            "LOCALITY_NAME",
            "STATE",
            "POSTCODE",
        )
    ]
    joined = pc.binary_join_element_wise(*parts, " ")
    text = pc.utf8_upper(pc.utf8_trim_whitespace(pc.replace_substring_regex(joined, " +", " ")))
    return pd.Series(text.to_numpy(zero_copy_only=False)), table["ADDRESS_DETAIL_PID"].to_pandas()


def normalise(queries: pd.Series) -> pd.Series:
    return queries.str.upper().str.replace(r"[^A-Z0-9 ]", " ", regex=True).str.split().str.join(" ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument(
        "--brute-force-sample",
        type=int,
        default=100,
        help="queries for the rapidfuzz brute-force baseline (it scans every address)",
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        points = gnaf_points(args.points, seed=args.seed)
        psv = write_psv(points, folder / "GNAF_CORE.psv")
        queries = noisy_queries(points, args.queries, seed=args.seed + 1)
        size_mb = psv.stat().st_size / 1e6
        print(
            f"generated {len(points):,} address points ({size_mb:,.0f} MB) and "
            f"{len(queries):,} queries in {time.perf_counter() - started:.1f} s"
        )

        # --- build ----------------------------------------------------------------------
        db = Database(folder / "site.sqlite")
        store = SiteStore(db, "bench")
        started = time.perf_counter()
        gazetteer, report = load_files(store, [psv], name="gnaf")
        toolkit_build = time.perf_counter() - started
        header = gazetteer.header
        started = time.perf_counter()
        addresses, pids = raw_addresses(psv)
        exact_index = pd.Index(addresses)
        exact_index.get_indexer(addresses[:1])  # pandas builds its hash table here
        raw_build = time.perf_counter() - started
        print(
            f"gazetteer build: {toolkit_build:.1f} s for {report.kept:,} points "
            f"(index and matcher {header['buildSeconds']:.1f} s, stored "
            f"{header['bytes'] / 1e6:,.0f} MB); raw pyarrow read + pandas hash index "
            f"{raw_build:.1f} s; ratio {toolkit_build / raw_build:.1f}"
        )
        del gazetteer
        started = time.perf_counter()
        gazetteer = read_gazetteer(SiteStore(Database(folder / "site.sqlite"), "bench"))
        assert gazetteer is not None
        print(f"gazetteer read back from the site file: {time.perf_counter() - started:.1f} s")

        # --- lookup ---------------------------------------------------------------------
        started = time.perf_counter()
        found = gazetteer.geocode(queries["query"], {})
        toolkit_lookup = time.perf_counter() - started
        answered, right = score(found["place_id"], queries["truth"])
        per_query_ms = 1000 * toolkit_lookup / len(queries)
        print(
            f"gazetteer lookup: {len(queries):,} queries in {toolkit_lookup:.2f} s "
            f"({len(queries) / toolkit_lookup:,.0f} queries/s, {per_query_ms:.2f} ms each); "
            f"answered {answered:.1%}, right {right:.2%} of those"
        )
        by_kind = (
            found.assign(
                right=(found["place_id"].astype("string") == queries["truth"]).fillna(False),
                kind=queries["kind"],
            )
            .groupby("kind")["right"]
            .mean()
        )
        print("  right by kind: " + ", ".join(f"{k} {v:.1%}" for k, v in by_kind.items()))

        started = time.perf_counter()
        hit = exact_index.get_indexer(normalise(queries["query"]))
        raw_exact = time.perf_counter() - started
        exact_found = pd.Series(np.where(hit >= 0, pids.to_numpy()[np.maximum(hit, 0)], None))
        answered, right = score(exact_found, queries["truth"])
        print(
            f"raw pandas exact lookup: {raw_exact:.3f} s; answered {answered:.1%}, "
            f"right {right:.2%} of those"
        )

        sample = queries.iloc[: args.brute_force_sample]
        started = time.perf_counter()
        scores = process.cdist(
            normalise(sample["query"]).tolist(),
            addresses.tolist(),
            scorer=fuzz.ratio,
            workers=-1,
            dtype=np.uint8,
        )
        best = scores.argmax(axis=1)
        raw_fuzzy = time.perf_counter() - started
        brute = pd.Series(pids.to_numpy()[best])
        answered, right = score(brute, sample["truth"])
        raw_ms = 1000 * raw_fuzzy / len(sample)
        print(
            f"raw rapidfuzz cdist brute force: {len(sample):,} queries in {raw_fuzzy:.1f} s "
            f"({raw_ms:.1f} ms each); right {right:.1%}; per query the gazetteer takes "
            f"{per_query_ms / raw_ms:.3f} of its time (ratio)"
        )
        print(f"peak memory {peak_rss_mib():,.0f} MiB")
        db.close()


if __name__ == "__main__":
    main()
