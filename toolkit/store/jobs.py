"""Import job records: the spec's job object (2.7) and its moves between states."""

from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
from itertools import repeat
from typing import TYPE_CHECKING, Any

from toolkit.lazy import lazy
from toolkit.store.database import Database
from toolkit.store.dialect import (
    copy_rows,
    insert_rows,
    is_postgres_connection,
    key_checked_once,
)
from toolkit.store.sql import one_row, read_frame

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy("numpy")
    pd = lazy("pandas")


class JobStore:
    """The import jobs of one site.

    A job moves ``NOT_STARTED -> RUNNING -> COMPLETE | FAILED``. Each move is
    its own small committed transaction, apart from the data the job writes,
    so the job record survives a rollback of that data.
    """

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id

    def create(
        self,
        *,
        import_type: str,
        import_rule: str,
        user_id: str | None,
        params: dict[str, object],
        summary: dict[str, object] | None = None,
    ) -> int:
        """Record a ``NOT_STARTED`` job with everything it was asked to do.

        ``summary`` is the job's summary before it runs (its rule, type, source...), kept
        from the start so a job whose process dies still says what it was.
        """
        # The process that records the job is the one that will run it (a server queues it in
        # its own threads): if that process dies first, orphan recovery can tell.
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO import_job (site_id, status, code, user_id, import_type, "
                "import_rule, params, summary, pid, host, date_created) "
                "VALUES (?, 'NOT_STARTED', 200, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.site_id,
                    user_id,
                    import_type,
                    import_rule,
                    json.dumps(params, ensure_ascii=False),
                    None if summary is None else json.dumps(summary, ensure_ascii=False),
                    os.getpid(),
                    socket.gethostname(),
                    self.db.clock(),
                ),
            )
            return int(cursor.lastrowid or 0)

    def start(self, job_id: int) -> None:
        """Mark the job RUNNING in this process (so a crash can be told from a live run)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE import_job SET status = 'RUNNING', pid = ?, host = ?, "
                "summary = json_set(summary, '$.status', 'RUNNING') "
                "WHERE id = ? AND status = 'NOT_STARTED'",
                (os.getpid(), socket.gethostname(), job_id),
            )

    def finish(
        self,
        job_id: int,
        *,
        status: str,
        code: int,
        summary: dict[str, object],
        result: str,
        conn: sqlite3.Connection | None = None,
    ) -> None:
        """Record the outcome; pass ``conn`` to commit it together with the job's data."""
        statement = (
            "UPDATE import_job SET status = ?, code = ?, summary = ?, result = ?, "
            "date_completed = ? WHERE id = ?"
        )
        params = (
            status,
            code,
            json.dumps(summary, ensure_ascii=False),
            result,
            self.db.clock(),
            job_id,
        )
        if conn is not None:
            conn.execute(statement, params)
            return
        with self.db.transaction() as own:
            own.execute(statement, params)

    def get(self, job_id: int) -> sqlite3.Row | None:
        return one_row(
            self.db.connection.execute(
                "SELECT * FROM import_job WHERE id = ? AND site_id = ?", (job_id, self.site_id)
            )
        )

    def all(self) -> list[sqlite3.Row]:
        return self.db.connection.execute(
            "SELECT * FROM import_job WHERE site_id = ? ORDER BY id", (self.site_id,)
        ).fetchall()

    LINK_COLUMNS = (
        "row",
        "reference",
        "query",
        "asset_id",
        "mode",
        "accuracy",
        "candidates",
        "err",
        "probability",
        "evidence",
    )

    def record_links(
        self,
        job_id: int,
        links: pd.DataFrame,
        *,
        conn: sqlite3.Connection | None = None,
        append: bool = False,
    ) -> None:
        """Keep how each row was linked to an asset (columns :attr:`LINK_COLUMNS`;
        ``probability`` and ``evidence`` may be absent: no fuzzy matching was done), in
        ``conn``'s transaction when the caller holds one; ``append``: beside the links kept
        already (an import read in parts), not instead of them."""
        # A column with no value in any row is left to the table's default (NULL): a
        # value bound costs more than the row's own share of the insert.
        names = [
            c
            for c in self.LINK_COLUMNS
            if c == "row" or (c in links.columns and bool(links[c].notna().any()))
        ]

        def write(conn: sqlite3.Connection) -> None:
            if not append:
                conn.execute("DELETE FROM import_link WHERE job_id = ?", (job_id,))
            if is_postgres_connection(conn):
                columns = [_link_values(links[c], _LINK_KINDS[c], None) for c in names]
                # Every link is of this job: its key checked once, not by a trigger a row
                # (tests/benchmarks/bench_link_fk.py: 1.6 s of 2.5 s for 200,000 links).
                with key_checked_once(
                    conn, ["import_link"], column="job_id", parent="import_job", key=job_id
                ):
                    rows = zip(repeat(job_id), *columns)
                    copy_rows(conn, "import_link", ["job_id", *names], rows)
                return
            # NaN, not None, stands for a missing value here: sqlite3 binds a float as it
            # is and SQLite stores a NaN as NULL, while each None goes through sqlite3's
            # adapter lookup first (0.3 us a value: of 1,000,000 links' 3.1 s, 1 s).
            columns = [_link_values(links[c], _LINK_KINDS[c], math.nan) for c in names]
            insert_rows(
                conn,
                f"INSERT INTO import_link (job_id, {', '.join(names)})",
                f"({int(job_id)}, {', '.join('?' * len(names))})",
                zip(*columns, strict=True),
                count=len(links),
                width=len(names),
            )

        if conn is not None:
            write(conn)
            return
        with self.db.transaction() as own:
            write(own)

    def links(self, job_id: int) -> pd.DataFrame:
        """How the rows of a job were linked, in row order."""
        return read_frame(
            self.db.connection,
            "SELECT l.row, l.reference, l.query, l.asset_id, l.mode, l.accuracy, l.candidates, "
            "l.err, l.probability, l.evidence FROM import_link l "
            "JOIN import_job j ON j.id = l.job_id "
            "WHERE l.job_id = ? AND j.site_id = ? ORDER BY l.row",
            (job_id, self.site_id),
        )


# What each link column holds, as the table declares it.
_LINK_KINDS = {
    "row": "integer",
    "reference": "text",
    "query": "text",
    "asset_id": "integer",
    "mode": "text",
    "accuracy": "real",
    "candidates": "integer",
    "err": "text",
    "probability": "real",
    "evidence": "text",
}


def _link_values(column: pd.Series, kind: str, missing: float | None) -> list[Any]:
    """A link column as Python values of its kind (an asset id as an int even where the
    column is float for its missing values), ``missing`` where a value is missing."""
    if kind == "integer":
        # Only a numpy integer column has no missing value: a nullable one (``Int64``)
        # would come out of ``to_numpy`` as floats with NaN.
        if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu":
            values: list[Any] = column.to_numpy().tolist()
            return values
        column = pd.to_numeric(column).astype("Int64")
    elif kind == "real":
        column = column.astype("Float64")
    # pandas takes None for na_value, which pandas-stubs leave out.
    values = column.to_numpy(dtype=object, na_value=missing).tolist()  # type: ignore[arg-type]
    return values
