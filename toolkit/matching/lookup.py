"""Asset lookup for people and files: queries from a file, an index from a file, results
as the spec's object or as one row per query.

The matching itself is ``toolkit.matching``; this module gathers the queries
(from a column of any readable source, with its codes and its geometry), builds
or reloads the asset index, and shapes the answer for output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from toolkit.errors import SourceError
from toolkit.matching import AssetIndex, checked_options, resolve_with_candidates
from toolkit.matching.geocoder import Geocoder
from toolkit.matching.modes import ModeFunction
from toolkit.matching.review import apply_decisions
from toolkit.progress import Progress, no_progress
from toolkit.sources import read_source

RESULT_FILE_COLUMNS = (
    "reference",
    "query",
    "asset_id",
    "asset_name",
    "mode",
    "accuracy",
    "candidates",
    "err",
    "review",
)


@dataclass(frozen=True)
class LookupResult:
    """Resolved queries (one row each), their top candidates, and the index used."""

    resolved: pd.DataFrame
    candidates: pd.DataFrame
    index: AssetIndex

    def summary(self) -> dict[str, Any]:
        """Matched, ambiguous (tied) and unmatched counts, matches per mode, and the
        queries answered by an external place that is no asset."""
        found = self.resolved["asset_position"].to_numpy() >= 0
        tied = ~found & (self.resolved["candidates"].fillna(0).to_numpy() > 1)
        modes = self.resolved.loc[found, "mode"].value_counts()
        external = (
            ~found
            & self.resolved["external_longitude"].notna().to_numpy()
            & self.resolved["err"].isna().to_numpy()
        )
        return {
            "queries": len(self.resolved),
            "matched": int(found.sum()),
            "ambiguous": int(tied.sum()),
            "unmatched": int((~found & ~tied).sum()),
            "byMode": {str(k): int(v) for k, v in modes.items()},
            "externalPlaces": int(external.sum()),
        }


def index_from_file(
    path: Path,
    *,
    layer: str | None = None,
    crs: str | None = None,
    saved: Path | None = None,
    progress: Progress = no_progress,
) -> AssetIndex:
    """An index of the assets in ``path`` (any readable source), reloaded from ``saved``
    when that index exists and is newer than the file, else built (and saved there)."""
    if (
        saved is not None
        and (saved / "index.json").exists()
        and (saved.stat().st_mtime >= path.stat().st_mtime)
    ):
        return AssetIndex.load(saved)
    frame, _ = read_source(path, layer=layer, crs=crs, progress=progress)
    progress("index", 0, len(frame), detail="building the asset index")
    index = AssetIndex.from_frame(frame.reset_index(drop=True))
    progress("index", len(frame), len(frame))
    if saved is not None:
        index.save(saved)
    return index


def queries_from_file(
    path: Path,
    *,
    column: str | None,
    code_column: str | None = None,
    lat_column: str | None = None,
    lon_column: str | None = None,
    wkt_column: str | None = None,
    layer: str | None = None,
    encoding: str | None = None,
    format: str | None = None,
    delimiter: str | None = None,
    quotechar: str | None = None,
    name: str | None = None,
    progress: Progress = no_progress,
) -> pd.DataFrame:
    """The queries of a file: ``query`` from ``column``, ``reference`` from ``code_column``
    (or the row number), and ``geometry`` from the file's coordinates or WKT. ``format``,
    ``delimiter``, ``quotechar`` and ``name`` are :func:`read_source`'s."""
    frame, report = read_source(
        path,
        layer=layer,
        encoding=encoding,
        lat_column=lat_column,
        lon_column=lon_column,
        wkt_column=wkt_column,
        format=format,
        delimiter=delimiter,
        quotechar=quotechar,
        name=name,
        progress=progress,
    )
    queries = pd.DataFrame(index=frame.index)

    def pick(wanted: str | None, role: str) -> pd.Series | None:
        if wanted is None:
            return None
        by_key = {str(c).strip().casefold(): c for c in frame.columns}
        heading = by_key.get(wanted.strip().casefold())
        if heading is None:
            raise SourceError(
                f"{report.path}: no {role} column {wanted!r}; its columns are: "
                + ", ".join(str(c) for c in frame.columns if c != "geometry")
            )
        return frame[heading]

    text = pick(column, "query")
    queries["query"] = (
        text.astype("string").fillna("")
        if text is not None
        else pd.Series("", index=frame.index, dtype="string")
    )
    codes = pick(code_column, "code")
    queries["reference"] = (
        codes.astype("string").to_numpy(dtype=object)
        if codes is not None
        else frame.index.to_numpy()
    )
    if isinstance(frame, gpd.GeoDataFrame) and frame.geometry.notna().any():
        queries["geometry"] = np.asarray(frame.geometry.values, dtype=object)
    return queries.reset_index(drop=True)


def run_lookup(
    index: AssetIndex,
    queries: pd.DataFrame,
    options: dict[str, Any],
    candidates: int = 0,
    decisions: pd.DataFrame | None = None,
    progress: Progress = no_progress,
    geocoder: Geocoder | None = None,
    fuzzy: ModeFunction | None = None,
) -> LookupResult:
    """Resolve ``queries``; reviewers' ``decisions`` (see ``matching.review``) settle the
    queries whose text they name; ``geocoder`` is the external last resort; ``fuzzy``
    stands in for mode fuzzy (``resolve_with_candidates``)."""
    checked = checked_options(index, options)
    resolved, top = resolve_with_candidates(
        index, queries, checked, candidates, progress=progress, geocoder=geocoder, fuzzy=fuzzy
    )
    resolved = apply_decisions(index, resolved, decisions)
    return LookupResult(resolved=resolved, candidates=top, index=index)


def result_rows(result: LookupResult) -> pd.DataFrame:
    """One row per query for a CSV: the asset's id and name, how it matched, why not."""
    resolved = result.resolved
    positions = resolved["asset_position"].to_numpy()
    found = positions >= 0
    names = pd.Series(pd.NA, index=resolved.index, dtype="string")
    if found.any():
        names[found] = result.index.assets["name"].to_numpy()[positions[found]]
    review = pd.Series("", index=resolved.index, dtype="string")
    top = result.candidates
    if not top.empty:
        text = top["asset_id"].astype("string") + ":" + top["score"].round(1).astype("string")
        joined = text.groupby(top["row"].to_numpy()).agg(" | ".join)
        review.iloc[joined.index.to_numpy()] = joined.astype("string")
    return pd.DataFrame(
        {
            "reference": resolved["reference"].astype("string"),
            "query": resolved["query"],
            "asset_id": resolved["asset_id"],
            "asset_name": names,
            "mode": resolved["mode"],
            "accuracy": resolved["accuracy"],
            "candidates": resolved["candidates"],
            "err": resolved["err"],
            "review": review,
        }
    )
