"""The PostgreSQL store (issue 16): choosing it, its schema and migrations, its dialect
(the SQLite statements rewritten, SQLite's functions given their meaning over jsonb),
credentials never shown. A real server: the session's throwaway cluster."""

from __future__ import annotations

import json
from pathlib import Path

import jellyfish
import psycopg
import pytest
import shapely
from click.testing import CliRunner
from pg_cluster import Cluster

from toolkit.cli import cli
from toolkit.errors import StoreError
from toolkit.importing.pipeline import ImportRequest
from toolkit.model.location import PostgresURL, display_name, parse_location
from toolkit.site import LocalSite
from toolkit.store import SCHEMA_VERSION, Actor, Database, SiteStore
from toolkit.store.dialect import to_postgres
from toolkit.store.reports import AnalystQueryError, analyst_rows
from toolkit.store.schema import MIGRATIONS
from toolkit.store.schema_pg import POSTGRES_EXTENSIONS, POSTGRES_MIGRATIONS
from toolkit.store.sql import sounds_like

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def test_display_name_never_shows_a_password() -> None:
    assert (
        display_name("postgresql://ann:s3cret@db.example:5432/sites?sslmode=require")
        == "postgresql://ann@db.example:5432/sites?sslmode=require"
    )
    assert (
        display_name("postgresql:///sites?host=/run/pg&password=s3cret&user=ann")
        == "postgresql:///sites?host=/run/pg&user=ann"
    )
    assert display_name("site.sqlite") == "site.sqlite"
    assert isinstance(parse_location("postgres://h/db"), PostgresURL)


def test_statements_are_rewritten_for_postgresql() -> None:
    assert to_postgres("INSERT OR IGNORE INTO duty (a, b) VALUES (?, ?)") == (
        "INSERT INTO duty (a, b) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    )
    # '?' and '%' inside literals are text, not placeholders.
    assert to_postgres("SELECT '?%' || x FROM t WHERE y LIKE ? AND z IS ?") == (
        "SELECT '?%%' || x FROM t WHERE y LIKE %s AND z IS NOT DISTINCT FROM %s"
    )
    assert to_postgres("SELECT 1 FROM temp.ids t CROSS JOIN item r ON r.id = t.id") == (
        "SELECT 1 FROM pg_temp.ids t JOIN item r ON r.id = t.id"
    )
    assert to_postgres("SELECT json_object('a', json(x)) FROM user WHERE u IS NOT NULL") == (
        "SELECT jsonb_build_object('a', toolkit_json(x)) FROM \"user\" WHERE u IS NOT NULL"
    )


def test_every_migration_has_a_postgresql_body() -> None:
    assert len(POSTGRES_MIGRATIONS) == len(MIGRATIONS) == SCHEMA_VERSION


def test_the_schema_is_made_once_and_versioned(pg_url: str) -> None:
    with Database(pg_url) as db:
        assert db.dialect == "postgresql"
        assert db.sites() == []
    with Database(pg_url) as db, psycopg.connect(pg_url) as conn:
        # Opened again: nothing to do, the version stands.
        assert conn.execute("SELECT version FROM toolkit_schema").fetchall() == [(SCHEMA_VERSION,)]
        geometry = conn.execute(
            "SELECT type, srid FROM geometry_columns WHERE f_table_name = 'asset'"
        ).fetchone()
        assert geometry == ("GEOMETRY", 4326)
        gist = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'asset_geometry'"
        ).fetchone()
        assert gist is not None and "gist" in gist[0]
        conn.execute("UPDATE toolkit_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer toolkit"):
        Database(pg_url)


def test_schema_8_numbers_ids_by_default_and_keeps_existing_ones(pg_url: str) -> None:
    # A store as schema 7 left it: ids numbered by a trigger per row, some written as given.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for extension in POSTGRES_EXTENSIONS:
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        for body in POSTGRES_MIGRATIONS[:7]:
            if body:
                conn.execute(body.encode())
        conn.execute("CREATE TABLE toolkit_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO toolkit_schema VALUES (7)")
        conn.execute("INSERT INTO site (id, name, date_created) VALUES (41, 'old', 0)")
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, action, record_type, record_id) "
            "VALUES (41, 0, 'create', 'site', 41), (41, 0, 'create', 'site', 41)"
        )
    with Database(pg_url) as db, psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM toolkit_schema").fetchall() == [(SCHEMA_VERSION,)]
        triggers = conn.execute("SELECT tgname FROM pg_trigger WHERE tgname LIKE '%next_id'")
        assert triggers.fetchall() == []
        default = conn.execute(
            "SELECT column_default FROM information_schema.columns "
            "WHERE table_name = 'audit_log' AND column_name = 'id'"
        ).fetchone()
        assert default == ("nextval('toolkit_ids_audit_log'::regclass)",)
        store = SiteStore(db, "new")
        with db.transaction() as c:
            event = store.events.insert(c, {"name": "Flood", "status": 1}, Actor(), 1)
        assert event == 1
        sites = conn.execute("SELECT id, name FROM site ORDER BY id").fetchall()
        assert sites == [(41, "old"), (42, "new")]
        audit = conn.execute("SELECT id, record_type FROM audit_log ORDER BY id").fetchall()
        assert audit == [(1, "site"), (2, "site"), (3, "event")]


def test_a_read_never_makes_a_store_of_an_empty_database(pg_url: str) -> None:
    result = CliRunner().invoke(cli, ["--store", pg_url, "event", "list"])
    assert result.exit_code != 0
    assert "no site at postgresql://" in result.output
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('toolkit_schema')").fetchone() == (None,)


def test_init_on_postgresql_and_the_url_shown_without_password(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cluster trusts its socket, so any password is accepted and must not be shown.
    with_password = pg_url.replace("toolkit@", "toolkit:hunter2@")
    result = CliRunner().invoke(cli, ["--store", with_password, "--json", "init"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["created"] is True
    assert document["sites"] == ["default"]
    assert "hunter2" not in result.output
    assert document["store"] == pg_url
    # TOOLKIT_STORE selects it too; the site is there now.
    monkeypatch.setenv("TOOLKIT_STORE", pg_url)
    again = CliRunner().invoke(cli, ["--json", "--site", "north", "init"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["sites"] == ["default", "north"]


JSON_PATCH_CASES = [
    ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": "x"}),
    ({"a": [1, 2]}, {"a": {"b": 1}}),
    ({"a": 1}, {"a": None}),
    ({}, {"a": {"b": {"c": None}}}),
]


def _merge(target: object, patch: object) -> object:
    """RFC 7396, as the RFC writes it."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def test_sqlite_functions_mean_the_same_on_postgresql(pg_url: str) -> None:
    with Database(pg_url) as db:
        conn = db.connection
        for target, patch in JSON_PATCH_CASES:
            row = conn.execute(
                "SELECT json_patch(?, ?)", (json.dumps(target), json.dumps(patch))
            ).fetchone()
            assert row is not None and json.loads(row[0]) == _merge(target, patch)
        doc = json.dumps({"a b": "x", 'q"t': 2, "flag": True})
        row = conn.execute(
            "SELECT json_extract(?, ?), json_extract(?, ?), json_extract(?, ?), "
            "json_type(?, '$.missing')",
            (doc, '$."a b"', doc, '$."q\\"t"', doc, "$.flag", doc),
        ).fetchone()
        assert row is not None and tuple(row) == ("x", "2", "1", None)
        for value, query in [
            ("Robert Smith", "Rupert"),
            ("12 Smith St", "Smyth"),
            ("Main Road", "Jones"),
            ("Main", "12"),
            (None, "x"),
        ]:
            got = conn.execute("SELECT sounds_like(?, ?)", (value, query)).fetchone()
            assert got is not None and got[0] == sounds_like(value, query), (value, query)
        assert jellyfish.soundex("Rupert") == "R163"


def test_events_written_and_audited_on_postgresql(pg_url: str) -> None:
    with Database(pg_url) as db:
        store = SiteStore(db, "demo")
        with db.transaction() as conn:
            first = store.events.insert(conn, {"name": "Flood", "status": 1}, Actor(), 1)
            second = store.events.insert(conn, {"name": "Fire", "status": 1}, Actor(), 2)
        assert (first, second) == (1, 2)
        with pytest.raises(RuntimeError), db.transaction() as conn:
            store.events.insert(conn, {"name": "Storm", "status": 1}, Actor(), 3)
            raise RuntimeError("rolled back")
        names = [r[0] for r in db.connection.execute("SELECT name FROM event ORDER BY id")]
        assert names == ["Flood", "Fire"]
        audit = db.connection.execute(
            "SELECT action, record_type, record_id FROM audit_log ORDER BY id"
        ).fetchall()
        assert [tuple(r) for r in audit] == [("create", "event", 1), ("create", "event", 2)]


def test_an_analysts_query_reads_only_its_sites_views_on_postgresql(pg_url: str) -> None:
    with Database(pg_url) as db:
        mine, other = SiteStore(db, "mine"), SiteStore(db, "other")
        with db.transaction() as conn:
            mine.events.insert(conn, {"name": "Flood", "status": 1}, Actor(), 5)
            other.events.insert(conn, {"name": "Secret fire", "status": 1}, Actor(), 6)
        # Mixed-case names and :name parameters as on SQLite; only this site's rows.
        frames = analyst_rows(
            db, mine.site_id, "SELECT id, name, dateCreated FROM events WHERE id > :e", {"e": 0}
        )
        rows = [r for f in frames for r in f.to_dict("records")]
        assert rows == [{"id": 1, "name": "Flood", "dateCreated": 5}]
        for sql, reason in [
            ("SELECT count(*) FROM event", "reads only the site's views .* not event"),
            ('SELECT password_hash FROM "user"', "not user"),
            ("DELETE FROM events", "one SELECT, not Delete"),
            ("WITH d AS (DELETE FROM events RETURNING id) SELECT id FROM d", "not Delete"),
            ("CREATE TABLE x (a int)", "one SELECT, not Create"),
            ("SELECT id INTO x FROM events", "may not write a table"),
            ("SELECT id FROM events FOR UPDATE", "may not lock rows"),
            # A second statement could undo the role; only one statement is ever run.
            ('RESET ROLE; SELECT password_hash FROM "user"', "exactly one SELECT"),
            ("SELECT 1 AS a; SELECT name FROM event", "exactly one SELECT"),
            # Nor from inside one statement: a role set by set_config, then a query run
            # by a function, would read as the store's user; quoting or escaping the
            # name changes nothing (the check reads PostgreSQL's own parse).
            (
                "SELECT set_config('role', session_user, true) AS r, "
                "query_to_xml('SELECT password_hash FROM \"user\"', true, false, '') AS x",
                "may not call set_config",
            ),
            ("SELECT U&\"set\\005fconfig\"('role', session_user, true) AS r", "set_config"),
            ("SELECT \"QUERY_TO_XML\"('SELECT 1', true, false, '') AS x", "QUERY_TO_XML"),
            ("SELECT * FROM ts_stat('SELECT to_tsvector(name) FROM event')", "ts_stat"),
        ]:
            with pytest.raises(AnalystQueryError, match=reason):
                list(analyst_rows(db, mine.site_id, sql, {}))
        names = [r[0] for r in db.connection.execute("SELECT name FROM event ORDER BY id")]
        assert names == ["Flood", "Secret fire"]


FACILITIES = (
    "Code,Name,Type,Capacity,Manager,WKT\n"
    "F1,Town Hall,Hall,200,Ann,POINT (143.85 -37.56)\n"
    'F2,Pool,Pool,40,Bob,"POLYGON ((143.86 -37.57, 143.87 -37.57, 143.87 -37.58, 143.86 -37.57))"\n'
)


def _store_rows(location: str | Path, site: str) -> dict[str, list[tuple[object, ...]]]:
    """What a site holds, read through the store (geometry as shapes, JSON parsed)."""
    with Database(location, create=False) as db:
        store = SiteStore(db, site, create=False)
        assets = [
            (r["id"], r["code"], r["name"], json.loads(r["extra_info"]),
             shapely.normalize(shapely.from_wkb(r["geometry"])).wkt)
            for r in (store.assets.get(i) for i in (1, 2))
        ]  # fmt: skip
        audit = db.connection.execute(
            "SELECT id, action, record_type, record_id, changes FROM audit_log ORDER BY id"
        ).fetchall()
        return {
            "assets": assets,
            "audit": [(r[0], r[1], r[2], r[3], json.loads(r[4] or "null")) for r in audit],
            "events": [tuple(r) for r in db.connection.execute("SELECT * FROM event")],
        }


def test_site_copy_sqlite_to_postgresql_and_back(pg_url: str, tmp_path: Path) -> None:
    first = tmp_path / "first.sqlite"
    with LocalSite(first, "north", rule_paths=[RULES]) as site:
        csv = tmp_path / "facilities.csv"
        csv.write_text(FACILITIES, encoding="utf-8")
        job = site.run_import(ImportRequest("asset", "test-facilities", csv))
        assert job["status"] == "COMPLETE", job
        site.create_event({"name": "Flood", "tags": ["flood"]})
        site.add_user("ann", positions=["Officer"], approved=True)
    there = CliRunner().invoke(
        cli, ["--site", "north", "--json", "site", "copy", str(first), pg_url]
    )
    assert there.exit_code == 0, there.output
    counts = json.loads(there.stdout)["counts"]
    assert (counts["asset"], counts["event"], counts["user"], counts["site"]) == (2, 1, 1, 1)
    back = tmp_path / "back.sqlite"
    again = CliRunner().invoke(
        cli, ["--site", "north", "--json", "site", "copy", pg_url, str(back)]
    )
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["counts"] == counts
    original = _store_rows(first, "north")
    assert _store_rows(pg_url, "north") == original
    assert _store_rows(back, "north") == original
    # The copy is a working site: a new import numbers on from the copied records.
    with LocalSite(pg_url, "north") as site:
        assert site.create_event({"name": "Fire"})["id"] == 2
    # Copying again is refused: the site is there already.
    refused = CliRunner().invoke(cli, ["--site", "north", "site", "copy", str(first), pg_url])
    assert refused.exit_code == 1
    assert "holds a site 'north' already; nothing copied" in refused.output


def test_a_bare_database_gets_the_extensions_it_needs(pg_cluster: Cluster) -> None:
    with psycopg.connect(pg_cluster.url("postgres"), autocommit=True) as admin:
        admin.execute("CREATE DATABASE bare_store TEMPLATE template0")
    url = pg_cluster.url("bare_store")
    try:
        with Database(url) as db:
            assert db.sites() == []
            names = {r[0] for r in db.connection.execute("SELECT extname FROM pg_extension")}
            assert {"postgis", "fuzzystrmatch", "pg_trgm"} <= names
    finally:
        pg_cluster.drop_database(url)
