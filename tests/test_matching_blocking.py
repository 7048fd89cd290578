"""Blocking: the true asset of a generated row reaches fuzzy's scoring (pairs completeness).

The generated workload carries the corruptions field data has (typos in any word, street
types spelt out, abbreviated or misspelt, unit forms, missing numbers or suburbs, swapped,
joined and split words), with the truth beside each row: the share of rows whose true
parcel is among fuzzy's candidates is measured on it, with the candidates per query
bounded, so reaching every asset cannot be how it is met.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from generated_addresses import address_problem, fuzzy_candidates, true_pairs_reached

from toolkit.matching.blocking import MAX_CANDIDATES

# Issue 11: at least 99% of true pairs reach scoring on the development sets.
COMPLETENESS = 0.99
# A row whose true parcel cannot be told from its address alone (its number missing, on a
# street of many parcels) is the usual miss; no kind of corruption may lose more than this.
KIND_COMPLETENESS = 0.95


@pytest.fixture(scope="module", params=[1, 2], ids=lambda seed: f"seed {seed}")
def problem(request: pytest.FixtureRequest) -> tuple[pd.DataFrame, pd.DataFrame]:
    return address_problem(3000, 3000, seed=request.param)


def test_true_pairs_reach_scoring_on_generated_field_data(
    problem: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    assets, queries = problem
    reached = true_pairs_reached(assets, queries)
    assert len(reached) > 2000
    assert reached.mean() >= COMPLETENESS
    by_kind = reached.groupby(queries.loc[reached.index, "kind"]).mean()
    # The generator's main corruptions are all there, and each kind still reaches scoring.
    kinds = {"typo", "swapped", "unit", "missing_suburb", "abbreviated", "field"}
    assert kinds <= set(by_kind.index)
    assert (by_kind >= KIND_COMPLETENESS).all(), by_kind.to_dict()


def test_candidates_per_query_stay_bounded(problem: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    assets, queries = problem
    _, q_analysis, _, q, _ = fuzzy_candidates(assets, queries)
    per_query = np.bincount(q, minlength=int(q_analysis.codes.max()) + 1)
    assert per_query.max() <= MAX_CANDIDATES
    # Blocking, not a cross product: under 1% of all (query, asset) pairs are scored.
    assert len(q) < len(per_query) * len(assets) / 100
