"""Bulk writes on the PostgreSQL store (issue 16/17): an import's rows and audit entries
check their site's foreign key once, not once per row, only where that leaves out
nothing else (no other foreign key, no trigger of the table's own) and only for a role
that may; every other row is checked as always. A real server: the session's cluster."""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd
import psycopg
import pytest
from pg_cluster import Cluster

from toolkit.importing.pipeline import ImportRequest
from toolkit.site import LocalSite
from toolkit.store import Database, SiteStore
from toolkit.store.dialect import site_checked_once

RULES = Path(__file__).resolve().parent / "fixtures_rules"
PASSWORD = "bulk-l0ad horse staple"
BULK_TABLES = ["item", "audit_log"]


def _insert_item(conn: object, site_id: int) -> None:
    conn.execute(  # type: ignore[attr-defined]  # either store's connection
        "INSERT INTO item (site_id, register_id, date_created, date_modified) "
        "VALUES (?, 'observation', 1, 1)",
        (site_id,),
    )


def _import(location: str, tmp_path: Path, rows: int) -> dict[str, object]:
    source = tmp_path / "obs.csv"
    lines = ["reference,level"] + [f"R{i},High" for i in range(rows)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with LocalSite(location, "north", rule_paths=[RULES]) as site:
        event = site.create_event({"name": "Flood"})["id"]
        job = site.run_import(
            ImportRequest("item", "test-observations", source, event_id=event, region_id=1)
        )
    assert job["status"] == "COMPLETE", job["result"]
    return job


def test_the_site_is_checked_once_inside_and_every_row_after(pg_url: str) -> None:
    with Database(pg_url) as db:
        store = SiteStore(db, "north")
        with db.transaction() as conn:
            with site_checked_once(conn, BULK_TABLES, store.site_id) as once:
                assert once
                role = conn.execute("SHOW session_replication_role").fetchone()
                assert role[0] == "replica"
                _insert_item(conn, store.site_id)
            assert conn.execute("SHOW session_replication_role").fetchone() == ("origin",)
            # The site row is locked as each row's own check locks it, to the end.
            locks = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' "
                "AND relation = 'site'::regclass AND mode = 'RowShareLock' "
                "AND pid = pg_backend_pid()"
            ).fetchone()
            assert locks[0] == 1
        # After the block a row of no site is refused by its own check again.
        with pytest.raises(psycopg.errors.ForeignKeyViolation), db.transaction() as conn:
            _insert_item(conn, store.site_id + 99)
        # A site that is not there is refused by the one check.
        with (
            pytest.raises(psycopg.errors.ForeignKeyViolation),
            db.transaction() as conn,
            site_checked_once(conn, BULK_TABLES, store.site_id + 99),
        ):
            _insert_item(conn, store.site_id + 99)
        counts = db.connection.execute("SELECT count(*) FROM item").fetchone()
        assert counts[0] == 1


def test_a_table_with_a_trigger_of_its_own_keeps_every_rows_checks(
    pg_url: str, tmp_path: Path
) -> None:
    # Replica mode would leave out this trigger too: so the rows are checked one by one.
    with psycopg.connect(pg_url, autocommit=True) as pg:
        Database(pg_url).close()  # the schema
        pg.execute("CREATE TABLE seen (n BIGINT NOT NULL)")
        pg.execute("INSERT INTO seen VALUES (0)")
        pg.execute(
            "CREATE FUNCTION count_item() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN UPDATE seen SET n = n + 1; RETURN NEW; END $$"
        )
        pg.execute(
            "CREATE TRIGGER count_item AFTER INSERT ON item FOR EACH ROW "
            "EXECUTE FUNCTION count_item()"
        )
    with (
        Database(pg_url) as db,
        db.transaction() as conn,
        site_checked_once(conn, BULK_TABLES, SiteStore(db, "north").site_id) as once,
    ):
        assert not once
        assert conn.execute("SHOW session_replication_role").fetchone() == ("origin",)
    job = _import(pg_url, tmp_path, 1200)
    assert job["summary"]["counts"]["inserted"] == 1200  # type: ignore[index]
    with psycopg.connect(pg_url) as pg:
        assert pg.execute("SELECT n FROM seen").fetchone() == (1200,)


def test_a_role_that_may_not_skip_the_checks_imports_with_them(
    pg_cluster: Cluster, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_cluster.password_login(pg_url, f"officer_{uuid.uuid4().hex[:12]}", PASSWORD)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with (
        Database(url) as db,
        db.transaction() as conn,
        site_checked_once(conn, BULK_TABLES, SiteStore(db, "north").site_id) as once,
    ):
        assert not once  # not a superuser: session_replication_role is refused
        _insert_item(conn, 1)  # the transaction goes on
    job = _import(url, tmp_path, 1500)
    assert job["summary"]["counts"]["inserted"] == 1500  # type: ignore[index]
    with psycopg.connect(url) as pg:
        items = pg.execute("SELECT count(*), min(site_id), max(site_id) FROM item")
        assert items.fetchone() == (1501, 1, 1)
        entries = pg.execute(
            "SELECT count(*) FROM audit_log WHERE record_type = 'item' AND action = 'create'"
        )
        assert entries.fetchone() == (1500,)


def _links(rows: int) -> pd.DataFrame:
    """Links as the link stage gives them (asset ids float, NaN where none was found)."""
    return pd.DataFrame(
        {
            "row": range(1, rows + 1),
            "reference": [f"R{i}" for i in range(rows)],
            "asset_id": [float(i) if i % 4 else float("nan") for i in range(rows)],
            "mode": "reference",
        }
    )


def _job_scans(conn: object) -> int:
    """Reads of ``import_job`` in this transaction so far (each foreign key check is one)."""
    row = conn.execute(  # type: ignore[attr-defined]  # the store's connection
        "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables "
        "WHERE relname = 'import_job'"
    ).fetchone()
    return int(row[0])


def test_a_jobs_links_check_their_job_once_not_once_a_link(pg_url: str) -> None:
    with Database(pg_url) as db:
        store = SiteStore(db, "north")
        job = store.jobs.create(import_type="item", import_rule="t", user_id=None, params={})
        with db.transaction() as conn:
            before = _job_scans(conn)
            store.jobs.record_links(job, _links(1000), conn=conn)
            assert _job_scans(conn) - before == 1  # not 1,000
            assert conn.execute("SHOW session_replication_role").fetchone() == ("origin",)
        stored = db.connection.execute(
            "SELECT count(*), count(asset_id), min(job_id), max(job_id) FROM import_link"
        ).fetchone()
        assert tuple(stored) == (1000, 750, job, job)
        # A job that is not there is refused by the one check; nothing is kept.
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="import_job"):
            store.jobs.record_links(job + 99, _links(10))
        assert db.connection.execute("SELECT count(*) FROM import_link").fetchone()[0] == 1000
