"""Hostile analysts' queries on both stores (issue 16): SQLite's authorizer and
PostgreSQL's checked parse, role and read-only transaction refuse the same things:
another site's rows, the user table and its password hashes, the database's catalogs,
the server's files and large objects, writes, several statements, SQL run from text, and
a query that never ends. No refusal repeats another site's value or a hash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from report_demo import demo_site

from toolkit.cli import cli
from toolkit.site import LocalSite
from toolkit.store import Actor, Database, SiteStore
from toolkit.store.reports import AnalystQueryError, analyst_rows

SECRET = "Secret fire"

# Refused on both stores: (query, what the refusal says on SQLite, on PostgreSQL).
BOTH = [
    ("SELECT name FROM event", "prohibited", "not event"),
    ('SELECT password_hash FROM "user"', "prohibited", "not user"),
    ("SELECT e.name FROM events x JOIN event e ON 1 = 1", "prohibited", "not event"),
    ("DELETE FROM events", "cannot modify events", "not Delete"),
    ("CREATE TABLE x (a INTEGER)", "not authorized", "not Create"),
    ("SELECT 1 AS a; SELECT name FROM event", "one statement at a time", "exactly one"),
    # SQLite reads the inner event as the WITH query itself; PostgreSQL as the table.
    ("WITH event AS (SELECT name FROM event) SELECT name FROM event", "circular", "not event"),
]
SQLITE_ONLY = [
    ("SELECT name, sql FROM sqlite_master", "prohibited"),
    ("SELECT * FROM pragma_table_info('user')", "not authorized|prohibited"),
    ("PRAGMA table_info('user')", "not authorized"),
    ("ATTACH DATABASE '/tmp/x.sqlite' AS x", "not authorized"),
    ("SELECT load_extension('/tmp/nothing') AS x", "not authorized"),
    ("SELECT readfile('/etc/passwd') AS x", "no such function"),
]
POSTGRES_ONLY = [
    ("SELECT rolname, rolpassword FROM pg_authid", "not pg_authid"),
    ("SELECT rolname FROM pg_catalog.pg_roles", "not pg_catalog.pg_roles"),
    ("SELECT name, setting FROM pg_settings", "not pg_settings"),
    ("SELECT usename, query FROM pg_stat_activity", "not pg_stat_activity"),
    ("SELECT table_name FROM information_schema.tables", "not information_schema.tables"),
    ("SELECT srtext FROM spatial_ref_sys", "not spatial_ref_sys"),
    ("WITH pg_roles AS (SELECT * FROM pg_roles) SELECT * FROM pg_roles", "not pg_roles"),
    ("SELECT pg_read_file('/etc/passwd') AS f", "may not call pg_read_file"),
    ("SELECT lo_import('/etc/passwd') AS f", "may not call lo_import"),
    ("SELECT lo_get(1) AS f", "may not call lo_get"),
    ("SELECT * FROM pg_ls_dir('.') AS f", "may not call pg_ls_dir"),
    ("SELECT current_setting('data_directory') AS d", "may not call current_setting"),
    ("SELECT pg_sleep(60) AS s", "may not call pg_sleep"),
    ("SELECT pg_terminate_backend(1) AS s", "may not call pg_terminate_backend"),
    ("COPY (SELECT name FROM events) TO STDOUT", "one SELECT, not Copy"),
    ("COPY (SELECT 1) TO '/tmp/analyst-copy'", "one SELECT, not Copy"),
    ("SELECT table_to_xml('event', true, false, '') AS x", "may not call table_to_xml"),
    ("SELECT * FROM dblink('dbname=x', 'SELECT 1') AS t(a int)", "may not call dblink"),
    ("SELECT U&\"pg\\005fread\\005ffile\"('/etc/passwd') AS f", "may not call pg_read_file"),
    ("SELECT nextval('toolkit_ids_event') AS n", "may not call nextval"),
]
# Never ends unless stopped.
# (max, not count(*): SQLite's authorizer sees count(*) over a WITH query as a read of a
# table's every column, as over a table, and refuses it.)
FOREVER = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r"


@pytest.fixture
def two_sites(store_location: str | Path) -> tuple[Database, int]:
    """A store with the site "mine" (event Flood; a user with a password) and the site
    "other" (event Secret fire); the database and mine's id."""
    with LocalSite(store_location, "mine", create=True) as site:
        site.add_user("ann", positions=["Officer"], approved=True)
        site.set_password("ann", "ann's long password")
    db = Database(store_location)
    mine, other = SiteStore(db, "mine"), SiteStore(db, "other")
    with db.transaction() as conn:
        mine.events.insert(conn, {"name": "Flood", "status": 1}, Actor(), 5)
        other.events.insert(conn, {"name": SECRET, "status": 1}, Actor(), 6)
    return db, mine.site_id


def _rows(db: Database, site_id: int, sql: str, timeout_s: float = 60) -> list[dict[str, object]]:
    frames = analyst_rows(db, site_id, sql, {}, timeout_s=timeout_s)
    return [row for frame in frames for row in frame.to_dict("records")]


def _refused(db: Database, site_id: int, sql: str, reason: str) -> None:
    with pytest.raises(AnalystQueryError, match=reason) as caught:
        _rows(db, site_id, sql)
    message = str(caught.value)
    assert SECRET not in message and "$argon2" not in message


def test_hostile_queries_are_refused_on_both_stores(two_sites: tuple[Database, int]) -> None:
    db, site_id = two_sites
    postgres = db.dialect == "postgresql"
    for sql, on_sqlite, on_postgres in BOTH:
        _refused(db, site_id, sql, on_postgres if postgres else on_sqlite)
    for sql, reason in POSTGRES_ONLY if postgres else SQLITE_ONLY:
        _refused(db, site_id, sql, reason)
    # What the analyst may read, only this site's.
    assert _rows(db, site_id, "SELECT id, name FROM events") == [{"id": 1, "name": "Flood"}]
    # A condition that fails on another site's value never sees it: the site's filter
    # comes first (PostgreSQL: a security-barrier view).
    cast = "SELECT id FROM events WHERE name <> 'Flood' AND CAST(name AS INTEGER) = 0"
    assert _rows(db, site_id, cast) == []
    finite = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
    assert _rows(db, site_id, finite + "SELECT n FROM r") == [{"n": 1}, {"n": 2}, {"n": 3}]
    with db.transaction() as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM event ORDER BY id")]
    assert names == ["Flood", SECRET]  # nothing written
    db.close()


def test_a_query_that_never_ends_is_stopped(two_sites: tuple[Database, int]) -> None:
    db, site_id = two_sites
    with pytest.raises(AnalystQueryError, match="ran longer than its limit of 1 s"):
        _rows(db, site_id, FOREVER, timeout_s=1)
    # The store is usable after it.
    assert _rows(db, site_id, "SELECT count(*) AS n FROM events") == [{"n": 1}]
    db.close()


DEFINITIONS = Path(__file__).resolve().parent / "fixtures_reports"


def _contents(store: str | Path, *args: str) -> dict[str, Any]:
    base = ["--store", str(store), "--site", "default", "report"]
    reports = ("--reports", str(DEFINITIONS))
    ran = CliRunner().invoke(cli, [*base, "run", *args, "--wait", "--json", *reports])
    assert ran.exit_code == 0, ran.output
    instance = json.loads(ran.stdout)
    fetched = CliRunner().invoke(cli, [*base, "fetch", instance["id"], *reports])
    assert fetched.exit_code == 0, fetched.output
    contents: dict[str, Any] = json.loads(fetched.stdout)["contents"]
    return contents


@pytest.mark.slow
def test_the_analysts_fixture_definitions_give_the_same_rows_on_postgresql(
    pg_url: str, tmp_path: Path
) -> None:
    # The demo site, copied whole to PostgreSQL: the same records on both stores.
    site, result = demo_site(tmp_path)
    site.close()
    sqlite = tmp_path / "site.sqlite"
    copied = CliRunner().invoke(cli, ["--site", "default", "site", "copy", str(sqlite), pg_url])
    assert copied.exit_code == 0, copied.output
    event = str(result.event["id"])
    for args in (("101", "--param", f"eventId={event}", "--param", "minimum=2"),
                 ("102", "--param", f"eventId={event}"),
                 ("103", "--param", f"eventId={event}")):  # fmt: skip
        on_sqlite, on_postgres = _contents(sqlite, *args), _contents(pg_url, *args)
        assert on_sqlite["data"], args
        assert on_postgres["spec"] == on_sqlite["spec"]
        assert on_postgres["data"] == on_sqlite["data"], args
    # SQLite's own forms (a summed comparison, an alias in HAVING) are not PostgreSQL's:
    # there the run fails, naming the file and what PostgreSQL could not do.
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "sqlite_only.toml").write_text(
        "id = 150\nname = 'x'\n[query]\nsql = '''SELECT count(*) AS items, "
        "sum(json_extract(fields, '$.damageLevel') IN ('Severe')) AS severe FROM items "
        "HAVING severe >= 0'''\n[[column]]\nkey = 'items'\n[[column]]\nkey = 'severe'\n",
        encoding="utf-8",
    )
    for store, code in ((sqlite, 0), (pg_url, 1)):
        ran = CliRunner().invoke(
            cli,
            ["--store", str(store), "--site", "default", "report", "run", "150", "--wait",
             "--reports", str(tmp_path / "own")],
        )  # fmt: skip
        assert ran.exit_code == code, ran.output
    assert f"{tmp_path / 'own' / 'sqlite_only.toml'}: query.sql: function sum(boolean)" in (
        ran.output
    )
