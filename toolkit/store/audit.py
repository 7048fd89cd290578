"""Reading the audit log of one site (entries are written by the record stores)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from toolkit.query.filters import Page, TimeBound
from toolkit.store.records import audit_changes_sql
from toolkit.store.sql import Where, add_time_bound, one_row, page_sql

# An entry's columns, its changes read back where an import left them out.
ENTRY_COLUMNS = (
    "l.id, l.site_id, l.date_created, l.user_id, l.action, l.record_type, l.record_id, "
    f"l.item_id, l.event_id, {audit_changes_sql('l')} AS changes, l.message, l.import_job_id"
)


class AuditStore:
    """The audit log of one site, newest entries last."""

    def __init__(self, connection: sqlite3.Connection, site_id: int) -> None:
        self.connection = connection
        self.site_id = site_id

    def get(self, audit_id: int) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                f"SELECT {ENTRY_COLUMNS} FROM audit_log l WHERE l.id = ? AND l.site_id = ?",
                (audit_id, self.site_id),
            )
        )

    def query(
        self,
        *,
        page: Page,
        audit_id: int | None = None,
        event_id: int | None = None,
        item_id: int | None = None,
        import_job_id: int | None = None,
        within_events: Collection[int] | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
    ) -> tuple[list[sqlite3.Row], int]:
        """One page of entries; ``within_events`` keeps entries of those events or of none.

        Entries never change, so their ``dateModified`` (for ``since``, ``until`` and
        ``order``) is their ``dateCreated``.
        """
        where = Where()
        where.add("site_id = ?", self.site_id)
        if within_events is not None:
            events = sorted(within_events)
            where.add(f"event_id IS NULL OR event_id IN ({', '.join('?' * len(events))})", *events)
        if audit_id is not None:
            where.add("id = ?", audit_id)
        if event_id is not None:
            where.add("event_id = ?", event_id)
        if item_id is not None:
            where.add("item_id = ?", item_id)
        if import_job_id is not None:
            where.add("import_job_id = ?", import_job_id)
        add_time_bound(where, since, "date_created")
        add_time_bound(where, until, "date_created")
        total = self.connection.execute(
            f"SELECT count(*) FROM audit_log WHERE {where.sql()}", where.params
        ).fetchone()[0]
        tail, tail_params = page_sql(page, {"dateModified": "date_created"})
        rows = self.connection.execute(
            f"SELECT {ENTRY_COLUMNS} FROM audit_log l WHERE {where.sql()}{tail}",
            [*where.params, *tail_params],
        ).fetchall()
        return rows, total
