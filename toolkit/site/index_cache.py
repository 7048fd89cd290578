"""The matching index of a site's assets: built from the store, cached in the site file.

Building it for a million assets takes seconds, so it is kept in the site file
(so that a copy of the file is the whole site) and reused until the site's assets
change (a stamp of their count, last change and highest id).
"""

from __future__ import annotations

import logging
import threading
import time

import geopandas as gpd
import shapely

from toolkit.allocator import heap_kept_for_reuse
from toolkit.errors import ToolkitError
from toolkit.matching import AssetIndex
from toolkit.matching.index import DUMP_ENCODING, dump_encoding
from toolkit.site.index_build import build_index, site_assets
from toolkit.store import SiteStore

log = logging.getLogger(__name__)


def site_asset_frame(store: SiteStore) -> gpd.GeoDataFrame:
    """The site's active assets as a GeoDataFrame of asset fields plus one column per code."""
    frame, wkb, _bounds = site_assets(store)
    geometry = shapely.from_wkb(wkb.to_numpy(zero_copy_only=False))
    return gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(geometry, crs=4326))


def site_asset_index(store: SiteStore, *, stamp: str | None = None) -> AssetIndex:
    """The index of the site's active assets, from the cache when the assets have not changed.

    ``stamp`` is the assets' stamp when the caller has just read it.
    """
    # Its reads (the cache, or every asset) read the file, not an import's log.
    store.db.log_copied()
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
    # The build makes and drops arrays of a million values over and over: kept in the
    # heap for the next one rather than faulted in afresh (12% fewer page faults, about
    # 1 s less CPU of ~12.5 at a million parcels, for ~60 MiB more at the peak).
    with heap_kept_for_reuse():
        index, dump = build_index(store)
        # A busy or read-only file: matching still works, only slower next time.
        store.index_cache.put(stamp, dump)
    return index


def _keep(store: SiteStore, stamp: str, index: AssetIndex) -> None:
    """Cache ``index`` in the site file as the index of assets of ``stamp``."""
    # Stored from Arrow's buffers as they are: spooling a million assets' dump to a file
    # first wrote and read 200 MiB more (0.3 s of CPU).
    # A busy or read-only file: matching still works, only slower next time.
    store.index_cache.put(stamp, index.dump_parts())


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
