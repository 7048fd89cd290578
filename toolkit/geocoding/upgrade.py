"""``upgradeExternalLookupToInternalAsset``: geocoded places made assets of the site.

``resolve`` already links a geocoded point to the asset of ``assetClass`` that covers it;
a place no such asset covers comes back unmatched with its point, label and source
(``external_*`` columns). Here each distinct place of a batch becomes one point asset of
``assetClass`` (its ``source`` the gazetteer or service, its extraInfo ``externalSource``,
``externalId`` and ``externalFeature``), inserted and audited in one transaction; a place
already made an asset earlier (same source and id) is reused, not inserted again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import shapely

from toolkit.store import Actor, SiteStore
from toolkit.store.assets import NewAssets, geometry_columns

if TYPE_CHECKING:
    import sqlite3

EXTERNAL_ID = "externalId"
EXTERNAL_SOURCE = "externalSource"
EXTERNAL_FEATURE = "externalFeature"


@dataclass(frozen=True)
class Places:
    """Distinct places of a batch and, per row of the batch, its place (-1 for none)."""

    frame: pd.DataFrame  # source, place_id, label, longitude, latitude, feature, name, query
    row_place: np.ndarray  # int64, one per row of the resolved frame

    def __len__(self) -> int:
        return len(self.frame)


def pending_places(resolved: pd.DataFrame) -> Places:
    """The places ``resolve`` found that no asset holds yet, each distinct place once: the
    same source and id, or (without an id) the same point and label."""
    pending = (resolved["asset_position"].to_numpy() < 0) & resolved[
        "external_longitude"
    ].notna().to_numpy()
    rows = np.flatnonzero(pending)
    sub = resolved.iloc[rows]
    source = sub["external_source"].astype("str").fillna("external")
    lon = sub["external_longitude"].to_numpy(dtype=float)
    lat = sub["external_latitude"].to_numpy(dtype=float)
    label = sub["external_label"].astype("str").fillna("")
    where = pd.Series(
        np.char.add(np.char.add(np.round(lon, 7).astype(str), ","), np.round(lat, 7).astype(str)),
        index=sub.index,
    )
    place_id = sub["external_id"].astype("str")
    # A place without an id of its own is known by where it is and what it is called.
    identity = place_id.fillna("@" + where + " " + label)
    codes, _ = pd.factorize(source + "\0" + identity)
    first = np.unique(codes, return_index=True)[1] if len(codes) else np.array([], dtype=np.int64)
    frame = pd.DataFrame(
        {
            "source": source.to_numpy(dtype=object)[first],
            "place_id": identity.to_numpy(dtype=object)[first],
            "label": label.to_numpy(dtype=object)[first],
            "longitude": lon[first],
            "latitude": lat[first],
            "feature": sub["external_feature"].astype("str").to_numpy(dtype=object)[first],
            "name": sub["external_name"].astype("str").to_numpy(dtype=object)[first],
            "query": sub["query"].astype("str").to_numpy(dtype=object)[first],
        }
    )
    row_place = np.full(len(resolved), -1, dtype=np.int64)
    row_place[rows] = codes
    return Places(frame, row_place)


def make_assets(
    store: SiteStore,
    places: Places,
    asset_class: str,
    actor: Actor,
    *,
    conn: sqlite3.Connection | None = None,
) -> np.ndarray:
    """The asset id of each place: one made earlier from the same source and id, else a new
    point asset of ``asset_class``, inserted and audited in one transaction (``conn``'s,
    when the caller holds one: an import's, so a dry run makes none)."""
    ids = np.zeros(len(places.frame), dtype=np.int64)
    if not len(places.frame):
        return ids
    if conn is not None:
        _make(store, conn, places.frame, asset_class, actor, ids)
        return ids
    with store.db.transaction() as own:
        _make(store, own, places.frame, asset_class, actor, ids)
    return ids


def _make(
    store: SiteStore,
    conn: sqlite3.Connection,
    frame: pd.DataFrame,
    asset_class: str,
    actor: Actor,
    ids: np.ndarray,
) -> None:
    made = np.zeros(len(frame), dtype=bool)
    for source in frame["source"].unique():
        # Read under the write lock: two lookups of the same place at once make one.
        known = store.assets.ids_by_source_code(conn, asset_class, source, EXTERNAL_ID)
        mine = (frame["source"] == source).to_numpy()
        earlier = frame["place_id"].map(known).to_numpy(dtype=float)
        reuse = mine & ~np.isnan(earlier)
        ids[reuse] = earlier[reuse].astype(np.int64)
        made |= reuse
    for source in frame["source"].unique():
        # The store writes one source per insert: one insert per source.
        new = np.flatnonzero(~made & (frame["source"] == source).to_numpy())
        if len(new):
            ids[new] = _insert(store, conn, frame.iloc[new], asset_class, source, actor)


def _insert(
    store: SiteStore,
    conn: sqlite3.Connection,
    fresh: pd.DataFrame,
    asset_class: str,
    source: str,
    actor: Actor,
) -> list[int]:
    """Insert ``fresh`` places of one ``source`` as point assets; their new ids."""
    points = shapely.points(fresh["longitude"].to_numpy(), fresh["latitude"].to_numpy())
    wkb, bounds = geometry_columns(np.asarray(points, dtype=object))
    extra = [
        json.dumps(
            {
                EXTERNAL_SOURCE: source,
                EXTERNAL_ID: place_id,
                **({EXTERNAL_FEATURE: feature} if isinstance(feature, str) else {}),
            },
            ensure_ascii=False,
        )
        for place_id, feature in zip(fresh["place_id"], fresh["feature"], strict=True)
    ]
    # Named as the source names the place (else its label, else the text that found it);
    # its label is the friendly name.
    names = [
        _text(name) or _text(label) or str(query)
        for name, label, query in zip(fresh["name"], fresh["label"], fresh["query"], strict=True)
    ]
    labels = [_text(label) or name for label, name in zip(fresh["label"], names, strict=True)]
    return store.assets.insert_many(
        conn,
        NewAssets(
            type=asset_class,
            name=names,
            code=[None] * len(fresh),
            friendly=labels,
            region_id=None,
            status=1,
            extra_info=extra,
            geometry=wkb,
            bounds=bounds,
            source=source,
        ),
        actor,
        store.db.clock(),
    )


def _text(value: object) -> str | None:
    """Text, or None for a missing or blank value."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return str(value) if str(value).strip() else None
