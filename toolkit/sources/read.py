"""The one entry point: any supported file to a GeoDataFrame in EPSG:4326 plus a report."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from toolkit.errors import OptionError, SourceError, ToolkitError
from toolkit.gc_pause import collector_paused
from toolkit.progress import Progress, no_progress
from toolkit.scratch import scratch_folder
from toolkit.sources.csv import CsvDialect, add_lines, csv_dialect, read_csv_table
from toolkit.sources.geometry import (
    NOT_FINITE,
    OUTSIDE_WGS84,
    BadValues,
    bad_coordinates,
    geometry_counts,
    repair_polygons,
)
from toolkit.sources.report import ReadLimits, SourceFormat, SourceProblem, SourceReport
from toolkit.sources.spatial import SpatialRead, read_ogr, read_shapefile, read_zipped_shapefile
from toolkit.sources.tabular import DEFAULT_CRS, build_geometry, geo_series, to_geodataframe
from toolkit.sources.xlsx import read_sheet

_WKT_PREVIEW = 200

_SUFFIXES: dict[str, SourceFormat] = {
    ".csv": "csv",
    ".txt": "csv",
    ".tsv": "csv",
    ".psv": "csv",
    ".zip": "shapefile",
    ".shz": "shapefile",
    ".shp": "shapefile",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".geojson": "geojson",
    ".json": "geojson",
    ".gpkg": "gpkg",
}


# What ``--format`` takes: the API's dataType names, and the reader's own name for a
# zipped Shapefile.
FORMAT_NAMES: dict[str, SourceFormat] = {
    "csv": "csv",
    "zip": "shapefile",
    "shapefile": "shapefile",
    "xlsx": "xlsx",
    "geojson": "geojson",
    "gpkg": "gpkg",
}
# The name a file of each format is read under when its own name says otherwise.
_READ_AS: dict[SourceFormat, str] = {
    "csv": ".csv",
    "shapefile": ".zip",
    "xlsx": ".xlsx",
    "geojson": ".geojson",
    "gpkg": ".gpkg",
}


def source_format(path: Path, given: str | None = None) -> SourceFormat:
    """The format ``given`` (it wins over the name), else the one the file's name says,
    else a SourceError listing the known suffixes."""
    if given is not None:
        if given.lower() not in FORMAT_NAMES:
            raise OptionError(
                f"--format {given!r} is not one of: {', '.join(sorted(FORMAT_NAMES))}"
            )
        return FORMAT_NAMES[given.lower()]
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise SourceError(
            f"{path}: unknown file type {suffix or '(no suffix)'!r}; supported: "
            f"{', '.join(sorted(_SUFFIXES))} (.shp.zip too); or say what it is with "
            "--format csv|zip|xlsx|geojson|gpkg"
        )
    return _SUFFIXES[suffix]


@contextmanager
def _readable_as(path: Path, fmt: SourceFormat) -> Iterator[Path]:
    """``path``, or when its name says another format than ``fmt``, a link to it named as
    ``fmt`` says: some readers (openpyxl, GDAL's drivers) go by the name."""
    if fmt == "csv" or _SUFFIXES.get(path.suffix.lower()) == fmt or not path.is_file():
        yield path
        return
    with scratch_folder("toolkit-source-") as folder:
        link = Path(folder) / f"{path.stem or 'source'}{_READ_AS[fmt]}"
        try:
            link.symlink_to(path.absolute())
        except OSError:  # no symbolic links here (some Windows accounts): a copy
            shutil.copyfile(path, link)
        yield link


def _check_file(path: Path, limits: ReadLimits) -> None:
    if not path.exists():
        raise SourceError(f"{path}: no such file")
    if not path.is_file():
        raise SourceError(f"{path}: not a file")
    size = path.stat().st_size
    if size == 0:
        raise SourceError(f"{path}: the file is empty")
    if size > limits.max_file_bytes:
        raise SourceError(
            f"{path}: {size} bytes is more than the limit of {limits.max_file_bytes} bytes; "
            "raise ReadLimits.max_file_bytes if the file is meant to be this large"
        )


def read_source(
    path: str | Path,
    *,
    layer: str | None = None,
    encoding: str | None = None,
    crs: str | None = None,
    wkt_column: str | None = None,
    lat_column: str | None = None,
    lon_column: str | None = None,
    limits: ReadLimits | None = None,
    progress: Progress | None = None,
    name: str | None = None,
    format: str | None = None,
    delimiter: str | None = None,
    quotechar: str | None = None,
) -> tuple[gpd.GeoDataFrame, SourceReport]:
    """Read a CSV, zipped Shapefile, XLSX, GeoJSON or GeoPackage file.

    Returns a GeoDataFrame (geometry column ``geometry`` in EPSG:4326, index ``row`` =
    1-based data-record number in the source) and a :class:`SourceReport`. Rows that
    could not be read are left out and listed in ``report.problems``. Raises
    :class:`SourceError` when the file cannot be read at all.

    ``name`` is what errors and the report call the file instead of its path: a server
    reads data sent to it from a temporary file whose path is nobody's business.
    ``format`` (``csv``, ``zip``, ``xlsx``, ``geojson``, ``gpkg``) wins over the file's
    name; ``delimiter`` and ``quotechar`` (see :func:`csv_dialect`) replace detection.
    """
    path = Path(path)
    fmt = source_format(path, format)
    dialect = csv_dialect(delimiter, quotechar)
    if fmt != "csv" and (delimiter is not None or quotechar is not None):
        raise OptionError(
            f"{name or path}: --delimiter and --quotechar are for CSV files; this is {fmt}"
        )
    with _readable_as(path, fmt) as readable:
        shown = name if name is not None or readable == path else str(path)
        return _read_named(
            readable,
            fmt,
            dialect,
            layer=layer,
            encoding=encoding,
            crs=crs,
            wkt_column=wkt_column,
            lat_column=lat_column,
            lon_column=lon_column,
            limits=limits,
            progress=progress,
            name=shown,
        )


def _read_named(
    path: Path,
    fmt: SourceFormat,
    dialect: CsvDialect,
    *,
    layer: str | None,
    encoding: str | None,
    crs: str | None,
    wkt_column: str | None,
    lat_column: str | None,
    lon_column: str | None,
    limits: ReadLimits | None,
    progress: Progress | None,
    name: str | None,
) -> tuple[gpd.GeoDataFrame, SourceReport]:
    """:func:`read_source` once the format is settled; messages call the file ``name``."""
    try:
        with collector_paused():
            frame, report = _read(
                path,
                fmt,
                dialect,
                layer=layer,
                encoding=encoding,
                crs=crs,
                wkt_column=wkt_column,
                lat_column=lat_column,
                lon_column=lon_column,
                limits=limits or ReadLimits(),
                progress=progress or no_progress,
                label=f"read {Path(name).name if name else path.name}",
            )
    except ToolkitError as exc:
        if name is not None:
            # The one place a path becomes a message: every reader names the file by its
            # path, and so may the libraries whose errors they quote.
            exc.args = (_renamed(str(exc), path, name), *exc.args[1:])
        raise
    if name is not None:
        report.path = name
        report.problems = [
            replace(p, message=_renamed(p.message, path, name)) for p in report.problems
        ]
        report.warnings = [_renamed(w, path, name) for w in report.warnings]
    return frame, report


def _renamed(message: str, path: Path, name: str) -> str:
    """``message`` with the file's path (and its folder) replaced by ``name``."""
    for form in dict.fromkeys((str(path), str(path.absolute()), path.as_posix())):
        message = message.replace(form, name)
    folder = path.parent.absolute()
    if folder.parent != folder:  # never the root: "/" is in every path
        message = message.replace(f"{folder}{os.sep}", "").replace(str(folder), "")
    return message


def _read(
    path: Path,
    fmt: SourceFormat,
    dialect: CsvDialect,
    *,
    layer: str | None,
    encoding: str | None,
    crs: str | None,
    wkt_column: str | None,
    lat_column: str | None,
    lon_column: str | None,
    limits: ReadLimits,
    progress: Progress,
    label: str,
) -> tuple[gpd.GeoDataFrame, SourceReport]:
    """The body of :func:`read_source`. Progress: the bytes of the file, as the CSV
    reader takes them in; the rows of a sheet as they are read; a spatial file (read by
    GDAL in one call) when it is done."""
    _check_file(path, limits)
    size = path.stat().st_size
    columns = GeometryColumns(wkt_column, lat_column, lon_column)

    def read_bytes(done: int) -> None:
        progress(label, min(done, size), size, unit="bytes")

    def read_rows(done: int, total: int | None) -> None:
        progress(label, done, total, unit="rows")

    if fmt == "csv":
        read_bytes(0)
        frame, report = _read_csv(path, encoding, crs, columns, limits, dialect, read_bytes)
        read_bytes(size)
    elif fmt == "xlsx":
        frame, report = _read_xlsx(path, layer, crs, columns, limits, read_rows)
        read_rows(len(frame), len(frame))
    else:
        read_bytes(0)
        frame, report = _read_spatial(path, fmt, layer, encoding, crs, limits)
        read_bytes(size)
    geoms, repaired = repair_polygons(frame.geometry.to_numpy())
    if repaired:
        frame = frame.set_geometry(geo_series(geoms, DEFAULT_CRS).set_axis(frame.index))
    report.repaired_geometries = repaired
    report.geometry_types, report.null_geometries, report.empty_geometries = geometry_counts(geoms)
    report.rows = len(frame)
    report.columns = [str(c) for c in frame.columns if c != frame.geometry.name]
    return frame, report


@dataclass(frozen=True)
class GeometryColumns:
    """The user's choice of geometry columns for a text table (None: detect by name)."""

    wkt: str | None
    lat: str | None
    lon: str | None


def _read_csv(
    path: Path,
    encoding: str | None,
    crs: str | None,
    columns: GeometryColumns,
    limits: ReadLimits,
    dialect: CsvDialect,
    on_bytes: Callable[[int], None],
) -> tuple[gpd.GeoDataFrame, SourceReport]:
    parsed = read_csv_table(path, encoding, limits, dialect, on_bytes=on_bytes)
    geometry = build_geometry(
        parsed.table,
        path=str(path),
        crs=crs,
        wkt_column=columns.wkt,
        lat_column=columns.lat,
        lon_column=columns.lon,
    )
    frame = to_geodataframe(parsed.table, geometry.geometry, parsed.row_numbers)
    report = SourceReport(
        str(path),
        "csv",
        encoding=parsed.encoding.encoding,
        encoding_source=parsed.encoding.source,
        delimiter=parsed.split.delimiter,
        crs=geometry.crs,
        geometry_source=geometry.source,
        geometry_columns=geometry.columns,
    )
    problems = _merge(parsed.problems, parsed.rejected_rows, geometry.bad, parsed.row_numbers)
    report.problems = add_lines(problems, path, parsed)
    return frame, report


def _read_xlsx(
    path: Path,
    sheet_name: str | None,
    crs: str | None,
    columns: GeometryColumns,
    limits: ReadLimits,
    on_rows: Callable[[int, int | None], None],
) -> tuple[gpd.GeoDataFrame, SourceReport]:
    sheet = read_sheet(path, sheet_name, limits, on_rows=on_rows)
    geometry = build_geometry(
        sheet.table,
        path=str(path),
        crs=crs,
        wkt_column=columns.wkt,
        lat_column=columns.lat,
        lon_column=columns.lon,
    )
    frame = to_geodataframe(sheet.table, geometry.geometry, sheet.row_numbers)
    report = SourceReport(
        str(path),
        "xlsx",
        layer=sheet.sheet,
        crs=geometry.crs,
        geometry_source=geometry.source,
        geometry_columns=geometry.columns,
        number_columns={
            name: {"count": count, "example": example}
            for name, (count, example) in sheet.numbers.items()
        },
    )
    problems = _merge(sheet.problems, sheet.rejected_rows, geometry.bad, sheet.row_numbers)
    # A sheet row is the XLSX counterpart of a CSV line.
    report.problems = [
        replace(p, line=int(sheet.record_lines[p.row - 1]))
        if p.row is not None and p.line is None
        else p
        for p in problems
    ]
    return frame, report


def _read_spatial(
    path: Path,
    fmt: SourceFormat,
    layer: str | None,
    encoding: str | None,
    crs: str | None,
    limits: ReadLimits,
) -> tuple[gpd.GeoDataFrame, SourceReport]:
    if fmt == "shapefile" and path.suffix.lower() == ".shp":
        spatial = read_shapefile(path, path, encoding, crs)
    elif fmt == "shapefile":
        spatial = read_zipped_shapefile(path, layer, encoding, crs, limits)
    else:
        spatial = read_ogr(path, layer, encoding, crs)
    frame = _spatial_frame(spatial)
    frame, unusable = _drop_bad_coordinates(frame, spatial.crs)
    report = SourceReport(
        str(path),
        fmt,
        layer=spatial.layer,
        encoding=spatial.encoding,
        encoding_source=spatial.encoding_source,
        crs=spatial.crs,
        geometry_source="native" if frame.geometry.notna().any() or spatial.crs else None,
        problems=[*spatial.problems, *unusable],
        warnings=spatial.warnings,
    )
    if len(frame) == 0:
        report.problems.append(SourceProblem("the layer holds no records"))
    return frame, report


def _spatial_frame(spatial: SpatialRead, first: int = 1) -> gpd.GeoDataFrame:
    """The layer's frame with its geometry named ``geometry`` (missing where it has none)
    and its rows numbered from ``first`` (a part's first feature)."""
    frame = spatial.frame
    if not isinstance(frame, gpd.GeoDataFrame) or frame.geometry.name is None:
        empty = geo_series(np.full(len(frame), None, dtype=object), DEFAULT_CRS)
        frame = gpd.GeoDataFrame(frame, geometry=empty.set_axis(frame.index), crs=DEFAULT_CRS)
    elif frame.geometry.name != "geometry":
        frame = frame.rename_geometry("geometry")
    frame.index = pd.RangeIndex(first, first + len(frame), name="row")
    return frame


def _drop_bad_coordinates(
    frame: gpd.GeoDataFrame, crs: str | None
) -> tuple[gpd.GeoDataFrame, list[SourceProblem]]:
    """Native geometries with a NaN, infinite or out-of-range coordinate (once in EPSG:4326)
    become missing, each reported with its row and the start of its WKT."""
    geoms = np.asarray(frame.geometry.values)
    not_finite, outside = bad_coordinates(geoms)
    if not_finite.size == 0 and outside.size == 0:
        return frame, []
    after = "" if crs in (None, DEFAULT_CRS) else f" after reprojection from {crs}"
    problems = [
        SourceProblem(
            message + after,
            row=int(frame.index[position]),
            column="geometry",
            value=shapely.to_wkt(geoms[position], rounding_precision=6)[:_WKT_PREVIEW],
        )
        for positions, message in ((not_finite, NOT_FINITE), (outside, OUTSIDE_WGS84))
        for position in positions.tolist()
    ]
    geoms = geoms.copy()
    geoms[np.concatenate([not_finite, outside])] = None
    frame = frame.set_geometry(geo_series(geoms, DEFAULT_CRS).set_axis(frame.index))
    problems.sort(key=lambda p: p.row or 0)
    return frame, problems


def _merge(
    problems: list[SourceProblem],
    rejected: dict[int, SourceProblem],
    bad: list[BadValues],
    row_numbers: np.ndarray,
) -> list[SourceProblem]:
    """All problems, file-level first, then by row: rejected rows and geometry values."""
    by_row: list[SourceProblem] = list(rejected.values())
    for item in bad:
        rows = row_numbers[item.positions].tolist()
        by_row.extend(
            SourceProblem(item.message, row=row, column=item.column, value=value)
            for row, value in zip(rows, item.values, strict=True)
        )
    by_row.sort(key=lambda p: p.row or 0)
    return [*problems, *by_row]
