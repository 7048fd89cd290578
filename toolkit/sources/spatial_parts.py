"""Shapefile and GeoPackage layers in parts by feature ranges, each read alone.

What reading the whole layer decides once (the layer, the text encoding, the coordinate
reference system and the problems that belong to the file) is decided here once, without
reading a feature; each part is then read by pyogrio with ``skip_features`` and
``max_features`` (here or on a Dask worker), reprojected and checked on its own, its rows
numbered as the file's (the part's first feature is row ``skip + 1``). Shapefile seeks to a
part's first feature through the .shx; GeoPackage steps over the rows before it in SQLite
(measured at 1,000,000 parcels: a last quarter read in the CPU time of the first for the
Shapefile, 0.12 s more for the GeoPackage). A zipped Shapefile is extracted once, with the
checks of :func:`~toolkit.sources.archive.extracted_zip`, into the job's folder, where the
parts (and a local cluster's workers) read it; through ``/vsizip/`` every part would
inflate the zip from its start again (the last quarter cost 0.35 s more CPU than the first).

A part holding curved geometries has them made straight, as the whole read does, and
counts them for the report's one warning. Anything out of the ordinary (a .prj GDAL or
PROJ cannot read, a layer of no features, a file whose name says another format) is left
to the whole read, which says what it says about it: ``None`` from
:func:`plan_spatial_parts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import geopandas as gpd
import pyogrio

from toolkit.sources.archive import extract_zip
from toolkit.sources.encoding import check_encoding
from toolkit.sources.read import _drop_bad_coordinates, _spatial_frame
from toolkit.sources.report import ReadLimits, SourceFormat, SourceProblem, SourceReport
from toolkit.sources.spatial import (
    SHAPEFILE_PARTS,
    FeatureRange,
    SpatialRead,
    _choose_layer,
    _finish_crs,
    _layer_names,
    _prj_not_text,
    _prj_problem,
    _read_layer,
    _shapefile_encoding,
    _sidecar,
)


@dataclass(frozen=True)
class SpatialPart:
    """A feature range of a Shapefile or GeoPackage layer and what reading it needs
    (picklable, so a Dask worker reads it itself)."""

    source: str  # the .shp (a zip's, extracted in the job's folder) or the .gpkg
    layer: str | None  # a GeoPackage's layer; None for a Shapefile
    encoding: str | None  # what GDAL is told (None: what the file declares)
    crs: str | None  # --crs, for a layer without one
    shown: str  # the file messages name
    label: str | None  # the source's CRS as the report names it
    rows: FeatureRange


@dataclass(frozen=True)
class SpatialPlan:
    """The report of a layer before any feature is read, and its parts."""

    report: SourceReport
    parts: list[SpatialPart]


def plan_spatial_parts(
    path: Path,
    fmt: SourceFormat,
    folder: Path,
    chunk_rows: int,
    *,
    layer: str | None,
    encoding: str | None,
    crs: str | None,
    limits: ReadLimits,
) -> SpatialPlan | None:
    """The parts of ``chunk_rows`` features of the layer at ``path``, or None where the
    whole read must decide (see the module's docstring). A zip is extracted under
    ``folder`` (the caller removes it). Raises as the whole read would for a layer or
    encoding that is not there and a layer without a CRS when no ``crs`` is given."""
    suffix = path.suffix.lower()
    prj: Path | None = None
    if fmt == "gpkg" and suffix == ".gpkg":
        try:
            available = [str(name) for name in pyogrio.list_layers(path)[:, 0]]
        except pyogrio.errors.DataSourceError:
            return None
        chosen: str = _choose_layer(path, available, layer)
        decided = check_encoding(encoding, str(path)) if encoding else None
        source, gdal_layer, gdal_encoding = path, chosen, decided
        read_encoding: str | None = decided or "utf-8"
        spatial = SpatialRead(
            gpd.GeoDataFrame(), chosen, read_encoding, "given" if decided else "default", None
        )
    elif fmt == "shapefile" and suffix in (".shp", ".zip", ".shz"):
        if suffix == ".shp":
            shp, chosen = path, path.stem
        else:
            root = folder / "zip"
            root.mkdir(parents=True, exist_ok=True)
            extract_zip(path, SHAPEFILE_PARTS, limits, root)
            shapefiles = sorted(p for p in root.rglob("*") if p.suffix.lower() == ".shp")
            if not shapefiles:
                return None
            layers = _layer_names(shapefiles, root.resolve())
            chosen = _choose_layer(path, list(layers), layer)
            shp = layers[chosen]
        decided_text, how, gdal_encoding = _shapefile_encoding(shp, path, encoding)
        prj = _sidecar(shp, ".prj")
        if prj is not None and (_prj_not_text(prj) or _prj_problem(prj) is not None):
            return None
        source, gdal_layer = shp, None
        spatial = SpatialRead(gpd.GeoDataFrame(), chosen, decided_text, how, None)
    else:
        return None
    try:
        info = pyogrio.read_info(
            source, layer=gdal_layer, encoding=gdal_encoding, force_feature_count=True
        )
    except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError, UnicodeDecodeError):
        return None
    count = int(info["features"])
    if count <= 0 or (info["crs"] is None and prj is not None):
        return None
    # The CRS is decided as the whole read decides it, on a frame of no rows: the same
    # label, the same note on an ignored --crs, the same error when there is none.
    problems: list[SourceProblem] = []
    empty = gpd.GeoDataFrame(geometry=gpd.GeoSeries([], crs=info["crs"]))
    _, label = _finish_crs(path, empty, crs, problems)
    parts = [
        SpatialPart(
            str(source),
            gdal_layer,
            gdal_encoding,
            crs,
            str(path),
            label,
            FeatureRange(start, min(chunk_rows, count - start)),
        )
        for start in range(0, count, chunk_rows)
    ]
    report = SourceReport(
        str(path),
        fmt,
        rows=count,
        columns=[str(name) for name in info["fields"]],
        layer=spatial.layer,
        encoding=spatial.encoding,
        encoding_source=spatial.encoding_source,
        crs=label,
        geometry_source="native",  # a CRS is known: so says the whole read
        problems=problems,
    )
    return SpatialPlan(report, parts)


def read_spatial_frame(
    part: SpatialPart,
) -> tuple[gpd.GeoDataFrame, list[SourceProblem], int]:
    """The frame of one part (in EPSG:4326, index ``row``: the file's row numbers), the
    problems of its rows (shapes GEOS refuses, coordinates that are not finite or not on
    the earth) and how many curved geometries were made straight. Geometry repair and
    counts are the caller's, as for every format."""
    shown = Path(part.shown)
    frame, problems, curved = _read_layer(
        Path(part.source), part.layer, part.encoding, shown, part.rows
    )
    frame, _ = _finish_crs(shown, frame, part.crs, [])
    frame = _spatial_frame(
        SpatialRead(frame, part.layer, part.encoding, None, part.label), first=part.rows.skip + 1
    )
    frame, unusable = _drop_bad_coordinates(frame, part.label)
    return frame, [*problems, *unusable], curved
