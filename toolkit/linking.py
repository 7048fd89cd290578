"""Linking import rows to assets: the rule's ways, tried in order, on whole columns.

An item rule's :class:`~toolkit.rules.AssetLink` names up to four ways: an
asset id column, a code column matched on a code field (the spec's
``asset_lookup``/``asset_codefield``), the row's own point inside an asset, and
an address from some columns (``asset_friendly``) with lookup options. Each way
runs only on the rows still without an asset, so the most certain way wins.
Ties are never broken by guessing: a tied row stays unlinked with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import shapely

from toolkit.matching import AssetIndex, resolve
from toolkit.rules import ImportRule, Prepared

LINK_COLUMNS = ("row", "reference", "query", "asset_id", "mode", "accuracy", "candidates", "err")


@dataclass(frozen=True)
class LinkResult:
    """Per source row: the asset id (Int64, missing when unlinked) and how it was decided."""

    asset_ids: pd.Series
    reasons: pd.Series
    links: pd.DataFrame

    def counts(self) -> dict[str, int]:
        """How many rows each way linked, and how many stayed unlinked."""
        linked = self.links["mode"].where(self.asset_ids.notna().to_numpy())
        counts = {str(k): int(v) for k, v in linked.value_counts().items()}
        counts["unlinked"] = int(self.asset_ids.isna().sum())
        return counts


def _frame_text(frame: pd.DataFrame, column: str | None) -> pd.Series | None:
    if column is None:
        return None
    by_key = {c.strip().casefold(): c for c in frame.columns}
    heading = by_key.get(column.strip().casefold())
    if heading is None:
        return None
    text = frame[heading].astype("string").str.strip()
    return text.mask(text == "")


def link_rows(
    index: AssetIndex,
    frame: pd.DataFrame,
    prepared: Prepared,
    rule: ImportRule,
    *,
    reference_field: str | None = None,
) -> LinkResult:
    """Link every row of ``frame`` that the rule's asset link can place."""
    link = rule.asset_link
    n = len(frame)
    asset_ids = pd.Series(pd.NA, index=frame.index, dtype="Int64")
    mode = pd.Series(pd.NA, index=frame.index, dtype="string")
    query = pd.Series(pd.NA, index=frame.index, dtype="string")
    accuracy = pd.Series(np.nan, index=frame.index, dtype="float64")
    candidates = pd.Series(0, index=frame.index, dtype="int64")
    reasons = pd.Series(pd.NA, index=frame.index, dtype="string")
    if link is None or n == 0:
        return _result(
            frame, prepared, reference_field, asset_ids, reasons, mode, query, accuracy, candidates
        )
    options: dict[str, Any] = {"useExternalLookups": False, **link.options}
    asset_class = options.get("assetClass")

    def attempt(
        mask: np.ndarray,
        texts: pd.Series,
        way_options: Mapping[str, Any],
        geometry: np.ndarray | None = None,
    ) -> None:
        todo = mask & asset_ids.isna().to_numpy()
        if not todo.any():
            return
        rows = np.flatnonzero(todo)
        queries = pd.DataFrame({"query": texts.iloc[rows].fillna("").astype("str").to_numpy()})
        if geometry is not None:
            queries["geometry"] = geometry[rows]
        result = resolve(index, queries, way_options)
        found = result["asset_position"].to_numpy() >= 0
        ids = pd.to_numeric(result["asset_id"], errors="coerce").astype("Int64").to_numpy()
        positions = frame.index[rows]
        asset_ids.loc[positions[found]] = ids[found]
        mode.loc[positions] = result["mode"].astype("string").to_numpy()
        query.loc[positions] = result["query"].astype("string").to_numpy()
        accuracy.loc[positions] = pd.to_numeric(result["accuracy"], errors="coerce").to_numpy()
        candidates.loc[positions] = result["candidates"].fillna(0).astype("int64").to_numpy()
        way = str(way_options.get("mode"))
        described = (way + ": " + result["err"].astype("string").fillna("no match")).to_numpy(
            dtype=object
        )
        earlier = reasons.loc[positions].to_numpy(dtype=object)
        unseen = pd.isna(earlier)
        combined = described.copy()
        combined[~unseen] = earlier[~unseen] + "; " + described[~unseen]
        reasons.loc[positions[~found]] = combined[~found]

    ids_text = _frame_text(frame, link.id_column)
    if ids_text is not None:
        attempt(ids_text.notna().to_numpy(), ids_text, {"mode": "id", "assetClass": asset_class})
    codes = _frame_text(frame, link.lookup_column)
    if codes is not None:
        code_options = {"mode": "code", "assetClass": asset_class}
        if link.codefield:
            code_options["codeField"] = link.codefield
        attempt(codes.notna().to_numpy(), codes, code_options)
    if link.use_geometry and "geometry" in frame.columns:
        geometry = np.asarray(frame.geometry.values, dtype=object)
        has_point = ~shapely.is_missing(geometry)
        has_point[has_point] = ~shapely.is_empty(geometry[has_point])
        empty_text = pd.Series("", index=frame.index, dtype="string")
        attempt(has_point, empty_text, {"mode": "geo", "assetClass": asset_class}, geometry)
    if link.friendly_columns:
        parts = [_frame_text(frame, c) for c in link.friendly_columns]
        present = [p for p in parts if p is not None]
        if present:
            address = join_address(present)
            attempt(address.notna().to_numpy(), address, options)
    reasons = reasons.where(asset_ids.isna())
    nothing_tried = asset_ids.isna() & reasons.isna()
    reasons = reasons.mask(nothing_tried, "the row has nothing to find an asset by")
    return _result(
        frame, prepared, reference_field, asset_ids, reasons, mode, query, accuracy, candidates
    )


def _result(
    frame: pd.DataFrame,
    prepared: Prepared,
    reference_field: str | None,
    asset_ids: pd.Series,
    reasons: pd.Series,
    mode: pd.Series,
    query: pd.Series,
    accuracy: pd.Series,
    candidates: pd.Series,
) -> LinkResult:
    reference = (
        prepared.values[reference_field].astype("string")
        if reference_field and reference_field in prepared.values
        else pd.Series(pd.NA, index=frame.index, dtype="string")
    )
    links = pd.DataFrame(
        {
            "row": frame.index.to_numpy(),
            "reference": reference.to_numpy(),
            "query": query.to_numpy(),
            "asset_id": asset_ids.to_numpy(),
            "mode": mode.to_numpy(),
            "accuracy": accuracy.to_numpy(),
            "candidates": candidates.to_numpy(),
            "err": reasons.to_numpy(),
        }
    )
    return LinkResult(asset_ids=asset_ids, reasons=reasons, links=links)


def join_address(parts: list[pd.Series]) -> pd.Series:
    """Join address columns with spaces, leaving out a part the address already holds.

    Officers often type the suburb into the address as well as the suburb column;
    "12 SMITH ST BUNINYONG BUNINYONG" would no longer sound like the parcel.
    """
    text = np.dtypes.StringDType()
    address = parts[0].fillna("").to_numpy(dtype=object).astype(text)
    for part in parts[1:]:
        addition = part.fillna("").to_numpy(dtype=object).astype(text)
        held = np.strings.find(np.strings.upper(address), np.strings.upper(addition)) >= 0
        keep = (addition != "") & ~held
        joined = np.strings.add(np.strings.add(address, " "), addition)
        address = np.where(keep, joined, address)
    joined_text = pd.Series(
        np.strings.strip(address).astype(object), index=parts[0].index, dtype="string"
    )
    return joined_text.mask(joined_text == "")
