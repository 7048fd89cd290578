"""A small geocoding service for tests: Nominatim's ``/search?format=jsonv2`` and Pelias'
``/v1/search``, answering from a table of places, run on 127.0.0.1 by the test.

The real services cannot run here (they need a planet's worth of data); this one speaks
their JSON as their documentation shows it, so the client is tested over real HTTP. Some
query texts misbehave on purpose:

- ``busy ...``: 429 with ``Retry-After: <retry_after>`` the first time, then answers;
- ``long wait ...``: 429 with ``Retry-After: 120`` every time;
- ``down ...``: 503 every time;
- ``slow ...``: answers after ``slow_s`` seconds;
- ``garbage ...``: 200 with a body that is not JSON.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class FakePlace:
    """A place the service knows: its text, point and what kind of place it is."""

    text: str
    longitude: float
    latitude: float
    nominatim: dict[str, Any]  # category, type, addresstype, place_rank
    layer: str  # Pelias layer
    confidence: float = 0.9
    osm: tuple[str, int] = ("node", 1)
    # house_number, road, suburb, state, postcode: Nominatim's address details
    parts: dict[str, str] = field(default_factory=dict)


@dataclass
class GeocodingService:
    places: list[FakePlace]
    retry_after: str = "1"
    slow_s: float = 2.0
    asked: Counter[str] = field(default_factory=Counter)
    params: list[dict[str, str]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def matching(self, text: str) -> list[FakePlace]:
        words = text.lower().replace(",", " ").split()
        return [p for p in self.places if all(w in p.text.lower() for w in words)]

    def misbehaviour(self, text: str) -> Response | None:
        with self._lock:
            self.asked[text] += 1
            count = self.asked[text]
        if text.startswith("busy") and count == 1:
            return JSONResponse(
                {"error": "rate limited"}, 429, headers={"Retry-After": self.retry_after}
            )
        if text.startswith("long wait"):
            return JSONResponse({"error": "later"}, 429, headers={"Retry-After": "120"})
        if text.startswith("down"):
            return PlainTextResponse("maintenance", 503)
        if text.startswith("garbage"):
            return PlainTextResponse("<html>not json</html>")
        return None

    def _record(self, request: Request) -> str:
        params = dict(request.query_params)
        with self._lock:
            self.params.append(params)
            self.times.append(time.monotonic())
        return params.get("q") or params.get("text") or ""

    async def nominatim(self, request: Request) -> Response:
        text = self._record(request)
        if request.query_params.get("format") != "jsonv2":
            return JSONResponse({"error": "format must be jsonv2 here"}, 400)
        odd = self.misbehaviour(text)
        if odd is not None:
            return odd
        if text.startswith("slow"):
            await asyncio.sleep(self.slow_s)
        limit = int(request.query_params.get("limit", "10"))
        return JSONResponse(
            [
                {
                    "place_id": 1000 + i,
                    "licence": "Data © OpenStreetMap contributors, ODbL 1.0.",
                    "osm_type": p.osm[0],
                    "osm_id": p.osm[1],
                    "lat": repr(p.latitude),
                    "lon": repr(p.longitude),
                    "importance": 0.1,
                    "name": p.text.split(",")[0],
                    "display_name": p.text,
                    **(
                        {"address": {**p.parts, "country": "Australia", "country_code": "au"}}
                        if request.query_params.get("addressdetails") == "1"
                        else {}
                    ),
                    "boundingbox": [repr(p.latitude)] * 2 + [repr(p.longitude)] * 2,
                    **p.nominatim,
                }
                for i, p in enumerate(self.matching(text)[:limit])
            ]
        )

    async def pelias(self, request: Request) -> Response:
        text = self._record(request)
        odd = self.misbehaviour(text)
        if odd is not None:
            return odd
        if text.startswith("slow"):
            await asyncio.sleep(self.slow_s)
        layers = request.query_params.get("layers")
        found = self.matching(text)
        if layers:
            found = [p for p in found if p.layer in layers.split(",")]
        size = int(request.query_params.get("size", "10"))
        return JSONResponse(
            {
                "geocoding": {"version": "0.2", "query": {"text": text, "size": size}},
                "type": "FeatureCollection",
                "features": [
                    {
                        "type": "Feature",
                        "geometry": {"type": "Point", "coordinates": [p.longitude, p.latitude]},
                        "properties": {
                            "id": str(p.osm[1]),
                            "gid": f"openstreetmap:{p.layer}:{p.osm[0]}/{p.osm[1]}",
                            "layer": p.layer,
                            "source": "openstreetmap",
                            "name": p.text.split(",")[0],
                            "confidence": p.confidence,
                            "accuracy": "point",
                            "label": p.text,
                            **{
                                pelias: p.parts[key]
                                for key, pelias in PELIAS_PARTS.items()
                                if key in p.parts
                            },
                        },
                    }
                    for p in found[:size]
                ],
            }
        )

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/search", self.nominatim),
                Route("/v1/search", self.pelias),
            ]
        )


PELIAS_PARTS = {
    "house_number": "housenumber",
    "road": "street",
    "suburb": "locality",
    "state": "region",
    "postcode": "postalcode",
}
KEW = {"suburb": "Kew", "state": "Victoria", "postcode": "3101"}
HOUSE = {"category": "place", "type": "house", "addresstype": "place", "place_rank": 30}
BUILDING = {"category": "building", "type": "yes", "addresstype": "building", "place_rank": 30}
ROAD = {"category": "highway", "type": "residential", "addresstype": "road", "place_rank": 26}
SUBURB = {"category": "place", "type": "suburb", "addresstype": "suburb", "place_rank": 19}
SCHOOL = {"category": "amenity", "type": "school", "addresstype": "amenity", "place_rank": 30}

PLACES = [
    FakePlace(
        "12 Smith Street, Kew, Victoria, 3101",
        145.0301,
        -37.8001,
        HOUSE,
        "address",
        0.87,
        ("node", 501),
        {"house_number": "12", "road": "Smith Street", **KEW},
    ),
    FakePlace(
        "Smith Street, Kew, Victoria, 3101",
        145.0322,
        -37.8022,
        ROAD,
        "street",
        0.8,
        ("way", 77),
        {"road": "Smith Street", **KEW},
    ),
    FakePlace("Kew, Victoria, 3101", 145.035, -37.805, SUBURB, "locality", 0.7, ("relation", 9)),
    FakePlace(
        "Kew Primary School, Smith Street, Kew",
        145.0333,
        -37.8033,
        SCHOOL,
        "venue",
        0.95,
        ("way", 88),
        {"road": "Smith Street", **KEW},
    ),
    FakePlace(
        "busy 5 High Road, Camberwell", 145.06, -37.83, BUILDING, "address", 0.9, ("way", 55)
    ),
    FakePlace("slow 7 Low Road, Camberwell", 145.07, -37.84, HOUSE, "address", 0.9, ("node", 66)),
    FakePlace("1 Town Hall Place, Richmond", 144.99, -37.81, HOUSE, "address", 0.9, ("node", 67)),
    FakePlace("2 Town Hall Place, Richmond", 144.991, -37.811, HOUSE, "address", 0.9, ("node", 68)),
    FakePlace("3 Town Hall Place, Richmond", 144.992, -37.812, HOUSE, "address", 0.9, ("node", 69)),
]
