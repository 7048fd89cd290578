"""SQLite's bulk insert (``insert_rows``): several rows a statement, the rows and values
exactly as ``executemany`` of one row a statement would write them."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from toolkit.store.dialect import MAX_VALUES_PER_INSERT, ROWS_PER_INSERT, insert_rows

HEAD = "INSERT INTO t (job, n, text, x, blob)"
ROW = "(7, ?, ?, ?, ?)"  # a literal beside the bound values


def _table(path: Path, name: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path / f"{name}.sqlite")
    conn.execute("CREATE TABLE t (job INTEGER, n INTEGER PRIMARY KEY, text TEXT, x REAL, blob)")
    return conn


def _rows(count: int) -> list[tuple[object, ...]]:
    """Values of every kind sqlite3 binds: ints, text (non-ASCII, quotes, '?'), floats
    (NaN stored as NULL), None and bytes."""
    texts = ["a", "é ñ 漢字", "it's ?", "", None]
    reals = [0.5, math.nan, -1e300, None]
    return [
        (i, texts[i % len(texts)], reals[i % len(reals)], bytes([i % 256]) if i % 3 else None)
        for i in range(count)
    ]


@pytest.mark.parametrize("count", [0, 1, ROWS_PER_INSERT - 1, ROWS_PER_INSERT, 1000, 1003])
def test_rows_are_written_as_one_row_a_statement_writes_them(tmp_path: Path, count: int) -> None:
    rows = _rows(count)
    bulk, single = _table(tmp_path, "bulk"), _table(tmp_path, "single")
    insert_rows(bulk, HEAD, ROW, iter(rows), count=count, width=4)
    single.executemany(f"{HEAD} VALUES {ROW}", rows)
    got = bulk.execute("SELECT * FROM t ORDER BY n").fetchall()
    assert got == single.execute("SELECT * FROM t ORDER BY n").fetchall()
    assert len(got) == count and all(r[0] == 7 for r in got)


def test_wide_rows_stay_within_sqlites_oldest_limit_on_values(tmp_path: Path) -> None:
    width = 300  # three rows would pass 999 values: fewer rows a statement
    conn = sqlite3.connect(tmp_path / "wide.sqlite")
    conn.execute(f"CREATE TABLE w ({', '.join(f'c{i}' for i in range(width))})")
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, MAX_VALUES_PER_INSERT)
    rows = [tuple(range(r, r + width)) for r in range(10)]
    insert_rows(
        conn, "INSERT INTO w", f"({', '.join('?' * width)})", iter(rows), count=10, width=width
    )
    assert conn.execute("SELECT * FROM w ORDER BY c0").fetchall() == rows


def test_no_row_is_dropped_when_fewer_come_than_counted(tmp_path: Path) -> None:
    """Rows short of a statement's worth would be dropped by the grouping: an error. Rows
    short of ``count`` after whole statements are written as they come."""
    conn = _table(tmp_path, "short")
    with pytest.raises(ValueError, match="32 rows were to be inserted, 16 were given"):
        insert_rows(conn, HEAD, ROW, iter(_rows(20)), count=40, width=4)
    conn.rollback()
    insert_rows(conn, HEAD, ROW, iter(_rows(35)), count=40, width=4)
    assert conn.execute("SELECT count(*), sum(n) FROM t").fetchone() == (35, sum(range(35)))


def test_a_refused_row_fails_the_insert(tmp_path: Path) -> None:
    conn = _table(tmp_path, "refused")
    rows = _rows(40)
    rows[21] = rows[20]  # the same key twice
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        insert_rows(conn, HEAD, ROW, iter(rows), count=40, width=4)
