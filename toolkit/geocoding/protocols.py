"""The two geocoding protocols spoken over HTTP: requests to make and answers to read.

Pure functions, no network: ``toolkit.geocoding.http`` sends what these build.

- Nominatim: ``GET <url>/search?q=<text>&format=jsonv2&limit=N&addressdetails=1``; the
  answer is a JSON array of places (``lat``/``lon`` as strings, ``display_name``, ``name``,
  ``category``, ``type``, ``addresstype``, ``place_rank``, ``place_id``, ``osm_type``,
  ``osm_id``, ``address`` with ``house_number``, ``road``, ``suburb``... ``postcode``). It
  gives no match confidence, so accuracy comes from the feature found
  (``NOMINATIM_ACCURACY``).
- Pelias: ``GET <url>/v1/search?text=<text>&size=N[&layers=...]``; the answer is a GeoJSON
  FeatureCollection whose features have ``geometry.coordinates`` ``[lon, lat]`` and
  ``properties`` ``label``, ``name``, ``layer``, ``gid``/``id``, ``housenumber``,
  ``street``, ``locality``, ``region_a``, ``postalcode`` and ``confidence`` (0-1, used as
  accuracy x 100).

A place's ``name`` (what an asset made of it is called) is its address from those parts
(``12 Smith Street Kew Victoria 3101``: what the address matcher compares best), or a
venue's own name; ``label`` is the service's whole display text.

``requiredFeatures`` is also sent where the protocol can narrow the search (Pelias'
``layers``); either way each answer is checked against it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolkit import names
from toolkit.geocoding.features import Feature, nominatim_feature, pelias_feature, pelias_layers

Protocol = names.GeocoderProtocol
PROTOCOLS = names.GEOCODER_PROTOCOLS
# Places asked for per query: enough that a premise below a street or suburb is still seen.
RESULTS_PER_QUERY = 10
# Nominatim says nothing of how sure it is; how precise the kind of place found is.
NOMINATIM_ACCURACY: dict[Feature, float] = {
    "premise": 90.0,
    "venue": 80.0,
    "street": 70.0,
    "postcode": 60.0,
    "locality": 50.0,
    "region": 30.0,
}


@dataclass(frozen=True)
class Place:
    """One place a service answered with."""

    longitude: float
    latitude: float
    label: str
    accuracy: float
    place_id: str | None
    feature: Feature | None
    name: str | None = None


class ProtocolError(ValueError):
    """An answer that is not the protocol's JSON."""


def search_request(
    protocol: Protocol, text: str, features: tuple[Feature, ...] | None
) -> tuple[str, dict[str, str]]:
    """The path (relative to the service's URL) and query parameters of one search."""
    if protocol == "nominatim":
        return "search", {
            "q": text,
            "format": "jsonv2",
            "limit": str(RESULTS_PER_QUERY),
            "addressdetails": "1",
        }
    params = {"text": text, "size": str(RESULTS_PER_QUERY)}
    if features is not None:
        layers = pelias_layers(features)
        if layers:
            params["layers"] = layers
    return "v1/search", params


def places(protocol: Protocol, body: Any) -> list[Place]:
    """The places of an answer, best first; ``ProtocolError`` when it is not the
    protocol's JSON."""
    return _nominatim(body) if protocol == "nominatim" else _pelias(body)


def _number(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{what} {value!r} is not a number") from exc
    if number != number:  # NaN
        raise ProtocolError(f"{what} is not a number")
    return number


NOMINATIM_LOCALITY_KEYS = ("suburb", "town", "village", "city", "hamlet", "neighbourhood")


def _words(*parts: Any) -> str | None:
    text = " ".join(str(p).strip() for p in parts if p not in (None, "") and str(p).strip())
    return text or None


def _nominatim_name(entry: Mapping[str, Any], feature: Feature | None) -> str | None:
    if feature == "venue" and entry.get("name"):
        return str(entry["name"])
    address = entry.get("address")
    if not isinstance(address, Mapping) or not (address.get("road") or address.get("house_number")):
        return None
    locality = next((address[k] for k in NOMINATIM_LOCALITY_KEYS if address.get(k)), None)
    return _words(
        address.get("house_number"),
        address.get("road"),
        locality,
        address.get("state"),
        address.get("postcode"),
    )


def _nominatim(body: Any) -> list[Place]:
    if not isinstance(body, list):
        raise ProtocolError("a Nominatim search answers with a JSON array")
    found = []
    for entry in body:
        if not isinstance(entry, Mapping):
            raise ProtocolError("a Nominatim place is a JSON object")
        feature = nominatim_feature(entry)
        place_id = entry.get("place_id")
        if entry.get("osm_type") and entry.get("osm_id") is not None:
            place_id = f"{entry['osm_type']}/{entry['osm_id']}"
        found.append(
            Place(
                longitude=_number(entry.get("lon"), "lon"),
                latitude=_number(entry.get("lat"), "lat"),
                label=str(entry.get("display_name") or entry.get("name") or ""),
                accuracy=NOMINATIM_ACCURACY.get(feature, 20.0) if feature else 20.0,
                place_id=None if place_id is None else str(place_id),
                feature=feature,
                name=_nominatim_name(entry, feature),
            )
        )
    return found


def _pelias_name(properties: Mapping[str, Any], feature: Feature | None) -> str | None:
    if feature == "venue" and properties.get("name"):
        return str(properties["name"])
    if not (properties.get("street") or properties.get("housenumber")):
        return None
    return _words(
        properties.get("housenumber"),
        properties.get("street"),
        properties.get("locality") or properties.get("localadmin"),
        properties.get("region_a") or properties.get("region"),
        properties.get("postalcode"),
    )


def _pelias(body: Any) -> list[Place]:
    if not isinstance(body, Mapping) or not isinstance(body.get("features"), list):
        raise ProtocolError("a Pelias search answers with a GeoJSON FeatureCollection")
    found = []
    for entry in body["features"]:
        if not isinstance(entry, Mapping):
            raise ProtocolError("a Pelias feature is a JSON object")
        geometry = entry.get("geometry") or {}
        coordinates = geometry.get("coordinates") if isinstance(geometry, Mapping) else None
        if not isinstance(coordinates, list) or len(coordinates) < 2:
            raise ProtocolError("a Pelias feature has no point coordinates")
        properties = entry.get("properties") or {}
        if not isinstance(properties, Mapping):
            raise ProtocolError("a Pelias feature's properties are not an object")
        feature = pelias_feature(properties.get("layer"))
        confidence = properties.get("confidence")
        accuracy = (
            100.0 * _number(confidence, "confidence")
            if confidence is not None
            else NOMINATIM_ACCURACY.get(feature, 20.0)
            if feature
            else 20.0
        )
        place_id = properties.get("gid") or properties.get("id")
        found.append(
            Place(
                longitude=_number(coordinates[0], "longitude"),
                latitude=_number(coordinates[1], "latitude"),
                label=str(properties.get("label") or properties.get("name") or ""),
                accuracy=round(accuracy, 1),
                place_id=None if place_id is None else str(place_id),
                feature=feature,
                name=_pelias_name(properties, feature),
            )
        )
    return found


def best(found: list[Place], features: tuple[Feature, ...] | None) -> Place | None:
    """The first place (the service's best) of a required feature; with no requirement,
    the first place."""
    for place in found:
        if features is None or place.feature in features:
            return place
    return None


def guess_protocol(url_path: str) -> Protocol:
    """Pelias when the URL's path ends in its API root ``/v1``, else Nominatim."""
    return "pelias" if url_path.rstrip("/").endswith("/v1") else "nominatim"
