"""External lookups: where an asset lookup turns when no asset matches (spec 4.3,
``useExternalLookups``, ``upgradeExternalLookupToInternalAsset``, ``geocoderOptions``).

This package owns:

- the address gazetteer: reading G-NAF-style or OpenAddresses-style address-point files
  (``points``), indexing them with asset matching's own index and matcher
  (``gazetteer``), keeping the index in the site file and in memory (``keeping``);
- geocoding services over HTTP, Nominatim and Pelias (``protocols`` builds and reads
  their requests, ``http`` sends them: per-run cache, rate limit, retries honouring
  ``Retry-After``, timeouts), configured by URL (``config``);
- ``requiredFeatures`` and the mapping of each source's place types (``features``);
- sources tried in turn and the answer when there is none (``chain``);
- making geocoded places assets of the site (``upgrade``).

Every source is a ``toolkit.matching.Geocoder``: ``resolve(..., geocoder=...)`` calls it
for the queries no asset matched. This package may import ``toolkit.matching``,
``toolkit.sources``, ``toolkit.store`` (whose stores alone write SQL), ``toolkit.model``,
``toolkit.progress`` and ``toolkit.errors``; never the site, import, server, remote or CLI
packages (they import it). Only ``toolkit.geocoding.http`` imports httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Light: what the CLI asks of every command (is a geocoding service configured?).
from toolkit.geocoding.config import ServiceSettings, service_from_config
from toolkit.geocoding.features import FEATURES, Feature, required_features

if TYPE_CHECKING:
    from toolkit.geocoding.chain import (
        NOT_CONFIGURED,
        GeocoderChain,
        LazyGeocoder,
        NoSource,
        site_sources,
    )
    from toolkit.geocoding.gazetteer import Gazetteer, GazetteerIndex
    from toolkit.geocoding.keeping import GazetteerCache, describe, load_files, read_gazetteer
    from toolkit.geocoding.points import PointsReport, read_points
    from toolkit.geocoding.upgrade import Places, make_assets, pending_places
else:
    # The rest brings pandas and the matcher: imported when first asked for, so a command
    # that never geocodes (``toolkit ping``) does not wait for them (issue 17).
    _HOMES = {
        "NOT_CONFIGURED": "chain",
        "GeocoderChain": "chain",
        "LazyGeocoder": "chain",
        "NoSource": "chain",
        "site_sources": "chain",
        "Gazetteer": "gazetteer",
        "GazetteerIndex": "gazetteer",
        "GazetteerCache": "keeping",
        "describe": "keeping",
        "load_files": "keeping",
        "read_gazetteer": "keeping",
        "PointsReport": "points",
        "read_points": "points",
        "Places": "upgrade",
        "make_assets": "upgrade",
        "pending_places": "upgrade",
    }

    def __getattr__(name: str) -> object:
        if name not in _HOMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = [
    "FEATURES",
    "NOT_CONFIGURED",
    "Feature",
    "Gazetteer",
    "GazetteerCache",
    "GazetteerIndex",
    "GeocoderChain",
    "LazyGeocoder",
    "NoSource",
    "Places",
    "PointsReport",
    "ServiceSettings",
    "describe",
    "load_files",
    "make_assets",
    "pending_places",
    "read_gazetteer",
    "read_points",
    "required_features",
    "service_from_config",
    "site_sources",
]
