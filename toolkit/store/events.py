"""Events (incidents) of one site, and the registers whose items they hold."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from toolkit.query.filters import Page, TimeBound
from toolkit.store.records import Actor
from toolkit.store.sql import Where, add_time_bound, one_row, page_sql

EVENT_COLUMNS = (
    "name",
    "description",
    "status",
    "start_date",
    "tags",
    "is_template",
    "is_global",
    "region_id",
)


class EventStore:
    """The events of one site."""

    def __init__(self, connection: sqlite3.Connection, site_id: int) -> None:
        self.connection = connection
        self.site_id = site_id

    def insert(
        self, conn: sqlite3.Connection, values: Mapping[str, object], actor: Actor, now: int
    ) -> int:
        unknown = set(values) - set(EVENT_COLUMNS)
        if unknown:
            raise ValueError(f"not event columns: {sorted(unknown)}")
        names = ["site_id", *values, "date_created", "date_modified"]
        cursor = conn.execute(
            f"INSERT INTO event ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [self.site_id, *values.values(), now, now],
        )
        event_id = int(cursor.lastrowid or 0)
        self._audit(conn, event_id, "create", {"after": dict(values)}, actor, now)
        return event_id

    def update(
        self,
        conn: sqlite3.Connection,
        event_id: int,
        changes: Mapping[str, object],
        actor: Actor,
        now: int,
    ) -> bool:
        """Set ``changes``, audited; setting an active event's status inactive is audited
        as a retirement. A change that changes nothing is neither written nor audited.
        Returns whether the event changed."""
        unknown = set(changes) - set(EVENT_COLUMNS)
        if unknown:
            raise ValueError(f"not event columns: {sorted(unknown)}")
        row = conn.execute(
            f"SELECT {', '.join(changes)} FROM event WHERE id = ? AND site_id = ?",
            (event_id, self.site_id),
        ).fetchone()
        if row is None:
            return False
        before = dict(zip(changes, row, strict=True))
        if before == dict(changes):
            return False
        sets = ", ".join(f"{c} = ?" for c in changes)
        conn.execute(
            f"UPDATE event SET {sets}, date_modified = ? WHERE id = ? AND site_id = ?",
            [*changes.values(), now, event_id, self.site_id],
        )
        status, was = changes.get("status"), before.get("status")
        retiring = isinstance(status, int) and isinstance(was, int) and was > 0 >= status
        action = "retire" if retiring else "update"
        self._audit(conn, event_id, action, {"before": before, "after": dict(changes)}, actor, now)
        return True

    def _audit(
        self,
        conn: sqlite3.Connection,
        event_id: int,
        action: str,
        changes: dict[str, object],
        actor: Actor,
        now: int,
    ) -> None:
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
            "record_id, event_id, changes, message, import_job_id) "
            "VALUES (?, ?, ?, ?, 'event', ?, ?, ?, ?, ?)",
            (
                self.site_id,
                now,
                actor.user_id,
                action,
                event_id,
                event_id,
                json.dumps(changes, ensure_ascii=False),
                actor.message,
                actor.import_job_id,
            ),
        )

    def get(self, event_id: int) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                "SELECT * FROM event WHERE id = ? AND site_id = ?", (event_id, self.site_id)
            )
        )

    def query(
        self,
        *,
        page: Page,
        event_id: int | None = None,
        fulltext: str | None = None,
        fulltext_operator: str = "contains",
        status: int | None = None,
        active: bool | None = None,
        start_after: int | None = None,
        start_before: int | None = None,
        tag: str | None = None,
        is_template: bool | None = None,
        is_global: bool | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
    ) -> tuple[list[sqlite3.Row], int]:
        """One page of the spec's event search (4.8) and the size of the whole result."""
        where = Where()
        where.add("site_id = ?", self.site_id)
        if event_id is not None:
            where.add("id = ?", event_id)
        if fulltext:
            text = "lower(name || ' ' || coalesce(description, ''))"
            value = fulltext.lower()
            if fulltext_operator == "equals":
                where.add("(lower(name) = ? OR lower(coalesce(description, '')) = ?)", value, value)
            elif fulltext_operator == "startsWith":
                where.add(
                    "(substr(lower(name), 1, length(?)) = ? OR "
                    "substr(lower(coalesce(description, '')), 1, length(?)) = ?)",
                    value,
                    value,
                    value,
                    value,
                )
            else:
                where.add(f"instr({text}, ?) > 0", value)
        if status is not None:
            where.add("status = ?", status)
        if active is not None:
            where.add("status > 0" if active else "status <= 0")
        if start_after is not None:
            where.add("start_date > ?", start_after)
        if start_before is not None:
            where.add("start_date < ?", start_before)
        if tag is not None:
            where.add("EXISTS (SELECT 1 FROM json_each(event.tags) WHERE value = ?)", tag)
        if is_template is not None:
            where.add("is_template = ?", int(is_template))
        if is_global is not None:
            where.add("is_global = ?", int(is_global))
        add_time_bound(where, since)
        add_time_bound(where, until)
        total = self.connection.execute(
            f"SELECT count(*) FROM event WHERE {where.sql()}", where.params
        ).fetchone()[0]
        tail, tail_params = page_sql(page)
        rows = self.connection.execute(
            f"SELECT * FROM event WHERE {where.sql()}{tail}", [*where.params, *tail_params]
        ).fetchall()
        return rows, total


class RegisterStore:
    """The registers of one site: each names the fields its items carry."""

    def __init__(self, connection: sqlite3.Connection, site_id: int) -> None:
        self.connection = connection
        self.site_id = site_id

    def upsert(
        self, conn: sqlite3.Connection, register_id: str, name: str, fields: list[dict[str, object]]
    ) -> None:
        """Create the register, or add fields it does not have yet (fields are never dropped)."""
        row = conn.execute(
            "SELECT fields FROM register WHERE site_id = ? AND id = ?", (self.site_id, register_id)
        ).fetchone()
        if row is None:
            # OR IGNORE: on PostgreSQL another import may be making it at this moment; this
            # one then waits for it and merges its fields into the register that made.
            made = conn.execute(
                "INSERT OR IGNORE INTO register (site_id, id, name, fields) VALUES (?, ?, ?, ?)",
                (self.site_id, register_id, name, json.dumps(fields, ensure_ascii=False)),
            ).rowcount
            if made:
                return
            row = conn.execute(
                "SELECT fields FROM register WHERE site_id = ? AND id = ?",
                (self.site_id, register_id),
            ).fetchone()
        known = json.loads(row[0])
        names = {f["name"] for f in known}
        merged = known + [f for f in fields if f["name"] not in names]
        if len(merged) != len(known):
            conn.execute(
                "UPDATE register SET fields = ? WHERE site_id = ? AND id = ?",
                (json.dumps(merged, ensure_ascii=False), self.site_id, register_id),
            )

    def get(self, register_id: str) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                "SELECT * FROM register WHERE site_id = ? AND id = ?", (self.site_id, register_id)
            )
        )

    def all(self) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT r.*, (SELECT count(*) FROM item i WHERE i.site_id = r.site_id "
            "AND i.register_id = r.id) AS item_count "
            "FROM register r WHERE site_id = ? ORDER BY id",
            (self.site_id,),
        ).fetchall()
