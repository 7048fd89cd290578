"""Reading address-point files (G-NAF-style or OpenAddresses-style) into one table.

A file is CSV (``.csv``/``.psv``/``.txt``, any delimiter), GeoPackage, GeoJSON or Parquet
(GeoParquet, or plain Parquet with longitude/latitude columns). Its columns are found by
name, case and spacing ignored (``ROLES``); ``columns`` overrides any of them
(``{"number": "HOUSE_NO"}``). An address is built from its components (unit, number,
street, locality, state, postcode) or, without them, taken from a full-address column.

The result has one row per usable point: ``id``, ``name`` (the address the matcher
reads), ``friendly`` (the address as the file writes it, else ``name``), ``type`` (the
feature, see ``toolkit.geocoding.features``) and a point ``geometry`` in EPSG:4326. Rows
without a usable point or address are left out and counted, with the first few named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from toolkit.errors import OptionError, SourceError
from toolkit.geocoding.features import gazetteer_features
from toolkit.progress import Progress, no_progress
from toolkit.sources import read_source
from toolkit.sources.tabular import LAT_NAMES, LON_NAMES

# Column roles and the headings that fill them, best first (compared lower-case, with
# spaces, dashes and underscores removed).
ROLES: dict[str, tuple[str, ...]] = {
    "id": ("address_detail_pid", "gnaf_pid", "address_pid", "pid", "address_id", "id", "hash"),
    "label": ("address_label", "full_address", "address", "label", "display_name"),
    "flat_type": ("flat_type", "unit_type"),
    "unit": ("flat_number", "unit", "unit_number", "flat"),
    "number": ("number_first", "number", "house_number", "housenumber", "street_number"),
    "number_last": ("number_last",),
    "street_name": ("street_name", "street"),
    "street_type": ("street_type", "street_type_code"),
    "street_suffix": ("street_suffix", "street_suffix_code"),
    "locality": ("locality_name", "locality", "suburb", "city", "town"),
    "state": ("state", "state_abbreviation", "region"),
    "postcode": ("postcode", "post_code", "postal_code", "zip", "zipcode"),
    "feature": ("feature_type", "feature", "geocode_type", "geocode_type_code", "type"),
}
COMPONENTS = ("unit", "number", "street_name", "locality")
SHOWN_PROBLEMS = 5
PARQUET_SUFFIXES = (".parquet", ".geoparquet", ".pq")


@dataclass
class PointsReport:
    """What reading the files gave: rows read and kept, the columns used per role, and
    rows left out (their count by reason, the first few by file and row)."""

    files: list[str] = field(default_factory=list)
    read: int = 0
    kept: int = 0
    columns: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def skip(self, reason: str, where: Sequence[str]) -> None:
        if not len(where):
            return
        self.skipped[reason] = self.skipped.get(reason, 0) + len(where)
        room = SHOWN_PROBLEMS - len(self.examples)
        self.examples.extend(f"{w}: {reason}" for w in where[: max(room, 0)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "read": self.read,
            "kept": self.kept,
            "columns": dict(self.columns),
            "skipped": dict(self.skipped),
            "examples": list(self.examples),
        }


def read_points(
    paths: Sequence[str | Path],
    *,
    columns: Mapping[str, str] | None = None,
    progress: Progress = no_progress,
) -> tuple[gpd.GeoDataFrame, PointsReport]:
    """Every usable address point of ``paths``, one table (see the module docstring)."""
    unknown = sorted(set(columns or {}) - set(ROLES))
    if unknown:
        raise OptionError(
            f"unknown column role(s) {', '.join(map(repr, unknown))}; roles: {', '.join(ROLES)}"
        )
    if not paths:
        raise OptionError("no address-point file given")
    report = PointsReport()
    frames = []
    for path in map(Path, paths):
        frame, geometry, where = _read_one(path, report, progress)
        frames.append(_standard(frame, geometry, where, path, dict(columns or {}), report))
    points = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    report.kept = len(points)
    if not len(points):
        raise SourceError(
            f"{', '.join(report.files)}: no usable address point (a point and an address) in "
            f"{report.read:,} rows; "
            + "; ".join(f"{count:,} {reason}" for reason, count in report.skipped.items())
        )
    return gpd.GeoDataFrame(points, geometry="geometry", crs=4326), report


def _read_one(
    path: Path, report: PointsReport, progress: Progress
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The file's columns as text, its points (None where missing) and each row's name
    for messages (``file row N``)."""
    report.files.append(str(path))
    if path.suffix.lower() in PARQUET_SUFFIXES:
        frame, geometry = _read_parquet(path)
        rows = np.arange(1, len(frame) + 1)
    else:
        read, source = read_source(path, progress=progress)
        for problem in source.problems:
            # Bad coordinates leave the row without a point; it is counted below.
            if problem.row is None:
                report.examples.append(f"{path.name}: {problem.message}")
        geometry = np.asarray(read.geometry.values, dtype=object)
        frame = pd.DataFrame(read.drop(columns="geometry"))
        rows = read.index.to_numpy()
    report.read += len(frame)
    where = np.char.add(f"{path.name} row ", rows.astype(str)).astype(object)
    return frame.reset_index(drop=True), geometry, where


def _read_parquet(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """A GeoParquet file's geometry, or a plain one's longitude/latitude columns."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise SourceError(f"{path}: cannot read it as Parquet: {exc}") from exc
    if b"geo" in (table.schema.metadata or {}):
        frame = gpd.read_parquet(path)
        if frame.crs is not None and frame.crs.to_epsg() != 4326:
            frame = frame.to_crs(4326)
        geometry = np.asarray(frame.geometry.values, dtype=object)
        return pd.DataFrame(frame.drop(columns=frame.geometry.name)), geometry
    frame = table.to_pandas()
    lat = _heading(frame.columns, LAT_NAMES)
    lon = _heading(frame.columns, LON_NAMES)
    if lat is None or lon is None:
        raise SourceError(
            f"{path}: no geometry and no latitude/longitude columns; its columns are: "
            + ", ".join(map(str, frame.columns))
        )
    y = pd.to_numeric(frame[lat], errors="coerce").to_numpy(dtype=float)
    x = pd.to_numeric(frame[lon], errors="coerce").to_numpy(dtype=float)
    usable = np.isfinite(x) & np.isfinite(y) & (np.abs(y) <= 90) & (np.abs(x) <= 180)
    geometry = np.full(len(frame), None, dtype=object)
    geometry[usable] = shapely.points(x[usable], y[usable])
    return frame, geometry


def _key(heading: object) -> str:
    return "".join(ch for ch in str(heading).lower() if ch.isalnum())


def _heading(headings: Sequence[object] | pd.Index, names: Sequence[str]) -> str | None:
    by_key = {_key(h): str(h) for h in headings}
    for name in names:
        if _key(name) in by_key:
            return by_key[_key(name)]
    return None


def _standard(
    frame: pd.DataFrame,
    geometry: np.ndarray,
    where: np.ndarray,
    path: Path,
    given: dict[str, str],
    report: PointsReport,
) -> pd.DataFrame:
    """One file's rows as the standard table, bad rows left out and counted."""
    headings = [str(c) for c in frame.columns]
    found: dict[str, str] = {}
    for role, names in ROLES.items():
        if role in given:
            heading = _heading(headings, [given[role]])
            if heading is None:
                raise SourceError(
                    f"{path}: no column {given[role]!r} for {role}; its columns are: "
                    + ", ".join(headings)
                )
            found[role] = heading
        else:
            heading = _heading(headings, names)
            if heading is not None and heading not in found.values():
                found[role] = heading
    report.columns.update(found)
    if not any(role in found for role in COMPONENTS) and "label" not in found:
        raise SourceError(
            f"{path}: no address columns: need a street, number or locality column (e.g. "
            "NUMBER_FIRST, STREET_NAME, LOCALITY_NAME) or a full-address column (ADDRESS); "
            f"its columns are: {', '.join(headings)}"
        )
    text = {role: _text(frame[heading]) for role, heading in found.items()}
    name = _address(text, len(frame))
    label = text.get("label")
    friendly = name if label is None else pc.if_else(pc.is_null(label), name, label)
    has_point = ~shapely.is_missing(geometry)
    has_point[has_point] = ~shapely.is_empty(geometry[has_point])
    points = np.full(len(frame), None, dtype=object)
    points[has_point] = shapely.point_on_surface(geometry[has_point])
    has_name = pc.is_valid(name).to_numpy(zero_copy_only=False)
    report.skip("no point (missing or unusable coordinates)", where[~has_point])
    report.skip("no address", where[has_point & ~has_name])
    keep = has_point & has_name
    ids = text.get("id")
    generated = pa.array(
        np.char.add(f"{path.stem}:", np.arange(1, len(frame) + 1).astype(str)),
        type=pa.large_string(),
    )
    id_values = generated if ids is None else pc.if_else(pc.is_null(ids), generated, ids)
    has_number = _present(text.get("number"), len(frame))
    has_street = _present(text.get("street_name"), len(frame))
    feature_column = (
        pd.Series(text["feature"], dtype="str")
        if "feature" in text
        else pd.Series(np.full(len(frame), None, dtype=object), dtype="str")
    )
    features = gazetteer_features(feature_column, has_number, has_street)
    mask = pa.array(keep)
    return pd.DataFrame(
        {
            "id": pd.Series(id_values.filter(mask), dtype="str"),
            "name": pd.Series(name.filter(mask), dtype="str"),
            "friendly": pd.Series(friendly.filter(mask), dtype="str"),
            "type": pd.Series(features[keep], dtype="str"),
            "geometry": points[keep],
        }
    )


def _text(values: pd.Series) -> pa.Array:
    """A column as trimmed text, blank as null; whole floats (``12.0``) as integers."""
    if pd.api.types.is_float_dtype(values.dtype):
        present = values.dropna()
        if (present == present.round()).all():
            values = values.astype("Int64")
    array = pa.array(values.astype("str").array, from_pandas=True)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    text = pc.utf8_trim_whitespace(array.cast(pa.large_string()))
    return pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.large_string()), text)


def _text_scalar(value: str) -> pa.Scalar:
    return pa.scalar(value, pa.large_string())


def _present(values: pa.Array | None, n: int) -> np.ndarray:
    if values is None:
        return np.zeros(n, dtype=bool)
    present: np.ndarray = pc.is_valid(values).to_numpy(zero_copy_only=False)
    return present


def _join(parts: Sequence[pa.Array | None], separator: str) -> pa.Array:
    """The present values of each row joined by ``separator`` (null when none is)."""
    present = [p for p in parts if p is not None]
    if len(present) == 1:
        return present[0]
    # Missing parts as "" and the doubled separators removed: pyarrow 26's own
    # ``null_handling="skip"`` drops a trailing row whose parts are all null.
    joined = pc.binary_join_element_wise(
        *(pc.fill_null(p, "") for p in present), _text_scalar(separator)
    )
    doubled = re.escape(separator) + "{2,}"
    joined = pc.replace_substring_regex(joined, doubled, separator)
    joined = pc.utf8_trim(joined, separator)
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.large_string()), joined)


def _address(text: dict[str, pa.Array], n: int) -> pa.Array:
    """``[UNIT u ]number[-last] street type suffix locality state postcode``, from the
    component columns; without any, the full-address column."""
    if not any(role in text for role in COMPONENTS):
        return text["label"]
    unit = text.get("unit")
    if unit is not None:
        kind = text.get("flat_type")
        # G-NAF's flat types (UNIT, FLAT, SHOP, SUITE...) are unit words to the matcher.
        prefix = pa.array(np.full(n, "UNIT"), type=pa.large_string())
        if kind is not None:
            prefix = pc.if_else(pc.is_null(kind), prefix, kind)
        unit = pc.if_else(
            pc.is_null(unit), unit, pc.binary_join_element_wise(prefix, unit, _text_scalar(" "))
        )
    number = text.get("number")
    last = text.get("number_last")
    if number is not None and last is not None:
        ranged = pc.binary_join_element_wise(number, last, _text_scalar("-"))
        number = pc.if_else(pc.is_null(last), number, ranged)
    joined = _join(
        [
            unit,
            number,
            text.get("street_name"),
            text.get("street_type"),
            text.get("street_suffix"),
            text.get("locality"),
            text.get("state"),
            text.get("postcode"),
        ],
        " ",
    )
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.large_string()), joined)
