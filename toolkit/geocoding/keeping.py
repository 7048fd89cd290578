"""A site's gazetteer: built from files into the site file, loaded from it, kept in memory.

``load_files`` reads and indexes address-point files and replaces the site's gazetteer
in one transaction (a failure leaves the old one); ``GazetteerCache`` holds loaded
gazetteers between lookups (``toolkit serve`` shares one between its threads) and notices
a replaced one by its stamp.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import geopandas as gpd

from toolkit.geocoding.gazetteer import Gazetteer, GazetteerIndex, matcher_fingerprint
from toolkit.geocoding.points import PointsReport, read_points
from toolkit.progress import Progress, no_progress
from toolkit.store import SiteStore

log = logging.getLogger(__name__)

# How often a cached gazetteer's stamp is read again (a cheap query).
RECHECK_S = 2.0


def load_files(
    store: SiteStore,
    paths: Sequence[str | Path],
    *,
    name: str | None = None,
    columns: Mapping[str, str] | None = None,
    progress: Progress = no_progress,
) -> tuple[Gazetteer, PointsReport]:
    """Build the gazetteer of ``paths`` and make it the site's (replacing any other)."""
    started = time.perf_counter()
    points, report = read_points(paths, columns=columns, progress=progress)
    chosen = name or Path(paths[0]).stem
    gazetteer = Gazetteer.build(
        chosen,
        points,
        {
            "files": [Path(p).name for p in paths],
            "read": report.read,
            "skipped": report.skipped,
            "columns": report.columns,
            "matcher": matcher_fingerprint(),
        },
        progress=progress,
    )
    progress("store", 0, None, detail="writing into the site file")
    with tempfile.SpooledTemporaryFile(max_size=64 * 2**20) as spool:
        gazetteer.dump(spool)
        gazetteer.header["bytes"] = spool.tell()
        gazetteer.header["loadSeconds"] = round(time.perf_counter() - started, 2)
        spool.seek(0)
        store.gazetteers.replace(gazetteer.name, gazetteer.header, spool)
    progress("store", 1, 1)
    return gazetteer, report


def read_gazetteer(store: SiteStore) -> Gazetteer | None:
    """The site's gazetteer from the site file, or None when none is loaded. One kept by
    another version of the matcher is re-indexed from its points (slower, still right)."""
    stored = store.gazetteers.current()
    if stored is None:
        return None
    gazetteer = Gazetteer.loads(stored.name, stored.header, store.gazetteers.data(stored.id))
    if stored.header.get("matcher") != matcher_fingerprint():
        log.warning(
            "the gazetteer %r was indexed by another version of the matcher; re-indexing it "
            "in memory (load it again with `toolkit gazetteer load` to keep that)",
            stored.name,
        )
        index = gazetteer.index
        frame = index.assets[["id", "name", "friendly", "type"]].copy()
        points = gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(index.geometry, crs=4326))
        index = cast(GazetteerIndex, GazetteerIndex.from_frame(points))
        gazetteer = Gazetteer(stored.name, index, gazetteer.header)
    return gazetteer


def describe(store: SiteStore) -> dict[str, Any] | None:
    """The site's gazetteer header and the size of its parts, without loading it."""
    stored = store.gazetteers.current()
    if stored is None:
        return None
    return {
        "name": stored.name,
        "source": f"gazetteer:{stored.name}",
        **stored.header,
        "storedBytes": store.gazetteers.size(stored.id),
        "current": stored.header.get("matcher") == matcher_fingerprint(),
    }


class GazetteerCache:
    """Loaded gazetteers by site, shared by threads; reloaded when the stored one changes."""

    def __init__(self, recheck_s: float = RECHECK_S) -> None:
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._loading = threading.Lock()
        self._entries: dict[tuple[str, int], tuple[str | None, float, Gazetteer | None]] = {}

    def get(self, store: SiteStore) -> Gazetteer | None:
        key = (str(store.db.path), store.site_id)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and now - entry[1] < self.recheck_s:
            return entry[2]
        stored = store.gazetteers.current()
        stamp = None if stored is None else stored.stamp
        if entry is not None and entry[0] == stamp:
            gazetteer = entry[2]
        else:
            # One thread loads; the others wait for it rather than load their own copy.
            with self._loading:
                with self._lock:
                    entry = self._entries.get(key)
                if entry is not None and entry[0] == stamp:
                    gazetteer = entry[2]
                else:
                    gazetteer = read_gazetteer(store)
        with self._lock:
            self._entries[key] = (stamp, now, gazetteer)
        return gazetteer

    def forget(self, store: SiteStore) -> None:
        with self._lock:
            self._entries.pop((str(store.db.path), store.site_id), None)
