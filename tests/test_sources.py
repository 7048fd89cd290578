"""read_source on awkward files the tests build themselves: encodings, delimiters, ragged rows,
shapefiles without .cpg or .prj, zips with folders, two layers or hostile entries."""

from __future__ import annotations

import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from pyproj import Transformer

from toolkit.sources import ReadLimits, SourceError, read_source
from toolkit.sources.archive import extract_zip
from toolkit.sources.tabular import names_geometry

# Flinders Street Station, Melbourne, and the same point in GDA2020 / MGA zone 55.
MELBOURNE_LON, MELBOURNE_LAT = 144.9671, -37.8183
MGA55 = "EPSG:7855"


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- CSV: encodings ------------------------------------------------------------------------


def test_utf8_with_bom_is_decoded_and_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "bom.csv", "\ufeffName,Code\nCafé,007\n".encode())
    gdf, report = read_source(path)
    assert list(gdf.columns) == ["Name", "Code", "geometry"]
    assert gdf.loc[1, "Name"] == "Café"
    assert gdf.loc[1, "Code"] == "007"
    assert (report.encoding, report.encoding_source) == ("utf-8", "bom")


def test_utf8_without_bom_is_detected(tmp_path: Path) -> None:
    path = write(tmp_path / "plain.csv", "Name,Code\nCafé,007\n".encode())
    gdf, report = read_source(path)
    assert gdf.loc[1, "Name"] == "Café"
    assert (report.encoding, report.encoding_source) == ("utf-8", "detected")


def test_utf16_with_bom(tmp_path: Path) -> None:
    path = write(tmp_path / "u16.csv", "Name\tCode\nCafé\t007\n".encode("utf-16"))
    gdf, report = read_source(path)
    assert gdf.loc[1, "Name"] == "Café"
    assert (report.encoding, report.encoding_source, report.delimiter) == ("utf-16", "bom", "\t")


def test_windows_1252_is_detected_not_mangled(tmp_path: Path) -> None:
    path = write(tmp_path / "cp.csv", "Name;Code\nCafé;007\nCrème brûlée;010\n".encode("cp1252"))
    gdf, report = read_source(path)
    assert gdf["Name"].tolist() == ["Café", "Crème brûlée"]
    assert (report.encoding, report.encoding_source) == ("windows-1252", "detected")


def test_windows_1252_after_a_long_ascii_start_is_still_read(tmp_path: Path) -> None:
    # The first non-ASCII byte lies beyond the detection sample.
    lines = ["Name,Code"] + [f"Street {i},{i:05d}" for i in range(120_000)] + ["Café,1"]
    path = write(tmp_path / "late.csv", ("\n".join(lines) + "\n").encode("cp1252"))
    gdf, report = read_source(path)
    assert gdf.loc[120_001, "Name"] == "Café"
    assert report.encoding == "windows-1252"


def test_given_encoding_overrides_detection(tmp_path: Path) -> None:
    path = write(tmp_path / "given.csv", "Name\nCafé\n".encode("cp1252"))
    gdf, report = read_source(path, encoding="latin-1")
    assert gdf.loc[1, "Name"] == "Café"
    assert report.encoding_source == "given"


def test_wrong_given_encoding_is_a_source_error_suggesting_encoding(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.csv", "Name\nCafé\n".encode("cp1252"))
    with pytest.raises(SourceError, match=r"bad\.csv.*--encoding"):
        read_source(path, encoding="utf-8")
    with pytest.raises(SourceError, match="unknown encoding 'nope'"):
        read_source(path, encoding="nope")


# --- CSV: structure ------------------------------------------------------------------------


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_delimiter_is_sniffed(tmp_path: Path, delimiter: str) -> None:
    text = delimiter.join(["id", "address", "code"]) + "\n"
    text += delimiter.join(["1", '"1/12 Smith St, Carlton"', "007"]) + "\n"
    text += delimiter.join(["2", "3 High St", "010"]) + "\n"
    gdf, report = read_source(write(tmp_path / "d.csv", text.encode()))
    assert report.delimiter == delimiter
    assert gdf["address"].tolist() == ["1/12 Smith St, Carlton", "3 High St"]


def test_values_are_text_nulls_are_empty_cells_only(tmp_path: Path) -> None:
    text = 'id,code,note\n1,007,[NULL]\n2,,"  padded "\n3,1e3,\n'
    gdf, _ = read_source(write(tmp_path / "v.csv", text.encode()))
    assert str(gdf["code"].dtype) == "str"
    assert gdf["code"].tolist()[0] == "007"
    assert pd.isna(gdf.loc[2, "code"])
    assert gdf.loc[3, "code"] == "1e3"
    assert gdf.loc[1, "note"] == "[NULL]"
    assert gdf.loc[2, "note"] == "  padded "
    assert pd.isna(gdf.loc[3, "note"])


def test_quoted_newlines_and_ragged_rows_report_row_and_line(tmp_path: Path) -> None:
    text = (
        "id,name,code\n"  # line 1
        '1,"two\nlines",001\n'  # lines 2-3, row 1
        "2,short\n"  # line 4, row 2: ragged
        "\n"  # line 5: blank, not a record
        "3,ok,003\n"  # line 6, row 3
        "4,too,many,values\n"  # line 7, row 4: ragged
        "5,last,005\n"  # line 8, row 5
    )
    gdf, report = read_source(write(tmp_path / "r.csv", text.encode()))
    assert gdf.index.name == "row"
    assert gdf.index.tolist() == [1, 3, 5]
    assert gdf.loc[1, "name"] == "two\nlines"
    assert gdf["code"].tolist() == ["001", "003", "005"]
    ragged = [(p.row, p.line) for p in report.problems]
    assert ragged == [(2, 4), (4, 7)]
    assert "expected 3 values, found 2" in report.problems[0].message
    assert report.problems[1].value == "4,too,many,values"


def test_blank_and_duplicate_headers_are_renamed_and_reported(tmp_path: Path) -> None:
    text = " id ,name,,name\n1,a,b,c\n"
    gdf, report = read_source(write(tmp_path / "h.csv", text.encode()))
    assert list(gdf.columns[:-1]) == ["id", "name", "column_3", "name_2"]
    assert gdf.loc[1, "name_2"] == "c"
    messages = [(p.line, p.column) for p in report.problems]
    assert messages == [(1, "column_3"), (1, "name_2")]


def test_empty_file_is_an_error_and_header_only_is_a_problem(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"empty\.csv: the file is empty"):
        read_source(write(tmp_path / "empty.csv", b""))
    with pytest.raises(SourceError, match="empty"):
        read_source(write(tmp_path / "blank.csv", b"\xef\xbb\xbf\n\n"))
    gdf, report = read_source(write(tmp_path / "head.csv", b"a,b\n"))
    assert len(gdf) == 0
    assert report.columns == ["a", "b"]
    assert "no data rows" in report.problems[0].message


def test_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "big.csv", b"a\n" + b"1\n" * 100)
    with pytest.raises(SourceError, match=r"big\.csv: 202 bytes is more than the limit of 100"):
        read_source(path, limits=ReadLimits(max_file_bytes=100))


def test_oversized_field_rejects_its_row(tmp_path: Path) -> None:
    text = "id,note\n1,short\n2," + "x" * 50 + "\n3,ok\n"
    gdf, report = read_source(
        write(tmp_path / "f.csv", text.encode()), limits=ReadLimits(max_field_bytes=20)
    )
    assert gdf.index.tolist() == [1, 3]
    assert (report.problems[0].row, report.problems[0].line) == (2, 3)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"nope\.csv: no such file"):
        read_source(tmp_path / "nope.csv")


# --- CSV: geometry -------------------------------------------------------------------------


def test_wkt_column_with_bad_values_and_a_bow_tie(tmp_path: Path) -> None:
    text = (
        "id;WKT\n"
        "1;POINT (144.9671 -37.8183)\n"
        "2;not wkt\n"
        "3;\n"
        "4;POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))\n"
    )
    gdf, report = read_source(write(tmp_path / "w.csv", text.encode()))
    assert report.geometry_source == "wkt:WKT"
    assert gdf.crs.to_epsg() == 4326
    assert gdf.geometry[1].equals(shapely.Point(144.9671, -37.8183))
    assert gdf.geometry[2] is None and gdf.loc[2, "id"] == "2"
    assert gdf.geometry[3] is None
    assert gdf.geometry[4].geom_type == "MultiPolygon"
    assert gdf.geometry[4].area == pytest.approx(0.5)
    assert report.repaired_geometries == 1
    assert report.null_geometries == 2
    assert report.geometry_types == {"Point": 1, "MultiPolygon": 1}
    (problem,) = report.problems
    assert (problem.row, problem.line, problem.column, problem.value) == (2, 3, "WKT", "not wkt")


def test_latitude_longitude_with_range_checks(tmp_path: Path) -> None:
    text = (
        "Property,Latitude,Longitude\n"
        f"0001,{MELBOURNE_LAT},{MELBOURNE_LON}\n"
        "0002,-95,144\n"
        "0003,abc,144\n"
        "0004,,\n"
        "0005,-37,\n"
    )
    gdf, report = read_source(write(tmp_path / "ll.csv", text.encode()))
    assert report.geometry_source == "latlon:Latitude,Longitude"
    assert report.crs == "EPSG:4326"
    assert gdf.geometry[1].x == pytest.approx(MELBOURNE_LON)
    assert gdf.geometry[1].y == pytest.approx(MELBOURNE_LAT)
    assert gdf.geometry[2:].isna().all()
    assert gdf.loc[2, "Property"] == "0002"
    found = {(p.row, p.column, p.value) for p in report.problems}
    assert found == {(2, "Latitude", "-95"), (3, "Latitude", "abc"), (5, "Longitude", None)}


def test_projected_coordinates_with_given_crs_are_reprojected(tmp_path: Path) -> None:
    to_mga = Transformer.from_crs("EPSG:4326", MGA55, always_xy=True)
    x, y = to_mga.transform(MELBOURNE_LON, MELBOURNE_LAT)
    text = f"id,easting,northing\n1,{x},{y}\n"
    gdf, report = read_source(
        write(tmp_path / "mga.csv", text.encode()),
        crs=MGA55,
        lat_column="northing",
        lon_column="easting",
    )
    assert report.crs == MGA55
    assert gdf.geometry[1].x == pytest.approx(MELBOURNE_LON, abs=1e-6)
    assert gdf.geometry[1].y == pytest.approx(MELBOURNE_LAT, abs=1e-6)


def test_unknown_geometry_column_lists_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", b"a,b\n1,2\n")
    with pytest.raises(SourceError, match=r"c\.csv: no column 'shape'; the columns are: a, b"):
        read_source(path, wkt_column="shape")


def test_csv_without_geometry_has_all_missing_geometry(tmp_path: Path) -> None:
    gdf, report = read_source(write(tmp_path / "n.csv", b"a\n1\n2\n"))
    assert gdf.crs.to_epsg() == 4326
    assert gdf.geometry.isna().all()
    assert report.geometry_source is None and report.crs is None


# --- Shapefiles ----------------------------------------------------------------------------


def melbourne_parcels(crs: str = MGA55) -> gpd.GeoDataFrame:
    """Two parcels around Flinders Street Station and a bow-tie, in ``crs``."""
    to_crs = Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    x, y = to_crs.transform(MELBOURNE_LON, MELBOURNE_LAT)
    bow_tie = shapely.Polygon([(x, y), (x + 10, y + 10), (x + 10, y), (x, y + 10)])
    multi = shapely.MultiPolygon(
        [shapely.box(x, y, x + 5, y + 5), shapely.box(x + 6, y, x + 9, y + 3)]
    )
    return gpd.GeoDataFrame(
        {"name": ["Café", "Crème", "Plain"], "propnum": ["007", "010", "011"]},
        geometry=[shapely.box(x - 1, y - 1, x + 1, y + 1), bow_tie, multi],
        crs=crs,
    )


def write_shapefile(folder: Path, name: str, frame: gpd.GeoDataFrame, **kwargs: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shp = folder / f"{name}.shp"
    frame.to_file(shp, engine="pyogrio", **kwargs)
    return shp


def zip_folder(folder: Path, target: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, prefix + file.relative_to(folder).as_posix())
    return target


def test_zipped_shapefile_in_a_folder_is_reprojected_from_gda2020(tmp_path: Path) -> None:
    write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    path = zip_folder(tmp_path / "src", tmp_path / "parcels.zip", prefix="export/data/")
    gdf, report = read_source(path)
    assert report.format == "shapefile"
    assert report.layer == "parcels"
    assert report.crs == MGA55
    assert gdf.crs.to_epsg() == 4326
    assert gdf.index.tolist() == [1, 2, 3]
    centre = gdf.geometry[1].centroid
    assert centre.x == pytest.approx(MELBOURNE_LON, abs=1e-6)
    assert centre.y == pytest.approx(MELBOURNE_LAT, abs=1e-6)
    assert gdf["name"].tolist() == ["Café", "Crème", "Plain"]
    assert gdf["propnum"].tolist() == ["007", "010", "011"]
    assert (report.encoding, report.encoding_source) == ("utf-8", "cpg")
    assert report.repaired_geometries == 1
    assert gdf.geometry[2].is_valid and gdf.geometry[2].geom_type == "MultiPolygon"
    assert report.geometry_types == {"Polygon": 1, "MultiPolygon": 2}


@pytest.mark.parametrize("written", ["UTF-8", "cp1252"])
def test_shapefile_without_cpg_detects_the_dbf_encoding(tmp_path: Path, written: str) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels(), encoding=written)
    shp.with_suffix(".cpg").unlink(missing_ok=True)
    path = zip_folder(tmp_path / "src", tmp_path / "parcels.shp.zip")
    gdf, report = read_source(path)
    assert gdf["name"].tolist() == ["Café", "Crème", "Plain"]
    expected = "utf-8" if written == "UTF-8" else "windows-1252"
    assert (report.encoding, report.encoding_source) == (expected, "detected")


def test_shapefile_cpg_is_honoured(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels(), encoding="cp1252")
    assert shp.with_suffix(".cpg").read_text().strip() in {"1252", "CP1252", "cp1252"}
    path = zip_folder(tmp_path / "src", tmp_path / "parcels.zip")
    gdf, report = read_source(path)
    assert gdf["name"].tolist() == ["Café", "Crème", "Plain"]
    assert (report.encoding, report.encoding_source) == ("cp1252", "cpg")


def test_shapefile_without_prj_needs_a_crs(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    shp.with_suffix(".prj").unlink()
    path = zip_folder(tmp_path / "src", tmp_path / "noprj.shz")
    with pytest.raises(SourceError, match=r"noprj\.shz: has no coordinate reference.*--crs"):
        read_source(path)
    gdf, report = read_source(path, crs=MGA55)
    assert report.crs == MGA55
    assert gdf.geometry[1].centroid.x == pytest.approx(MELBOURNE_LON, abs=1e-6)


def test_two_shapefiles_in_one_zip_need_a_layer(tmp_path: Path) -> None:
    write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    write_shapefile(tmp_path / "src", "roads", melbourne_parcels().iloc[:1])
    path = zip_folder(tmp_path / "src", tmp_path / "two.zip")
    with pytest.raises(
        SourceError, match=r"two\.zip: holds 2 layers; pass --layer one of: parcels, roads"
    ):
        read_source(path)
    gdf, report = read_source(path, layer="roads")
    assert (report.layer, len(gdf)) == ("roads", 1)
    with pytest.raises(SourceError, match="no layer 'rivers'; pass --layer one of: parcels, roads"):
        read_source(path, layer="rivers")


def test_zip_slip_entry_is_refused_and_nothing_escapes(tmp_path: Path) -> None:
    write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    path = zip_folder(tmp_path / "src", tmp_path / "evil.zip")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("../../escaped.shp", b"owned")
        archive.writestr("/tmp/absolute.shp", b"owned")
    before = set(tmp_path.parent.rglob("escaped.shp"))
    with pytest.raises(SourceError, match=r"evil\.zip: refusing a zip .*\.\./\.\./escaped\.shp"):
        read_source(path)
    assert set(tmp_path.parent.rglob("escaped.shp")) == before
    assert not (tmp_path / "escaped.shp").exists()
    assert not Path("/tmp/absolute.shp").exists()


def test_zip_bomb_is_refused_by_ratio_and_by_total_size(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb.dbf", b"\0" * (20 * 1024 * 1024))
    with pytest.raises(SourceError, match=r"bomb\.zip: entry bomb\.dbf is compressed \d+:1"):
        read_source(path)
    with pytest.raises(SourceError, match="would expand to 20971520 bytes"):
        read_source(path, limits=ReadLimits(max_uncompressed_bytes=1024 * 1024))


def test_entries_are_extracted_side_by_side_and_a_lying_size_is_refused(tmp_path: Path) -> None:
    big = bytes(range(256)) * 8192  # 2 MiB, a few entries of it
    path = tmp_path / "parts.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("a.shp", "a.dbf", "a.shx", "a.prj"):
            archive.writestr(name, name.encode() + big)
    out = tmp_path / "out"
    out.mkdir()
    suffixes = frozenset({".shp", ".dbf", ".shx", ".prj"})
    extract_zip(path, suffixes, ReadLimits(), out)
    for name in ("a.shp", "a.dbf", "a.shx", "a.prj"):
        assert (out / name).read_bytes() == name.encode() + big
    # The central directory says a.dbf is 1,000 bytes: it expands to 2 MiB.
    data = bytearray(path.read_bytes())
    entry = data.rindex(b"a.dbf") - 46  # its central directory record
    assert data[entry : entry + 4] == b"PK\x01\x02"
    data[entry + 24 : entry + 28] = (1000).to_bytes(4, "little")
    lying = tmp_path / "lying.zip"
    lying.write_bytes(bytes(data))
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(SourceError, match=r"lying\.zip: (cannot extract the zip|entry a\.dbf)"):
        extract_zip(lying, suffixes, ReadLimits(), again)


def test_a_zip_naming_a_file_twice_keeps_the_last_as_extracting_in_order_would(
    tmp_path: Path,
) -> None:
    first, table = np.random.default_rng(1).bytes(2_000_000), b"table" * 100
    path = tmp_path / "twice.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.shp", first)  # larger than the second: extracted first by size
        archive.writestr("a.dbf", table)
        with pytest.warns(UserWarning, match="Duplicate name"):
            archive.writestr("a.shp", b"second")
    out = tmp_path / "out"
    out.mkdir()
    extract_zip(path, frozenset({".shp", ".dbf"}), ReadLimits(), out)
    assert (out / "a.shp").read_bytes() == b"second"
    assert (out / "a.dbf").read_bytes() == table


def test_not_a_zip_and_a_zip_without_shapefile(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"fake\.zip: not a zip archive"):
        read_source(write(tmp_path / "fake.zip", b"a,b\n1,2\n"))
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(SourceError, match=r"other\.zip: the zip holds no shapefile"):
        read_source(path)


# --- GeoJSON, GeoPackage, XLSX -------------------------------------------------------------


def test_geojson_and_geopackage(tmp_path: Path) -> None:
    frame = melbourne_parcels()
    frame.to_crs("EPSG:4326").to_file(tmp_path / "p.geojson", engine="pyogrio")
    gdf, report = read_source(tmp_path / "p.geojson")
    assert (report.format, report.crs, report.rows) == ("geojson", "EPSG:4326", 3)
    assert report.repaired_geometries == 1
    gpkg = tmp_path / "p.gpkg"
    frame.to_file(gpkg, layer="parcels", engine="pyogrio")
    frame.iloc[:1].to_file(gpkg, layer="other", engine="pyogrio")
    with pytest.raises(SourceError, match="pass --layer one of: parcels, other"):
        read_source(gpkg)
    gdf, report = read_source(gpkg, layer="parcels")
    assert (report.format, report.crs, report.layer) == ("gpkg", MGA55, "parcels")
    assert gdf.geometry[1].centroid.y == pytest.approx(MELBOURNE_LAT, abs=1e-6)


def test_xlsx_named_or_first_sheet_as_text(tmp_path: Path) -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    first = workbook.active
    first.title = "Items"
    first.append(["Name", "Code", "Count", "Latitude", "Longitude"])
    first.append(["Café", "007", 12, MELBOURNE_LAT, MELBOURNE_LON])
    first.append([None, None, None, None, None])
    first.append(["[NULL]", None, 2.5, 100, 0])
    second = workbook.create_sheet("Other")
    second.append(["x"])
    second.append(["y"])
    workbook.save(tmp_path / "book.xlsx")

    gdf, report = read_source(tmp_path / "book.xlsx")
    assert (report.format, report.layer, report.rows) == ("xlsx", "Items", 2)
    assert gdf.loc[1, "Code"] == "007"
    assert gdf.loc[1, "Count"] == "12"
    assert gdf.loc[2, "Count"] == "2.5"
    assert gdf.loc[2, "Name"] == "[NULL]"
    assert pd.isna(gdf.loc[2, "Code"])
    assert gdf.geometry[1].x == pytest.approx(MELBOURNE_LON)
    (problem,) = report.problems
    assert (problem.row, problem.line, problem.column) == (2, 4, "Latitude")

    other, report = read_source(tmp_path / "book.xlsx", layer="Other")
    assert other["x"].tolist() == ["y"]
    with pytest.raises(SourceError, match="no sheet 'Nope'; pass --layer one of: Items, Other"):
        read_source(tmp_path / "book.xlsx", layer="Nope")


def test_report_to_dict_uses_camel_case(tmp_path: Path) -> None:
    _, report = read_source(write(tmp_path / "r.csv", b"a,WKT\n1,POINT (1 2)\n2,bad\n"))
    data = report.to_dict()
    assert data["encodingSource"] == "detected"
    assert data["geometrySource"] == "wkt:WKT"
    assert data["geometryTypes"] == {"Point": 1}
    assert data["problems"] == [
        {"row": 2, "line": 3, "column": "WKT", "value": "bad", "message": "not valid WKT"}
    ]
    assert np.isclose(data["rows"], 2)


def test_progress_counts_the_bytes_of_the_file_as_they_are_read(tmp_path: Path) -> None:
    calls: list[tuple[str, int, int | None, str]] = []

    def progress(label: str, done: int, total: int | None, *, unit: str, detail: str = "") -> None:
        calls.append((label, done, total, unit))

    read_source(write(tmp_path / "p.csv", b"a\n1\n"), progress=progress)
    assert calls[0] == ("read p.csv", 0, 4, "bytes")
    assert calls[-1] == ("read p.csv", 4, 4, "bytes")
    done = [c[1] for c in calls]
    assert done == sorted(done) and {c[2] for c in calls} == {4}


def test_zip_with_too_many_entries_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for number in range(5):
            archive.writestr(f"f{number}.dbf", b"x")
    with pytest.raises(SourceError, match=r"many\.zip: the zip holds 5 entries, more than .* 4"):
        read_source(path, limits=ReadLimits(max_zip_entries=4))


def test_plain_shapefile_path_is_read_too(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    gdf, report = read_source(shp)
    assert (report.format, report.layer, report.crs, len(gdf)) == ("shapefile", "parcels", MGA55, 3)


def test_rows_without_wkt_take_their_coordinates(tmp_path: Path) -> None:
    path = tmp_path / "mixed.csv"
    path.write_text(
        "Reference,Latitude,Longitude,WKT\nA,,,POINT (143.85 -37.56)\nB,-37.57,143.86,\nC,,,\n",
        encoding="utf-8",
    )
    frame, report = read_source(path)
    assert report.geometry_source == "wkt:WKT+latlon:Latitude,Longitude"
    points = frame.geometry
    assert (points.iloc[0].x, points.iloc[0].y) == (143.85, -37.56)
    assert (points.iloc[1].x, points.iloc[1].y) == (143.86, -37.57)
    assert points.iloc[2] is None
    assert report.problems == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a;b;c\n1;2;3\n4;5;6\n", ";"),
        ("a|b\n1|2\n", "|"),
        ("a\tb\tc,d\n1\t2\t3,4\n", "\t"),  # a comma inside values, tabs between them
        ('a,b\n"x;y",2\n"z;w",3\n', ","),  # semicolons only inside quotes
        ('name\n"a, b"\n', ","),
    ],
)
def test_the_delimiter_is_found_cheaply_when_lines_agree(text: str, expected: str) -> None:
    from toolkit.sources.csv import sniff_delimiter

    assert sniff_delimiter(text) == expected


# --- hardening: huge values, coordinates outside EPSG:4326, a .prj nobody understands ---------


def test_a_value_beyond_the_csv_modules_own_limit_leaves_only_its_row_out(tmp_path: Path) -> None:
    # Python's csv module refuses fields over 128 KiB by default; the scan that numbers lines
    # for the report must pass over the long value, not fail the whole file.
    text = "id,note\n1,short\n2," + "x" * 300_000 + "\n3,ok\n"
    gdf, report = read_source(
        write(tmp_path / "f.csv", text.encode()), limits=ReadLimits(max_field_bytes=1000)
    )
    assert gdf.index.tolist() == [1, 3]
    (problem,) = report.problems
    assert (problem.row, problem.line, problem.column) == (2, 3, "note")
    assert problem.message == "the value is longer than 1000 bytes; row left out"
    assert problem.value == "x" * 40 + "..."


@pytest.mark.slow
def test_a_20_mb_quoted_value_with_line_breaks_leaves_only_its_row_out(tmp_path: Path) -> None:
    # Longer than pyarrow's block (16 MiB) and spanning lines: the file is still read.
    huge = ("y" * 1_000_000 + "\n") * 20
    text = f'id,note\n1,short\n2,"{huge}"\n3,ok\n'
    gdf, report = read_source(write(tmp_path / "huge.csv", text.encode()))
    assert gdf.index.tolist() == [1, 3]
    assert gdf["note"].tolist() == ["short", "ok"]
    (problem,) = report.problems
    assert (problem.row, problem.line, problem.column) == (2, 3, "note")
    assert "longer than 8388608 bytes; row left out" in problem.message


def test_wkt_coordinates_outside_epsg_4326_or_not_finite_are_problems(tmp_path: Path) -> None:
    text = (
        "id,wkt\n"
        "1,POINT (144.9 -37.8)\n"
        "2,POINT (999 999)\n"
        "3,POINT (nan nan)\n"
        '4,"LINESTRING (144 -37, nan 1, 145 -38)"\n'
        "5,POINT (inf 1)\n"
        "6,POINT (-180 90)\n"
        "7,POINT (144.9 -90.5)\n"
    )
    gdf, report = read_source(write(tmp_path / "r.csv", text.encode()))
    assert gdf.index.tolist() == [1, 2, 3, 4, 5, 6, 7]  # inspect shows every row
    assert gdf.geometry.isna().tolist() == [False, True, True, True, True, False, True]
    found = [(p.row, p.line, p.column, p.value, p.message) for p in report.problems]
    outside = "coordinates outside longitude -180..180, latitude -90..90 (EPSG:4326)"
    not_finite = "a coordinate is not a finite number"
    assert found == [
        (2, 3, "wkt", "POINT (999 999)", outside),
        (3, 4, "wkt", "POINT (nan nan)", not_finite),
        (4, 5, "wkt", "LINESTRING (144 -37, nan 1, 145 -38)", not_finite),
        (5, 6, "wkt", "POINT (inf 1)", not_finite),
        (7, 8, "wkt", "POINT (144.9 -90.5)", outside),
    ]


def test_projected_coordinates_outside_the_world_after_reprojection(tmp_path: Path) -> None:
    to_mga = Transformer.from_crs("EPSG:4326", MGA55, always_xy=True)
    x, y = to_mga.transform(MELBOURNE_LON, MELBOURNE_LAT)
    # Far past the projection's edge: the inverse gives infinity.
    text = f"id,easting,northing\n1,{x},{y}\n2,1e9,{y}\n"
    gdf, report = read_source(
        write(tmp_path / "mga.csv", text.encode()),
        crs=MGA55,
        lat_column="northing",
        lon_column="easting",
    )
    assert gdf.geometry.isna().tolist() == [False, True]
    found = {(p.row, p.column, p.value) for p in report.problems}
    assert found == {(2, "northing", str(y)), (2, "easting", "1e9")}
    assert {p.message for p in report.problems} == {
        "a coordinate is not a finite number after reprojection from EPSG:7855"
    }


def test_shapefile_geometry_outside_epsg_4326_is_a_problem(tmp_path: Path) -> None:
    frame = gpd.GeoDataFrame(
        {"name": ["ok", "far", "nan"]},
        geometry=[shapely.Point(144.9, -37.8), shapely.Point(500, 500), shapely.Point(1, 1)],
        crs="EPSG:4326",
    )
    write_shapefile(tmp_path / "src", "points", frame)
    path = zip_folder(tmp_path / "src", tmp_path / "points.zip")
    gdf, report = read_source(path)
    assert gdf.geometry.isna().tolist() == [False, True, False]
    (problem,) = report.problems
    assert (problem.row, problem.column, problem.value) == (2, "geometry", "POINT (500 500)")
    assert "outside longitude -180..180" in problem.message


# GDAL reads the first as no CRS at all, and fails to open the shapefile with the second.
@pytest.mark.parametrize("garbage", ["this is not a projection", "GEOGCS[not a projection"])
def test_a_prj_that_cannot_be_understood_is_not_called_missing(
    tmp_path: Path, garbage: str
) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    shp.with_suffix(".prj").write_text(garbage, encoding="ascii")
    path = zip_folder(tmp_path / "src", tmp_path / "garbled.zip")
    with pytest.raises(SourceError) as caught:
        read_source(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: the .prj could not be understood: parcels.prj: ")
    assert garbage in message and "--crs" in message
    assert "no .prj" not in message
    # The user who knows the CRS can say so; the report keeps the .prj's problem.
    gdf, report = read_source(path, crs=MGA55)
    assert report.crs == MGA55
    assert gdf.geometry[1].centroid.x == pytest.approx(MELBOURNE_LON, abs=1e-6)
    (problem,) = report.problems
    assert problem.message.startswith("the .prj could not be understood: parcels.prj")
    assert problem.message.endswith(f"--crs {MGA55} used instead")


def test_an_empty_prj_is_not_understood_either(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    shp.with_suffix(".prj").write_bytes(b"")
    with pytest.raises(SourceError, match=r"could not be understood: parcels\.prj: it is empty"):
        read_source(zip_folder(tmp_path / "src", tmp_path / "empty_prj.zip"))


def test_a_display_name_replaces_the_path_in_errors_and_the_report(tmp_path: Path) -> None:
    folder = tmp_path / "toolkit-import-secret"
    folder.mkdir()
    empty = write(folder / "import-data.csv", b"\n\n")
    with pytest.raises(SourceError) as caught:
        read_source(empty, name="import data (csv)")
    assert str(caught.value) == "import data (csv): the file is empty (no header, no data)"
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    shp.with_suffix(".shp").write_bytes(b"not a shapefile at all")
    broken = zip_folder(tmp_path / "src", folder / "import-data.zip")
    with pytest.raises(SourceError) as caught:
        read_source(broken, name="import data (zip)")
    message = str(caught.value)
    assert message.startswith("import data (zip): parcels.shp: cannot read")
    assert str(tmp_path) not in message and "/tmp" not in message and "toolkit-" not in message
    good = write(folder / "import-data2.csv", b"a,wkt\n1,POINT (1 2)\n2,nope\n")
    _, report = read_source(good, name="import data (csv)")
    assert report.path == "import data (csv)"
    assert all(str(folder) not in p.message for p in report.problems)


def test_a_shape_geos_cannot_build_is_a_problem_of_its_row_not_of_the_file(
    tmp_path: Path,
) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    data = bytearray(shp.read_bytes())
    # The first record is a box: one part of five points from byte 156; moving the last
    # point's x leaves its ring open, which GDAL passes on and GEOS refuses.
    last_x = 156 + 16 * 4
    x = np.frombuffer(bytes(data[last_x : last_x + 8]), dtype="<f8")[0]
    data[last_x : last_x + 8] = np.array([x + 3], dtype="<f8").tobytes()
    shp.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="Non closed ring"):
        gdf, report = read_source(zip_folder(tmp_path / "src", tmp_path / "open.zip"))
    assert gdf.index.tolist() == [1, 2, 3]
    assert gdf.geometry.isna().tolist() == [True, False, False]
    (problem,) = report.problems
    assert (problem.row, problem.column) == (1, "geometry")
    assert problem.message == "not a valid geometry (GEOS cannot build it)"


def test_a_header_that_is_not_what_its_bom_says_is_a_source_error(tmp_path: Path) -> None:
    # Found by the property tests: a header byte that is not UTF-8 after a UTF-8 BOM made
    # pyarrow type that column itself, and the size check failed with an IndexError.
    data = b"\xef\xbb\xbfReference\xbbLatitude;Longitude\nR1;-37.56;143.85\nR2;;\n"
    with pytest.raises(SourceError, match=r"bom\.csv: cannot read as utf-8 CSV.*--encoding"):
        read_source(write(tmp_path / "bom.csv", data))


# Found by the property tests: each failed with a library's own exception, not a SourceError.
def test_a_prj_that_is_not_text_is_not_understood(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    prj = shp.with_suffix(".prj")
    prj.write_bytes(b"\x80" + prj.read_bytes())
    path = zip_folder(tmp_path / "src", tmp_path / "binary_prj.zip")
    with pytest.raises(SourceError, match=r"parcels\.prj: it is not text"):
        read_source(path)
    gdf, _ = read_source(path, crs=MGA55)
    assert gdf.geometry[1].centroid.x == pytest.approx(MELBOURNE_LON, abs=1e-6)


def test_a_crs_proj_cannot_transform_is_a_source_error(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    prj = shp.with_suffix(".prj")
    # An inverse flattening of 0 and a stray number: it parses, but leads nowhere.
    prj.write_text(prj.read_text().replace("6378137.0,", "6378137,0,"), encoding="ascii")
    path = zip_folder(tmp_path / "src", tmp_path / "odd.zip")
    with pytest.raises(SourceError, match=r"odd\.zip: cannot reproject from .* to EPSG:4326"):
        read_source(path)


def test_a_cpg_with_a_nul_byte_is_read_like_an_unknown_one(tmp_path: Path) -> None:
    shp = write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    shp.with_suffix(".cpg").write_bytes(b"\x00UTF-8")
    gdf, report = read_source(zip_folder(tmp_path / "src", tmp_path / "nul.zip"))
    assert len(gdf) == 3 and report.encoding_source == "cpg"


def test_an_unknown_crs_beside_a_prj_is_a_source_error(tmp_path: Path) -> None:
    write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    path = zip_folder(tmp_path / "src", tmp_path / "p.zip")
    with pytest.raises(SourceError, match="unknown CRS 'EPSG:nope'"):
        read_source(path, crs="EPSG:nope")


def test_a_lone_carriage_return_before_the_header_is_a_line_end(tmp_path: Path) -> None:
    # Found by the property tests: the csv module refused the sample ("new-line character
    # seen in unquoted field") where pyarrow reads a lone CR as the end of a line.
    gdf, report = read_source(write(tmp_path / "cr.csv", b"\rcode,name\nA,B\n"))
    assert (len(gdf), report.rows) == (1, 1)


def test_a_dbf_whose_only_accents_are_in_its_field_names_is_read(tmp_path: Path) -> None:
    frame = melbourne_parcels().rename(columns={"name": "straße"})
    frame["straße"] = ["A", "B", "C"]  # nothing but ASCII in the values
    shp = write_shapefile(tmp_path / "src", "parcels", frame, encoding="cp1252")
    shp.with_suffix(".cpg").unlink(missing_ok=True)
    gdf, report = read_source(zip_folder(tmp_path / "src", tmp_path / "names.zip"))
    assert "straße" in gdf.columns and gdf["straße"].tolist() == ["A", "B", "C"]
    assert (report.encoding, report.encoding_source) == ("windows-1252", "detected")
    # Told the wrong encoding, it says so instead of failing with pyogrio's UnicodeDecodeError.
    with pytest.raises(SourceError, match=r"names\.zip: parcels\.shp: cannot read its text as"):
        read_source(tmp_path / "names.zip", encoding="utf-8")


def test_a_corrupt_deflate_stream_is_a_source_error(tmp_path: Path) -> None:
    write_shapefile(tmp_path / "src", "parcels", melbourne_parcels())
    path = zip_folder(tmp_path / "src", tmp_path / "p.zip")
    with zipfile.ZipFile(path) as archive:
        first = archive.infolist()[0]
    data = bytearray(path.read_bytes())
    # The block type bits of the entry's deflate stream: zlib refuses what follows
    # (found by the property tests as "invalid stored block lengths").
    start = first.header_offset + 30 + len(first.filename.encode()) + len(first.extra)
    data[start] ^= 2
    broken = write(tmp_path / "broken.zip", bytes(data))
    with pytest.raises(SourceError, match=r"broken\.zip: cannot extract the zip"):
        read_source(broken)


@pytest.mark.parametrize(
    ("headings", "has_geometry"),
    [
        (["Reference", "WKT"], True),
        (["Reference", "Latitude", "Longitude"], True),
        (["ref", "LAT", "lng"], True),
        (["Reference", "Latitude"], False),  # a latitude alone makes no point
        (["Reference", "Address", "Suburb"], False),
        ([], False),
    ],
)
def test_headings_name_a_geometry_as_the_reader_finds_it(
    headings: list[str], has_geometry: bool, tmp_path: Path
) -> None:
    """``names_geometry`` says from headings alone what reading the table then finds."""
    assert names_geometry(headings) is has_geometry
    if headings:
        path = tmp_path / "t.csv"
        row = ["POINT (144 -37)" if h == "WKT" else "1" for h in headings]
        path.write_text(",".join(headings) + "\n" + ",".join(row) + "\n", encoding="utf-8")
        assert bool(read_source(path)[1].geometry_columns) is has_geometry
