"""The matching index of a site's assets: built from the store, cached in the site file.

Building it for a million assets takes seconds, so it is kept in the site file
(so that a copy of the file is the whole site) and reused until the site's assets
change (a stamp of their count, last change and highest id).
"""

from __future__ import annotations

import io
import logging
import threading
import time

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import shapely

from toolkit.allocator import heap_kept_for_reuse
from toolkit.errors import ToolkitError
from toolkit.matching import AssetIndex
from toolkit.matching.index import ASSET_FIELDS, DUMP_ENCODING, dump_encoding
from toolkit.store import SiteStore
from toolkit.store.assets import AssetStore

log = logging.getLogger(__name__)


def site_asset_frame(store: SiteStore) -> gpd.GeoDataFrame:
    """The site's active assets as a GeoDataFrame of asset fields plus one column per code."""
    frame, wkb, _bounds = site_assets(store)
    geometry = shapely.from_wkb(wkb.to_numpy(zero_copy_only=False))
    return gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(geometry, crs=4326))


def site_assets(store: SiteStore) -> tuple[pd.DataFrame, pa.Array, np.ndarray]:
    """The site's active assets as a frame of asset fields plus one column per code, their
    geometries as the store keeps them (WKB, binary; null when missing) and each one's box
    (xmin, ymin, xmax, ymax; NaN when missing or empty): what an index keeps, read without
    decoding a geometry (a million parcels' WKB took a second and a half to decode, for
    the boxes the store holds already)."""
    raw = store.assets.columns(names=_READ_COLUMNS)
    # Straight from Arrow: a pandas frame of the rows held each WKB as a Python bytes
    # object, made and then read back (0.4 s of CPU at a million assets).
    frame = pd.DataFrame(
        {
            "id": _text(raw["id"]),
            "type": _text(raw["type"]),
            "code": _text(raw["code"]),
            "name": _text(raw["name"]),
            "friendly": _text(raw["friendly"]),
            "regionId": _text(raw["region_id"]),
            "source": _text(raw["source"]),
        }
    )
    if len(raw):
        extra = _extra_columns(raw["extra_info"])
        extra.index = frame.index
        for name in extra.columns:
            column = f"{name} (extra)" if name in ASSET_FIELDS else str(name)
            values = extra[name]
            frame[column] = values.astype("str").where(values.notna(), None)
    wkb = raw["geometry"].combine_chunks().cast(pa.large_binary())
    bounds = np.column_stack(
        [raw[name].to_numpy().astype(np.float64, copy=False) for name in AssetStore.BOUNDS_COLUMNS]
    ).reshape(len(raw), 4)
    # A geometry without a stored box: an empty one (its box is NaN too), or written by
    # something that left the box out; only those are decoded.
    unboxed = np.flatnonzero(
        wkb.is_valid().to_numpy(zero_copy_only=False) & np.isnan(bounds).any(axis=1)
    )
    if len(unboxed):
        chosen = wkb.take(pa.array(unboxed)).to_numpy(zero_copy_only=False)
        bounds[unboxed] = shapely.bounds(shapely.from_wkb(chosen))
    return frame, wkb, bounds


# What an index is built from (not the status: only active assets are read).
_READ_COLUMNS = (
    *(name for name in AssetStore.FRAME_COLUMNS if name != "status"),
    *AssetStore.BOUNDS_COLUMNS,
)


def _text(values: pa.ChunkedArray) -> pd.Series:
    """A column as pandas text (``str``, missing as NaN), converted in Arrow: numbers
    as their decimal digits, as ``astype("str")`` of the numbers writes them."""
    return pd.Series(values.cast(pa.large_string()), dtype=_STR)


_STR = pd.StringDtype("pyarrow", na_value=np.nan)


def _extra_columns(extra_info: pa.ChunkedArray) -> pd.DataFrame:
    """Every asset's extraInfo object as columns, parsed by Arrow's multithreaded reader."""
    # One line per object, joined in Arrow: the text never becomes a million Python strings.
    texts = extra_info.combine_chunks().cast(pa.large_string())
    newline, none = pa.scalar("\n", pa.large_string()), pa.scalar("", pa.large_string())
    lines = pc.binary_join_element_wise(texts, newline, none)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset :]
    data = lines.buffers()[2][offsets[0] : offsets[len(lines)]]
    try:
        frame: pd.DataFrame = pa_json.read_json(pa.BufferReader(data)).to_pandas()
        return frame
    except pa.ArrowInvalid:
        # A code that is a number in one asset and text in another: the slower, lenient way.
        text = data.to_pybytes().decode("utf-8")
        return pd.read_json(io.StringIO(text), lines=True, dtype=False)


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
    # The build makes and drops arrays of a million values over and over: kept in the
    # heap for the next one rather than faulted in afresh (12% fewer page faults, about
    # 1 s less CPU of ~12.5 at a million parcels, for ~60 MiB more at the peak).
    with heap_kept_for_reuse():
        frame, wkb, bounds = site_assets(store)
        index = AssetIndex.from_frame(frame, wkb=wkb, bounds=bounds)
        # The frame's texts are not needed to save the index.
        del frame, wkb, bounds
        _keep(store, stamp, index)
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
