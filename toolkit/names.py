"""The library's allowed values, one home each: ``Literal`` types, read with ``get_args``.

Click choices, the server's checks and the OpenAPI document all take their sets from
here (``tests/test_names.py`` pins that they agree), so a value is added in one place.
Imports nothing of the toolkit: the command line reads these without loading pandas.
"""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

ImportType = Literal["item", "asset", "user"]
OverwriteRule = Literal["updateOnly", "insertOnly", "updateAndInsert", "deleteAndInsert"]
LookupMode = Literal["id", "code", "name", "contains", "soundex", "geo", "auto", "fuzzy"]
LookupOutput = Literal["asset", "id"]
Operator = Literal["gt", "gte", "lt", "lte", "eq"]
Order = Literal["id", "dateCreated", "dateModified"]
Direction = Literal["asc", "desc"]
FulltextOperator = Literal["contains", "startsWith", "equals"]
# The spec's four, the CSV for Excel (UTF-8 BOM, text kept as text; `--excel`), and the
# spatial exports of reports with asset geometry (GeoPackage, GeoJSON, GeoParquet).
ReportFormat = Literal["json", "csv", "csv-excel", "html", "xlsx", "gpkg", "geojson", "parquet"]
# What an import job counts, in the order every summary shows them. Each row of the file is
# exactly one of inserted, updated, unchanged, skipped or rejected, so those add up to
# ``read``; ``retired`` counts records already there (deleteAndInsert), not rows.
JobCount = Literal["read", "inserted", "updated", "unchanged", "skipped", "retired", "rejected"]
# A file's format: the API's import dataType, and the CLI's --format of what it reads.
DataType = Literal["csv", "zip", "xlsx", "geojson", "gpkg"]
# How an import's data travels in its JSON body.
DataEncoding = Literal["plain", "base64"]
# Where an import job and a report instance stand (spec 2.7 and 5).
JobStatus = Literal["NOT_STARTED", "RUNNING", "COMPLETE", "FAILED"]
ReportStatus = Literal["QUEUED", "RUNNING", "COMPLETED", "FAILED"]

IMPORT_TYPES: tuple[ImportType, ...] = get_args(ImportType)
OVERWRITE_RULES: tuple[OverwriteRule, ...] = get_args(OverwriteRule)
LOOKUP_MODES: tuple[LookupMode, ...] = get_args(LookupMode)
LOOKUP_OUTPUTS: tuple[LookupOutput, ...] = get_args(LookupOutput)
OPERATORS: tuple[Operator, ...] = get_args(Operator)
ORDER_COLUMNS: tuple[Order, ...] = get_args(Order)
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
FULLTEXT_OPERATORS: tuple[FulltextOperator, ...] = get_args(FulltextOperator)
REPORT_FORMATS: tuple[ReportFormat, ...] = get_args(ReportFormat)
JOB_COUNTS: tuple[JobCount, ...] = get_args(JobCount)
ROW_OUTCOMES: tuple[JobCount, ...] = ("inserted", "updated", "unchanged", "skipped", "rejected")
DATA_TYPES: tuple[DataType, ...] = get_args(DataType)
DATA_ENCODINGS: tuple[DataEncoding, ...] = get_args(DataEncoding)
JOB_STATUSES: tuple[JobStatus, ...] = get_args(JobStatus)
REPORT_STATUSES: tuple[ReportStatus, ...] = get_args(ReportStatus)


_Name = TypeVar("_Name", bound=str)


def member(value: str, allowed: tuple[_Name, ...]) -> _Name | None:
    """``value`` as one of ``allowed`` (so typed as its ``Literal``), or None if it is not."""
    for name in allowed:
        if name == value:
            return name
    return None
