"""Reading in parts (``read_chunks``) gives exactly what one read gives: the same rows with
the same row numbers, geometry and problems (rows, lines, columns, words), part by part."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
from shapely import Point, Polygon, box

from toolkit.errors import SourceError
from toolkit.sources import ReadLimits, read_source
from toolkit.sources.chunks import read_chunks

FILES: dict[str, bytes] = {
    "plain": b"id,name\n1,a\n2,b\n3,c\n4,d\n5,e\n",
    "ragged and quoted newlines": (
        b'id,note\n1,"two\nlines"\n2,short,x\n3,ok\n\n4,too,many,values\n5,"a\nb\nc"\n'
        b"6\n7,last\n8\n"
    ),
    "only ragged": b"a,b\n1\n2\n3,4,5\n",
    "header only": b"a,b\n",
    "geometry": (
        b"id,wkt,latitude,longitude\n1,POINT (1 2),,\n2,,-33.5,151.2\n3,POINT (400 2),,\n"
        b"4,NOT WKT,,\n5,,95,10\n6,,x,y\n7,POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0)),,\n"
    ),
    "duplicate headings": b"a,a,,b\n1,2,3,4\n5,6,7,8\n9,10,11,12\n",
    "over-long value": b"id,text\n1,short\n2," + b"x" * 300 + b"\n3,fine\n4," + b"y" * 400 + b"\n",
    "semicolons in windows-1252": "id;name\n1;Zoë\n2;Renée\n3;Ångström\n".encode("cp1252"),
}


def _whole(path: Path, **options: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    frame, report = read_source(path, **options)
    return frame, report.to_dict()


def _parts(
    path: Path, folder: Path, rows: int, **options: Any
) -> tuple[pd.DataFrame, dict[str, Any], list[int]]:
    chunked = read_chunks(path, folder, chunk_rows=rows, **options)
    frames = [chunked.read(i).frame for i in range(chunked.count)]
    report = chunked.finish()
    return pd.concat(frames), report.to_dict(), chunked.sizes


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("rows", [1, 2, 3, 1000])
def test_parts_read_as_the_whole_file(tmp_path: Path, name: str, rows: int) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(FILES[name])
    limits = ReadLimits(max_field_bytes=200)
    frame, report = _whole(path, limits=limits, name="sent.csv")
    parts, parts_report, sizes = _parts(
        path, tmp_path / "parts", rows, limits=limits, name="sent.csv"
    )
    assert all(size <= rows for size in sizes)
    assert sum(sizes) == len(frame)
    assert parts_report == report
    assert list(parts.index) == list(frame.index)
    assert parts.index.name == "row"
    pd.testing.assert_frame_equal(
        pd.DataFrame(parts.drop(columns="geometry")),
        pd.DataFrame(frame.drop(columns="geometry")),
        check_index_type=False,
    )
    assert parts.geometry.to_wkt().tolist() == frame.geometry.to_wkt().tolist()


def test_a_late_accented_letter_rereads_the_stream_as_windows_1252(tmp_path: Path) -> None:
    # The first MiB is plain ASCII, so UTF-8 is detected; the letter after it is not UTF-8.
    body = b"".join(b"%d,name %d\n" % (i, i) for i in range(1, 120_000))
    path = tmp_path / "late.csv"
    path.write_bytes(
        b"id,name\n"
        + body
        + "120000,Zo\xeb\n".encode("latin-1").decode("latin-1").encode("latin-1")
    )
    frame, report = _whole(path)
    parts, parts_report, sizes = _parts(path, tmp_path / "parts", 50_000)
    assert sizes == [50_000, 50_000, 20_000]
    assert parts_report["encoding"] == report["encoding"] == "windows-1252"
    assert parts["name"].iloc[-1] == frame["name"].iloc[-1] == "Zoë"


def test_errors_name_the_file_as_given(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"id,wkt\n1,POINT (1 2)\n")
    chunked = read_chunks(path, tmp_path / "p", chunk_rows=1, crs="EPSG:999999", name="sent.csv")
    with pytest.raises(SourceError, match=r"^sent\.csv: unknown CRS"):
        chunked.read(0)


def _layer(geometry: list[Any], crs: str | None = "EPSG:4326") -> gpd.GeoDataFrame:
    count = len(geometry)
    return gpd.GeoDataFrame(
        {"code": [f"P{i:03d}" for i in range(1, count + 1)], "name": ["Zoë"] * count},
        geometry=geometry,
        crs=crs,
    )


def _spatial_files(folder: Path) -> dict[str, Path]:
    """A Shapefile (plain and zipped) of points and a GeoPackage of polygons, 25 features
    each, with rows the reader reports past the first parts: no geometry, a coordinate
    off the earth, a polygon that crosses itself (repaired)."""
    points: list[Any] = [Point(144.0 + i / 100, -37.0) for i in range(25)]
    points[17] = None
    points[21] = Point(400.0, -37.0)  # not a longitude
    shp = folder / "points.shp"
    _layer(points).to_file(shp, engine="pyogrio")
    zipped = folder / "points.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for part in folder.glob("points.*"):
            if part != zipped:
                archive.write(part, part.name)
    squares: list[Any] = [box(i, 0, i + 1, 1) for i in range(25)]
    squares[19] = Polygon([(0, 0), (1, 1), (1, 0), (0, 1), (0, 0)])  # a bow tie
    squares[23] = Polygon([(500, 0), (501, 0), (501, 1), (500, 0)])
    gpkg = folder / "squares.gpkg"
    _layer(squares).to_file(gpkg, engine="pyogrio", layer="squares")
    return {"shapefile": shp, "zipped shapefile": zipped, "geopackage": gpkg}


@pytest.mark.parametrize("kind", ["shapefile", "zipped shapefile", "geopackage"])
@pytest.mark.parametrize("rows", [1, 4, 10, 1000])
def test_layers_are_read_in_parts_by_feature_ranges_as_the_whole_layer(
    tmp_path: Path, kind: str, rows: int
) -> None:
    path = _spatial_files(tmp_path)[kind]
    frame, report = _whole(path, name="sent" + path.suffix)
    chunked = read_chunks(path, tmp_path / "parts", chunk_rows=rows, name="sent" + path.suffix)
    # Each part is a feature range read alone, not a slice of a whole read.
    assert chunked.frame is None and chunked.parts is not None
    assert [p.rows.skip for p in chunked.parts] == list(range(0, 25, rows))  # type: ignore[union-attr]
    parts = pd.concat([chunked.read(i).frame for i in range(chunked.count)])
    assert chunked.finish().to_dict() == report
    assert list(parts.index) == list(frame.index) == list(range(1, 26))
    pd.testing.assert_frame_equal(
        pd.DataFrame(parts.drop(columns="geometry")), pd.DataFrame(frame.drop(columns="geometry"))
    )
    assert parts.geometry.to_wkt().tolist() == frame.geometry.to_wkt().tolist()
    # The rows the reader reports are the file's, whichever part held them.
    assert [p["row"] for p in report["problems"]] == ([22] if kind != "geopackage" else [24])
    assert not any(str(tmp_path) in p["message"] for p in report["problems"])
    shapefile = kind != "geopackage"
    assert (report["nullGeometries"], report["repairedGeometries"]) == (
        (2, 0) if shapefile else (1, 1)
    )


@pytest.mark.filterwarnings("ignore:'crs' was not provided")
def test_a_layer_without_a_crs_is_refused_naming_the_file(tmp_path: Path) -> None:
    shp = tmp_path / "nocrs.shp"
    _layer([Point(1, 2), Point(3, 4)], crs=None).to_file(shp, engine="pyogrio")
    with pytest.raises(SourceError, match=r"^sent\.shp: has no coordinate reference system"):
        read_chunks(shp, tmp_path / "p", chunk_rows=1, name="sent.shp")
    chunked = read_chunks(shp, tmp_path / "p", chunk_rows=1, crs="EPSG:4326")
    assert chunked.count == 2 and chunked.read(1).frame.index.tolist() == [2]
