"""Feature types of external places, and ``geocoderOptions.requiredFeatures``.

Every source's own place types map to one small vocabulary, so ``requiredFeatures``
means the same whichever source answers:

- ``premise``: a house or other addressed property. Gazetteer: an address point with a
  number, or a geocode type such as building/property centroid, frontage centre, property
  access point, gap geocode (``GAZETTEER_TYPES``). Nominatim: ``category`` building, or
  place/house, or ``addresstype`` house/building. Pelias: layer ``address``.
- ``venue``: a named place of interest. Gazetteer: VENUE, LANDMARK, POI. Nominatim: any
  other place of rank 28-30 (amenity, shop, tourism...). Pelias: ``venue``.
- ``street``: Gazetteer: STREET, STREET LOCALITY. Nominatim: ``category`` highway or
  ``addresstype`` road. Pelias: ``street``.
- ``locality``: a suburb, town or neighbourhood. Gazetteer: LOCALITY, SUBURB, TOWN.
  Nominatim: ``addresstype`` city, town, village, hamlet, suburb, neighbourhood...
  (``NOMINATIM_LOCALITY``), or place rank 13-25. Pelias: ``locality``, ``localadmin``,
  ``borough``, ``neighbourhood``.
- ``postcode``: Gazetteer: POSTCODE. Nominatim: ``type``/``addresstype`` postcode.
  Pelias: ``postalcode``.
- ``region``: Gazetteer: STATE, REGION, COUNTY. Nominatim: state, county, region,
  country... or place rank below 13. Pelias: ``region``, ``macroregion``, ``county``,
  ``macrocounty``, ``country``, ``dependency``.

``premise`` restricts matches to houses and other addressed properties, as the spec says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolkit import names
from toolkit.errors import OptionError
from toolkit.lazy import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy("numpy")
    pd = lazy("pandas")

# The allowed values live in toolkit.names; this package's spelling of them.
Feature = names.GeocodingFeature
FEATURES = names.GEOCODING_FEATURES
GEOCODER_OPTIONS = ("requiredFeatures",)

# Spellings of a feature type in address-point files (G-NAF geocode types among them),
# upper case; anything else with a house number is a premise.
GAZETTEER_TYPES: dict[str, Feature] = {
    **dict.fromkeys(
        (
            "PREMISE",
            "PROPERTY",
            "HOUSE",
            "BUILDING",
            "ADDRESS",
            "BUILDING CENTROID",
            "PROPERTY CENTROID",
            "PROPERTY ACCESS POINT",
            "PROPERTY ACCESS POINT SETBACK",
            "FRONTAGE CENTRE",
            "FRONTAGE CENTRE SETBACK",
            "DRIVEWAY FRONTAGE",
            "BUILDING ACCESS POINT",
            "ENTRANCE",
            "UNIT CENTROID",
            "PARCEL CENTROID",
            "GAP GEOCODE",
            "EMERGENCY ACCESS",
            "EMERGENCY ACCESS SECONDARY",
            "FRONT DOOR ACCESS",
            "WATERWAY ACCESS",
            "BC",
            "PC",
            "PAP",
            "PAPS",
            "FC",
            "FCS",
            "BAP",
            "UC",
            "GG",
            "EA",
            "EAS",
            "FDA",
            "DF",
            "WA",
        ),
        "premise",
    ),
    **dict.fromkeys(("VENUE", "LANDMARK", "POI", "PLACE OF INTEREST"), "venue"),
    **dict.fromkeys(("STREET", "ROAD", "STREET LOCALITY", "STL", "SL"), "street"),
    **dict.fromkeys(
        ("LOCALITY", "SUBURB", "TOWN", "CITY", "VILLAGE", "NEIGHBOURHOOD", "LOC"), "locality"
    ),
    **dict.fromkeys(("POSTCODE", "POSTAL CODE", "POSTALCODE"), "postcode"),
    **dict.fromkeys(("REGION", "STATE", "COUNTY", "LGA", "COUNTRY"), "region"),
}

PELIAS_LAYERS: dict[str, Feature] = {
    "address": "premise",
    "venue": "venue",
    "street": "street",
    "neighbourhood": "locality",
    "borough": "locality",
    "locality": "locality",
    "localadmin": "locality",
    "postalcode": "postcode",
    "county": "region",
    "macrocounty": "region",
    "region": "region",
    "macroregion": "region",
    "dependency": "region",
    "country": "region",
}

NOMINATIM_LOCALITY = frozenset(
    {
        "city",
        "town",
        "village",
        "hamlet",
        "suburb",
        "neighbourhood",
        "quarter",
        "city_district",
        "borough",
        "locality",
        "isolated_dwelling",
        "farm",
        "croft",
        "municipality",
        "city_block",
        "residential",
    }
)
NOMINATIM_REGION = frozenset(
    {"state", "county", "region", "province", "state_district", "country", "district"}
)


def required_features(options: Mapping[str, Any] | None) -> tuple[Feature, ...] | None:
    """The features ``geocoderOptions`` requires (sorted, distinct), or None for any.

    Unknown option keys and unknown feature names are an ``OptionError`` listing the
    allowed ones; names compare case-insensitively.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - set(GEOCODER_OPTIONS))
    if unknown:
        raise OptionError(
            f"unknown geocoderOptions key(s) {', '.join(map(repr, unknown))}; known: "
            + ", ".join(GEOCODER_OPTIONS)
        )
    wanted = options.get("requiredFeatures")
    if wanted is None:
        return None
    if isinstance(wanted, str):
        wanted = [wanted]
    if not isinstance(wanted, list) or not all(isinstance(w, str) for w in wanted):
        raise OptionError(
            f"geocoderOptions.requiredFeatures is {wanted!r}; it must be an array of strings "
            f"from: {', '.join(FEATURES)}"
        )
    names = {w.strip().lower() for w in wanted}
    bad = sorted(names - set(FEATURES))
    if bad:
        raise OptionError(
            f"geocoderOptions.requiredFeatures has {', '.join(map(repr, bad))}; allowed: "
            + ", ".join(FEATURES)
        )
    if not names:
        return None
    return tuple(f for f in FEATURES if f in names)


def gazetteer_features(
    types: pd.Series, has_number: np.ndarray, has_street: np.ndarray
) -> np.ndarray:
    """The feature of each address point: its type column read through
    ``GAZETTEER_TYPES`` where it names one, else premise when it has a house number,
    street when it has a street, locality otherwise."""
    guessed = np.where(has_number, "premise", np.where(has_street, "street", "locality"))
    named = (
        types.astype("str").str.strip().str.upper().map(GAZETTEER_TYPES)
        if len(types)
        else pd.Series([], dtype=object)
    )
    return np.where(named.isna().to_numpy(), guessed, named.to_numpy(dtype=object)).astype(object)


def nominatim_feature(place: Mapping[str, Any]) -> Feature | None:
    """The feature of one Nominatim ``jsonv2`` result (None when it fits none)."""
    category = str(place.get("category") or place.get("class") or "")
    kind = str(place.get("type") or "")
    address_type = str(place.get("addresstype") or "")
    try:
        rank = int(place.get("place_rank") or 0)
    except (TypeError, ValueError):
        rank = 0
    if kind == "postcode" or address_type == "postcode":
        return "postcode"
    if (
        category == "building"
        or (category == "place" and kind in ("house", "houses"))
        or address_type in ("house", "building")
    ):
        return "premise"
    if category == "highway" or address_type == "road":
        return "street"
    if address_type in NOMINATIM_LOCALITY or (category == "place" and kind in NOMINATIM_LOCALITY):
        return "locality"
    if address_type in NOMINATIM_REGION or (category == "boundary" and rank < 13):
        return "region"
    if rank >= 28:
        return "venue"
    if 13 <= rank <= 25:
        return "locality"
    if 0 < rank < 13:
        return "region"
    return None


def pelias_feature(layer: str | None) -> Feature | None:
    """The feature of a Pelias result's ``layer`` (None when it fits none)."""
    return PELIAS_LAYERS.get(str(layer or ""))


def pelias_layers(features: tuple[Feature, ...]) -> str:
    """Pelias' ``layers`` parameter asking only for ``features``."""
    return ",".join(layer for layer, feature in PELIAS_LAYERS.items() if feature in features)


def describe(features: tuple[Feature, ...] | None) -> str:
    return "any" if features is None else ", ".join(features)
