"""What a read found: the report and its per-row problems, and the limits a read obeys."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

SourceFormat = Literal["csv", "shapefile", "xlsx", "geojson", "gpkg"]
EncodingSource = Literal["bom", "cpg", "detected", "given", "default", "ldid"]

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class ReadLimits:
    """Bounds that keep a hostile or mistaken file from exhausting the machine.

    - ``max_file_bytes``: the file itself (CSV, zip, XLSX...) may not be larger.
    - ``max_uncompressed_bytes``: total declared size of the zip entries that are extracted.
    - ``max_compression_ratio``: uncompressed/compressed size of any zip entry over 1 MiB
      (deflate cannot exceed about 1032:1; zip bombs sit near it, real data well below).
    - ``max_zip_entries``: entries in a zip's central directory.
    - ``max_field_bytes``: one CSV/XLSX cell; longer values reject their row.
    """

    max_file_bytes: int = 4 * GIB
    max_uncompressed_bytes: int = 8 * GIB
    max_compression_ratio: float = 500.0
    max_zip_entries: int = 10_000
    max_field_bytes: int = 8 * MIB


@dataclass(frozen=True)
class SourceProblem:
    """One thing wrong with part of a source: a row, a header cell or the file as a whole.

    ``row`` is the 1-based data-record number (the GeoDataFrame index), ``line`` the
    physical line (CSV) or sheet row (XLSX); either is None where it does not apply.
    """

    message: str
    row: int | None = None
    line: int | None = None
    column: str | None = None
    value: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape: ``{row, line, column, value, message}``."""
        return {
            "row": self.row,
            "line": self.line,
            "column": self.column,
            "value": self.value,
            "message": self.message,
        }


@dataclass
class SourceReport:
    """What was read from one source and how; ``to_dict()`` gives the camelCase JSON."""

    path: str
    format: SourceFormat
    layer: str | None = None
    rows: int = 0
    columns: list[str] = field(default_factory=list)
    encoding: str | None = None
    encoding_source: EncodingSource | None = None
    delimiter: str | None = None
    crs: str | None = None
    geometry_source: str | None = None
    # Columns of a table the geometry was made from (they are the geometry, not data).
    geometry_columns: list[str] = field(default_factory=list)
    geometry_types: dict[str, int] = field(default_factory=dict)
    repaired_geometries: int = 0
    null_geometries: int = 0
    empty_geometries: int = 0
    problems: list[SourceProblem] = field(default_factory=list)
    # What the read did to the data that its user should know (curves made straight,
    # text fields that came as numbers), each naming the file.
    warnings: list[str] = field(default_factory=list)
    # XLSX: the columns with cells typed as numbers, {column: {count, example}}; a rule
    # that reads such a column as text warns (leading zeros do not survive a number).
    number_columns: dict[str, dict[str, Any]] = field(default_factory=dict)

    def row_problems(self) -> list[dict[str, Any]]:
        """Every problem of a row, as an import rejects it: ``{row, column, value, reason}``.

        Rows the reader left out, and rows it kept whose geometry could not be made (bad
        WKT, coordinates outside EPSG:4326): inspect shows those rows, an import rejects them.
        """
        return [
            {"row": p.row, "column": p.column, "value": p.value, "reason": p.message}
            for p in self.problems
            if p.row is not None
        ]

    def record_count(self, kept: pd.Index) -> int:
        """Records of the source: the rows ``kept`` (the frame's index, unique row numbers)
        and those the reader left out (a wrong number of values, an over-long field)."""
        problem_rows = np.unique([p.row for p in self.problems if p.row is not None])
        if problem_rows.size == 0:  # the usual case: no need to look through a million rows
            return len(kept)
        left_out = ~np.isin(problem_rows, kept.to_numpy())
        return len(kept) + int(left_out.sum())

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready camelCase keys."""
        plain = asdict(self)
        plain["problems"] = [problem.to_dict() for problem in self.problems]
        return {_camel(key): value for key, value in plain.items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
