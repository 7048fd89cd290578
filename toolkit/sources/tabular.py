"""From a table of text columns (CSV, XLSX) to a GeoDataFrame: finding and building geometry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import shapely
from geopandas.array import from_shapely
from numpy.typing import NDArray
from pyproj import CRS
from pyproj.exceptions import CRSError, ProjError

from toolkit.errors import SourceError
from toolkit.sources.geometry import (
    NOT_FINITE,
    OUTSIDE_WGS84,
    BadValues,
    Geometries,
    bad_coordinates,
    geometry_from_coordinates,
    geometry_from_wkt,
)

WKT_NAMES = ("wkt", "geometry", "geom", "the_geom", "shape")
LAT_NAMES = ("latitude", "lat", "y")
LON_NAMES = ("longitude", "lon", "lng", "long", "x")
DEFAULT_CRS = "EPSG:4326"


@dataclass
class TabularGeometry:
    """The geometry built for a text table, where it came from, and the rows that failed."""

    geometry: gpd.GeoSeries
    source: str | None
    crs: str | None
    bad: list[BadValues] = field(default_factory=list)
    # The headings the geometry was made from (WKT, latitude, longitude), in that order.
    columns: list[str] = field(default_factory=list)


def names_geometry(columns: Sequence[str]) -> bool:
    """Whether a text table of headings ``columns`` has a geometry by the usual names (a
    WKT column, or latitude and longitude), as :func:`build_geometry` finds them."""
    lower = {name.lower() for name in columns}
    return bool(lower.intersection(WKT_NAMES)) or (
        bool(lower.intersection(LAT_NAMES)) and bool(lower.intersection(LON_NAMES))
    )


def _find(columns: list[str], given: str | None, usual: tuple[str, ...], path: str) -> str | None:
    if given is not None:
        if given in columns:
            return given
        by_lower = {name.lower(): name for name in columns}
        if given.lower() in by_lower:
            return by_lower[given.lower()]
        raise SourceError(
            f"{path}: no column {given!r}; the columns are: {', '.join(columns) or '(none)'}"
        )
    by_lower = {name.lower(): name for name in columns}
    return next((by_lower[name] for name in usual if name in by_lower), None)


def crs_label(crs: CRS | None) -> str:
    """``EPSG:NNNN`` when the CRS has an EPSG code, else its name."""
    if crs is None:
        return "no CRS"
    code = crs.to_epsg()
    return f"EPSG:{code}" if code else crs.name


def parse_crs(crs: str, path: str) -> CRS:
    """A user-given CRS, or a SourceError naming it."""
    try:
        return CRS.from_user_input(crs)
    except Exception as exc:  # pyproj raises CRSError and others for unknown input
        raise SourceError(
            f"{path}: unknown CRS {crs!r}; pass --crs as EPSG:NNNN, e.g. EPSG:4326 or EPSG:7855"
        ) from exc


_Geo = TypeVar("_Geo", gpd.GeoSeries, gpd.GeoDataFrame)


def to_wgs84(geo: _Geo, path: str) -> _Geo:
    """``geo`` reprojected to EPSG:4326, or a SourceError when PROJ cannot do it (a CRS
    that parses but describes no usable transformation)."""
    try:
        return geo.to_crs(DEFAULT_CRS)
    except (ProjError, CRSError) as exc:
        raise SourceError(
            f"{path}: cannot reproject from {crs_label(geo.crs)} to EPSG:4326: {exc}"
        ) from exc


def build_geometry(
    table: pa.Table,
    *,
    path: str,
    wkt_column: str | None,
    lat_column: str | None,
    lon_column: str | None,
    crs: str | None,
) -> TabularGeometry:
    """Geometry from the WKT or latitude/longitude columns of ``table``, in EPSG:4326.

    Explicit columns win; otherwise the usual names are looked up case-insensitively,
    and a row with no WKT takes its latitude/longitude when the table has both kinds.
    A table without any gives an all-missing geometry.
    """
    columns = table.column_names
    if (lat_column is None) != (lon_column is None):
        raise SourceError(f"{path}: pass both --lat-column and --lon-column, not one of them")
    wkt = _find(columns, wkt_column, WKT_NAMES, path) if lat_column is None else None
    lat = lon = None
    if wkt_column is None:
        # Field data often has a WKT column filled on some rows and coordinates on others:
        # found together by their usual names, each row takes whichever it has.
        lat = _find(columns, lat_column, LAT_NAMES, path)
        lon = _find(columns, lon_column, LON_NAMES, path)
    if wkt is None and (lat is None or lon is None):
        empty = np.full(table.num_rows, None, dtype=object)
        return TabularGeometry(geo_series(empty, DEFAULT_CRS), None, None)
    source_crs = parse_crs(crs or DEFAULT_CRS, path)

    geoms: Geometries
    # Which rows took their geometry from the coordinate columns (the others from WKT).
    from_points = np.zeros(table.num_rows, dtype=bool)
    if wkt is not None:
        geoms, bad = geometry_from_wkt(table.column(wkt), wkt)
        source = f"wkt:{wkt}"
        if lat is not None and lon is not None:
            points, point_bad = geometry_from_coordinates(
                table.column(lat), table.column(lon), lat, lon, source_crs.is_geographic
            )
            from_points = shapely.is_missing(geoms) & ~shapely.is_missing(points)
            if from_points.any():
                geoms = np.where(from_points, points, geoms)
            bad = [*bad, *point_bad]
            source = f"{source}+latlon:{lat},{lon}"
    else:
        assert lat is not None and lon is not None
        geoms, bad = geometry_from_coordinates(
            table.column(lat), table.column(lon), lat, lon, source_crs.is_geographic
        )
        from_points[:] = True
        source = f"latlon:{lat},{lon}"

    series = geo_series(geoms, source_crs)
    after = ""
    if source_crs.to_epsg() != 4326:
        series = to_wgs84(series, path)
        after = f" after reprojection from {crs_label(source_crs)}"
    series, unusable = _drop_bad_coordinates(series, table, from_points, wkt, lat, lon, after)
    used = [name for name in (wkt, lat, lon) if name is not None]
    return TabularGeometry(series, source, crs_label(source_crs), [*bad, *unusable], used)


def _drop_bad_coordinates(
    series: gpd.GeoSeries,
    table: pa.Table,
    from_points: NDArray[np.bool_],
    wkt: str | None,
    lat: str | None,
    lon: str | None,
    after: str,
) -> tuple[gpd.GeoSeries, list[BadValues]]:
    """Geometries in EPSG:4326 with a NaN, infinite or out-of-range coordinate become
    missing; each is reported on the column(s) it came from."""
    not_finite, outside = bad_coordinates(np.asarray(series.values))
    bad: list[BadValues] = []
    for positions, message in ((not_finite, NOT_FINITE), (outside, OUTSIDE_WGS84)):
        if positions.size == 0:
            continue
        pointed = from_points[positions]
        sources = [(positions[~pointed], wkt)] + [(positions[pointed], c) for c in (lat, lon)]
        for where, column in sources:
            if where.size and column is not None:
                values = table.column(column).take(where).to_pylist()
                bad.append(BadValues(where, column, values, message + after))
    dropped = np.concatenate([not_finite, outside])
    if dropped.size == 0:
        return series, bad
    geoms = np.asarray(series.values).copy()
    geoms[dropped] = None
    return geo_series(geoms, DEFAULT_CRS), bad


def geo_series(geoms: Geometries, crs: CRS | str) -> gpd.GeoSeries:
    """A GeoSeries over an array of shapely objects (or None) without re-checking each one."""
    return gpd.GeoSeries(from_shapely(geoms, crs=crs))


def to_geodataframe(
    table: pa.Table, geometry: gpd.GeoSeries, row_numbers: NDArray[np.int64]
) -> gpd.GeoDataFrame:
    """Text columns as pandas strings (arrow-backed, no copy), geometry, index ``row``."""
    frame = table.to_pandas(types_mapper=_string_dtype)
    contiguous = row_numbers.size == 0 or row_numbers[-1] == row_numbers.size
    index = (
        pd.RangeIndex(1, row_numbers.size + 1, name="row")
        if contiguous
        else pd.Index(row_numbers, name="row")
    )
    frame.index = index
    geometry = geometry.set_axis(index)
    if "geometry" in frame.columns:
        # A WKT column called "geometry" is the geometry now; two columns cannot share a name.
        frame = frame.drop(columns="geometry")
    return gpd.GeoDataFrame(frame, geometry=geometry, crs=DEFAULT_CRS)


_STRING = pd.StringDtype("pyarrow", na_value=np.nan)


def _string_dtype(arrow_type: pa.DataType) -> pd.api.extensions.ExtensionDtype | None:
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return _STRING
    return None
