"""Report instances of one site, and the set-wise queries that gather report rows.

An instance moves ``QUEUED -> RUNNING -> COMPLETED | FAILED``; each move is its
own small committed transaction. The rows of a completed run are a Parquet
snapshot kept in the site file (table ``report_snapshot``, in parts), written in
the transaction that marks the run COMPLETED: a run either completes with its
snapshot or leaves none, and copying the site file copies every report's contents.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from toolkit.lazy import lazy
from toolkit.names import JOB_COUNTS
from toolkit.store.blobs import BlobFile, open_parts, parts_of
from toolkit.store.database import Database
from toolkit.store.dialect import analyst_to_postgres, view_to_postgres
from toolkit.store.records import audit_changes_sql
from toolkit.store.sql import SqlValue, Where, json_path, one_row, read_chunks

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")

# Rows per chunk read from SQLite: large enough to amortise pandas, small enough to
# keep a million-row report in bounded memory.
CHUNK_ROWS = 50_000


def _within(
    where: Where, column: str, events: Collection[int] | None, *, or_null: bool = False
) -> None:
    """Keep rows whose ``column`` is one of ``events`` (a caller's duty; None: any event),
    and with ``or_null`` rows of no event too."""
    if events is None:
        return
    marks = ", ".join("?" * len(events))
    clause = f"{column} IN ({marks})"
    where.add(f"{column} IS NULL OR {clause}" if or_null else clause, *sorted(events))


# An asset's locality (suburb, town) as property data names it in its extraInfo.
_LOCALITY = (
    "coalesce(json_extract(a.extra_info, '$.locality'), json_extract(a.extra_info, '$.suburb'))"
)
# Statuses as people name them: positive is active, zero or below retired (spec 2.3).
_STATUS_NAME = "CASE WHEN i.status > 0 THEN 'active' ELSE 'retired' END"


def _date_range(
    where: Where, alias: str, field: str | None, date_from: str | None, date_to: str | None
) -> None:
    """Keep items whose date field (ISO text) is within the range; without a field the
    range cannot apply (callers refuse that before asking)."""
    if field is None or (date_from is None and date_to is None):
        return
    extract = f"json_extract({alias}.fields, ?)"
    if date_from is not None:
        where.add(f"{extract} >= ?", json_path(field), date_from)
    if date_to is not None:
        where.add(f"{extract} <= ?", json_path(field), date_to)


def _rank_sql(severity: str | None, levels: Sequence[str]) -> tuple[str, list[object]]:
    """SQL of a severity's rank (0 for the first level) and its parameters; NULL when the
    item has no level, or there is no severity."""
    if severity is None or not levels:
        return "NULL", []
    whens = " ".join(f"WHEN ? THEN {n}" for n in range(len(levels)))
    return f"(CASE json_extract(i.fields, ?) {whens} END)", [json_path(severity), *levels]


class ReportStore:
    """The report instances of one site, and the data reports are made of."""

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id

    # --- instances ------------------------------------------------------------------------

    def spool(self) -> IO[bytes]:
        """A temporary file for a snapshot being written, beside the site file (where its
        bytes are going; the system's temporary folder may be small). It is removed as it
        is made (on POSIX), so a run that dies leaves nothing behind."""
        folder = self.db.path.parent if isinstance(self.db.path, Path) else None
        return tempfile.TemporaryFile(dir=folder, prefix=".report-")

    def snapshot(self, instance_id: int) -> BlobFile | None:
        """The snapshot of a completed run as a read-only file; None when it has none."""
        return open_parts(self.db.connection, "report_snapshot", "instance_id = ?", (instance_id,))

    def create(
        self, *, report_id: int, params: dict[str, object], user_id: str | None, result: str
    ) -> int:
        """A new QUEUED instance, owned by this process until an executor takes it."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO report_instance (site_id, report_id, status, code, user_id, params, "
                "result, pid, host, date_created) VALUES (?, ?, 'QUEUED', 200, ?, ?, ?, ?, ?, ?)",
                (
                    self.site_id,
                    report_id,
                    user_id,
                    json.dumps(params, ensure_ascii=False),
                    result,
                    os.getpid(),
                    socket.gethostname(),
                    self.db.clock(),
                ),
            )
            return int(cursor.lastrowid or 0)

    def hand_over(self, instance_id: int, pid: int) -> None:
        """A queued instance now belongs to process ``pid`` (a detached worker).

        Crash recovery fails a queued instance whose owner has gone; the owner must be
        the worker, not the short-lived command that queued it.
        """
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE report_instance SET pid = ? WHERE id = ? AND status = 'QUEUED'",
                (pid, instance_id),
            )

    def start(self, instance_id: int) -> bool:
        """Claim a QUEUED instance for this process; False when another run took it."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE report_instance SET status = 'RUNNING', pid = ?, host = ?, date_run = ? "
                "WHERE id = ? AND site_id = ? AND status = 'QUEUED'",
                (os.getpid(), socket.gethostname(), self.db.clock(), instance_id, self.site_id),
            )
            return cursor.rowcount == 1

    def complete(
        self,
        instance_id: int,
        *,
        row_count: int,
        time_taken: float,
        header: dict[str, object],
        result: str,
        snapshot: IO[bytes],
    ) -> None:
        """COMPLETED, with the snapshot's bytes (read from where ``snapshot`` stands to
        its end), in one transaction."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM report_snapshot WHERE instance_id = ?", (instance_id,))
            for part, data in enumerate(parts_of(snapshot)):
                conn.execute(
                    "INSERT INTO report_snapshot (instance_id, part, data) VALUES (?, ?, ?)",
                    (instance_id, part, data),
                )
            conn.execute(
                "UPDATE report_instance SET status = 'COMPLETED', code = 200, row_count = ?, "
                "time_taken = ?, header = ?, result = ?, date_completed = ? WHERE id = ?",
                (
                    row_count,
                    time_taken,
                    json.dumps(header, ensure_ascii=False),
                    result,
                    self.db.clock(),
                    instance_id,
                ),
            )

    def fail(self, instance_id: int, *, reason: str, code: int, time_taken: float | None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE report_instance SET status = 'FAILED', code = ?, result = ?, "
                "time_taken = ?, date_completed = ? WHERE id = ?",
                (code, reason, time_taken, self.db.clock(), instance_id),
            )

    def get(self, instance_id: int) -> sqlite3.Row | None:
        return one_row(
            self.db.connection.execute(
                "SELECT * FROM report_instance WHERE id = ? AND site_id = ?",
                (instance_id, self.site_id),
            )
        )

    def unfinished(self, user_id: str | None) -> int:
        """How many of ``user_id``'s instances have not ended (``QUEUED`` or ``RUNNING``)."""
        row = self.db.connection.execute(
            "SELECT count(*) FROM report_instance WHERE site_id = ? AND user_id IS ? "
            "AND status IN ('QUEUED', 'RUNNING')",
            (self.site_id, user_id),
        ).fetchone()
        return int(row[0])

    # --- report data: chunks of rows, gathered set-wise -----------------------------------

    def _chunks(self, sql: str, params: Sequence[Any]) -> Iterator[pd.DataFrame]:
        yield from read_chunks(self.db.connection, sql, list(params), CHUNK_ROWS)

    def item_rows(
        self,
        *,
        event_id: int,
        register_id: str | None,
        register_fields: Sequence[str],
        status: str,
        created_from: int | None,
        created_to: int | None,
        is_template: bool | None,
        within_events: Collection[int] | None = None,
        date_field: str | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
    ) -> Iterator[pd.DataFrame]:
        """Items of an event with their event's and register's names and their asset's
        name and address; each register field as a column ``f0, f1, ...`` (in
        ``register_fields`` order), else the fields as JSON text. ``date_field`` (a date
        field of the register, ISO text) is kept within ``date_from``..``date_to``.
        ``within_events``, here and below: only register data of these events."""
        where = Where()
        where.add("i.site_id = ?", self.site_id)
        where.add("i.event_id = ?", event_id)
        _within(where, "i.event_id", within_events)
        if register_id is not None:
            where.add("i.register_id = ?", register_id)
        if status == "active":
            where.add("i.status > 0")
        elif status == "inactive":
            where.add("i.status <= 0")
        if created_from is not None:
            where.add("i.date_created >= ?", created_from)
        if created_to is not None:
            where.add("i.date_created <= ?", created_to)
        if is_template is not None:
            where.add("i.is_template = ?", int(is_template))
        _date_range(where, "i", date_field, date_from, date_to)
        extract_params: list[SqlValue] = [json_path(name) for name in register_fields]
        extracted = "".join(
            f", json_extract(i.fields, ?) AS f{n}" for n in range(len(register_fields))
        )
        if not register_fields:
            extracted = ", i.fields AS fields"
        sql = (
            "SELECT i.id, i.register_id, r.name AS register_name, i.event_id, "
            "e.name AS event_name, i.region_id, i.asset_id, a.name AS asset_name, "
            f"coalesce(a.friendly, a.name) AS asset_friendly, {_LOCALITY} AS locality, "
            f"{_STATUS_NAME} AS status, i.is_template, "
            f"i.tags, i.date_created, i.date_modified{extracted} "
            "FROM item i LEFT JOIN asset a ON a.id = i.asset_id AND a.site_id = i.site_id "
            "LEFT JOIN event e ON e.id = i.event_id "
            "LEFT JOIN register r ON r.id = i.register_id AND r.site_id = i.site_id "
            f"WHERE {where.sql()} ORDER BY i.id"
        )
        return self._chunks(sql, [*extract_params, *where.params])

    def item_registers(self, event_id: int | None) -> list[str]:
        """The registers the event's items (every item without one) belong to."""
        where = Where()
        where.add("site_id = ?", self.site_id)
        if event_id is not None:
            where.add("event_id = ?", event_id)
        rows = self.db.connection.execute(
            f"SELECT DISTINCT register_id FROM item WHERE {where.sql()} ORDER BY register_id",
            where.params,
        ).fetchall()
        return [str(r[0]) for r in rows]

    def impacted_asset_rows(
        self,
        *,
        event_id: int | None,
        register_id: str | None,
        asset_type: str | None,
        within_events: Collection[int] | None = None,
        severity: str | None = None,
        levels: Sequence[str] = (),
        damaged_only: bool = False,
        date_field: str | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
    ) -> Iterator[pd.DataFrame]:
        """Assets with active items (spec 2.2 "impacted"), with counts, address, locality,
        region and geometry (WKB); only the items of ``within_events`` count.

        With a ``severity`` field (its ``levels`` from none to the worst) each asset has
        ``worst_rank`` (the index of its worst level; null when no item says) and
        ``damaged_items`` (items above the first level); ``damaged_only`` keeps the
        assets with at least one (damage, not merely an assessment)."""
        join = Where()
        join.add("i.asset_id = a.id")
        join.add("i.site_id = a.site_id")
        join.add("i.status > 0")
        _within(join, "i.event_id", within_events)
        if event_id is not None:
            join.add("i.event_id = ?", event_id)
        if register_id is not None:
            join.add("i.register_id = ?", register_id)
        _date_range(join, "i", date_field, date_from, date_to)
        where = Where()
        where.add("a.site_id = ?", self.site_id)
        if asset_type is not None:
            where.add("a.type = ?", asset_type)
        rank, rank_params = _rank_sql(severity, levels)
        last_inspected: list[object] = []
        inspected = "NULL"
        if date_field is not None:
            inspected, last_inspected = "max(json_extract(i.fields, ?))", [json_path(date_field)]
        having = " HAVING max(" + rank + ") > 0" if damaged_only and severity else ""
        sql = (
            "SELECT a.id, a.type, a.code, a.name, coalesce(a.friendly, a.name) AS address, "
            f"{_LOCALITY} AS locality, coalesce(a.region_id, max(i.region_id)) AS region_id, "
            "a.status, "
            f"max({rank}) AS worst_rank, "
            f"sum(CASE WHEN ({rank}) > 0 THEN 1 ELSE 0 END) AS damaged_items, "
            "count(i.id) AS active_items, count(DISTINCT i.register_id) AS registers, "
            "min(i.date_created) AS first_item, max(i.date_modified) AS last_change, "
            f"{inspected} AS last_inspected, a.geometry "
            f"FROM asset a JOIN item i ON {join.sql()} WHERE {where.sql()} "
            # a.site_id too: PostgreSQL groups by the whole key (site_id, id).
            f"GROUP BY a.site_id, a.id{having} ORDER BY a.id"
        )
        params = [*rank_params, *rank_params, *last_inspected, *join.params, *where.params]
        if having:
            params += rank_params
        return self._chunks(sql, params)

    def damage_item_rows(
        self,
        *,
        event_id: int | None,
        register_id: str,
        severity: str,
        levels: Sequence[str],
        date_field: str | None,
        habitable_field: str | None,
        occupants_field: str | None,
        date_from: str | None = None,
        date_to: str | None = None,
        within_events: Collection[int] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """The active, non-template items of a register, as the damage summary counts
        them: event (id and name), asset and its locality, severity rank (index in
        ``levels``; null when missing), inspection date, habitable, occupants."""
        where = Where()
        where.add("i.site_id = ?", self.site_id)
        where.add("i.register_id = ?", register_id)
        where.add("i.status > 0")
        where.add("i.is_template = 0")
        _within(where, "i.event_id", within_events)
        if event_id is not None:
            where.add("i.event_id = ?", event_id)
        _date_range(where, "i", date_field, date_from, date_to)
        rank, rank_params = _rank_sql(severity, levels)
        extracted: list[object] = []
        columns = []
        for name, field in (
            ("inspected", date_field),
            ("habitable", habitable_field),
            ("occupants", occupants_field),
        ):
            if field is None:
                columns.append(f"NULL AS {name}")
            else:
                columns.append(f"json_extract(i.fields, ?) AS {name}")
                extracted.append(json_path(field))
        sql = (
            "SELECT i.id, i.event_id, e.name AS event_name, i.asset_id, "
            f"{_LOCALITY} AS locality, {rank} AS rank, {', '.join(columns)} "
            "FROM item i LEFT JOIN asset a ON a.id = i.asset_id AND a.site_id = i.site_id "
            "LEFT JOIN event e ON e.id = i.event_id "
            f"WHERE {where.sql()} ORDER BY i.id"
        )
        return self._chunks(sql, [*rank_params, *extracted, *where.params])

    def active_asset_count(self, asset_type: str | None) -> int:
        where = Where()
        where.add("site_id = ?", self.site_id)
        where.add("status > 0")
        if asset_type is not None:
            where.add("type = ?", asset_type)
        return int(
            self.db.connection.execute(
                f"SELECT count(*) FROM asset WHERE {where.sql()}", where.params
            ).fetchone()[0]
        )

    def import_job_rows(
        self,
        *,
        status: str | None,
        import_type: str | None,
        within_events: Collection[int] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """Import jobs with the counts of their summaries; with ``within_events``, item
        jobs only of those events (an item job's rows are its event's register data)."""
        where = Where()
        where.add("site_id = ?", self.site_id)
        if within_events is not None:
            item_job = Where()
            _within(item_job, "json_extract(params, '$.eventId')", within_events)
            where.add(f"import_type != 'item' OR ({item_job.sql()})", *item_job.params)
        if status is not None:
            where.add("status = ?", status)
        if import_type is not None:
            where.add("import_type = ?", import_type)
        counts = "".join(
            f", json_extract(summary, '$.counts.{name}') AS {name}" for name in JOB_COUNTS
        )
        sql = (
            "SELECT id, status, import_type, import_rule, user_id, "
            "json_extract(summary, '$.source') AS source, "
            "json_extract(summary, '$.overwriteRule') AS overwrite_rule, "
            f"json_extract(summary, '$.dryRun') AS dry_run{counts}, "
            "json_extract(summary, '$.reason') AS reason, date_created, date_completed, "
            "(date_completed - date_created) / 1000.0 AS seconds "
            f"FROM import_job WHERE {where.sql()} ORDER BY id"
        )
        return self._chunks(sql, where.params)

    def link_rows(self, job_id: int, evidence_keys: Sequence[str] = ()) -> Iterator[pd.DataFrame]:
        """How each row of an import job was linked to an asset, in row order; with the
        match probability, and one ``evidence_<key>`` column per key of the evidence."""
        for key in evidence_keys:
            if not key.isidentifier():  # names are formatted into the SQL
                raise ValueError(f"evidence key {key!r} is not a plain name")
        evidence = "".join(
            f", json_extract(l.evidence, '$.{key}') AS evidence_{key}" for key in evidence_keys
        )
        sql = (
            "SELECT l.row, l.reference, l.query, l.asset_id, a.name AS asset_name, l.mode, "
            f"l.accuracy, l.candidates, l.err, l.probability{evidence} FROM import_link l "
            "JOIN import_job j ON j.id = l.job_id "
            "LEFT JOIN asset a ON a.id = l.asset_id AND a.site_id = j.site_id "
            "WHERE l.job_id = ? AND j.site_id = ? ORDER BY l.row"
        )
        return self._chunks(sql, (job_id, self.site_id))

    def audit_rows(
        self,
        *,
        event_id: int | None,
        item_id: int | None,
        import_job_id: int | None,
        record_type: str | None,
        action: str | None,
        created_from: int | None,
        created_to: int | None,
        within_events: Collection[int] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """Audit entries; with ``within_events`` those of these events or of no event."""
        where = Where()
        where.add("l.site_id = ?", self.site_id)
        _within(where, "l.event_id", within_events, or_null=True)
        for column, value in (
            ("event_id", event_id),
            ("item_id", item_id),
            ("import_job_id", import_job_id),
            ("record_type", record_type),
            ("action", action),
        ):
            if value is not None:
                where.add(f"l.{column} = ?", value)
        if created_from is not None:
            where.add("l.date_created >= ?", created_from)
        if created_to is not None:
            where.add("l.date_created <= ?", created_to)
        sql = (
            "SELECT l.id, l.date_created, l.user_id, l.action, l.record_type, l.record_id, "
            "l.item_id, l.event_id, e.name AS event_name, l.import_job_id, l.message, "
            f"{audit_changes_sql('l')} AS changes "
            "FROM audit_log l LEFT JOIN event e ON e.id = l.event_id "
            f"WHERE {where.sql()} ORDER BY l.id"
        )
        return self._chunks(sql, where.params)


# --- analysts' queries: read-only SQL over views of one site ----------------------------

# The views an analyst's query may read, each one site's rows with friendly names. Items,
# audit entries and item import jobs are further kept to the events the caller sees.
ANALYST_VIEWS: dict[str, str] = {
    "events": "SELECT id, name, description, status, start_date AS startDate, tags, "
    "date_created AS dateCreated FROM main.event WHERE site_id = {site}{events_id}",
    "registers": "SELECT id, name, fields FROM main.register WHERE site_id = {site}",
    "assets": "SELECT id, type, code, name, friendly, region_id AS regionId, status, "
    "extra_info AS extraInfo, geometry, date_created AS dateCreated, "
    "date_modified AS dateModified FROM main.asset WHERE site_id = {site}",
    "items": "SELECT id, register_id AS registerId, event_id AS eventId, region_id AS regionId, "
    "asset_id AS assetId, status, is_template AS isTemplate, tags, fields, "
    "import_job_id AS importJobId, date_created AS dateCreated, date_modified AS dateModified "
    "FROM main.item WHERE site_id = {site}{events}",
    "audit": "SELECT id, date_created AS dateCreated, user_id AS userId, action, "
    "record_type AS recordType, record_id AS recordId, item_id AS itemId, event_id AS eventId, "
    "import_job_id AS importJobId, message, "
    # Braces doubled: the statement is formatted with the site and events below.
    + audit_changes_sql("l").replace("{", "{{").replace("}", "}}")
    + " AS changes FROM main.audit_log l WHERE site_id = {site}{events_or_none}",
    "jobs": "SELECT id, status, import_type AS importType, import_rule AS importRule, "
    "user_id AS userId, summary, date_created AS dateCreated, "
    "date_completed AS dateCompleted FROM main.import_job WHERE site_id = {site}",
}
# What an analyst's statement may do besides reading the views (SQLite action codes).
_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


# How long an analyst's query may run (PostgreSQL's statement_timeout; on SQLite a
# progress handler): a report that never ends would hold a worker and the store.
ANALYST_TIMEOUT_S = 600.0


def _too_long(timeout_s: float) -> str:
    return f"the query ran longer than its limit of {timeout_s:g} s and was stopped"


class AnalystQueryError(ValueError):
    """The analyst's SQL is not a read-only query of the views, or SQLite refused it."""


def _view_sql(name: str, site_id: int, events: Collection[int] | None) -> str:
    listed = ", ".join(str(int(e)) for e in sorted(events or ()))
    only = "" if events is None else f" AND event_id IN ({listed or 'NULL'})"
    return ANALYST_VIEWS[name].format(
        site=int(site_id),
        events=only,
        events_id="" if events is None else f" AND id IN ({listed or 'NULL'})",
        events_or_none=""
        if events is None
        else f" AND (event_id IS NULL{only.replace(' AND', ' OR')})",
    )


def analyst_rows(
    db: Database,
    site_id: int,
    sql: str,
    params: dict[str, Any],
    within_events: Collection[int] | None = None,
    *,
    timeout_s: float = ANALYST_TIMEOUT_S,
) -> Iterator[pd.DataFrame]:
    """Run an analyst's SELECT over this site's views (``events``, ``registers``,
    ``assets``, ``items``, ``audit``, ``jobs``) in chunks; anything else it names (another
    table, another site's rows, a write, a pragma, an attached file, the server's catalogs)
    is refused, and a query running past ``timeout_s`` is stopped."""
    if db.dialect == "postgresql":
        yield from _analyst_rows_postgres(db, site_id, sql, params, within_events, timeout_s)
        return
    connection = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True)
    try:
        for name in ANALYST_VIEWS:
            connection.execute(
                f"CREATE TEMP VIEW {name} AS {_view_sql(name, site_id, within_events)}"
            )
        connection.execute("PRAGMA query_only = 1")

        def authorise(
            action: int,
            arg1: str | None,
            arg2: str | None,
            database: str | None,
            source: str | None,
        ) -> int:
            if action in _ALLOWED_ACTIONS:
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_READ:
                # A view's own columns, or the tables under one of our views.
                if database == "temp" and arg1 in ANALYST_VIEWS:
                    return sqlite3.SQLITE_OK
                if source in ANALYST_VIEWS:
                    return sqlite3.SQLITE_OK
            return sqlite3.SQLITE_DENY

        connection.set_authorizer(authorise)
        # As PostgreSQL's statement_timeout: SQLite asks this every so many steps.
        deadline = time.monotonic() + timeout_s
        connection.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        try:
            yield from pd.read_sql_query(sql, connection, params=params, chunksize=CHUNK_ROWS)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
            if "interrupted" in str(exc) and time.monotonic() > deadline:
                raise AnalystQueryError(_too_long(timeout_s)) from exc
            raise AnalystQueryError(str(exc)) from exc
    finally:
        connection.close()


# On PostgreSQL the views are granted to this role alone, and the query runs as it in a
# read-only transaction: it can read the views and nothing else (no table, no write).
ANALYST_ROLE = "toolkit_analyst"


def _analyst_rows_postgres(
    db: Database,
    site_id: int,
    sql: str,
    params: dict[str, Any],
    within_events: Collection[int] | None,
    timeout_s: float,
) -> Iterator[pd.DataFrame]:
    import psycopg

    from toolkit.store.analyst_sql import RefusedQuery, check_analyst_query
    from toolkit.store.pg import PgConnection

    connection = cast(PgConnection, db.connect_again())
    raw = connection.raw
    try:
        # The parameters go into the text on this side, so the text checked is the text
        # run (one statement, only the views, no denied function).
        statement = psycopg.ClientCursor(raw).mogrify(analyst_to_postgres(sql), dict(params))
        try:
            check_analyst_query(statement, ANALYST_VIEWS)
        except RefusedQuery as exc:
            raise AnalystQueryError(str(exc)) from exc
        for name in ANALYST_VIEWS:
            view = view_to_postgres(_view_sql(name, site_id, within_events))
            # A security barrier: the site's filter is applied before any condition of the
            # analyst's, so an error in one (name::int) never shows another site's value.
            raw.execute(f"CREATE TEMP VIEW {name} WITH (security_barrier) AS {view}".encode())
        try:
            for name in ANALYST_VIEWS:
                raw.execute(f"GRANT SELECT ON pg_temp.{name} TO {ANALYST_ROLE}")
            raw.execute("BEGIN READ ONLY")
            raw.execute(f"SET LOCAL statement_timeout = {max(1, round(timeout_s * 1000))}")
            raw.execute(f"SET LOCAL ROLE {ANALYST_ROLE}")
        except psycopg.Error as exc:
            raise AnalystQueryError(
                f"analysts' queries on PostgreSQL run as the role {ANALYST_ROLE}, which "
                f"the store could not use ({str(exc).splitlines()[0]}); an administrator "
                f"makes it with: CREATE ROLE {ANALYST_ROLE} NOLOGIN; "
                f"GRANT {ANALYST_ROLE} TO <the store's user>"
            ) from exc
        try:
            cursor = psycopg.ClientCursor(raw)
            # In a pipeline the query goes by the extended protocol, which runs exactly
            # one statement: the simple protocol would run `RESET ROLE; SELECT …` whole,
            # undoing the analyst's role.
            with raw.pipeline():
                cursor.execute(statement)
            columns = [c.name for c in cursor.description or ()]
            while batch := cursor.fetchmany(CHUNK_ROWS):
                yield pd.DataFrame.from_records(batch, columns=columns)
        except psycopg.errors.QueryCanceled as exc:
            raise AnalystQueryError(_too_long(timeout_s)) from exc
        except psycopg.Error as exc:
            raise AnalystQueryError(str(exc).strip().splitlines()[0]) from exc
    finally:
        connection.close()
