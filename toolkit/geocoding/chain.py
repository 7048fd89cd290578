"""Several sources tried in turn, and the answer when there is none.

A site's external lookup asks its gazetteer first (offline, instant), then the geocoding
service for what the gazetteer left; a query that none finds gets every source's reason,
joined with ``"; "``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.geocoding import result
from toolkit.matching.geocoder import OFFLINE, Geocoder

if TYPE_CHECKING:
    from toolkit.geocoding.keeping import GazetteerCache
    from toolkit.store import SiteStore

# One message wherever no source is configured, the matcher's own default included (a
# lookup on another engine, without a geocoder, says the same).
NOT_CONFIGURED = OFFLINE


class NoSource:
    """No gazetteer and no service: every query says so (``NOT_CONFIGURED``)."""

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        from toolkit.geocoding.features import required_features

        required_features(options)  # a bad option is an error even with nothing to ask
        return result.not_found(queries.index, NOT_CONFIGURED)


class GeocoderChain:
    """``geocoders`` in order, each asked only for the queries still without a place."""

    def __init__(self, geocoders: Sequence[Geocoder]) -> None:
        self.geocoders = list(geocoders)

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        if not self.geocoders:
            return NoSource().geocode(queries, options)
        out = result.not_found(queries.index, np.full(len(queries), None, dtype=object))
        reasons: list[np.ndarray] = []
        pending = np.ones(len(queries), dtype=bool)
        for geocoder in self.geocoders:
            if not pending.any():
                break
            rows = np.flatnonzero(pending)
            answer = geocoder.geocode(queries.iloc[rows], options)
            answer = answer.reindex(columns=list(result.RESULT_COLUMNS))
            hit = result.found(answer)
            out.iloc[rows[hit]] = answer.iloc[np.flatnonzero(hit)].to_numpy(dtype=object)
            why = np.full(len(queries), None, dtype=object)
            why[rows[~hit]] = answer["err"].to_numpy(dtype=object)[~hit]
            reasons.append(why)
            pending[rows[hit]] = False
        # Every source's reason, joined column-wise ("a; b"), where none found a place.
        errors = pd.Series(np.full(len(queries), None, dtype=object), dtype="str")
        for why in reasons:
            reason = pd.Series(why, dtype="str")
            errors = errors.where(reason.isna(), (errors + "; " + reason).fillna(reason))
        out["err"] = pd.Series(errors.to_numpy(dtype=object), index=out.index).where(pending)
        for name in ("longitude", "latitude", "accuracy"):
            out[name] = pd.to_numeric(out[name], errors="coerce").astype(float)
        return out


class LazyGeocoder:
    """A geocoder made on its first question (loading a gazetteer costs seconds; an import
    that never asks should not pay them)."""

    def __init__(self, make: Callable[[], Geocoder]) -> None:
        self.make = make
        self._made: Geocoder | None = None

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        if self._made is None:
            self._made = self.make()
        return self._made.geocode(queries, options)


def site_sources(
    store: SiteStore, gazetteers: GazetteerCache | None, service: Geocoder | None
) -> GeocoderChain:
    """A site's sources in turn: its gazetteer (if one is loaded), then ``service``."""
    from toolkit.geocoding.keeping import read_gazetteer

    gazetteer = gazetteers.get(store) if gazetteers is not None else read_gazetteer(store)
    return GeocoderChain([g for g in (gazetteer, service) if g is not None])
