"""The frame every geocoder here returns: ``toolkit.matching.geocoder``'s columns plus where
each place came from.

Beside ``longitude``, ``latitude``, ``label``, ``accuracy`` and ``err`` (the seam's
``GEOCODE_COLUMNS``), a found place carries ``source`` (``gazetteer:<name>``,
``nominatim:<host>``, ``pelias:<host>``), ``place_id`` (the source's id of the place) and
``feature`` (see ``toolkit.geocoding.features``) and ``name``: what an asset made of it is
called, so a later lookup of the same address or venue finds it (the address from its
parts, or a venue's own name; ``label`` is the whole display text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from toolkit.matching.geocoder import GEOCODE_COLUMNS

PLACE_COLUMNS = ("source", "place_id", "feature", "name")
RESULT_COLUMNS = (*GEOCODE_COLUMNS, *PLACE_COLUMNS)
TEXT_COLUMNS = ("label", "err", *PLACE_COLUMNS)


def not_found(index: pd.Index, err: str | Sequence[str | None] | np.ndarray) -> pd.DataFrame:
    """A frame aligned with ``index`` where nothing was found, each row with ``err``."""
    n = len(index)
    errors = (
        np.full(n, err, dtype=object) if isinstance(err, str) else np.asarray(err, dtype=object)
    )
    frame = pd.DataFrame(
        {
            "longitude": np.full(n, np.nan),
            "latitude": np.full(n, np.nan),
            "label": np.full(n, None, dtype=object),
            "accuracy": np.full(n, np.nan),
            "err": errors,
            **{name: np.full(n, None, dtype=object) for name in PLACE_COLUMNS},
        },
        index=index,
    )
    return frame


def from_rows(index: pd.Index, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """A frame aligned with ``index`` from one dict per row (keys of ``RESULT_COLUMNS``)."""
    frame = pd.DataFrame(list(rows), columns=list(RESULT_COLUMNS), index=index)
    for name in ("longitude", "latitude", "accuracy"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype(float)
    for name in TEXT_COLUMNS:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    return frame


def found(frame: pd.DataFrame) -> np.ndarray:
    """Mask of the rows that found a place."""
    return ~(frame["longitude"].isna().to_numpy() | frame["latitude"].isna().to_numpy())
