"""Nothing lost: a killed import leaves the site as it was; concurrent imports queue up.

These run real `toolkit import` processes against a real site file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.scratch import SWEEP_AFTER_S
from toolkit.store import Database

pytestmark = pytest.mark.slow


def _assets_csv(path: Path, rows: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    codes = pd.Series(np.arange(rows)).map("C{:07d}".format)
    pd.DataFrame(
        {
            "code": codes,
            "name": codes + " " + pd.Series(rng.integers(1, 999, rows)).astype(str) + " SMITH ST",
            "type": "Pole",
            "asset_no": pd.Series(rng.integers(0, 10**9, rows)).astype(str),
            "notes": "inspected after the storm; leaning, cables intact",
        }
    ).to_csv(path, index=False)
    return path


def _import(store: Path, source: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolkit",
            "--store",
            str(store),
            "--json",
            "import",
            str(source),
            "--type",
            "asset",
            "--rule",
            "assets-csv",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_an_import_killed_mid_write_leaves_the_site_as_it_was(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    wal = tmp_path / "site.sqlite-wal"
    source = _assets_csv(tmp_path / "poles.csv", 300_000)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "TOOLKIT_WORK_DIR": str(work)}
    process = _import(store, source, env)
    deadline = time.monotonic() + 120
    # Wait until the job's data is being written (the write-ahead log grows past a few MB),
    # then kill the process without warning.
    while process.poll() is None and time.monotonic() < deadline:
        if wal.exists() and wal.stat().st_size > 4_000_000:
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the import ended before it could be killed"
    with Database(store) as db:
        status, result = db.connection.execute("SELECT status, result FROM import_job").fetchone()
        counts = db.connection.execute(
            "SELECT (SELECT count(*) FROM asset), (SELECT count(*) FROM audit_log)"
        ).fetchone()
    assert status == "FAILED"
    assert "stopped before it finished" in result
    assert tuple(counts) == (0, 0)

    # Its job folder could not be removed; the next import (once the folder is older than
    # the time a new folder takes to be locked) removes it.
    (left,) = work.glob("toolkit-import-*")
    past = time.time() - SWEEP_AFTER_S - 5
    os.utime(left, (past, past))
    again = _import(store, _assets_csv(tmp_path / "few.csv", 100), env)
    assert again.wait(120) == 0, again.communicate()[1]
    assert not left.exists()
    assert list(work.iterdir()) == []


def test_two_imports_at_once_finish_one_after_the_other(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    source = _assets_csv(tmp_path / "poles.csv", 40_000)
    Database(store).close()  # the file exists before both start, as on a live site
    first, second = _import(store, source), _import(store, source)
    outputs = [p.communicate(timeout=300) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    counts = sorted(
        (
            json.loads(out)["summary"]["counts"]["inserted"],
            json.loads(out)["summary"]["counts"]["unchanged"],
        )
        for out, _ in outputs
    )
    # The second saw everything the first wrote: no key was inserted twice, and the same
    # rows found again changed nothing.
    assert counts == [(0, 40_000), (40_000, 0)]
    with Database(store) as db:
        assert db.connection.execute("SELECT count(*) FROM asset").fetchone()[0] == 40_000
        statuses = [r[0] for r in db.connection.execute("SELECT status FROM import_job")]
    assert statuses == ["COMPLETE", "COMPLETE"]
