"""The seam for an external point-of-interest geocoder (spec option ``useExternalLookups``).

Nothing here makes a network call: ``NoGeocoder`` answers every query with the error
``OFFLINE``. The real ones (a site's address gazetteer, a geocoding service) are in
``toolkit.geocoding`` and are passed to ``resolve(..., geocoder=...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import pandas as pd

# What a miss says where no source is given: what to configure (toolkit.geocoding).
OFFLINE = (
    "no external source is available here: load an address gazetteer into the site "
    "(toolkit gazetteer load FILE) or give a geocoding service (toolkit serve --geocoder URL, "
    "or geocoder in the config file)"
)
GEOCODE_COLUMNS = ("longitude", "latitude", "label", "accuracy", "err")


class Geocoder(Protocol):
    """Turns free text into points, one whole column at a time."""

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        """A frame aligned with ``queries`` with the columns ``GEOCODE_COLUMNS``:
        ``longitude``/``latitude`` (float, NaN when not found), ``label`` (display text),
        ``accuracy`` (0-100) and ``err`` (None when found). ``options`` is the lookup's
        ``geocoderOptions`` object (e.g. ``{"requiredFeatures": ["premise"]}``)."""
        ...


class NoGeocoder:
    """The offline default: finds nothing and says why."""

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        n = len(queries)
        return pd.DataFrame(
            {
                "longitude": np.full(n, np.nan),
                "latitude": np.full(n, np.nan),
                "label": pd.array([None] * n, dtype="str"),
                "accuracy": np.full(n, np.nan),
                "err": np.full(n, OFFLINE, dtype=object),
            },
            index=queries.index,
        )
