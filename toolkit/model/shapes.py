"""The spec's JSON shapes of stored records: one place, so every face prints the same thing.

Ids: items, events, audit logs and media are integers; assets are strings
(spec 2.2). Times are ISO 8601 in UTC with their offset. Register fields are
returned beside the item's own fields; a field the register defines but the
item lacks is ``null``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolkit.errors import OptionError
from toolkit.lazy import lazy
from toolkit.model.rows import StoredRow
from toolkit.query.filters import format_time

if TYPE_CHECKING:
    import numpy as np
    import shapely
else:
    np = lazy("numpy")
    shapely = lazy("shapely")

# The item's own fields (spec 2.3), as records show them; register fields come after.
ITEM_OWN_FIELDS = (
    "id",
    "registerId",
    "type",
    "eventId",
    "regionId",
    "assetId",
    "status",
    "isTemplate",
    "tags",
    "dateCreated",
    "dateModified",
)
ITEM_OUTPUT_ONLY_FIELDS = ("id", "dateCreated", "dateModified")


def envelope(models: Iterable[Mapping[str, Any]], total: int) -> dict[str, Any]:
    """The collection envelope (spec 2.1): models keyed by id, count, total as a string."""
    keyed = {str(model["id"]): dict(model) for model in models}
    return {"models": keyed, "count": len(keyed), "total": str(total)}


def geo_object(geometry: Any) -> dict[str, list[Any]]:
    """``{points, polygons, linestrings}`` of one geometry (empty lists when missing).

    ``points`` is ``[{longitude, latitude}]``; ``polygons`` a list of polygons, each
    a list of rings (exterior first), each ring a list of ``{longitude, latitude}``;
    ``linestrings`` a list of paths of the same pairs. Numbers are strings in their
    shortest round-trip form.
    """
    return geo_objects(np.array([geometry], dtype=object))[0]


def geo_objects(geometries: np.ndarray) -> list[dict[str, list[Any]]]:
    """``geo_object`` of many geometries, with the shapely work done in bulk."""
    result: list[dict[str, list[Any]]] = [
        {"points": [], "polygons": [], "linestrings": []} for _ in range(len(geometries))
    ]
    parts, owner = shapely.get_parts(np.asarray(geometries, dtype=object), return_index=True)
    # Multi-part members of collections are split until only simple parts are left.
    while len(parts):
        nested = np.isin(shapely.get_type_id(parts), (4, 5, 6, 7))
        if not nested.any():
            break
        inner, inner_owner = shapely.get_parts(parts[nested], return_index=True)
        parts = np.concatenate([parts[~nested], inner])
        owner = np.concatenate([owner[~nested], owner[nested][inner_owner]])
    order = np.argsort(owner, kind="stable")
    parts, owner = parts[order], owner[order]
    kinds = shapely.get_type_id(parts)
    points = kinds == 0
    for at, pair in zip(owner[points], _pairs(shapely.get_coordinates(parts[points])), strict=True):
        result[at]["points"].append(pair)
    lines = np.isin(kinds, (1, 2))
    for at, path in zip(owner[lines], _paths(parts[lines]), strict=True):
        result[at]["linestrings"].append(path)
    polygons = kinds == 3
    rings, ring_owner = shapely.get_rings(parts[polygons], return_index=True)
    paths = _paths(rings)
    ring_counts = np.bincount(ring_owner, minlength=int(polygons.sum()))
    starts = np.cumsum(ring_counts) - ring_counts
    for at, start, count in zip(owner[polygons], starts, ring_counts, strict=True):
        result[at]["polygons"].append(paths[start : start + count])
    return result


def _pairs(xy: np.ndarray) -> list[dict[str, str]]:
    """Coordinates as ``{longitude, latitude}`` strings (shortest round-trip form)."""
    text = xy.astype(str)
    return [{"longitude": x, "latitude": y} for x, y in text.tolist()]


def _paths(geometries: np.ndarray) -> list[list[dict[str, str]]]:
    coords, which = shapely.get_coordinates(geometries, return_index=True)
    pairs = _pairs(coords)
    counts = np.bincount(which, minlength=len(geometries))
    ends = np.cumsum(counts).tolist()
    return [pairs[end - count : end] for end, count in zip(ends, counts.tolist(), strict=True)]


def _coordinate(pair: Any, where: str) -> tuple[float, float]:
    if not isinstance(pair, Mapping) or not {"longitude", "latitude"} <= set(pair):
        raise OptionError(f"{where} must be an object with longitude and latitude")
    numbers = []
    for name in ("longitude", "latitude"):
        value = pair[name]
        number = None
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise OptionError(f"{where}.{name} {value!r:.40} is not a number")
        numbers.append(number)
    longitude, latitude = numbers
    if not (-180 <= longitude <= 180 and -90 <= latitude <= 90):
        raise OptionError(f"{where}: longitude {longitude}, latitude {latitude} is not a place")
    return longitude, latitude


def _path(value: Any, where: str, minimum: int) -> list[tuple[float, float]]:
    if not isinstance(value, list) or len(value) < minimum:
        raise OptionError(f"{where} must be a list of at least {minimum} coordinate objects")
    return [_coordinate(pair, f"{where}[{i}]") for i, pair in enumerate(value)]


def geometry_from_geo(geo: Any, where: str = "geo") -> Any:
    """A shapely geometry from the spec's ``geo`` object (the reverse of :func:`geo_object`).

    ``points`` ``[{longitude, latitude}]`` (numbers or numeric strings),
    ``polygons`` (each a list of rings, exterior first), ``linestrings`` (paths);
    several parts make a collection. Errors name ``where`` and the part at fault.
    """
    if not isinstance(geo, Mapping):
        raise OptionError(f"{where} must be an object with points, polygons or linestrings")
    unknown = sorted(set(geo) - {"points", "polygons", "linestrings"})
    if unknown:
        raise OptionError(
            f"{where} has unknown member(s) {', '.join(unknown)}; known: points, polygons, "
            "linestrings"
        )
    parts: list[Any] = []
    for name in ("points", "polygons", "linestrings"):
        value = geo.get(name) or []
        if not isinstance(value, list):
            raise OptionError(f"{where}.{name} must be a list")
        for i, part in enumerate(value):
            at = f"{where}.{name}[{i}]"
            if name == "points":
                parts.append(shapely.Point(_coordinate(part, at)))
            elif name == "linestrings":
                parts.append(shapely.LineString(_path(part, at, 2)))
            else:
                if not isinstance(part, list) or not part:
                    raise OptionError(f"{at} must be a list of rings (exterior first)")
                rings = [_path(ring, f"{at}[{r}]", 3) for r, ring in enumerate(part)]
                parts.append(shapely.Polygon(rings[0], rings[1:]))
    if not parts:
        raise OptionError(f"{where} has no points, polygons or linestrings")
    return parts[0] if len(parts) == 1 else shapely.GeometryCollection(parts)


def asset_json(
    fields: Mapping[str, Any],
    geo: dict[str, list[Any]],
    extra_info: Mapping[str, Any],
    accuracy: str | None = None,
) -> dict[str, Any]:
    """One asset in the shape of spec 2.2, from its fields by spec name.

    ``extraInfo`` is ``[{"key": code name, "value": text}]`` for each code that
    has a value. Defaults: ``source`` internal, ``friendly`` the name,
    ``friendlyType`` the type.
    """

    def text(name: str, default: str | None = None) -> str | None:
        value = fields.get(name)
        return default if value is None or value == "" else str(value)

    name = text("name", "") or ""
    type_name = text("type", "") or ""
    return {
        "id": text("id"),
        "type": type_name,
        "code": text("code", ""),
        "regionId": text("regionId"),
        "geo": geo,
        "source": text("source", "internal"),
        "accuracy": accuracy,
        "friendly": text("friendly", name),
        "name": name,
        "friendlyType": text("friendlyType", type_name),
        "extraInfo": [
            {"key": str(key), "value": str(value)}
            for key, value in extra_info.items()
            if value is not None and value != ""
        ],
        "infoLabel": text("infoLabel"),
        "infoUrl": text("infoUrl"),
        "regionName": text("regionName"),
    }


def asset_from_row(row: StoredRow) -> dict[str, Any]:
    """An asset as stored (a ``SELECT * FROM asset`` row) in the shape of spec 2.2.

    Beyond the spec's fields: ``active`` and, where the row says, ``isImpacted``.
    """
    geometry = shapely.from_wkb(row["geometry"]) if row["geometry"] is not None else None
    record = asset_json(
        {
            "id": row["id"],
            "type": row["type"],
            "code": row["code"],
            "name": row["name"],
            "friendly": row["friendly"],
            "regionId": row["region_id"],
            "source": row["source"],
        },
        geo_object(geometry),
        json.loads(row["extra_info"]),
    )
    record["active"] = row["status"] > 0
    if "impacted" in row.keys():  # noqa: SIM118  (`in` on a sqlite3.Row tests its values)
        record["isImpacted"] = bool(row["impacted"])
    record["dateCreated"] = format_time(row["date_created"])
    record["dateModified"] = format_time(row["date_modified"])
    return record


def item_from_row(row: StoredRow, register_fields: Sequence[str] = ()) -> dict[str, Any]:
    """A register item as stored, in the shape GET returns and POST/PUT accept."""
    record: dict[str, Any] = {
        "id": row["id"],
        "registerId": row["register_id"],
        "type": row["register_id"],
        "eventId": row["event_id"],
        "regionId": row["region_id"],
        "assetId": None if row["asset_id"] is None else str(row["asset_id"]),
        "status": row["status"],
        "isTemplate": bool(row["is_template"]),
        "tags": json.loads(row["tags"]),
        "dateCreated": format_time(row["date_created"]),
        "dateModified": format_time(row["date_modified"]),
    }
    own = set(record)  # a register field never hides the item's own fields
    for name in register_fields:
        if name not in own:
            record[name] = None
    for name, value in json.loads(row["fields"]).items():
        if name not in own:
            record[name] = value
    return record


def event_from_row(row: StoredRow) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "description": row["description"],
        "status": row["status"],
        "active": row["status"] > 0,
        "startDate": format_time(row["start_date"]),
        "tags": json.loads(row["tags"]),
        "isTemplate": bool(row["is_template"]),
        "isGlobal": bool(row["is_global"]),
        "regionId": row["region_id"],
        "dateCreated": format_time(row["date_created"]),
        "dateModified": format_time(row["date_modified"]),
    }


def audit_from_row(row: StoredRow) -> dict[str, Any]:
    return {
        "id": row["id"],
        "dateCreated": format_time(row["date_created"]),
        "userId": row["user_id"],
        "action": row["action"],
        "recordType": row["record_type"],
        "recordId": row["record_id"],
        "itemId": row["item_id"],
        "eventId": row["event_id"],
        "changes": json.loads(row["changes"]) if row["changes"] else None,
        "message": row["message"],
        "importJobId": row["import_job_id"],
    }
