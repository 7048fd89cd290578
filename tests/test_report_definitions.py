"""Analysts' report definitions (TOML, `--reports DIR`): good ones run through the CLI
like the built-in reports (rows checked against the items, a spatial one exported and
read back), broken ones are an error naming the file and the key, and a query can read
only its own site's views, never write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyogrio
import pytest
from click.testing import CliRunner
from report_demo import demo_site

from toolkit.cli import cli

DEFINITIONS = Path(__file__).resolve().parent / "fixtures_reports"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    site, result = demo_site(tmp_path_factory.mktemp("definitions"))
    yield site, result
    site.close()


def _cli(site: Any, *args: str) -> Any:
    return CliRunner().invoke(
        cli, ["--store", str(site.db.path), "--site", "default", *args], catch_exceptions=False
    )


def _run(site: Any, *args: str) -> dict[str, Any]:
    done = _cli(site, "report", "run", *args, "--wait", "--json", "--reports", str(DEFINITIONS))
    assert done.exit_code in (0, 1), done.output
    instance: dict[str, Any] = json.loads(done.stdout)
    return instance


def test_definitions_join_the_catalogue_and_run_like_built_in_reports(demo: Any) -> None:
    site, result = demo
    listed = _cli(site, "report", "list", "--json", "--reports", str(DEFINITIONS))
    reports = {r["id"]: r for r in json.loads(listed.stdout)}
    assert {1, 2, 3, 4, 5, 6, 101, 102} <= set(reports)
    assert reports[101]["name"] == "Damage by street"
    assert reports[101]["source"].endswith("damage_by_street.toml")
    assert [p["key"] for p in reports[101]["params"]] == ["eventId", "minimum"]
    event = result.event["id"]
    instance = _run(site, "101", "--param", f"eventId={event}", "--param", "minimum=2")
    assert instance["status"] == "COMPLETED", instance["result"]
    fetched = _cli(site, "report", "fetch", instance["id"], "--reports", str(DEFINITIONS))
    contents = json.loads(fetched.stdout)["contents"]
    assert [f["key"] for f in contents["spec"]] == ["street", "locality", "items", "damaged"]
    rows = contents["data"]
    assert rows and all(r["damaged"] >= 2 for r in rows)
    assert [r["damaged"] for r in rows] == sorted((r["damaged"] for r in rows), reverse=True)
    # Counted independently from the items and their parcels.
    items = site.list_items(
        {"registerId": "damage-assessment", "eventId": str(event), "limit": "1000"}
    )["models"].values()
    street = {}
    for item in items:
        if item["assetId"] is None or item["status"] <= 0:
            continue
        asset = site.get_asset(str(item["assetId"]))
        extra = {e["key"]: e["value"] for e in asset["extraInfo"]}
        key = (extra["street"], extra["locality"])
        damaged = item["damageLevel"] != "None"
        street[key] = street.get(key, 0) + damaged
    first = rows[0]
    assert street[(first["street"], first["locality"])] == first["damaged"]
    assert sum(1 for n in street.values() if n >= 2) == len(rows)


def test_a_definition_with_geometry_has_a_map_and_gis_exports(demo: Any, tmp_path: Path) -> None:
    site, result = demo
    instance = _run(site, "102", "--param", f"eventId={result.event['id']}")
    assert instance["status"] == "COMPLETED", instance["result"]
    out = tmp_path / "severe.gpkg"
    done = _cli(
        site,
        "report",
        "fetch",
        instance["id"],
        "--format",
        "gpkg",
        "-o",
        str(out),
        "--reports",
        str(DEFINITIONS),
    )
    assert done.exit_code == 0, done.output
    layer = pyogrio.read_dataframe(out)
    assert layer.crs.to_epsg() == 4326 and set(layer["level"]) == {"Severe", "Destroyed"}
    assert set(layer.geom_type) <= {"Polygon", "MultiPolygon"}
    page = _cli(
        site, "report", "fetch", instance["id"], "--format", "html", "--reports", str(DEFINITIONS)
    ).stdout
    assert "<figure class='chart map'>" in page and f"{len(layer)} of {len(layer)}" in page


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("id = 5\nname = 'x'\n[query]\nsql = 'SELECT 1 AS a'\n[[column]]\nkey = 'a'\n", ": id: "),
        ("id = 150\n[query]\nsql = 'SELECT 1'\n[[column]]\nkey = 'a'\n", ": name: needs text"),
        ("id = 150\nname = 'x'\n[[column]]\nkey = 'a'\n", ": query: needs a [query]"),
        (
            "id = 150\nname = 'x'\ncolour = 'red'\n[query]\nsql = 'SELECT 1'\n",
            ": colour: is not a setting",
        ),
        (
            "id = 150\nname = 'x'\n[[param]]\nkey = 'n'\ntype = 'float'\n[query]\nsql = 'SELECT 1'"
            "\n[[column]]\nkey = 'a'\n",
            ": param[0].type: 'float' is not one of",
        ),
        (
            "id = 150\nname = 'x'\n[query]\nsql = 'SELECT 1'\n[[column]]\nkey = 'a'\n"
            "type = 'money'\n",
            ": column[0].type: 'money' is not one of",
        ),
        (
            "id = 150\nname = 'x'\n[query]\nsql = 'SELECT 1'\n[[column]]\nkey = 'a'\n[chart]\n"
            "title = 't'\nkey = 'b'\n",
            ": chart.key: 'b' is not a column",
        ),
        ("id = 150\nname = 'x\n", ": not TOML"),
        (
            "id = 101\nname = 'x'\n[query]\nsql = 'SELECT 1'\n[[column]]\nkey = 'a'\n",
            ": id: 101 is already",
        ),
        # Calling a named source instead of a query.
        (
            "id = 150\nname = 'x'\n[query]\nsql = 'SELECT 1'\n[source]\nname = 'import_jobs'\n",
            ": query: needs a [query] table with its sql, or a [source] (not both)",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'nope'\n",
            ": source.name: 'nope' is not a source",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\nsql = 'SELECT 1'\n",
            ": source.sql: is not a source setting",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\n[[param]]\nkey = 'colour'\n",
            ": param[0].key: source import_jobs reads no parameter 'colour'; it reads: status",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\n[[param]]\nkey = 'status'\n",
            ": param[0].type: source import_jobs reads status as choice",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\n[[param]]\nkey = 'status'\n"
            "type = 'choice'\nchoices = ['FAILED', 'DONE']\n",
            ": param[0].choices: 'DONE' is not one source import_jobs knows",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'matching_quality'\n",
            ": param: source matching_quality needs parameter 'jobId' (integer, required)",
        ),
        (
            "id = 150\nname = 'x'\ncolumn = [{ key = 'colour' }]\n[source]\nname = 'import_jobs'\n",
            ": column[0].key: 'colour' is not a column of source import_jobs; it gives: id,",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\n[[chart]]\ntitle = 't'\n"
            "key = 'id'\n[[chart]]\nkind = 'pie'\ntitle = 't'\nkey = 'id'\n",
            ": chart[1].kind: 'pie' is not one of",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\n[chart]\ntitle = 't'\n"
            "key = 'id'\npalette = 'neon'\n",
            ": chart.palette: 'neon' is not one of: severity, categorical",
        ),
        (
            "id = 150\nname = 'x'\n[source]\nname = 'import_jobs'\n[chart]\ntitle = 't'\n"
            "key = 'colour'\n",
            ": chart.key: 'colour' is not a column",
        ),
        (
            "id = 150\nname = 'x'\n[[param]]\nkey = 'e'\ntype = 'integer'\nscope = 'region'\n"
            "[query]\nsql = 'SELECT 1 AS a'\n[[column]]\nkey = 'a'\n",
            ": param[0].scope: 'region' is not one of: event, item, job",
        ),
        (
            "id = 150\nname = 'x'\n[[param]]\nkey = 'e'\nscope = 'item'\n"
            "[query]\nsql = 'SELECT 1 AS a'\n[[column]]\nkey = 'a'\n",
            ": param[0].scope: names an item by its id: needs type integer",
        ),
        (
            "id = 150\nname = 'x'\nheadline = 'items'\n[source]\nname = 'import_jobs'\n",
            ": headline: must be a list of metadata keys",
        ),
        (
            "id = 150\nname = 'x'\ntotals = 'yes'\n[source]\nname = 'import_jobs'\n",
            ": totals: must be true or false",
        ),
    ],
)
def test_a_broken_definition_is_an_error_naming_the_file_and_key(
    demo: Any, tmp_path: Path, text: str, named: str
) -> None:
    site, _result = demo
    folder = tmp_path / "mine"
    folder.mkdir()
    broken = folder / "broken.toml"
    broken.write_text(text)
    done = _cli(site, "report", "list", "--reports", str(DEFINITIONS), "--reports", str(folder))
    assert done.exit_code == 1
    assert f"Error: {broken}{named}" in done.output


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT count(*) AS a FROM item", "not authorized"),
        ("SELECT name AS a FROM sqlite_master", "prohibited"),
        ("DELETE FROM items", "cannot modify items"),
        ("SELECT password_hash AS a FROM user", "prohibited"),
    ],
)
def test_a_query_reads_only_its_sites_views(
    demo: Any, tmp_path: Path, sql: str, reason: str
) -> None:
    site, _result = demo
    (tmp_path / "bad.toml").write_text(
        f'id = 150\nname = "x"\n[query]\nsql = "{sql}"\n[[column]]\nkey = "a"\n'
    )
    done = _cli(site, "report", "run", "150", "--wait", "--reports", str(tmp_path))
    assert done.exit_code == 1
    assert f"{tmp_path / 'bad.toml'}: query.sql:" in done.output and reason in done.output


def test_a_column_the_query_does_not_return_fails_the_run(demo: Any, tmp_path: Path) -> None:
    site, _result = demo
    (tmp_path / "cols.toml").write_text(
        'id = 151\nname = "x"\n[query]\nsql = "SELECT id AS b FROM events"\n[[column]]\nkey = "a"\n'
    )
    done = _cli(site, "report", "run", "151", "--wait", "--reports", str(tmp_path))
    assert done.exit_code == 1
    assert "column.key 'a' is not a column of the query's result; it returns: b" in done.output


def test_a_definition_can_call_a_built_in_source(demo: Any) -> None:
    """Report 103 calls report 2's source with only eventId: the same damaged parcels,
    its own columns (labels and types it leaves out are report 2's), charts and page."""
    site, result = demo
    event = result.event["id"]
    listed = _cli(site, "report", "list", "--json", "--reports", str(DEFINITIONS))
    mine = next(r for r in json.loads(listed.stdout) if r["id"] == 103)
    assert [p["key"] for p in mine["params"]] == ["eventId"] and mine["chart"] == "bars"
    instance = _run(site, "103", "--param", f"eventId={event}")
    assert instance["status"] == "COMPLETED", instance["result"]
    fetched = _cli(site, "report", "fetch", instance["id"], "--reports", str(DEFINITIONS))
    contents = json.loads(fetched.stdout)["contents"]
    assert [(f["key"], f["label"], f["type"]) for f in contents["spec"]] == [
        ("locality", "Locality", "text"),
        ("name", "Parcel", "text"),
        ("worstLevel", "Worst damage level", "text"),
        ("damagedItems", "Damaged items", "integer"),
    ]
    built_in = _run(site, "2", "--param", f"eventId={event}")
    reference = json.loads(
        _cli(site, "report", "fetch", built_in["id"], "--reports", str(DEFINITIONS)).stdout
    )["contents"]["data"]
    assert len(reference) > 100  # the demo has hundreds of damaged parcels
    assert sorted((r["name"], r["worstLevel"]) for r in contents["data"]) == sorted(
        (r["name"], r["worstLevel"]) for r in reference
    )
    assert all(r["worstLevel"] != "None" for r in contents["data"])  # impact: damaged
    page = _cli(
        site, "report", "fetch", instance["id"], "--format", "html", "--reports", str(DEFINITIONS)
    ).stdout
    # Both charts (bars, then the map of the source's geometry), the headline, the totals.
    assert "Damaged parcels per locality" in page and "<figure class='chart map'>" in page
    assert "<div class='tiles'>" in page and "Share of active assets impacted</span>" in page
    total = sum(r["damagedItems"] for r in contents["data"])
    assert f"<tfoot><tr><td>Total</td><td></td><td></td><td class='num'>{total:,}</td>" in page


def test_the_built_in_reports_are_definition_files(tmp_path: Path) -> None:
    """The catalogue is the files shipped in toolkit/reports/defined, read by the loader
    analysts' files go through; as an analyst's file a built-in one is refused (its id)."""
    from toolkit.errors import OptionError
    from toolkit.reports import CATALOGUE
    from toolkit.reports.definitions import load_definition

    folder = Path(__file__).resolve().parent.parent / "toolkit" / "reports" / "defined"
    files = sorted(folder.glob("*.toml"))
    assert [d.id for d in CATALOGUE] == [1, 2, 3, 4, 5, 6] and len(files) == 6
    for path in files:
        definition = load_definition(path, built_in=True)
        shipped = CATALOGUE.get(definition.id)
        assert definition.describe() == shipped.describe()
        assert shipped.source == "built-in"
        with pytest.raises(OptionError, match=rf"{path}: id: must be a whole number from 100"):
            load_definition(path)
    # A changed file changes the report: the name comes from the file, not from Python.
    copy = tmp_path / "3_import_jobs.toml"
    copy.write_text(files[2].read_text().replace('name = "Import jobs"', 'name = "Jobs"'))
    assert load_definition(copy, built_in=True).name == "Jobs"
