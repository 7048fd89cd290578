"""The test cluster itself: each test gets its own database with the extensions the
PostgreSQL store needs (PostGIS geometry, soundex, trigrams)."""

from __future__ import annotations

import psycopg


def test_database_has_the_store_extensions(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        names = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
        assert {"postgis", "fuzzystrmatch", "pg_trgm"} <= names
        assert conn.execute("SELECT soundex('Robert'), soundex('Rupert')").fetchone() == (
            "R163",
            "R163",
        )
        srid = conn.execute("SELECT ST_SRID(ST_GeomFromText('POINT(1 2)', 4326))").fetchone()
        assert srid == (4326,)
        conn.execute("CREATE TABLE leftover (id int)")


def test_each_test_starts_with_an_empty_database(pg_url: str) -> None:
    # The table the test above made is not here: databases are per test.
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_name = 'leftover'"
        ).fetchone()
        assert tables == (0,)
