"""Two imports at once into one PostgreSQL store, in two real processes (issue 16):
into different events both run and neither takes the other's ids; of the same keys the
second waits for the first and updates its records, never inserting a key twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


# ``toolkit`` whose item import, once it has written its rows and before its transaction
# ends, touches the file $PAUSE_WRITTEN and waits for the file $PAUSE_UNTIL: a test holds
# one import in the middle of its write while another runs.
_PAUSING_TOOLKIT = """
import os, sys, time
from pathlib import Path
import toolkit.importing.pipeline as pipeline
write_items = pipeline.write_items  # the item writer the runner calls (item_writes)
def paused(*args, **kwargs):
    written = write_items(*args, **kwargs)
    Path(os.environ["PAUSE_WRITTEN"]).touch()
    deadline = time.monotonic() + 120
    while not Path(os.environ["PAUSE_UNTIL"]).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return written
pipeline.write_items = paused
from toolkit.cli import main
sys.argv[0] = "toolkit"
main()
"""


def _start(
    url: str, source: Path, event: int, pause: tuple[Path, Path] | None = None
) -> subprocess.Popen[str]:
    """``toolkit import`` of ``source`` in a process of its own; with ``pause`` (written,
    until), held inside its write transaction as ``_PAUSING_TOOLKIT`` does."""
    program = ["-c", _PAUSING_TOOLKIT] if pause else ["-m", "toolkit"]
    command = [
        sys.executable, *program, "--store", url, "--rules", str(RULES), "--json",
        "--quiet", "import", str(source), "--type", "item", "--rule", "test-observations",
        "--event-id", str(event), "--region-id", "1",
    ]  # fmt: skip
    env = dict(os.environ)
    if pause:
        env |= {"PAUSE_WRITTEN": str(pause[0]), "PAUSE_UNTIL": str(pause[1])}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


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
    """The first import is held inside its write transaction, its rows written, while the
    second runs from start to commit: nothing of the first's blocks it."""
    _site(pg_url)
    _first(pg_url, tmp_path)
    written, release = tmp_path / "a-written", tmp_path / "a-release"
    held = _start(pg_url, _csv(tmp_path / "a.csv", "Low"), 1, pause=(written, release))
    try:
        deadline = time.monotonic() + 120
        while not written.exists() and held.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert written.exists(), held.communicate()[1]
        second = _start(pg_url, _csv(tmp_path / "b.csv", "High"), 2)
        out_b, err_b = second.communicate(timeout=120)  # would time out if it waited
        assert second.returncode == 0, err_b
        assert held.poll() is None  # the first is still inside its transaction
        with Database(pg_url) as db:  # the second's rows are committed, the first's not yet
            counts = db.connection.execute(
                "SELECT event_id, count(*) FROM item WHERE event_id IN (1, 2) GROUP BY event_id"
            ).fetchall()
            assert [tuple(r) for r in counts] == [(2, ROWS)]
    finally:
        release.touch()
    out_a, err_a = held.communicate(timeout=120)
    assert held.returncode == 0, err_a
    jobs = [json.loads(out_a), json.loads(out_b)]
    assert [j["summary"]["counts"]["inserted"] for j in jobs] == [ROWS, ROWS]
    with Database(pg_url) as db:
        rows = db.connection.execute(
            "SELECT event_id, count(*), count(DISTINCT id), min(fields ->> 'level') "
            "FROM item WHERE event_id IN (1, 2) GROUP BY event_id ORDER BY event_id"
        ).fetchall()
        assert [tuple(r) for r in rows] == [(1, ROWS, ROWS, "Low"), (2, ROWS, ROWS, "High")]


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


# One process's asset insert: site "default", ids left to the store, the transaction kept
# open a moment after writing (``hold``), a file touched once the rows are in. Each process
# its own asset type: a type both made would make the second wait on the first's row.
_INSERT_ASSETS = """
import sys, time
from pathlib import Path
import numpy as np
from toolkit.store import Actor, Database, SiteStore
from toolkit.store.assets import NewAssets
url, name, count, hold, ready, wait_for = sys.argv[1:]
count = int(count)
while wait_for != "-" and not Path(wait_for).exists():
    time.sleep(0.02)
with Database(url) as db:
    store = SiteStore(db, "default")
    with db.transaction() as conn:
        ids = store.assets.insert_many(conn, NewAssets(
            type=f"Type {name}", name=[f"{name} {i}" for i in range(count)],
            code=[f"{name}{i}" for i in range(count)], friendly=[None] * count,
            region_id=None, status=1, extra_info=["{}"] * count, geometry=[None] * count,
            bounds=np.full((count, 4), np.nan)), Actor(), db.clock())
        Path(ready).touch()
        time.sleep(float(hold))
print(min(ids), max(ids))
"""


def test_two_processes_inserting_assets_into_one_site_never_draw_one_id(
    pg_url: str, tmp_path: Path
) -> None:
    # The second inserts while the first's rows are written but not committed: both read
    # the same largest id unless the second waits for the first's transaction.
    with LocalSite(pg_url, "default"):
        pass
    count = 2_000
    ready_a, ready_b = tmp_path / "a.ready", tmp_path / "b.ready"
    script = [sys.executable, "-c", _INSERT_ASSETS, pg_url]
    first = [*script, "A", str(count), "1.5", str(ready_a), "-"]
    second = [*script, "B", str(count), "0", str(ready_b), str(ready_a)]
    processes = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in (first, second)]  # fmt: skip
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        outputs.append(tuple(int(v) for v in out.split()))
    assert outputs == [(1, count), (count + 1, 2 * count)]
    with Database(pg_url) as db:
        row = db.connection.execute(
            "SELECT count(*), count(DISTINCT id), min(id), max(id), "
            "count(*) FILTER (WHERE code LIKE 'A%' AND id <= ?) FROM asset",
            (count,),
        ).fetchone()
        assert row is not None and tuple(row) == (2 * count, 2 * count, 1, 2 * count, count)
        audited = db.connection.execute(
            "SELECT count(DISTINCT record_id) FROM audit_log WHERE record_type = 'asset'"
        ).fetchone()
        assert audited is not None and audited[0] == 2 * count
