"""Geometry columns a rule uses are used: an import does not call them unused, an asset
import does not keep them as extraInfo codes, and `rules show` says where geometry comes
from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from toolkit.cli import cli

RULES = Path(__file__).resolve().parent / "fixtures_rules"

# Two parcels as WKT polygons, with the property numbers damage-assessments links on.
PARCELS = (
    "code,type,name,propnum,wkt\n"
    'P1,Property,1 MAIN STREET BALLARAT,1001,"POLYGON ((143.80 -37.50, 143.81 -37.50, '
    '143.81 -37.51, 143.80 -37.51, 143.80 -37.50))"\n'
    'P2,Property,3 MAIN STREET BALLARAT,1003,"POLYGON ((143.82 -37.50, 143.83 -37.50, '
    '143.83 -37.51, 143.82 -37.51, 143.82 -37.50))"\n'
)
# Rows located only by coordinates or WKT; Colour is a column no rule knows.
ITEMS = (
    "Reference,Latitude,Longitude,WKT,Colour\n"
    "DA-1,-37.505,143.805,,red\n"
    "DA-2,,,POINT (143.825 -37.505),blue\n"
)


def _run(store: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", str(store), "--rules", str(RULES), *args])


def test_columns_that_located_rows_are_not_called_unused(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    parcels, items = tmp_path / "parcels.csv", tmp_path / "items.csv"
    parcels.write_text(PARCELS, encoding="utf-8")
    items.write_text(ITEMS, encoding="utf-8")
    assets = _run(
        store, "--json", "import", str(parcels), "--type", "asset", "--rule", "assets-csv"
    )
    assert assets.exit_code == 0, assets.output
    assert json.loads(assets.stdout)["summary"]["notes"] == []
    # The WKT made the asset's geometry; it is not also an extraInfo code.
    asset = json.loads(_run(store, "--json", "asset", "get", "1").stdout)
    assert asset["extraInfo"] == [{"key": "propnum", "value": "1001"}]
    assert asset["geo"]["polygons"]
    assert _run(store, "event", "create", "Flood").exit_code == 0
    result = _run(
        store,
        *("import", str(items), "--type", "item", "--rule", "damage-assessments"),
        *("--event-id", "1", "--region-id", "1"),
    )
    assert result.exit_code == 0, result.output
    assert "  note: columns not used by the rule: Colour" in result.stdout.splitlines()
    assert "Latitude" not in result.stdout and "WKT" not in result.stdout
    assert "assets: geo 2" in result.stdout  # the columns did locate both rows


def test_a_rule_without_geometry_still_names_coordinate_columns_unused(tmp_path: Path) -> None:
    users = tmp_path / "users.csv"
    users.write_text("Username,Latitude,Longitude\nann,-37.5,143.8\n", encoding="utf-8")
    result = _run(
        tmp_path / "site.sqlite", "import", str(users), "--type", "user", "--rule", "test-users"
    )
    assert result.exit_code == 0, result.output
    assert "  note: columns not used by the rule: Latitude, Longitude" in result.stdout


def test_rules_show_says_where_geometry_comes_from() -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["--json", "rules", "show", "damage-assessments"])
    assert shown.exit_code == 0
    geometry = json.loads(shown.stdout)["geometry"]
    assert geometry == {
        "used": True,
        "use": "links the row to the asset that contains it",
        "wktColumns": ["wkt", "geometry", "geom", "the_geom", "shape"],
        "latitudeColumns": ["latitude", "lat", "y"],
        "longitudeColumns": ["longitude", "lon", "lng", "long", "x"],
    }
    text = runner.invoke(cli, ["rules", "show", "assets-csv"]).stdout
    assert (
        "  geometry (stored as the asset's geometry): a Shapefile's, GeoPackage's or "
        "GeoJSON's own; in a table, a WKT column (wkt, geometry, geom, the_geom, shape) and/or "
        "latitude (latitude, lat, y) and longitude (longitude, lon, lng, long, x) columns, any case"
    ) in text
    users = runner.invoke(cli, ["rules", "show", "users"]).stdout
    assert "  geometry: not used (coordinate and WKT columns are left unused)" in users
