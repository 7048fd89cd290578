"""Clerical review of fuzzy matches: the review file, the reviewer's decisions, their use.

Rows mode ``fuzzy`` could not link but whose best candidate is at least
``REVIEW_PROBABILITY`` likely (ties included) go to a review file, one row per query with
its top candidates. The reviewer fills ``chosen`` with a candidate's number (1, 2, 3), an
asset id, or ``none``; blank rows are left undecided. Decisions are keyed by the query's
normalised text, so the same text links the same way next time (``apply_decisions``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.errors import MatchingError
from toolkit.matching.address import normalise
from toolkit.matching.index import AssetIndex, normalise_codes
from toolkit.matching.probabilistic import REVIEW_PROBABILITY

REVIEW_CANDIDATES = 3
NONE_WORDS = frozenset({"NONE", "NO", "NO MATCH", "-"})
REVIEWED_MODE = "reviewed"
REJECTED = "a reviewer decided that no asset matches this text"
DECISION_COLUMNS = ("query", "asset_id")


def review_columns(k: int = REVIEW_CANDIDATES) -> list[str]:
    columns = ["reference", "query", "probability"]
    for i in range(1, k + 1):
        columns += [f"candidate_{i}_id", f"candidate_{i}_name", f"candidate_{i}_score"]
    return [*columns, "chosen"]


def review_frame(
    index: AssetIndex, resolved: pd.DataFrame, asset_class: str | None = None
) -> pd.DataFrame:
    """One row per unlinked query whose best fuzzy candidate is at least
    ``REVIEW_PROBABILITY`` likely (``resolve``'s frame), with its top ``REVIEW_CANDIDATES``
    fuzzy candidates and an empty ``chosen`` column for the reviewer."""
    from toolkit.matching.resolve import resolve_with_candidates

    probability = resolved["probability"].to_numpy(dtype=float)
    wanted = (resolved["asset_position"].to_numpy() < 0) & (probability >= REVIEW_PROBABILITY)
    rows = np.flatnonzero(wanted)
    out = pd.DataFrame(
        {
            "reference": resolved["reference"].to_numpy(dtype=object)[rows],
            "query": resolved["query"].to_numpy(dtype=object)[rows],
            "probability": np.round(probability[rows], 4),
        }
    )
    options = {"mode": "fuzzy", "useExternalLookups": False}
    if asset_class is not None:
        options["assetClass"] = asset_class
    queries = pd.DataFrame({"query": out["query"].astype("str")})
    _, top = resolve_with_candidates(index, queries, options, REVIEW_CANDIDATES)
    names = index.assets["name"].to_numpy(dtype=object)
    for i in range(1, REVIEW_CANDIDATES + 1):
        ranked = top[top["rank"] == i]
        by_row = pd.DataFrame(
            {
                "id": ranked["asset_id"].to_numpy(dtype=object),
                "name": names[ranked["asset_position"].to_numpy(dtype=np.int64)],
                "score": ranked["score"].to_numpy(dtype=float),
            },
            index=ranked["row"].to_numpy(dtype=np.int64),
        ).reindex(np.arange(len(rows)))
        out[f"candidate_{i}_id"] = by_row["id"].to_numpy(dtype=object)
        out[f"candidate_{i}_name"] = by_row["name"].to_numpy(dtype=object)
        out[f"candidate_{i}_score"] = by_row["score"].to_numpy(dtype=float)
    out["chosen"] = ""
    return out[review_columns()]


def decisions_from_review(reviewed: pd.DataFrame, source: str) -> pd.DataFrame:
    """The decisions of a marked review file (``review_frame`` with ``chosen`` filled):
    columns ``query`` (normalised) and ``asset_id`` (None for "none"); undecided rows are
    left out. A ``chosen`` that is neither a candidate number, an asset id nor "none" is a
    ``MatchingError`` naming ``source``, the row and the value."""
    by_key = {str(c).strip().casefold(): c for c in reviewed.columns}
    missing = [c for c in ("query", "chosen") if c not in by_key]
    if missing:
        raise MatchingError(
            f"{source}: no {', '.join(missing)} column; a review file has the columns "
            f"{', '.join(review_columns())}"
        )
    chosen = reviewed[by_key["chosen"]].astype("string").fillna("").str.strip()
    decided = chosen != ""
    asset_id = pd.Series(None, index=reviewed.index, dtype=object)
    upper = chosen.str.upper()
    rejected = upper.isin(NONE_WORDS)
    numbered = chosen.str.fullmatch(r"[1-9]").fillna(False)
    for i in range(1, REVIEW_CANDIDATES + 1):
        column = by_key.get(f"candidate_{i}_id")
        pick = numbered & (chosen == str(i))
        if not pick.any():
            continue
        if column is None:
            raise MatchingError(f"{source}: 'chosen' names candidate {i}, but there is no column")
        ids = reviewed[column].astype("string")
        empty = pick & ids.isna()
        if empty.any():
            row = int(np.flatnonzero(empty.to_numpy())[0]) + 2
            raise MatchingError(
                f"{source}: row {row}, column chosen: candidate {i} is empty on this row"
            )
        asset_id[pick] = ids[pick]
    other = decided & ~rejected & ~numbered
    asset_id[other] = chosen[other]
    bad_number = numbered & (chosen.astype("string").str.fullmatch(r"[1-9]").fillna(False))
    bad_number &= ~chosen.isin([str(i) for i in range(1, REVIEW_CANDIDATES + 1)])
    if bad_number.any():
        row = int(np.flatnonzero(bad_number.to_numpy())[0]) + 2
        raise MatchingError(
            f"{source}: row {row}, column chosen: {chosen[bad_number].iloc[0]!r}; allowed: "
            f"a candidate number 1-{REVIEW_CANDIDATES}, an asset id, 'none', or blank"
        )
    queries = normalise(reviewed[by_key["query"]].astype("string").fillna(""))
    chosen_ids = asset_id[decided].to_numpy(dtype=object)
    out = pd.DataFrame(
        {
            "query": queries[decided].to_numpy(dtype=object),
            "asset_id": _none_where_missing(chosen_ids),
        }
    )
    out = out[out["query"] != ""]
    # The last decision on a text wins.
    return out.drop_duplicates("query", keep="last").reset_index(drop=True)


def read_review(path: Path) -> pd.DataFrame:
    """The decisions of a marked review file (CSV or XLSX)."""
    from toolkit.sources import read_source

    frame, _ = read_source(path)
    return decisions_from_review(pd.DataFrame(frame), path.name)


def write_review(frame: pd.DataFrame, path: Path) -> None:
    """Write a review file: XLSX when the name ends in .xlsx, else CSV; cells that a
    spreadsheet would run as formulas are neutralised."""
    from toolkit.safe_output import safe_frame

    safe = safe_frame(frame)
    if path.suffix.lower() == ".xlsx":
        safe.to_excel(path, index=False, engine="xlsxwriter")
    else:
        safe.to_csv(path, index=False)


def apply_decisions(
    index: AssetIndex, resolved: pd.DataFrame, decisions: pd.DataFrame | None
) -> pd.DataFrame:
    """``resolve``'s frame with reviewers' decisions applied: a query whose normalised text
    was decided links to the chosen asset (mode ``reviewed``, accuracy 100) or to none (with
    the reason); a decision naming an asset the index does not hold is reported in ``err``
    and the matcher's answer kept."""
    if decisions is None or not len(decisions) or not len(resolved):
        return resolved
    keys = normalise(resolved["query"].astype("string").fillna("")).to_numpy(dtype=object)
    table = dict(zip(decisions["query"], decisions["asset_id"], strict=True))
    position = pd.Series(keys).isin(list(table)).to_numpy(dtype=bool)
    if not position.any():
        return resolved
    out = resolved.copy()
    rows = np.flatnonzero(position)
    chosen = pd.Series(keys[rows]).map(table).astype(object)
    chosen = chosen.where(chosen.notna(), None)
    none = chosen.isna().to_numpy()
    ids = normalise_codes(index.assets["id"])
    id_position = pd.Index(pd.Series(ids, dtype=object))
    wanted = normalise_codes(chosen.astype("string").fillna(""))
    found = id_position.get_indexer(pd.Index(pd.Series(wanted, dtype=object)))
    allowed = index.allowed(None)
    ok = ~none & (found >= 0)
    ok[ok] = allowed[found[ok]]
    unknown = ~none & ~ok
    err = out["err"].astype(object).to_numpy().copy()
    asset_position = out["asset_position"].to_numpy().copy()
    asset_id = out["asset_id"].astype(object).to_numpy().copy()
    mode = out["mode"].astype(object).to_numpy().copy()
    accuracy = out["accuracy"].to_numpy(dtype=float).copy()
    count = out["candidates"].to_numpy().copy()
    take = rows[ok]
    asset_position[take] = found[ok]
    asset_id[take] = index.assets["id"].to_numpy(dtype=object)[found[ok]]
    mode[take] = REVIEWED_MODE
    accuracy[take] = 100.0
    count[take] = 1
    err[take] = None
    drop = rows[none]
    asset_position[drop] = -1
    asset_id[drop] = None
    mode[drop] = None
    accuracy[drop] = np.nan
    err[drop] = REJECTED
    for r, value in zip(rows[unknown], chosen[unknown], strict=True):
        err[r] = f"a reviewer chose asset {value!r}, which is not an active asset here"
    out["asset_position"] = asset_position
    out["asset_id"] = pd.array(asset_id, dtype="str")
    out["mode"] = pd.array(mode, dtype="str")
    out["accuracy"] = accuracy
    out["candidates"] = count
    out["err"] = pd.array(err, dtype="str")
    return out


def _none_where_missing(values: np.ndarray) -> np.ndarray:
    """An object array with None in place of missing values."""
    out = np.array(values, dtype=object)
    out[pd.isna(out)] = None
    return out
