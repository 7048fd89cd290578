"""The matching index of a site's assets: built from the store, cached in the site file.

Building it for a million assets takes seconds, so it is kept in the site file
(so that a copy of the file is the whole site) and reused until the site's assets
change (a stamp of their count, last change and highest id).
"""

from __future__ import annotations

import io
import logging
import tempfile
import threading
import time

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pa_json
import shapely

from toolkit.errors import ToolkitError
from toolkit.matching import AssetIndex
from toolkit.matching.index import ASSET_FIELDS, DUMP_ENCODING, dump_encoding
from toolkit.store import SiteStore

log = logging.getLogger(__name__)


def site_asset_frame(store: SiteStore) -> gpd.GeoDataFrame:
    """The site's active assets as a GeoDataFrame of asset fields plus one column per code."""
    return site_assets(store)[0]


def site_assets(store: SiteStore) -> tuple[gpd.GeoDataFrame, pa.Array]:
    """``site_asset_frame`` and the geometries as the store keeps them (WKB, binary;
    null when missing), which the index keeps instead of encoding them again."""
    raw = store.assets.frame()
    frame = pd.DataFrame(
        {
            "id": raw["id"].astype("str"),
            "type": raw["type"],
            "code": raw["code"],
            "name": raw["name"],
            "friendly": raw["friendly"],
            "regionId": raw["region_id"].astype("Int64").astype("str"),
            "source": raw["source"],
        }
    )
    if len(raw):
        extra = _extra_columns(raw["extra_info"])
        extra.index = frame.index
        for name in extra.columns:
            column = f"{name} (extra)" if name in ASSET_FIELDS else str(name)
            values = extra[name]
            frame[column] = values.astype("str").where(values.notna(), None)
    wkb = raw["geometry"].to_numpy()
    geometry = shapely.from_wkb(wkb) if len(raw) else np.empty(0, object)
    frame = gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(geometry, crs=4326))
    return frame, pa.array(wkb, type=pa.large_binary(), from_pandas=True)


def _extra_columns(extra_info: pd.Series) -> pd.DataFrame:
    """Every asset's extraInfo object as columns, parsed by Arrow's multithreaded reader."""
    lines = ("\n".join(extra_info.tolist()) + "\n").encode("utf-8")
    try:
        frame: pd.DataFrame = pa_json.read_json(io.BytesIO(lines)).to_pandas()
        return frame
    except pa.ArrowInvalid:
        # A code that is a number in one asset and text in another: the slower, lenient way.
        return pd.read_json(io.StringIO(lines.decode("utf-8")), lines=True, dtype=False)


def site_asset_index(store: SiteStore, *, stamp: str | None = None) -> AssetIndex:
    """The index of the site's active assets, from the cache when the assets have not changed.

    ``stamp`` is the assets' stamp when the caller has just read it.
    """
    stamp = stamp or store.assets.stamp()
    cached = store.index_cache.get(stamp)
    if cached is not None:
        encoding = dump_encoding(cached)
        try:
            # Consumed: the cached bytes are let go before the tables become frames.
            index = AssetIndex.loads(cached, f"the site file {store.db.path}", consume=True)
        except ToolkitError as exc:  # a damaged cache is rebuilt
            log.warning("rebuilding the asset index cache: %s", exc)
        else:
            # Kept again, quicker to read next time.
            if encoding != DUMP_ENCODING or index.outdated:
                _keep(store, stamp, index)
            return index
    frame, wkb = site_assets(store)
    index = AssetIndex.from_frame(frame, wkb=wkb)
    # The frame's decoded geometries and texts are not needed to save the index.
    del frame, wkb
    _keep(store, stamp, index)
    return index


def _keep(store: SiteStore, stamp: str, index: AssetIndex) -> None:
    """Cache ``index`` in the site file as the index of assets of ``stamp``."""
    # Spooled to disk past 64 MiB: a million assets' index is a few hundred.
    with tempfile.SpooledTemporaryFile(max_size=64 * 2**20) as spool:
        index.dump(spool)
        spool.seek(0)
        # A busy or read-only file: matching still works, only slower next time.
        store.index_cache.put(stamp, spool)


INDEX_RECHECK_S = 2.0


class IndexCache:
    """Matching indexes kept in memory between requests, shared by threads.

    The site's asset stamp (a scan of its assets) is checked at most every
    ``recheck_s`` seconds; :meth:`forget` drops a site's index at once (after an
    asset import finishes in this process).
    """

    def __init__(self, recheck_s: float = INDEX_RECHECK_S) -> None:
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._entries: dict[int, tuple[str, float, AssetIndex]] = {}

    def get(self, store: SiteStore) -> AssetIndex:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(store.site_id)
        if entry is not None and now - entry[1] < self.recheck_s:
            return entry[2]
        stamp = store.assets.stamp()
        index = (
            entry[2]
            if entry is not None and entry[0] == stamp
            else site_asset_index(store, stamp=stamp)
        )
        with self._lock:
            self._entries[store.site_id] = (stamp, now, index)
        return index

    def forget(self, site_id: int) -> None:
        with self._lock:
            self._entries.pop(site_id, None)
