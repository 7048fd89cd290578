"""Reading spatial formats through pyogrio: zipped or plain Shapefile, GeoJSON, GeoPackage.

Shapefiles get the care GDAL cannot give on its own: without a ``.cpg`` GDAL assumes
Latin-1, so the ``.dbf`` text is checked for UTF-8 first; without a ``.prj`` the
coordinates mean nothing, so the user must say what they are.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyogrio
import shapely
from pyproj import CRS
from pyproj.exceptions import CRSError

from toolkit.errors import SourceError
from toolkit.scratch import scratch_folder
from toolkit.sources.archive import extracted_zip
from toolkit.sources.curves import can_linearise, count_curves, is_curve_error, linear_geometries
from toolkit.sources.encoding import check_encoding, guess_single_byte
from toolkit.sources.report import EncodingSource, ReadLimits, SourceProblem
from toolkit.sources.tabular import crs_label, parse_crs, to_wgs84

SHAPEFILE_PARTS = frozenset({".shp", ".shx", ".dbf", ".prj", ".cpg"})
# Enough rows with non-ASCII text to tell UTF-8 from a single-byte code page.
_DBF_SAMPLE_ROWS = 20_000
_PRJ_PREVIEW = 200
_PRJ_BYTES = 64 * 1024  # a real .prj is a few hundred bytes


@dataclass
class SpatialRead:
    """A spatial layer in EPSG:4326 and what was decided reading it."""

    frame: gpd.GeoDataFrame
    layer: str | None
    encoding: str | None
    encoding_source: EncodingSource | None
    crs: str | None
    problems: list[SourceProblem] = field(default_factory=list)
    # What was done to the data that its user should know (curves made straight).
    warnings: list[str] = field(default_factory=list)


def _sidecar(shp: Path, suffix: str) -> Path | None:
    """The file beside ``shp`` with ``suffix``, whatever the case of either extension."""
    for candidate in shp.parent.iterdir():
        if candidate.stem == shp.stem and candidate.suffix.lower() == suffix:
            return candidate
    return None


def dbf_text_encoding(dbf: Path) -> str:
    """Decide UTF-8 or a single-byte code page from the raw bytes of a .dbf's text fields."""
    with dbf.open("rb") as handle:
        head = handle.read(32)
        if len(head) < 32:
            return "utf-8"
        records = int.from_bytes(head[4:8], "little")
        header_length = int.from_bytes(head[8:10], "little")
        record_length = int.from_bytes(head[10:12], "little")
        descriptors = handle.read(max(header_length - 32, 0))
    text_columns: list[np.ndarray] = []
    names = b""  # field names are in the same encoding as the text
    offset = 1  # each record starts with its deletion flag
    for start in range(0, len(descriptors) - 31, 32):
        descriptor = descriptors[start : start + 32]
        if descriptor[0] == 0x0D:
            break
        names += descriptor[:11].split(b"\0", 1)[0]
        width = descriptor[16]
        if descriptor[11:12] in (b"C", b"M"):
            text_columns.append(np.arange(offset, offset + width))
        offset += width
    if not names.isascii():
        try:
            names.decode("utf-8")
        except UnicodeDecodeError:
            return guess_single_byte(names)
    size = dbf.stat().st_size
    records = min(records, max((size - header_length) // max(record_length, 1), 0))
    if not text_columns or records == 0 or record_length == 0:
        return "utf-8"
    mapped = np.memmap(dbf, dtype=np.uint8, mode="r", offset=header_length)
    data = mapped[: records * record_length].reshape(records, record_length)
    text = data[:, np.concatenate(text_columns)]
    non_ascii = np.flatnonzero((text >= 0x80).any(axis=1))[:_DBF_SAMPLE_ROWS]
    if non_ascii.size == 0:
        return "utf-8"  # plain ASCII reads the same either way
    sample = np.ascontiguousarray(text[non_ascii]).tobytes()
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        return guess_single_byte(sample)
    return "utf-8"


def _choose_layer(path: Path, available: list[str], layer: str | None) -> str:
    if layer is not None:
        if layer in available:
            return layer
        by_lower = {name.lower(): name for name in available}
        if layer.lower() in by_lower:
            return by_lower[layer.lower()]
        raise SourceError(
            f"{path}: no layer {layer!r}; pass --layer one of: {', '.join(available)}"
        )
    if len(available) == 1:
        return available[0]
    if not available:
        raise SourceError(f"{path}: holds no layers")
    raise SourceError(
        f"{path}: holds {len(available)} layers; pass --layer one of: {', '.join(available)}"
    )


def _layer_names(shapefiles: list[Path], root: Path) -> dict[str, Path]:
    stems = [shp.stem for shp in shapefiles]
    # The stem names a layer unless two folders hold the same one; then the relative path does.
    return {
        (
            shp.stem
            if stems.count(shp.stem) == 1
            else shp.relative_to(root).with_suffix("").as_posix()
        ): shp
        for shp in shapefiles
    }


def _finish_crs(
    path: Path, frame: gpd.GeoDataFrame, crs: str | None, problems: list[SourceProblem]
) -> tuple[gpd.GeoDataFrame, str | None]:
    """Set a missing CRS from ``crs`` (or refuse), and reproject to EPSG:4326."""
    source_crs = frame.crs
    if source_crs is None:
        if crs is None:
            raise SourceError(
                f"{path}: has no coordinate reference system (no .prj); pass --crs, "
                "e.g. --crs EPSG:7855 for GDA2020 / MGA zone 55"
            )
        source_crs = parse_crs(crs, str(path))
        frame = frame.set_crs(source_crs, allow_override=True)
    elif crs is not None and parse_crs(crs, str(path)) != source_crs:
        problems.append(
            SourceProblem(
                f"the source's own CRS {crs_label(source_crs)} was used; --crs {crs} ignored"
            )
        )
    label = crs_label(source_crs)
    if source_crs.to_epsg() != 4326:
        frame = to_wgs84(frame, str(path))
    return frame, label


@dataclass(frozen=True)
class FeatureRange:
    """Features ``skip`` to ``skip + count`` of a layer (pyogrio's ``skip_features`` and
    ``max_features``): a part of it, read alone. Shapefile and GeoPackage seek to the
    first (the .shx gives its offset; SQLite steps over the rows before it)."""

    skip: int
    count: int

    def options(self) -> dict[str, int]:
        return {"skip_features": self.skip, "max_features": self.count}


def _range_options(rows: FeatureRange | None) -> dict[str, int]:
    return {} if rows is None else rows.options()


def _read_layer(
    source: Path,
    layer: str | None,
    encoding: str | None,
    shown: Path,
    rows: FeatureRange | None = None,
) -> tuple[gpd.GeoDataFrame, list[SourceProblem], int]:
    """The layer (or its features ``rows``) as a GeoDataFrame, a problem for each record
    whose shape is not a geometry (left missing), and how many curved shapes were made
    straight. Errors name ``shown`` (the file the user gave), never the folder a zip was
    extracted to."""
    try:
        try:
            frame = pyogrio.read_dataframe(
                source, layer=layer, encoding=encoding, use_arrow=True, **_range_options(rows)
            )
            return frame, [], 0
        except shapely.errors.GEOSException:
            # A shape GDAL hands over but GEOS refuses (a ring that does not close): that
            # record is a problem, not the whole file.
            return (*_read_with_invalid_shapes(source, layer, encoding, rows), 0)
        except NotImplementedError as exc:
            if not is_curve_error(exc):
                raise
            return _read_linearised(source, layer, encoding, shown, rows)
    except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError) as exc:
        where = "" if source == shown else f"{source.name}: "
        detail = str(exc).replace(str(source.parent), "").replace(str(source), source.name)
        raise SourceError(f"{shown}: {where}cannot read: {detail}") from exc
    except UnicodeDecodeError as exc:  # pyogrio decodes names and values itself
        where = "" if source == shown else f"{source.name}: "
        raise SourceError(
            f"{shown}: {where}cannot read its text as {encoding or 'the encoding it declares'}: "
            f"{exc.reason} at byte {exc.start}; pass --encoding (e.g. windows-1252)"
        ) from exc


def _read_linearised(
    source: Path,
    layer: str | None,
    encoding: str | None,
    shown: Path,
    rows: FeatureRange | None = None,
) -> tuple[gpd.GeoDataFrame, list[SourceProblem], int]:
    """A layer (or its features ``rows``) with curves (arcs), each made of straight
    segments by GDAL."""
    given = _range_options(rows)
    meta, table = pyogrio.read_arrow(source, layer=layer, encoding=encoding, columns=[], **given)
    curved = count_curves(table.column(meta["geometry_name"] or "wkb_geometry"))
    if not can_linearise():
        raise SourceError(
            f"{shown}: holds {curved} curved geometries (arcs), which cannot be made straight "
            "here; convert them first: ogr2ogr -nlt CONVERT_TO_LINEAR out.gpkg in.gpkg"
        )
    with linear_geometries():
        frame = pyogrio.read_dataframe(
            source, layer=layer, encoding=encoding, use_arrow=False, **given
        )
    return frame, [], curved


def _read_with_invalid_shapes(
    source: Path, layer: str | None, encoding: str | None, rows: FeatureRange | None = None
) -> tuple[gpd.GeoDataFrame, list[SourceProblem]]:
    given = _range_options(rows)
    frame = pyogrio.read_dataframe(
        source, layer=layer, encoding=encoding, use_arrow=True, on_invalid="ignore", **given
    )
    meta, table = pyogrio.read_arrow(source, layer=layer, encoding=encoding, columns=[], **given)
    first = 1 if rows is None else rows.skip + 1
    wkb = table.column(meta["geometry_name"] or "wkb_geometry").to_numpy(zero_copy_only=False)
    had_shape = np.array([value is not None for value in wkb], dtype=bool)
    invalid = np.flatnonzero(had_shape & frame.geometry.isna().to_numpy())
    problems = [
        SourceProblem(
            "not a valid geometry (GEOS cannot build it)", row=int(i) + first, column="geometry"
        )
        for i in invalid.tolist()
    ]
    return frame, problems


def _prj_not_text(prj: Path) -> bool:
    data = prj.read_bytes()[:_PRJ_BYTES]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return b"\x00" in data


def _prj_problem(prj: Path, *, parsed: bool = True) -> str | None:
    """Why a .prj gives no coordinate reference system, in a line; None if PROJ reads it
    (and ``parsed``: a .prj both GDAL and PROJ read is no .prj problem)."""
    if _prj_not_text(prj):
        return "it is not text (bytes that are not UTF-8, or a NUL)"
    text = prj.read_bytes()[:_PRJ_BYTES].decode("utf-8").strip()
    if not text:
        return "it is empty"
    try:
        CRS.from_wkt(text)
    except CRSError as exc:
        return str(exc).splitlines()[0][:_PRJ_PREVIEW]
    return None if parsed else f"GDAL does not read it: {text[:80]!r}"


def _prj_error(shown: Path, prj: Path, problem: str) -> SourceError:
    # A .prj nobody can make sense of is not the same as none: say so, by name.
    return SourceError(
        f"{shown}: the .prj could not be understood: {prj.name}: {problem}; fix it, or pass "
        "--crs, e.g. --crs EPSG:7855"
    )


def _read_without_prj(
    shp: Path, encoding: str | None, shown: Path
) -> tuple[gpd.GeoDataFrame, list[SourceProblem]]:
    """Read ``shp`` as if it had no .prj (the user gave --crs for a broken one), without
    touching the user's files: its other parts are linked into a folder of their own."""
    with scratch_folder("toolkit-noprj-") as folder:
        for part in shp.parent.iterdir():
            if part.stem == shp.stem and part.suffix.lower() in SHAPEFILE_PARTS - {".prj"}:
                (Path(folder) / part.name).symlink_to(part.absolute())
        return _read_layer(Path(folder) / shp.name, None, encoding, shown)[:2]


def _shapefile_encoding(
    shp: Path, shown: Path, encoding: str | None
) -> tuple[str | None, EncodingSource | None, str | None]:
    """The encoding of a .shp's text, how it was decided, and what GDAL is told (None:
    GDAL honours the .cpg itself)."""
    cpg = _sidecar(shp, ".cpg")
    dbf = _sidecar(shp, ".dbf")
    source: EncodingSource | None
    if encoding is not None:
        decided: str | None = check_encoding(encoding, str(shown))
        source = "given"
    elif cpg is not None:
        declared = cpg.read_text(encoding="ascii", errors="replace").strip()
        decided, source = _cpg_codec(declared), "cpg"
    elif dbf is not None:
        decided, source = dbf_text_encoding(dbf), "detected"
    else:
        decided, source = None, None
    if dbf is None:
        raise SourceError(f"{shown}: the shapefile {shp.name} has no .dbf beside it")
    # GDAL honours a .cpg itself; otherwise it is told what was decided.
    return decided, source, None if source == "cpg" else decided


def read_shapefile(shp: Path, shown: Path, encoding: str | None, crs: str | None) -> SpatialRead:
    """One .shp with its sidecars; ``shown`` is the path to name in messages."""
    problems: list[SourceProblem] = []
    decided, source, gdal_encoding = _shapefile_encoding(shp, shown, encoding)
    prj = _sidecar(shp, ".prj")
    try:
        if prj is not None and _prj_not_text(prj):
            # GDAL and pyogrio fail in their own ways on such bytes: never hand it over.
            raise SourceError(f"{shown}: {prj.name} is not text")
        frame, shape_problems, _ = _read_layer(shp, None, gdal_encoding, shown)
        # GDAL reads some broken .prj files as no CRS at all...
        prj_problem = _prj_problem(prj, parsed=False) if frame.crs is None and prj else None
    except SourceError as exc:
        # ...and fails on others ("missing , or ]").
        prj_problem = _prj_problem(prj) if prj is not None else None
        if prj is None or prj_problem is None:
            raise
        if crs is None:
            raise _prj_error(shown, prj, prj_problem) from exc
        frame, shape_problems = _read_without_prj(shp, gdal_encoding, shown)
    if prj is not None and prj_problem is not None:
        if crs is None:
            raise _prj_error(shown, prj, prj_problem)
        problems.append(
            SourceProblem(
                f"the .prj could not be understood: {prj.name}: {prj_problem}; "
                f"--crs {crs} used instead"
            )
        )
    frame, label = _finish_crs(shown, frame, crs, problems)
    return SpatialRead(frame, shp.stem, decided, source, label, [*problems, *shape_problems])


def _cpg_codec(declared: str) -> str:
    """The Python codec a .cpg names ("UTF-8", "1252", "ANSI 1252", "88591"...)."""
    value = declared.upper().replace("ANSI", "").strip()
    aliases = {"65001": "utf-8", "UTF8": "utf-8", "88591": "latin-1", "8859_1": "latin-1"}
    if value in aliases:
        return aliases[value]
    if value.isdigit():
        value = f"cp{value}"
    try:
        return codecs.lookup(value).name
    except (LookupError, ValueError):  # ValueError: a NUL byte in the name
        return declared


def read_zipped_shapefile(
    path: Path, layer: str | None, encoding: str | None, crs: str | None, limits: ReadLimits
) -> SpatialRead:
    """A zip (``.zip``, ``.shp.zip``, ``.shz``) holding one or more shapefiles, in any folder."""
    with extracted_zip(path, SHAPEFILE_PARTS, limits) as root:
        shapefiles = sorted(p for p in root.rglob("*") if p.suffix.lower() == ".shp")
        if not shapefiles:
            raise SourceError(f"{path}: the zip holds no shapefile (.shp)")
        layers = _layer_names(shapefiles, root)
        chosen = _choose_layer(path, list(layers), layer)
        result = read_shapefile(layers[chosen], path, encoding, crs)
        result.layer = chosen
        return result


def read_ogr(path: Path, layer: str | None, encoding: str | None, crs: str | None) -> SpatialRead:
    """GeoJSON or GeoPackage: the named layer, or the only one."""
    try:
        available = [str(name) for name in pyogrio.list_layers(path)[:, 0]]
    except pyogrio.errors.DataSourceError as exc:
        raise SourceError(f"{path}: cannot open: {exc}") from exc
    chosen = _choose_layer(path, available, layer)
    decided = check_encoding(encoding, str(path)) if encoding else None
    frame, problems, curved = _read_layer(path, chosen, decided, path)
    frame, label = _finish_crs(path, frame, crs, problems)
    # Both formats are UTF-8 by definition (RFC 7946; SQLite text).
    read = SpatialRead(
        frame, chosen, decided or "utf-8", "given" if decided else "default", label, problems
    )
    if curved:
        read.warnings.append(curves_warning(str(path), curved))
    return read


def curves_warning(path: str, curved: int) -> str:
    """What the user is told of ``curved`` geometries of ``path`` made straight."""
    return (
        f"{path}: {curved} curved geometr{'y' if curved == 1 else 'ies'} made linear "
        "(any arcs approximated by straight segments)"
    )
