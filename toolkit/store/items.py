"""Register items: bulk writes for imports, single writes for REST, reads and queries.

Every create, update and retirement writes its audit-log entry in the same
statement batch, done set-wise inside SQLite (``INSERT ... SELECT``) so a
million-row import pays no Python loop for its audit trail.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from toolkit.cql import Node
from toolkit.filters import Page, TimeBound
from toolkit.store.sql import Where, add_time_bound, compile_cql, json_path, page_sql

# CQL and filter names of item columns; every other name is a register field.
ITEM_COLUMNS = {
    "id": "id",
    "registerId": "register_id",
    "type": "register_id",
    "eventId": "event_id",
    "regionId": "region_id",
    "assetId": "asset_id",
    "status": "status",
    "isTemplate": "is_template",
    "dateCreated": "date_created",
    "dateModified": "date_modified",
}
INACTIVE_STATUS = 0


@dataclass(frozen=True)
class Actor:
    """Who does a write and why, for the audit log."""

    user_id: str | None = None
    message: str | None = None
    import_job_id: int | None = None


@dataclass(frozen=True)
class NewItems:
    """Columns of items to insert, as plain Python lists of equal length."""

    register_id: str
    event_id: int | None
    region_id: int | None
    asset_id: Sequence[int | None]
    status: Sequence[int]
    is_template: Sequence[int]
    tags: str
    fields: Sequence[str]


@dataclass(frozen=True)
class ItemChanges:
    """Per-item changes: a JSON merge patch of fields, and optional new asset and status."""

    ids: Sequence[int]
    fields_patch: Sequence[str]
    asset_id: Sequence[int | None]
    status: Sequence[int | None]
    tags: str | None = None


class ItemStore:
    """The register items of one site."""

    def __init__(self, connection: sqlite3.Connection, site_id: int) -> None:
        self.connection = connection
        self.site_id = site_id

    # --- bulk writes: the caller holds the transaction -----------------------------------

    def insert_many(
        self, conn: sqlite3.Connection, items: NewItems, actor: Actor, now: int
    ) -> range:
        """Insert items with consecutive new ids; returns the ids."""
        count = len(items.fields)
        if count == 0:
            return range(0)
        # The write lock is held (BEGIN IMMEDIATE), so the next ids are ours alone; knowing
        # them lets the audit entries be written with one INSERT ... SELECT.
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM item").fetchone()[0]
        ids = range(first, first + count)
        conn.executemany(
            "INSERT INTO item (id, site_id, register_id, event_id, region_id, asset_id, status, "
            "is_template, tags, fields, import_job_id, date_created, date_modified) "
            f"VALUES (?, {self.site_id}, ?, ?, ?, ?, ?, ?, ?, ?, ?, {now}, {now})",
            zip(
                ids,
                _repeat(items.register_id, count),
                _repeat(items.event_id, count),
                _repeat(items.region_id, count),
                items.asset_id,
                items.status,
                items.is_template,
                _repeat(items.tags, count),
                items.fields,
                _repeat(actor.import_job_id, count),
                strict=True,
            ),
        )
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
            "record_id, item_id, event_id, changes, message, import_job_id) "
            "SELECT site_id, ?, ?, 'create', 'item', id, id, event_id, "
            "json_object('fields', json(fields), 'assetId', asset_id, 'status', status), ?, ? "
            "FROM item WHERE id BETWEEN ? AND ?",
            (now, actor.user_id, actor.message, actor.import_job_id, ids.start, ids.stop - 1),
        )
        return ids

    def update_many(
        self, conn: sqlite3.Connection, changes: ItemChanges, actor: Actor, now: int
    ) -> int:
        """Apply per-item changes; the audit entry keeps the record as it was and the patch."""
        if not changes.ids:
            return 0
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS item_change (id INTEGER PRIMARY KEY, "
            "fields_patch TEXT, asset_id INTEGER, status INTEGER)"
        )
        conn.execute("DELETE FROM temp.item_change")
        conn.executemany(
            "INSERT INTO temp.item_change VALUES (?, ?, ?, ?)",
            zip(changes.ids, changes.fields_patch, changes.asset_id, changes.status, strict=True),
        )
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
            "record_id, item_id, event_id, changes, message, import_job_id) "
            "SELECT i.site_id, ?, ?, 'update', 'item', i.id, i.id, i.event_id, "
            "json_object('before', json_object('fields', json(i.fields), 'assetId', i.asset_id, "
            "'status', i.status), 'patch', json_object('fields', json(c.fields_patch), "
            "'assetId', c.asset_id, 'status', c.status)), ?, ? "
            "FROM temp.item_change c JOIN item i ON i.id = c.id",
            (now, actor.user_id, actor.message, actor.import_job_id),
        )
        conn.execute(
            "UPDATE item SET fields = json_patch(item.fields, c.fields_patch), "
            "asset_id = coalesce(c.asset_id, item.asset_id), "
            "status = coalesce(c.status, item.status), "
            "tags = coalesce(?, item.tags), "
            "import_job_id = coalesce(?, item.import_job_id), date_modified = ? "
            "FROM temp.item_change c WHERE item.id = c.id",
            (changes.tags, actor.import_job_id, now),
        )
        conn.execute("DELETE FROM temp.item_change")
        return len(changes.ids)

    def retire_many(
        self, conn: sqlite3.Connection, ids: Sequence[int], actor: Actor, now: int
    ) -> int:
        """Set items inactive (records are never deleted), audited."""
        if not ids:
            return 0
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS item_retire (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM temp.item_retire")
        conn.executemany("INSERT INTO temp.item_retire VALUES (?)", ((i,) for i in ids))
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
            "record_id, item_id, event_id, changes, message, import_job_id) "
            "SELECT i.site_id, ?, ?, 'retire', 'item', i.id, i.id, i.event_id, "
            f"json_object('status', json_array(i.status, {INACTIVE_STATUS})), ?, ? "
            "FROM temp.item_retire r JOIN item i ON i.id = r.id",
            (now, actor.user_id, actor.message, actor.import_job_id),
        )
        conn.execute(
            f"UPDATE item SET status = {INACTIVE_STATUS}, date_modified = ?, "
            "import_job_id = coalesce(?, import_job_id) "
            "WHERE id IN (SELECT id FROM temp.item_retire)",
            (now, actor.import_job_id),
        )
        conn.execute("DELETE FROM temp.item_retire")
        return len(ids)

    # --- reads -------------------------------------------------------------------------

    def active_keys(self, register_id: str, event_id: int | None, key: str) -> pd.DataFrame:
        """``id`` and ``key`` of the active items in an import's scope, for planning."""
        where = Where()
        where.add("site_id = ?", self.site_id)
        where.add("register_id = ?", register_id)
        if event_id is not None:
            where.add("event_id = ?", event_id)
        where.add("status > 0")
        if key in ITEM_COLUMNS:
            key_sql = f"CAST({ITEM_COLUMNS[key]} AS TEXT)"
        else:
            key_sql = "CAST(json_extract(fields, ?) AS TEXT)"
            where.params.insert(0, json_path(key))
        rows = self.connection.execute(
            f"SELECT id, {key_sql} AS key FROM item WHERE {where.sql()}", where.params
        ).fetchall()
        return pd.DataFrame(
            {"id": [r[0] for r in rows], "key": pd.array([r[1] for r in rows], dtype="string")}
        )

    def get(self, item_id: int) -> sqlite3.Row | None:
        return self.connection.execute(
            "SELECT * FROM item WHERE id = ? AND site_id = ?", (item_id, self.site_id)
        ).fetchone()

    def query(
        self,
        *,
        page: Page,
        register_id: str | None = None,
        event_id: int | None = None,
        is_template: bool | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        cql: Node | None = None,
        asset_id: int | None = None,
    ) -> tuple[list[sqlite3.Row], int]:
        """One page of items matching the filters, and the size of the whole matching set."""
        where = Where()
        where.add("site_id = ?", self.site_id)
        if register_id is not None:
            where.add("register_id = ?", register_id)
        if event_id is not None:
            where.add("event_id = ?", event_id)
        if asset_id is not None:
            where.add("asset_id = ?", asset_id)
        if is_template is not None:
            where.add("is_template = ?", int(is_template))
        add_time_bound(where, since)
        add_time_bound(where, until)
        if cql is not None:
            clause, params = compile_cql(cql, ITEM_COLUMNS)
            where.add(clause, *params)
        total = self.connection.execute(
            f"SELECT count(*) FROM item WHERE {where.sql()}", where.params
        ).fetchone()[0]
        tail, tail_params = page_sql(page)
        rows = self.connection.execute(
            f"SELECT * FROM item WHERE {where.sql()}{tail}", [*where.params, *tail_params]
        ).fetchall()
        return rows, total


def _repeat(value: object, count: int) -> list[object]:
    return [value] * count
