"""Geometry on whole columns: from WKT or coordinates, repair, and the counts the report gives."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import shapely
from numpy.typing import NDArray

# A plain decimal or scientific number, optionally signed and padded with spaces.
_NUMBER = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"

# A column of shapely geometries (None where a row has none), as shapely's array functions
# give and take it.
Geometries = NDArray[np.object_]

_POLYGONAL = (shapely.GeometryType.POLYGON, shapely.GeometryType.MULTIPOLYGON)


@dataclass(frozen=True)
class BadValues:
    """Rows (0-based positions) whose ``column`` held a value that gave no geometry, and why."""

    positions: NDArray[np.intp]
    column: str
    values: list[str | None]
    message: str


def geometry_from_wkt(values: pa.ChunkedArray, column: str) -> tuple[Geometries, list[BadValues]]:
    """Parse a text column of WKT; empty cells give a missing geometry, bad text a problem."""
    text = values.to_numpy(zero_copy_only=False)
    present = pc.is_valid(values).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):  # "POINT (nan nan)" parses; it is checked later
        geoms = shapely.from_wkt(text, on_invalid="ignore")
    failed = np.flatnonzero(present & shapely.is_missing(geoms))
    bad = []
    if failed.size:
        bad.append(BadValues(failed, column, text[failed].tolist(), "not valid WKT"))
    return geoms, bad


def parse_numbers(values: pa.ChunkedArray) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Numbers from a text column: NaN where empty or not a number, plus the not-a-number mask."""
    present = pc.is_valid(values).to_numpy(zero_copy_only=False)
    try:
        # Fast path: a clean column casts in one pass; anything odd falls back to the regex.
        numbers = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        numeric = pc.fill_null(pc.match_substring_regex(values, _NUMBER), False)
        cleaned = pc.if_else(numeric, pc.utf8_trim_whitespace(values), None)
        numbers = pc.cast(cleaned, pa.float64()).to_numpy(zero_copy_only=False)
        return np.asarray(numbers, dtype=np.float64), present & ~numeric.to_numpy(
            zero_copy_only=False
        )
    numbers = np.asarray(numbers, dtype=np.float64)
    # The cast accepts "nan" and "inf"; neither is a coordinate.
    return numbers, present & ~np.isfinite(numbers)


def geometry_from_coordinates(
    y_values: pa.ChunkedArray,
    x_values: pa.ChunkedArray,
    y_column: str,
    x_column: str,
    geographic: bool,
) -> tuple[Geometries, list[BadValues]]:
    """Points from latitude/northing and longitude/easting text columns, with range checks.

    Both cells empty gives a missing geometry without a problem (a row may simply have no
    location); one empty, a non-number, or a degree out of range is a problem.
    """
    y, y_not_number = parse_numbers(y_values)
    x, x_not_number = parse_numbers(x_values)
    y_missing = pc.is_null(y_values).to_numpy(zero_copy_only=False)
    x_missing = pc.is_null(x_values).to_numpy(zero_copy_only=False)

    checks: list[tuple[NDArray[np.bool_], str, pa.ChunkedArray, str]] = [
        (y_not_number, y_column, y_values, "not a number"),
        (x_not_number, x_column, x_values, "not a number"),
        (y_missing & ~x_missing, y_column, y_values, "missing while the other coordinate is given"),
        (x_missing & ~y_missing, x_column, x_values, "missing while the other coordinate is given"),
    ]
    if geographic:
        with np.errstate(invalid="ignore"):
            checks.append((np.abs(y) > 90, y_column, y_values, "latitude outside -90..90"))
            checks.append((np.abs(x) > 180, x_column, x_values, "longitude outside -180..180"))

    usable = np.isfinite(y) & np.isfinite(x)
    bad: list[BadValues] = []
    for mask, column, text, message in checks:
        positions = np.flatnonzero(mask)
        if positions.size:
            usable[positions] = False
            bad.append(BadValues(positions, column, text.take(positions).to_pylist(), message))
    if usable.all():
        points = shapely.points(x, y)
        assert isinstance(points, np.ndarray)  # arrays in, an array out (not one Point)
        return points, bad
    geoms = np.full(len(y), None, dtype=object)
    geoms[usable] = shapely.points(x[usable], y[usable])
    return geoms, bad


NOT_FINITE = "a coordinate is not a finite number"
OUTSIDE_WGS84 = "coordinates outside longitude -180..180, latitude -90..90 (EPSG:4326)"
# Geometries looked at together when checking coordinates: bounds the memory a column of
# large polygons needs, while staying vectorised.
_CHECK_CHUNK = 65_536


def bad_coordinates(geoms: Geometries) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Positions of geometries (in EPSG:4326) with a NaN or infinite coordinate, and of the
    others with a coordinate outside the valid longitudes and latitudes.

    Every vertex is looked at: a bounding box skips NaN vertices, so it cannot tell.
    """
    not_finite: list[NDArray[np.intp]] = []
    outside: list[NDArray[np.intp]] = []
    for start in range(0, len(geoms), _CHECK_CHUNK):
        chunk = geoms[start : start + _CHECK_CHUNK]
        coords = shapely.get_coordinates(chunk)
        x, y = coords[:, 0], coords[:, 1]
        finite = np.isfinite(x) & np.isfinite(y)
        with np.errstate(invalid="ignore"):
            beyond = finite & ((np.abs(x) > 180) | (np.abs(y) > 90))
        if finite.all() and not beyond.any():
            continue  # the usual case: no need to know which geometry owns which vertex
        owner = np.repeat(np.arange(len(chunk)), shapely.get_num_coordinates(chunk))
        nan_rows = np.unique(owner[~finite])
        not_finite.append(nan_rows + start)
        outside.append(np.setdiff1d(np.unique(owner[beyond]), nan_rows) + start)
    empty = np.zeros(0, dtype=np.intp)
    return (
        np.concatenate(not_finite).astype(np.intp) if not_finite else empty,
        np.concatenate(outside).astype(np.intp) if outside else empty,
    )


def repair_polygons(geoms: Geometries) -> tuple[Geometries, int]:
    """Make invalid polygons valid, keeping only polygonal parts; returns the repaired count.

    Only the invalid ones go through ``make_valid``; a bow-tie becomes a MultiPolygon
    of its two triangles, and the lines or points a repair may leave behind are dropped.
    """
    type_ids = shapely.get_type_id(geoms)
    polygonal = np.isin(type_ids, _POLYGONAL)
    if not polygonal.any():
        return geoms, 0
    candidates = np.flatnonzero(polygonal)
    invalid = candidates[~shapely.is_valid(geoms[candidates])]
    if invalid.size == 0:
        return geoms, 0
    repaired = shapely.make_valid(geoms[invalid])
    repaired = _keep_polygonal_parts(repaired)
    geoms = geoms.copy()
    geoms[invalid] = repaired
    return geoms, int(invalid.size)


def _keep_polygonal_parts(geoms: Geometries) -> Geometries:
    """Reduce collections to a MultiPolygon of their polygonal parts; others stay as they are."""
    is_collection = shapely.get_type_id(geoms) == shapely.GeometryType.GEOMETRYCOLLECTION
    if not is_collection.any():
        return geoms
    positions = np.flatnonzero(is_collection)
    parts, owner = shapely.get_parts(geoms[positions], return_index=True)
    # Multipolygon parts are split into polygons too, so one constructor fits all.
    polys, part_index = shapely.get_parts(parts, return_index=True)
    keep = shapely.get_type_id(polys) == shapely.GeometryType.POLYGON
    rebuilt = np.array([shapely.MultiPolygon() for _ in positions], dtype=object)
    shapely.multipolygons(polys[keep], indices=owner[part_index][keep], out=rebuilt)
    out = geoms.copy()
    out[positions] = rebuilt
    return out


def geometry_counts(geoms: Geometries) -> tuple[dict[str, int], int, int]:
    """Count of each geometry type among present geometries, the missing, and the empty ones."""
    type_ids = shapely.get_type_id(geoms)
    missing = int(np.count_nonzero(type_ids < 0))
    empty = int(np.count_nonzero(shapely.is_empty(geoms)))
    counts = np.bincount(type_ids[type_ids >= 0], minlength=len(_TYPE_NAMES))
    types = {_TYPE_NAMES[tid]: int(n) for tid, n in enumerate(counts) if n}
    return types, missing, empty


# Indexed by shapely's type id; the names GeoJSON and geopandas use.
_TYPE_NAMES = (
    "Point",
    "LineString",
    "LinearRing",
    "Polygon",
    "MultiPoint",
    "MultiLineString",
    "MultiPolygon",
    "GeometryCollection",
)
