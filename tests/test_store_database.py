"""The site file: migrations, transactions that keep all or nothing, crash recovery."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.errors import StoreError
from toolkit.store import SCHEMA_VERSION, Database
from toolkit.store.database import BULK_CACHE_KIB


def test_a_new_file_gets_the_current_schema(tmp_path: Path) -> None:
    with Database(tmp_path / "site.sqlite") as db:
        version = db.connection.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            row[0]
            for row in db.connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        mode = db.connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert version == SCHEMA_VERSION
    assert {"site", "event", "item", "asset", "audit_log", "import_job"} <= tables
    assert mode == "wal"


def test_a_file_from_a_newer_toolkit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match=r"site\.sqlite.*newer toolkit"):
        Database(path)


def test_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("these are not the tables you are looking for\n" * 100)
    with pytest.raises(StoreError, match=r"notes\.sqlite: cannot open the site file"):
        Database(path)


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    with Database(tmp_path / "site.sqlite") as db:
        with pytest.raises(RuntimeError), db.transaction() as conn:
            conn.execute("INSERT INTO site(name, date_created) VALUES ('a', 0)")
            raise RuntimeError("boom")
        count = db.connection.execute("SELECT count(*) FROM site").fetchone()[0]
    assert count == 0


def test_a_bulk_write_has_a_large_page_cache_only_while_it_lasts(tmp_path: Path) -> None:
    with Database(tmp_path / "site.sqlite") as db:
        (before,) = db.connection.execute("PRAGMA cache_size").fetchone()
        assert before != -BULK_CACHE_KIB
        with db.transaction(bulk=True) as conn:
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -BULK_CACHE_KIB
            conn.execute("INSERT INTO site(name, date_created) VALUES ('a', 0)")
        assert db.connection.execute("PRAGMA cache_size").fetchone()[0] == before
        with pytest.raises(RuntimeError), db.transaction(bulk=True) as conn:
            conn.execute("INSERT INTO site(name, date_created) VALUES ('b', 0)")
            raise RuntimeError("boom")
        assert db.connection.execute("PRAGMA cache_size").fetchone()[0] == before
        with db.transaction() as conn:  # an ordinary write keeps the ordinary cache
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == before
        names = [r[0] for r in db.connection.execute("SELECT name FROM site ORDER BY name")]
    assert names == ["a"]


def test_a_bulk_write_leaves_copying_its_log_to_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    with Database(path) as db:
        assert db.checkpointer is not None
        (automatic,) = db.connection.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert automatic > 0
        with db.transaction(bulk=True, commit=False) as conn:  # a dry run: nothing to copy
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
            conn.execute("INSERT INTO site(name, date_created) VALUES ('dry', 0)")
        assert not db.checkpointer.running()
        before = path.stat().st_size
        with db.transaction(bulk=True) as conn:
            # Its commit copies nothing into the file itself: ~8 MiB, well past the
            # automatic checkpoint's 1,000 pages.
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
            conn.executemany(
                "INSERT INTO site(name, date_created) VALUES (?, 0)",
                ((f"{i:06d}" + "x" * 4000,) for i in range(2000)),
            )
        db.log_copied()  # what a large read waits for
        assert not db.checkpointer.running()
        # The thread copied the log into the file; the committed rows read back.
        assert path.stat().st_size > before + 8_000_000
        count = db.connection.execute("SELECT count(*) FROM site").fetchone()[0]
        # With it done, the next write turns the automatic checkpoint on again.
        with db.transaction() as conn:
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == automatic
    assert count == 2000
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT count(*) FROM site").fetchone()[0] == 2000


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(proc.stdout)


def test_a_job_left_running_by_a_dead_process_reads_failed_on_next_open(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    with Database(path) as db, db.transaction() as conn:
        conn.execute("INSERT INTO site(id, name, date_created) VALUES (1, 'default', 0)")
        insert = (
            "INSERT INTO import_job(site_id, status, import_type, import_rule, pid, host, "
            "date_created) VALUES (1, 'RUNNING', 'item', 'r', ?, ?, 0)"
        )
        conn.execute(insert, (_dead_pid(), socket.gethostname()))
        # A job of a live process (this one) must be left alone.
        conn.execute(insert, (None, socket.gethostname()))
        conn.execute("UPDATE import_job SET pid = ? WHERE id = 2", (os.getpid(),))
    with Database(path, clock=lambda: 1234) as db:
        rows = db.connection.execute(
            "SELECT id, status, result, date_completed FROM import_job ORDER BY id"
        ).fetchall()
    assert [(r["id"], r["status"]) for r in rows] == [(1, "FAILED"), (2, "RUNNING")]
    assert "stopped before it finished" in rows[0]["result"]
    assert rows[0]["date_completed"] == 1234


def test_jobs_of_a_dead_process_keep_their_summary_and_queued_ones_fail_too(
    tmp_path: Path,
) -> None:
    import json

    from toolkit.store import SiteStore

    path = tmp_path / "site.sqlite"
    summary = {"status": "NOT_STARTED", "importRule": "r", "importType": "item", "source": "x"}
    with Database(path) as db:
        jobs = SiteStore(db, "demo").jobs
        queued = jobs.create(
            import_type="item", import_rule="r", user_id=None, params={}, summary=summary
        )
        running = jobs.create(
            import_type="item", import_rule="r", user_id=None, params={}, summary=summary
        )
        jobs.start(running)
        assert json.loads(jobs.get(running)["summary"])["status"] == "RUNNING"
        # As if a server had recorded both, then died: one running, one still in its queue.
        with db.transaction() as conn:
            conn.execute("UPDATE import_job SET pid = ?", (_dead_pid(),))
    with Database(path) as db:
        rows = {r["id"]: r for r in SiteStore(db, "demo").jobs.all()}
    for job_id, why in ((queued, "stopped before it started"), (running, "stopped before it")):
        row = rows[job_id]
        assert row["status"] == "FAILED" and why in row["result"]
        kept = json.loads(row["summary"])
        assert kept == {**summary, "status": "FAILED", "reason": kept["reason"]}
        assert why in kept["reason"]


def test_import_links_are_kept_per_job_and_site(tmp_path: Path) -> None:
    import pandas as pd

    from toolkit.store import SiteStore

    with Database(tmp_path / "site.sqlite") as db:
        store = SiteStore(db, "demo")
        job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
        links = pd.DataFrame(
            {
                "row": [1, 2],
                "reference": ["A", "B"],
                "query": ["12 SMITH ST", "x"],
                "asset_id": pd.array([100001, None], dtype="Int64"),
                "mode": ["soundex", None],
                "accuracy": [90.0, None],
                "candidates": [1, 0],
                "err": [None, "no asset matched"],
            }
        )
        store.jobs.record_links(job, links)
        kept = store.jobs.links(job)
        other = SiteStore(db, "other").jobs.links(job)
    assert kept["asset_id"].tolist()[0] == 100001
    assert kept["err"].isna().tolist() == [True, False]
    assert kept["err"].iloc[1] == "no asset matched"
    assert other.empty
