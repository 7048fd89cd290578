"""Spatial exports of reports whose rows carry asset geometry: GeoPackage, GeoJSON and
GeoParquet, each in EPSG:4326 with the CRS written where QGIS and ArcGIS read it.

Columns are the fields' keys (short, no spaces: what GIS attribute tables want);
timestamps stay UTC moments (each format stores the zone), dates stay dates. The
geometry is the asset's own (parcel polygons, lines, points), not a centroid.
pyogrio writes GeoPackage and GeoJSON to a file (GDAL needs one), which is then
streamed to ``out``; GeoParquet is written by geopandas straight to ``out``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import geopandas as gpd
import pyarrow as pa
import pyogrio
import shapely

from toolkit.errors import OptionError
from toolkit.reports.snapshot import Snapshot
from toolkit.scratch import scratch_folder

CRS = "EPSG:4326"
SPATIAL_FORMATS = ("gpkg", "geojson", "parquet")
DRIVERS = {"gpkg": "GPKG", "geojson": "GeoJSON"}


def layer_name(header: Mapping[str, Any]) -> str:
    """The report's name as a layer name: ``impacted_assets``."""
    return re.sub(r"[^a-z0-9]+", "_", str(header["name"]).lower()).strip("_") or "report"


def frame(snapshot: Snapshot) -> gpd.GeoDataFrame:
    """Every row with its geometry (held whole: GIS layers of assets are what a council
    has, not the million-row item lists)."""
    batches = list(snapshot.batches(geometry=True))
    schema = snapshot.file.schema_arrow
    columns = [f.key for f in snapshot.spec] + ["geometry"]
    table = (
        pa.Table.from_batches(batches)
        if batches
        else pa.Table.from_pylist([], schema=pa.schema([schema.field(c) for c in columns]))
    )
    data = table.drop(["geometry"]).to_pandas()
    geometry = shapely.from_wkb(table.column("geometry").to_numpy(zero_copy_only=False))
    return gpd.GeoDataFrame(data, geometry=geometry, crs=CRS)


def write_spatial(
    snapshot: Snapshot, header: Mapping[str, Any], out: BinaryIO, format: str
) -> None:
    """Write the rows and their geometry as ``format`` (one of SPATIAL_FORMATS)."""
    if not snapshot.has_geometry:
        raise OptionError(
            f"report {header['name']!r} has no asset geometry, so it has no {format} "
            "export; fetch it as json, csv, csv-excel, xlsx or html"
        )
    layer = frame(snapshot)
    if format == "parquet":
        layer.to_parquet(out, index=False)
        return
    with scratch_folder("toolkit-report-") as folder:
        path = Path(folder) / f"{layer_name(header)}.{format}"
        pyogrio.write_dataframe(layer, path, layer=layer_name(header), driver=DRIVERS[format])
        with path.open("rb") as handle:
            shutil.copyfileobj(handle, out)
