"""Reading every source a data officer brings: CSV, zipped Shapefile, XLSX, GeoJSON, GeoPackage.

``read_source(path)`` gives a GeoDataFrame in EPSG:4326 (index ``row`` = 1-based data
record number in the source) and a :class:`SourceReport` of what was read and what was
wrong with it.
"""

from __future__ import annotations

from toolkit.errors import SourceError
from toolkit.sources.read import read_source, source_format
from toolkit.sources.report import ReadLimits, SourceProblem, SourceReport

__all__ = [
    "ReadLimits",
    "SourceError",
    "SourceProblem",
    "SourceReport",
    "read_source",
    "source_format",
]
