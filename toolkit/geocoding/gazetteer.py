"""An address gazetteer: address points indexed by asset matching's own index and matcher.

The points (see ``toolkit.geocoding.points``) become an ``AssetIndex`` whose assets are the
addresses, their class the feature (premise, street, locality...) and their geometry the
point; a query is resolved with ``toolkit.matching.resolve`` exactly as an asset lookup
is (soundex up to rank 2, then the probabilistic matcher), so typos, abbreviations and
unit forms behave the same, and ties are never guessed. The built index is kept in the
site file (``SiteStore.gazetteers``) and loaded from there.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, cast

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from toolkit.errors import MatchingError, StoreError
from toolkit.geocoding import result
from toolkit.geocoding.features import Feature, describe, required_features
from toolkit.matching import AssetIndex, LookupOptions, resolve
from toolkit.progress import Progress, no_progress

FORMAT_NAME = "toolkit-gazetteer"
FORMAT_VERSION = 1
# How a gazetteer matches: asset lookup's default mode, with the probabilistic matcher for
# what it leaves (typos in two words, missing or swapped parts).
MATCHING = LookupOptions(
    mode="soundex", max_rank=2, fallback_mode="fuzzy", use_external_lookups=False
)
_ASSET_WORDS = (
    (re.compile(r"\bassets\b"), "address points"),
    (re.compile(r"\basset\b"), "address point"),
)


class GazetteerIndex(AssetIndex):
    """An asset index of address points whose class filter takes several classes at once:
    ``"premise|street"`` allows either (``requiredFeatures`` names any number)."""

    def allowed(self, asset_class: str | None) -> np.ndarray:
        if asset_class is None or "|" not in asset_class:
            return super().allowed(asset_class)
        key = ("allowed", asset_class)
        if key not in self._masks:
            masks = [AssetIndex.allowed(self, part) for part in asset_class.split("|")]
            self._masks[key] = np.logical_or.reduce(masks)
        return self._masks[key]


@dataclass
class Gazetteer:
    """A named gazetteer: the index of its points and what it was built from."""

    name: str
    index: GazetteerIndex
    header: dict[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """What results say they came from."""
        return f"gazetteer:{self.name}"

    # --- building and keeping -----------------------------------------------------------

    @classmethod
    def build(
        cls,
        name: str,
        points: gpd.GeoDataFrame,
        about: Mapping[str, Any] | None = None,
        *,
        progress: Progress = no_progress,
    ) -> Gazetteer:
        """Index ``points`` (``toolkit.geocoding.points.read_points``'s table). The
        probabilistic matcher's side of the index is built now too, so a lookup never
        waits for it."""
        if not name.strip():
            raise MatchingError("a gazetteer needs a name")
        started = time.perf_counter()
        progress("index", 0, len(points), unit="points", detail="indexing address points")
        index = cast(GazetteerIndex, GazetteerIndex.from_frame(points))
        progress("index", len(points), len(points), unit="points")
        progress("matcher", 0, len(points), unit="points", detail="parsing every address")
        index.fuzzy_side()
        progress("matcher", len(points), len(points), unit="points")
        features = index.assets["type"].value_counts().sort_index()
        header = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "name": name,
            "points": len(index),
            "features": {str(k): int(v) for k, v in features.items()},
            "buildSeconds": round(time.perf_counter() - started, 2),
            **dict(about or {}),
        }
        return cls(name.strip(), index, header)

    def dump(self, out: IO[bytes]) -> None:
        """Write the gazetteer's index to ``out`` as one byte string (``AssetIndex.dump``:
        its tables and the probabilistic matcher's side, so a load never re-parses)."""
        self.index.dump(out)

    @classmethod
    def loads(cls, name: str, header: Mapping[str, Any], data: bytes) -> Gazetteer:
        """A gazetteer written by :meth:`dump`; a foreign or damaged one is a StoreError."""
        again = "load it again with `toolkit gazetteer load`"
        if header.get("format") != FORMAT_NAME or header.get("version") != FORMAT_VERSION:
            raise StoreError(
                f"the site's gazetteer {name!r} is format {header.get('format')!r} version "
                f"{header.get('version')!r}; this toolkit reads {FORMAT_NAME!r} version "
                f"{FORMAT_VERSION}: {again}"
            )
        try:
            index = cast(GazetteerIndex, GazetteerIndex.loads(data, f"the gazetteer {name!r}"))
        except MatchingError as exc:
            raise StoreError(f"the site's gazetteer {name!r} is damaged ({exc}): {again}") from exc
        return cls(name, index, dict(header))

    def info(self) -> dict[str, Any]:
        """What ``toolkit gazetteer info`` shows."""
        return {"name": self.name, "source": self.source, **self.header}

    # --- geocoding ------------------------------------------------------------------------

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        """The ``Geocoder`` protocol: each query's address point, or why none."""
        features = required_features(options)
        index = queries.index
        present = self._features()
        if features is not None and not set(features) & present:
            return result.not_found(
                index,
                f"{self.source}: no address point is a {describe(features)} (it holds "
                f"{', '.join(sorted(present)) or 'none'})",
            )
        frame = pd.DataFrame({"query": queries.astype("str").fillna("").to_numpy()})
        asset_class = None if features is None else "|".join(features)
        resolved = resolve(self.index, frame, replace(MATCHING, asset_class=asset_class))
        position = resolved["asset_position"].to_numpy()
        hit = position >= 0
        out = result.not_found(index, self._errors(resolved["err"]))
        chosen = position[hit]
        points = shapely.point_on_surface(self.index.geometry[chosen])
        out.loc[hit, "longitude"] = shapely.get_x(points)
        out.loc[hit, "latitude"] = shapely.get_y(points)
        friendly = self.index.output_column("friendly")[chosen]
        names = self.index.output_column("name")[chosen]
        out.loc[hit, "label"] = np.where(friendly == None, names, friendly)  # noqa: E711
        out.loc[hit, "accuracy"] = resolved["accuracy"].to_numpy()[hit]
        out.loc[hit, "err"] = None
        out.loc[hit, "source"] = self.source
        out.loc[hit, "place_id"] = self.index.output_column("id")[chosen]
        out.loc[hit, "feature"] = self.index.output_column("type")[chosen]
        out.loc[hit, "name"] = names
        return out

    def _features(self) -> set[Feature]:
        return set(self.header.get("features") or self.index.classes())

    def _errors(self, errors: pd.Series) -> np.ndarray:
        """The matcher's reasons, in words about address points, naming this gazetteer."""
        text = errors.astype("str").fillna("no address point matches")
        for pattern, words in _ASSET_WORDS:
            text = text.str.replace(pattern, words, regex=True)
        return (f"{self.source}: " + text).to_numpy(dtype=object)


def matcher_fingerprint() -> str:
    """A hash of the source of the modules whose output a gazetteer keeps (the address
    model, the asset index and the probabilistic matcher): a gazetteer indexed by other
    code is re-indexed rather than read with keys this code would not make."""
    from toolkit.matching import address, index, probabilistic

    digest = hashlib.sha256()
    for module in (address, index, probabilistic):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]
