"""Two imports at once into one PostgreSQL store, in two real processes (issue 16):
into different events both run and neither takes the other's ids; of the same keys the
second waits for the first and updates its records, never inserting a key twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.site import LocalSite
from toolkit.store import Database

pytestmark = pytest.mark.slow

RULES = Path(__file__).resolve().parent / "fixtures_rules"
ROWS = 20_000


def _csv(path: Path, level: str) -> Path:
    lines = ["reference,level,count,notes"]
    lines += [f"R{i},{level},{i},note {i}" for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _start(url: str, source: Path, event: int) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "toolkit", "--store", url, "--rules", str(RULES), "--json",
        "--quiet", "import", str(source), "--type", "item", "--rule", "test-observations",
        "--event-id", str(event), "--region-id", "1",
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _both(url: str, first: tuple[Path, int], second: tuple[Path, int]) -> list[dict]:  # type: ignore[type-arg]
    processes = [_start(url, *first), _start(url, *second)]
    jobs = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        jobs.append(json.loads(out))
    return jobs


def _site(url: str) -> None:
    with LocalSite(url, "default") as site:
        site.create_event({"name": "Flood"})
        site.create_event({"name": "Fire"})


def _first(url: str, tmp_path: Path) -> None:
    """One import made the register before (the first import into a new register waits
    for another one making it at the same moment, a row lock of PostgreSQL's)."""
    with LocalSite(url, "default") as site:
        event = site.create_event({"name": "Earlier"})["id"]
    source = tmp_path / "first.csv"
    source.write_text("reference\nX1\n", encoding="utf-8")
    process = _start(url, source, event)
    assert process.wait(120) == 0


def test_imports_into_two_events_run_at_once(pg_url: str, tmp_path: Path) -> None:
    _site(pg_url)
    jobs = _both(
        pg_url, (_csv(tmp_path / "a.csv", "Low"), 1), (_csv(tmp_path / "b.csv", "High"), 2)
    )
    assert [j["summary"]["counts"]["inserted"] for j in jobs] == [ROWS, ROWS]
    with Database(pg_url) as db:
        rows = db.connection.execute(
            "SELECT event_id, count(*), count(DISTINCT id), min(fields ->> 'level') "
            "FROM item WHERE event_id IN (1, 2) GROUP BY event_id ORDER BY event_id"
        ).fetchall()
        assert [tuple(r) for r in rows] == [(1, ROWS, ROWS, "Low"), (2, ROWS, ROWS, "High")]
        windows = db.connection.execute(
            "SELECT id, date_created, date_completed FROM import_job ORDER BY id"
        ).fetchall()[-2:]
    # They ran at once: each started before the other finished.
    (_, start_a, end_a), (_, start_b, end_b) = windows
    assert start_a < end_b and start_b < end_a


def test_two_imports_of_the_same_keys_never_insert_a_key_twice(pg_url: str, tmp_path: Path) -> None:
    _site(pg_url)
    jobs = _both(
        pg_url, (_csv(tmp_path / "a.csv", "Low"), 1), (_csv(tmp_path / "b.csv", "High"), 1)
    )
    counts = sorted((j["summary"]["counts"]["inserted"], j["summary"]["counts"]["updated"])
                    for j in jobs)  # fmt: skip
    # One inserted every key; the other, waiting for it, found them and updated them.
    assert counts == [(0, ROWS), (ROWS, 0)]
    with Database(pg_url) as db:
        row = db.connection.execute(
            "SELECT count(*), count(DISTINCT fields ->> 'reference') FROM item"
        ).fetchone()
        assert row is not None and tuple(row) == (ROWS, ROWS)
