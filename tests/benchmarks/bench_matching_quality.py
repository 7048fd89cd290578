"""Benchmark: address matching quality on field-like data, against the known truth.

For FEBRL development sets 1, 2 and 3 (address-only: ``street_number address_1, suburb``,
the ``-org`` records as assets, their ``-dup-`` records as queries; see ``febrl.py``) and for
the generated workload (its address rows), prints correct / wrong / none (shares of all
queries), pairs completeness (share of true pairs that reach scoring) and time for:

(a) the toolkit's ``fuzzy`` (probabilistic) mode;
(b) the damage-assessments chain: ``soundex`` maxRank 3, fallback ``fuzzy``;
(c) rapidfuzz ``process.extractOne(token_sort_ratio, score_cutoff=85)`` per query;
(d) Splink 5 (DuckDB) with a comparable address model (the toolkit's parse as columns;
    number exact, street and locality Jaro–Winkler 0.95/0.88/0.80 with term-frequency
    adjustment, street type exact; blocking on number + soundex of street or locality, on
    street, on locality + first letters of the street; u by random sampling, m by EM),
    linking a query's best pair at match probability >= 0.9, fixed in advance.

FEBRL dataset 4 is held out and never read here.

    python tests/benchmarks/bench_matching_quality.py
    python tests/benchmarks/bench_matching_quality.py --generated-items 20000 --no-splink
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
# The tests' folder: the generated problem and pairs completeness, as the blocking test has them.
sys.path.insert(0, str(Path(__file__).parents[1]))

import febrl
from generated_addresses import address_problem, fuzzy_candidates, true_pairs_reached

from toolkit.matching import AssetIndex, resolve
from toolkit.matching.address import parse

OFF = {"useExternalLookups": False}
SPLINK_THRESHOLD = 0.9


def tally(got: pd.Series, truth: pd.Series) -> tuple[float, float, float]:
    """Shares of queries linked right, linked wrong and not linked."""
    got = got.astype("string").reset_index(drop=True)
    truth = truth.astype("string").reset_index(drop=True)
    linked = got.notna().to_numpy()
    right = linked & (got == truth).fillna(False).to_numpy(dtype=bool)
    n = max(len(got), 1)
    return right.sum() / n, (linked & ~right).sum() / n, (~linked).sum() / n


def pairs_completeness(assets: pd.DataFrame, queries: pd.DataFrame) -> float:
    """Share of queries (with a true asset) whose true asset reaches scoring in ``fuzzy``."""
    return float(true_pairs_reached(assets, queries).mean())


def raw_scoring(assets: pd.DataFrame, queries: pd.DataFrame) -> tuple[int, float]:
    """The raw library doing the core of (a)'s work: rapidfuzz ``cpdist`` Jaro–Winkler of
    each query's whole text with each of its candidate assets' names (the same pairs
    (a) scores), timed alone; (pairs, seconds)."""
    from rapidfuzz import process
    from rapidfuzz.distance import JaroWinkler

    a_analysis, q_analysis, _, q, a = fuzzy_candidates(assets, queries)
    query_text = queries["query"].astype(str).groupby(q_analysis.codes).first().to_numpy(object)
    asset_text = assets["name"].astype(str).groupby(a_analysis.codes).first().to_numpy(object)
    left, right = query_text[q], asset_text[a]
    started = time.perf_counter()
    process.cpdist(left, right, scorer=JaroWinkler.normalized_similarity, workers=-1)
    return len(q), time.perf_counter() - started


def run_toolkit(index: AssetIndex, queries: pd.DataFrame, options: dict) -> tuple:
    started = time.perf_counter()
    result = resolve(index, queries[["query"]], {**OFF, **options})
    return result["asset_id"], time.perf_counter() - started


def run_rapidfuzz(assets: pd.DataFrame, queries: pd.DataFrame) -> tuple:
    from rapidfuzz import fuzz, process, utils

    started = time.perf_counter()
    choices = assets["name"].tolist()
    ids = assets["id"].to_numpy()
    got = []
    for text in queries["query"]:
        best = process.extractOne(
            text, choices, scorer=fuzz.token_sort_ratio, processor=utils.default_process,
            score_cutoff=85,
        )  # fmt: skip
        got.append(None if best is None else ids[best[2]])
    return pd.Series(got, dtype="string"), time.perf_counter() - started


def splink_columns(texts: pd.Series) -> pd.DataFrame:
    """The toolkit's parse as Splink input columns (plus soundex and prefix helpers)."""
    import jellyfish

    parts = parse(texts)
    frame = pd.DataFrame(
        {
            "number": parts["number"].replace("", None),
            "street": parts["street_name"].replace("", None),
            "street_type": parts["street_type"].replace("", None),
            "locality": parts["locality"].replace("", None),
        }
    )
    for column in ("street", "locality"):
        frame[f"{column}_sdx"] = frame[column].map(
            lambda v: None if v is None or pd.isna(v) else jellyfish.soundex(v.split()[0])
        )
    frame["street_prefix"] = frame["street"].str[:3]
    return frame


def run_splink(assets: pd.DataFrame, queries: pd.DataFrame) -> tuple:
    import splink.comparison_library as cl
    from splink import Linker, SettingsCreator, block_on
    from splink.backends.duckdb import DuckDBAPI

    started = time.perf_counter()
    left = splink_columns(assets["name"]).assign(unique_id=assets["id"].astype(str).to_numpy())
    right = splink_columns(queries["query"]).assign(
        unique_id=[f"q{i}" for i in range(len(queries))]
    )
    db = DuckDBAPI()
    tables = [db.register(left, table_name="assets"), db.register(right, table_name="queries")]
    settings = SettingsCreator(
        link_type="link_only",
        comparisons=[
            cl.ExactMatch("number"),
            cl.JaroWinklerAtThresholds("street", [0.95, 0.88, 0.8]).configure(
                term_frequency_adjustments=True
            ),
            cl.ExactMatch("street_type"),
            cl.JaroWinklerAtThresholds("locality", [0.95, 0.88, 0.8]).configure(
                term_frequency_adjustments=True
            ),
        ],
        blocking_rules_to_generate_predictions=[
            block_on("number", "street_sdx"),
            block_on("number", "locality_sdx"),
            block_on("street"),
            block_on("locality", "street_prefix"),
        ],
        retain_intermediate_calculation_columns=False,
    )
    linker = Linker(tables, settings, log_level=40)
    linker.training.estimate_probability_two_random_records_match(
        [block_on("number", "street", "locality")], recall=0.7
    )
    linker.training.estimate_u_using_random_sampling(max_pairs=1e6)
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("number"))
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("locality"))
    predictions = linker.inference.predict(threshold_match_probability=0.01)
    frame = predictions.as_pandas_dataframe()
    # The query is on either side, depending on the order Splink chose.
    query_on_left = frame["unique_id_l"].astype(str).str.startswith("q")
    query = np.where(query_on_left, frame["unique_id_l"], frame["unique_id_r"])
    asset = np.where(query_on_left, frame["unique_id_r"], frame["unique_id_l"])
    pairs = pd.DataFrame({"query": query, "asset": asset, "p": frame["match_probability"]})
    best = pairs.sort_values("p", ascending=False).drop_duplicates("query")
    best = best[best["p"] >= SPLINK_THRESHOLD].set_index("query")["asset"]
    got = pd.Series([f"q{i}" for i in range(len(queries))]).map(best)
    return got.astype("string"), time.perf_counter() - started


def report(name: str, assets: pd.DataFrame, queries: pd.DataFrame, splink: bool) -> None:
    # Indexes (with the fuzzy side) are built once per asset table, as a site caches them:
    # outside the matchers' times, and printed on their own line.
    started = time.perf_counter()
    index = AssetIndex.from_frame(assets[["id", "name"]])
    index.fuzzy_side()
    build = time.perf_counter() - started
    chain_index = AssetIndex.from_frame(assets[["id", "name"]])
    chain_index.fuzzy_side()
    truth = queries["truth"].replace("", pd.NA)
    completeness = pairs_completeness(assets, queries)
    print(f"\n{name}: {len(assets):,} assets, {len(queries):,} queries")
    print(f"  {'matcher':<44} {'correct':>8} {'wrong':>8} {'none':>8} {'time':>8}")
    runs = {
        "(a) toolkit fuzzy": lambda: run_toolkit(index, queries, {"mode": "fuzzy"}),
        "(b) soundex maxRank 3, fallback fuzzy": lambda: run_toolkit(
            chain_index,
            queries,
            {"mode": "soundex", "maxRank": 3, "fallbackMode": "fuzzy"},
        ),
        "(c) rapidfuzz extractOne token_sort 85": lambda: run_rapidfuzz(assets, queries),
    }
    if splink:
        runs["(d) Splink 5 (DuckDB), p >= 0.9"] = lambda: run_splink(assets, queries)
    times = {}
    for label, run in runs.items():
        got, elapsed = run()
        times[label[:3]] = elapsed
        right, wrong, none = tally(got, truth)
        print(f"  {label:<44} {right:8.2%} {wrong:8.2%} {none:8.2%} {elapsed:7.2f}s")
    print(f"  pairs completeness of (a): {completeness:.2%}")
    pairs, raw = raw_scoring(assets, queries)
    print(
        f"  (a) {times['(a)']:.2f}s vs rapidfuzz cpdist Jaro-Winkler alone on its {pairs:,} "
        f"candidate pairs {raw:.2f}s: ratio {times['(a)'] / max(raw, 1e-9):.1f}; "
        f"vs (c): ratio {times['(a)'] / max(times['(c)'], 1e-9):.2f}"
    )
    print(
        f"  index build with its fuzzy side (once per asset table; not in the times): {build:.2f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generated-items", type=int, default=20_000)
    parser.add_argument("--generated-assets", type=int, default=20_000)
    parser.add_argument("--no-splink", action="store_true")
    parser.add_argument("--sets", default="1,2,3")
    args = parser.parse_args()
    for dataset in (int(s) for s in args.sets.split(",") if s):
        assets, queries = febrl.problem(dataset)
        report(f"FEBRL {dataset}", assets, queries, not args.no_splink)
    if args.generated_items:
        # The generated workload's address rows: parcels as assets, Address + Suburb as query.
        assets, queries = address_problem(args.generated_items, args.generated_assets, seed=1)
        report("generated", assets, queries, not args.no_splink)


if __name__ == "__main__":
    main()
