"""Report files on the demo site: CSV plain and for Excel, the spatial exports read back
with pyogrio (CRS and geometry), the HTML page's print CSS, map and interactive table,
and the XLSX print setup; through the CLI where the option lives there."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import geopandas as gpd
import openpyxl
import pyogrio
import pytest
import shapely
from click.testing import CliRunner
from PIL import Image
from report_demo import demo_site, file, run

from toolkit.cli import cli
from toolkit.reports import xlsx_fast
from toolkit.reports.charts import severity_colours
from toolkit.site import LocalSite


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    site, result = demo_site(tmp_path_factory.mktemp("files"))
    yield site, result
    site.close()


def _cli(site: LocalSite, *args: str) -> Any:
    return CliRunner().invoke(
        cli, ["--store", str(site.db.path), "--site", "default", *args], catch_exceptions=False
    )


def test_csv_for_excel_has_a_bom_and_keeps_text_as_text(demo: Any, tmp_path: Path) -> None:
    site, result = demo
    instance = run(site, 1, eventId=result.event["id"])
    plain = file(site, instance, "csv")
    assert not plain.startswith(b"\xef\xbb\xbf") and b"\r\n" not in plain
    out = tmp_path / "items.csv"
    done = _cli(site, "report", "fetch", instance, "--format", "csv", "--excel", "-o", str(out))
    assert done.exit_code == 0, done.output
    data = out.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"\r\n" in data
    rows = list(csv.DictReader(io.StringIO(data[3:].decode("utf-8"))))
    plain_rows = list(csv.DictReader(io.StringIO(plain.decode("utf-8"))))
    # A property number with leading zeros becomes a text formula Excel shows as is.
    zeros = [r["Property Number"] for r in plain_rows if r["Property Number"].startswith("0")]
    assert zeros
    excel_numbers = [r["Property Number"] for r in rows if r["Property Number"].startswith("=")]
    assert excel_numbers[: len(zeros)] == [f'="{z}"' for z in zeros]
    # Non-ASCII names survive; times are local spreadsheet times, the zone in the heading.
    assert any(r["Inspector"] == "Zoë Nguyễn" for r in rows)
    assert rows[0]["Created (UTC)"][10] == " " and "+" not in rows[0]["Created (UTC)"]
    bad = _cli(site, "report", "fetch", instance, "--format", "xlsx", "--excel", "-o", str(out))
    assert bad.exit_code == 2 and "--excel is for --format csv" in bad.output


def test_csv_for_excel_neutralises_formulas_without_a_visible_apostrophe(tmp_path: Path) -> None:
    import pyarrow as pa

    from toolkit.reports.csv_file import excel_text, safe_text

    column = pa.array(['=HYPERLINK("x")', "-37.5", "007", "plain", None, "=" + "a" * 600, "+1 x"])
    assert excel_text(column).to_pylist() == [
        '="=HYPERLINK(""x"")"',
        "-37.5",
        '="007"',
        "plain",
        None,
        '="=' + "a" * 254 + '"&"' + "a" * 255 + '"&"' + "a" * 91 + '"',
        '="+1 x"',
    ]
    assert safe_text(column).to_pylist()[:3] == ['\'=HYPERLINK("x")', "-37.5", "007"]
    huge = pa.array(["=" + "b" * 9000])
    assert excel_text(huge).to_pylist() == ["'=" + "b" * 9000]  # too long for a formula


@pytest.mark.parametrize("fmt", ["gpkg", "geojson", "parquet"])
def test_spatial_exports_read_back_with_their_crs_and_geometry(
    demo: Any, tmp_path: Path, fmt: str
) -> None:
    site, result = demo
    instance = run(site, 2, eventId=result.event["id"])
    out = tmp_path / f"impacted.{fmt}"
    done = _cli(site, "report", "fetch", instance, "--format", fmt, "-o", str(out))
    assert done.exit_code == 0, done.output
    rows = site.report_fetch(instance)["contents"]["data"]
    if fmt == "parquet":
        layer = gpd.read_parquet(out)
    else:
        layer = pyogrio.read_dataframe(out)
        info = pyogrio.read_info(out)
        assert info["crs"] == "EPSG:4326"
    assert layer.crs is not None and layer.crs.to_epsg() == 4326
    assert len(layer) == len(rows) > 0
    assert set(layer.geom_type) <= {"Polygon", "MultiPolygon"}
    assert list(layer["id"]) == [r["id"] for r in rows]
    assert list(layer["worstLevel"]) == [r["worstLevel"] for r in rows]
    # The parcel itself, not a point: its centroid is the report's location.
    first = site.get_asset(str(rows[0]["id"]))
    centroid = layer.geometry.iloc[0].centroid
    assert (centroid.x, centroid.y) == pytest.approx((rows[0]["longitude"], rows[0]["latitude"]))
    assert layer.geometry.iloc[0].area > 0 and first["id"] == str(rows[0]["id"])
    assert shapely.is_valid(layer.geometry).sum() >= len(layer) - 3  # 3 bow-ties in sample


def test_a_report_without_geometry_has_no_spatial_export(demo: Any, tmp_path: Path) -> None:
    site, _result = demo
    instance = run(site, 3)
    out = tmp_path / "jobs.gpkg"
    done = _cli(site, "report", "fetch", instance, "--format", "gpkg", "-o", str(out))
    assert done.exit_code == 1
    assert "has no asset geometry" in done.output and not out.exists()


def test_fetch_object_of_a_spatial_format_is_base64(demo: Any) -> None:
    site, result = demo
    instance = run(site, 2, eventId=result.event["id"])
    fetched = site.report_fetch(instance, "geojson")
    import base64

    collection = json.loads(base64.b64decode(fetched["contents"]))
    assert fetched["format"] == "geojson" and collection["type"] == "FeatureCollection"


def test_html_prints_on_a4_landscape_and_has_an_interactive_table(demo: Any) -> None:
    site, result = demo
    page = file(site, run(site, 6, eventId=result.event["id"]), "html").decode()
    style = page.split("<style>")[1].split("</style>")[0]
    assert "@page{size:A4 landscape" in style
    assert 'counter(page) " of " counter(pages)' in style  # page numbers
    assert "thead{display:table-header-group}" in style  # the heading on every page
    assert "@media print" in style and ".wrap{overflow:visible" in style  # nothing cut
    assert "table.data{width:100%;white-space:normal" in style
    # Sort, search and filter: an inline script over the table, a box, a filter per column.
    assert "<input id='search'" in page and page.count("data-col=") == page.count("scope='col'")
    assert "aria-sort" in page and "localeCompare" in page
    # The summary's figures: tiles, stacked bars by locality, a time series, totals.
    assert "class='tile'" in page and "Occupants displaced" in page
    assert "Items by damage level and locality" in page
    assert "Items by damage level over inspection date" in page
    assert "<tfoot><tr><td>Total</td>" in page
    totals = page.split("<tfoot>")[1].split("</tfoot>")[0]
    items = sum(r["items"] for r in site.report_fetch(run(site, 6))["contents"]["data"])
    assert f"<td class='num'>{items:,}</td>" in totals
    # Severity colours (YlOrRd, grey for None), each bar with its count as a tooltip.
    assert "#bdbdbd" in page and "#800026" in page and "<title>LAKE GARDENS, Minor:" in page


def test_printed_cells_break_between_words_unless_a_run_is_long(demo: Any) -> None:
    """A code or a word is never split across lines in print; JSON (a long unbroken run)
    may break anywhere, so it cannot widen its column past the page. Numbers show six
    decimals in the page (the files keep all)."""
    site, result = demo
    page = file(site, run(site, 5, recordType="item", action="create"), "html").decode()
    style = page.split("<style>")[1].split("</style>")[0]
    assert "overflow-wrap:break-word}" in style and "td.brk{overflow-wrap:anywhere}" in style
    row = page.split("<tbody>")[1].split("</tr>")[0]
    cells = row.split("</td>")
    assert "<td>create" in cells[3] and "<td class='brk'>{&quot;fields&quot;" in cells[12]
    instance = run(site, 2, eventId=result.event["id"])
    longitude = site.report_fetch(instance)["contents"]["data"][0]["longitude"]
    shown = file(site, instance, "html").decode()
    assert len(str(longitude).split(".")[1]) > 6  # the data keeps every digit
    assert f"<td class='num'>{round(longitude, 6)}</td>" in shown


def test_html_map_draws_parcels_by_worst_level_with_legend_scale_and_north(demo: Any) -> None:
    site, result = demo
    instance = run(site, 2, eventId=result.event["id"])
    page = file(site, instance, "html").decode()
    svg = page.split("<figure class='chart map'>")[1].split("</figure>")[0]
    rows = site.report_fetch(instance)["contents"]["data"]
    assert f"{len(rows)} of {len(rows)} located assets drawn" in svg
    levels = {r["worstLevel"] for r in rows}
    assert levels == {"Minor", "Moderate", "Severe", "Destroyed"}
    assert svg.count("<path d='M") >= len(levels) and "Z" in svg  # closed polygons
    for name in ("BALLARAT CENTRAL", "WENDOUREE", "SEBASTOPOL", "BUNINYONG"):
        assert f"class='place'>{name}</text>" in svg
    assert "class='scale'" in svg and (" m</text>" in svg or " km</text>" in svg)
    assert "aria-label='north'" in svg and ">N</text>" in svg
    for level in ("None", "Minor", "Destroyed"):
        assert f">{level}</text>" in svg  # the legend


@pytest.mark.parametrize("engine", ["rust", "xlsxwriter"])
def test_xlsx_of_impacted_assets_has_the_map_as_a_picture(
    demo: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """The Map sheet holds the HTML's drawing as a PNG (both writers): every parcel
    drawn in its level's colour, shown at the SVG's size, printed on one page."""
    site, result = demo
    if engine == "xlsxwriter":  # as where rustpy-xlsxwriter is not installed
        monkeypatch.setattr(xlsx_fast, "available", lambda: False)
    instance = run(site, 2, eventId=result.event["id"])
    rows = site.report_fetch(instance)["contents"]["data"]
    path = tmp_path / "impacted.xlsx"
    path.write_bytes(file(site, instance, "xlsx"))
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Data", "Map", "About"]
    sheet = book["Map"]
    assert sheet["A1"].value == "Impacted assets by worst damage level"
    assert f"{len(rows)} of {len(rows)} located assets drawn" in sheet["A2"].value
    (picture,) = sheet._images
    with Image.open(io.BytesIO(picture._data())) as png:
        assert png.format == "PNG"
        width, height = png.size
        pixels = png.convert("RGB").getcolors(1 << 20) or []
        colours = {"#{:02x}{:02x}{:02x}".format(*c) for _n, c in pixels}
    assert width == 1800 and 500 < height < 1400  # two pixels per pixel of the SVG
    # Minor to Destroyed (None is no damage: not in this report) fill parcels.
    assert set(severity_colours(5)[1:]) <= colours
    # Anchored under the caption, shown at half its pixels (Excel's default cells are
    # 64 x 20 px): about 900 px wide.
    start, end = picture.anchor._from, picture.anchor.to
    assert (start.row, start.col) == (3, 0)
    assert abs((end.col - start.col) * 64 - width / 2) < 64
    assert abs((end.row - start.row) * 20 - height / 2) < 40
    setup = sheet.page_setup
    assert setup.orientation == "landscape" and setup.fitToHeight in (None, 1)
    assert sheet.sheet_properties.pageSetUpPr.fitToPage is True


def test_xlsx_prints_to_the_page_width_with_the_heading_repeated(demo: Any, tmp_path: Path) -> None:
    site, result = demo
    instance = run(site, 6, eventId=result.event["id"])
    path = tmp_path / "summary.xlsx"
    path.write_bytes(file(site, instance, "xlsx"))
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Data", "By inspection date", "About"]
    for name in ("Data", "By inspection date"):
        sheet = book[name]
        setup = sheet.page_setup
        assert (setup.orientation, setup.paperSize) == ("landscape", 9)
        # One page wide (1, OOXML's default when left out), as many pages down as needed.
        assert setup.fitToWidth in (None, 1) and setup.fitToHeight == 0
        assert sheet.sheet_properties.pageSetUpPr.fitToPage is True
        assert sheet.print_title_rows == "$1:$1"
        assert "&P of &N" in sheet.oddFooter.right.text
    dates = list(book["By inspection date"].iter_rows(min_row=2, values_only=True))
    assert isinstance(dates[0][1], int | float) and dates[0][0] == "2026-02-01"
