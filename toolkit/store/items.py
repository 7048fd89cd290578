"""Register items: bulk writes for imports, reads and queries."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.lazy import lazy
from toolkit.query.cql import Node
from toolkit.query.filters import Page, TimeBound
from toolkit.store.arrow_read import apart_from
from toolkit.store.bulk_indexes import BULK_INDEX_ROWS, restore_indexes, set_aside_indexes
from toolkit.store.records import ITEM_KIND, Actor, RecordTable
from toolkit.store.sql import (
    Where,
    add_time_bound,
    compile_cql,
    json_path,
    one_row,
    page_sql,
    read_id_keys,
)

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")

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


@dataclass(frozen=True)
class NewItems:
    """Columns of items to insert, as plain Python lists of equal length (or, where the
    type allows, one value for all)."""

    register_id: str
    event_id: int | None
    region_id: int | None
    asset_id: Sequence[int | None]
    status: Sequence[int] | int  # one value: every row's
    is_template: Sequence[int] | int
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

    def __init__(
        self, connection: sqlite3.Connection, site_id: int, *, path: Path | None = None
    ) -> None:
        """``path``: the SQLite file ``connection`` is open on, whose large reads may then
        be made in a process apart (:func:`read_id_keys`); None for PostgreSQL."""
        self.connection = connection
        self.site_id = site_id
        self.path = path
        self.table = RecordTable(ITEM_KIND, site_id)

    # --- bulk writes: the caller holds the transaction -----------------------------------

    def insert_many(
        self,
        conn: sqlite3.Connection,
        items: NewItems,
        actor: Actor,
        now: int,
        *,
        on_rows: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Insert items with consecutive new ids, audited; returns the ids. ``on_rows``
        hears how many are in so far."""
        columns = {
            "register_id": items.register_id,
            "event_id": items.event_id,
            "region_id": items.region_id,
            "asset_id": items.asset_id,
            "status": items.status,
            "is_template": items.is_template,
            "tags": items.tags,
            "fields": items.fields,
        }
        return self.table.insert_many(conn, columns, len(items.fields), actor, now, on_rows=on_rows)

    def set_aside_indexes(self, conn: sqlite3.Connection, adding: int) -> list[str]:
        """Before ``adding`` new items are inserted in ``conn``'s transaction: the item
        table's indexes set aside (``bulk_indexes.set_aside_indexes``), the statements
        that make them again returned for :meth:`restore_indexes`. A bare executemany of
        a million items into an empty table took 9.7-10.1 s with the scope and asset
        indexes kept as rows came, 3.2-4.0 s without them, and 0.3-1.6 s more to make both
        after (an import's store stage, alternating: 12.5-17.4 s before, 10.0-14.8 s)."""
        return set_aside_indexes(conn, "item", adding, least=BULK_INDEX_ROWS)

    def restore_indexes(self, conn: sqlite3.Connection, statements: Sequence[str]) -> None:
        """Make again the indexes :meth:`set_aside_indexes` dropped."""
        restore_indexes(conn, statements)

    def update_many(
        self, conn: sqlite3.Connection, changes: ItemChanges, actor: Actor, now: int
    ) -> int:
        """Apply per-item changes; the audit entry keeps the record as it was and the patch."""
        columns: dict[str, Sequence[object]] = {
            "asset_id": changes.asset_id,
            "status": changes.status,
        }
        if changes.tags is not None:
            columns["tags"] = [changes.tags] * len(changes.ids)
        return self.table.update_many(conn, changes.ids, changes.fields_patch, columns, actor, now)

    def update_one(
        self,
        conn: sqlite3.Connection,
        item_id: int,
        fields_patch: str,
        columns: Mapping[str, object],
        actor: Actor,
        now: int,
    ) -> bool:
        """Patch one item's fields and set its own columns exactly (None clears), audited;
        whether it changed (a change that changes nothing is neither written nor audited)."""
        return self.table.update_one(conn, item_id, fields_patch, columns, actor, now)

    def retire_many(
        self, conn: sqlite3.Connection, ids: Sequence[int], actor: Actor, now: int
    ) -> int:
        """Set items inactive (records are never deleted), audited."""
        return self.table.retire_many(conn, ids, actor, now)

    # --- reads -------------------------------------------------------------------------

    def active_keys(
        self, register_id: str, event_id: int | None, key: str, *, locked: bool = False
    ) -> pd.DataFrame:
        """``id`` and ``key`` of the active items in an import's scope, for planning.

        ``locked``: the caller's transaction holds the write lock and has changed no item
        yet, so what is committed is what it would read: many are read in a process apart.
        """
        where = Where()
        where.add("site_id = ?", self.site_id)
        where.add("register_id = ?", register_id)
        if event_id is not None:
            where.add("event_id = ?", event_id)
        where.add("status > 0")
        key_params: list[object] = []
        if key in ITEM_COLUMNS:
            key_sql = f"CAST({ITEM_COLUMNS[key]} AS TEXT)"
        else:
            key_sql = "CAST(json_extract(fields, ?) AS TEXT)"
            key_params.append(json_path(key))
        from_where = f"FROM item WHERE {where.sql()}"
        apart = apart_from(self.connection, self.path, from_where, where.params, locked=locked)
        select = f"SELECT id, {key_sql} AS key {from_where} ORDER BY id"
        return read_id_keys(self.connection, apart, select, [*key_params, *where.params])

    def get(self, item_id: int) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                "SELECT * FROM item WHERE id = ? AND site_id = ?", (item_id, self.site_id)
            )
        )

    def has_field(self, register_id: str, name: str) -> bool:
        """Whether any item of the register holds a value (even null) under ``name``."""
        return (
            self.connection.execute(
                "SELECT 1 FROM item WHERE site_id = ? AND register_id = ? "
                "AND json_type(fields, ?) IS NOT NULL LIMIT 1",
                (self.site_id, register_id, json_path(name)),
            ).fetchone()
            is not None
        )

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
        within_events: Collection[int] | None = None,
    ) -> tuple[list[sqlite3.Row], int]:
        """One page of items matching the filters, and the size of the whole matching set.

        ``within_events`` limits the items to those events (a user's duty).
        """
        where = Where()
        where.add("site_id = ?", self.site_id)
        if within_events is not None:
            events = sorted(within_events)
            where.add(f"event_id IN ({', '.join('?' * len(events))})", *events)
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
