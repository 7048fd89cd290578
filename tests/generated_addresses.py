"""The generated workload's address rows as a matching problem, and pairs completeness.

Shared by the blocking test (``test_matching_blocking.py``) and the matching-quality
benchmark, so both measure the same thing: the parcels' names are the assets, each item
row's ``Address`` and ``Suburb`` joined as the import joins them is the query, and the
truth file says which parcel it means. Rows that carry no address (property number,
coordinates or WKT only) and the deliberately bad rows are left out.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.importing.linking import join_address
from toolkit.matching.address import Analysis
from toolkit.matching.blocking import KeyGroups, candidate_pairs
from toolkit.matching.parsed import Parsed
from toolkit.sample.generate import generate
from toolkit.sources import read_source

# Truth kinds whose rows are linked by something other than their address.
NOT_BY_ADDRESS = ("propnum_only", "coords_only", "wkt_only")


def address_problem(items: int, assets: int, *, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generate a workload and return (assets: ``id``, ``name``; queries: ``query``,
    ``truth``, ``kind``)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        generate(folder, assets=assets, items=items, seed=seed)
        parcels, _ = read_source(folder / "parcels.zip")
        raw, _ = read_source(folder / "items.csv")
        truth = pd.read_csv(folder / "items_truth.csv", dtype=str, keep_default_na=False)
    parcels = pd.DataFrame(parcels.drop(columns="geometry")).reset_index(drop=True)
    raw = raw.reset_index(drop=True)
    truth = truth.set_index("Reference").reindex(raw["Reference"].astype(str)).reset_index()
    address = join_address([raw["Address"].astype("string"), raw["Suburb"].astype("string")])
    on_address = ~truth["kind"].isin(NOT_BY_ADDRESS).to_numpy()
    on_address &= ~truth["kind"].str.startswith("bad_").to_numpy()
    queries = pd.DataFrame(
        {
            "query": address.fillna("")[on_address].to_numpy(),
            "truth": truth["asset_id"][on_address].to_numpy(),
            "kind": truth["kind"][on_address].to_numpy(),
        }
    )
    return parcels[["id", "name"]], queries


def fuzzy_candidates(
    assets: pd.DataFrame, queries: pd.DataFrame
) -> tuple[Analysis, Analysis, Parsed, np.ndarray, np.ndarray]:
    """Mode fuzzy's candidate pairs (distinct query text, distinct asset text), with the
    analyses and the assets' parse they were made from."""
    a_analysis, q_analysis = Analysis.of(assets["name"]), Analysis.of(queries["query"])
    a_parsed, q_parsed = Parsed.of(a_analysis), Parsed.of(q_analysis, field_data=True)
    groups = KeyGroups.of(a_parsed.key_rows, a_parsed.keys)
    q, a = candidate_pairs(q_parsed, groups, len(a_parsed))
    return a_analysis, q_analysis, a_parsed, q, a


def true_pairs_reached(assets: pd.DataFrame, queries: pd.DataFrame) -> pd.Series:
    """For each query with a true asset (by its index in ``queries``): whether its true
    asset is among fuzzy's candidates, i.e. reaches scoring. Its mean is pairs
    completeness."""
    a_analysis, q_analysis, a_parsed, q, a = fuzzy_candidates(assets, queries)
    position = pd.Series(np.arange(len(assets)), index=assets["id"].astype(str))
    has_truth = queries["truth"].notna().to_numpy() & (queries["truth"] != "").to_numpy()
    truth_rows = a_analysis.codes[position[queries["truth"][has_truth].astype(str)].to_numpy()]
    wanted = q_analysis.codes[has_truth].astype(np.int64) * len(a_parsed) + truth_rows
    found = q.astype(np.int64) * len(a_parsed) + a
    return pd.Series(np.isin(wanted, found), index=queries.index[has_truth])
