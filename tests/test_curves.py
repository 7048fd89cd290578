"""GeoPackages with curved geometries (CircularString, CompoundCurve, CurvePolygon,
MultiSurface): read with the curves made linear by GDAL, and a warning naming the file
and the count, by `inspect` and `import` alike."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pyogrio.raw
import pytest
import shapely
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.sources import read_source
from toolkit.sources.chunks import read_chunks

DATA = Path(__file__).resolve().parent / "data"
RULES = Path(__file__).resolve().parent / "fixtures_rules"
# pyogrio's fixtures (see data/README.md): each one feature of a curve type.
FIXTURES = {"curve": "LineString", "curvepolygon": "Polygon", "multisurface": "MultiPolygon"}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _warning(path: Path, count: int) -> str:
    shapes = "geometry" if count == 1 else "geometries"
    return (
        f"Warning: {path}: {count} curved {shapes} made linear (any arcs approximated by "
        "straight segments)\n"
    )


def _arcs(path: Path) -> Path:
    """A GeoPackage of a half circle (radius 1 about 145, -37) and a straight line."""
    arc = struct.pack("<BII", 1, 8, 3) + struct.pack("<6d", 144, -37, 145, -36, 146, -37)
    line = struct.pack("<BII", 1, 2, 2) + struct.pack("<4d", 144, -38, 146, -38)
    pyogrio.raw.write(
        path,
        geometry=np.array([arc, line], dtype=object),
        field_data=[np.array(["ARC", "LINE"], dtype=object)],
        fields=["Code"],
        driver="GPKG",
        geometry_type="Unknown",
        crs="EPSG:4326",
    )
    return path


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_inspect_reads_pyogrios_curved_geopackages(name: str) -> None:
    path = DATA / f"{name}.gpkg"
    code, out, err = _run("--json", "inspect", str(path), "--head", "1")
    assert code == 0, err
    assert err == _warning(path, 1)
    report = json.loads(out)
    assert (report["rows"], report["geometryTypes"]) == (1, {FIXTURES[name]: 1})
    assert report["warnings"] == [_warning(path, 1)[len("Warning: ") : -1]]
    shape = shapely.from_wkt(report["head"][0]["geometry"])
    assert shape.geom_type == FIXTURES[name] and shape.is_valid


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_import_stores_pyogrios_curved_geopackages(tmp_path: Path, name: str) -> None:
    path = DATA / f"{name}.gpkg"
    store = ("--store", str(tmp_path / "site.sqlite"), "--rules", str(RULES))
    code, out, err = _run(*store, "import", str(path), "--type", "asset", "--rule", "test-areas")
    assert code == 0, err
    assert err == _warning(path, 1)
    assert "read 1, inserted 1, updated 0, unchanged 0, skipped 0, retired 0, rejected 0" in out
    assert f"  warning: {path}: 1 curved geometry made linear" in out
    code, out, _ = _run(*store, "--json", "asset", "list")
    [asset] = json.loads(out)["models"].values()
    kind = "linestrings" if FIXTURES[name] == "LineString" else "polygons"
    assert asset["geo"][kind] and asset["name"] == "Unnamed area"


def test_an_arc_becomes_segments_on_its_circle_and_only_curves_are_counted(
    tmp_path: Path,
) -> None:
    path = _arcs(tmp_path / "arcs.gpkg")
    code, out, err = _run("--json", "inspect", str(path), "--head", "2")
    assert code == 0, err
    assert err == _warning(path, 1)  # the arc; the straight line is no curve
    arc, line = (shapely.from_wkt(row["geometry"]) for row in json.loads(out)["head"])
    points = shapely.get_coordinates(arc)
    assert len(points) > 20  # many short segments, not the three control points
    radius = np.hypot(points[:, 0] - 145, points[:, 1] + 37)
    assert np.allclose(radius, 1, atol=1e-5)
    assert (points[0].tolist(), points[-1].tolist()) == ([144, -37], [146, -37])
    assert points[:, 1].max() == pytest.approx(-36, abs=1e-3)  # through the top
    assert shapely.get_coordinates(line).tolist() == [[144, -38], [146, -38]]


def test_a_geopackage_without_curves_says_nothing(tmp_path: Path) -> None:
    path = tmp_path / "plain.gpkg"
    pyogrio.raw.write(
        path,
        geometry=np.array([struct.pack("<BI2d", 1, 1, 145, -37)], dtype=object),
        field_data=[np.array(["P"], dtype=object)],
        fields=["Code"],
        driver="GPKG",
        geometry_type="Point",
        crs="EPSG:4326",
    )
    code, out, err = _run("--json", "inspect", str(path))
    assert code == 0 and err == ""
    assert json.loads(out)["warnings"] == []


def test_a_layer_read_in_parts_makes_and_counts_its_curves_as_the_whole_read(
    tmp_path: Path,
) -> None:
    """Read by feature ranges (one feature a part), the arc's part makes it straight and
    the one warning counts it, as reading the whole layer does."""
    path = _arcs(tmp_path / "arcs.gpkg")
    whole, report = read_source(path)
    chunked = read_chunks(path, tmp_path / "parts", chunk_rows=1)
    assert chunked.count == 2 and chunked.frame is None
    frames = [chunked.read(i).frame for i in range(2)]
    assert chunked.finish().to_dict() == report.to_dict()
    assert report.warnings == [_warning(path, 1)[len("Warning: ") : -1]]
    assert [f.index.tolist() for f in frames] == [[1], [2]]
    shapes = [f.geometry.iloc[0] for f in frames]
    assert shapely.equals_exact(shapes, whole.geometry.to_numpy(), tolerance=0).all()
