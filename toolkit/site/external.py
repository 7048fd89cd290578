"""A site's external lookups: its gazetteer and geocoding service, and upgraded places.

An asset lookup that matches no asset asks the site's gazetteer (kept in the site file),
then the geocoding service the site was given (``toolkit serve --geocoder``, the config
file); with ``upgradeExternalLookupToInternalAsset`` each place found that no asset of
``assetClass`` covers becomes one (``toolkit.geocoding.upgrade``), and the answer is given
in terms of the rebuilt index, so it names the new asset.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from toolkit.geocoding import make_assets, pending_places
from toolkit.matching import AssetIndex, LookupOptions
from toolkit.store import Actor, SiteStore


def upgrade_places(
    store: SiteStore,
    index: AssetIndex,
    resolved: pd.DataFrame,
    options: LookupOptions,
    actor: Actor,
    reindex: Callable[[], AssetIndex],
) -> tuple[AssetIndex, pd.DataFrame]:
    """Make the places ``resolve`` found (and no asset holds) assets of
    ``options.asset_class``; returns the index that holds them (``reindex()``) and
    ``resolved`` with every position in terms of it."""
    places = pending_places(resolved)
    if not len(places) or options.asset_class is None:
        return index, resolved
    ids = make_assets(store, places, options.asset_class, actor)
    fresh = reindex()
    positions = pd.Index(fresh.output_column("id").astype(str))
    out = resolved.copy()
    old_ids = index.output_column("id")
    for column in ("asset_position", "explained_position"):
        old = out[column].to_numpy()
        known = old >= 0
        moved = np.full(len(old), -1, dtype=np.int64)
        moved[known] = positions.get_indexer(old_ids[old[known]].astype(str))
        out[column] = moved
    rows = np.flatnonzero(places.row_place >= 0)
    made = ids[places.row_place[rows]].astype(str)
    out.loc[rows, "asset_position"] = positions.get_indexer(made)
    out["asset_id"] = out["asset_id"].astype(object)
    out.loc[rows, "asset_id"] = made
    out.loc[rows, "mode"] = "external"
    out.loc[rows, "candidates"] = 1
    out.loc[rows, "err"] = None
    for column in ("external_longitude", "external_latitude"):
        out.loc[rows, column] = np.nan
    for column in (
        "external_label",
        "external_source",
        "external_id",
        "external_feature",
        "external_name",
    ):
        out.loc[rows, column] = None
    out["asset_id"] = out["asset_id"].astype("str")
    return fresh, out


def upgrade_message(options: LookupOptions) -> str:
    """What the audit log says of assets made from geocoded places."""
    return (
        f"asset lookup: geocoded places made assets of {options.asset_class} "
        "(upgradeExternalLookupToInternalAsset)"
    )
