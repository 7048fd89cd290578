"""Bulk create, patch and retire of one kind of record, each with its audit trail.

Items, assets and users share this machinery; each names its table, its JSON
column and which columns its audit entries show. Audit entries are written
set-wise inside SQLite (``INSERT ... SELECT``), so a million-row import pays no
Python loop for its audit trail. The caller holds the transaction.

An import's creation entries of items and assets do not copy the records' values (a
million copies were a third of the store stage): :func:`audit_changes_sql` reads them
back as the record's values with its later audited changes undone.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.errors import StoreError
from toolkit.lazy import lazy
from toolkit.store.dialect import (
    copy_rows,
    is_postgres_connection,
    next_ids,
    site_checked_once,
)

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy("numpy")  # not for every command that opens a store

INACTIVE_STATUS = 0
# Rows inserted between two progress reports.
INSERT_BATCH = 50_000
# Fewer rows than this keep PostgreSQL's per-row foreign key checks: checking the site
# once costs a few round trips (catalog, savepoint), more than a small write's checks.
CHECK_SITE_ONCE_ROWS = 1_000
# Binary columns cannot go into an audit entry's JSON; their change is noted as 'replaced'
# (an asset's new bounds are audited as numbers beside it).
BINARY_COLUMNS = frozenset({"geometry"})


@dataclass(frozen=True)
class Actor:
    """Who does a write and why, for the audit log."""

    user_id: str | None = None
    message: str | None = None
    import_job_id: int | None = None


@dataclass(frozen=True)
class RecordKind:
    """How one record table is written and audited."""

    table: str
    record_type: str
    json_column: str
    audit_columns: Mapping[str, str]  # column -> key in the audit JSON
    item_id_sql: str = "NULL"
    event_id_sql: str = "NULL"
    # Ids numbered within each site (assets keep their master system's ids, and two sites
    # may hold the same ones) rather than across the file.
    ids_per_site: bool = False
    # An import's creation entries leave ``changes`` empty; readers rebuild it.
    lean_import_create: bool = False


ITEM_KIND = RecordKind(
    "item",
    "item",
    "fields",
    {"asset_id": "assetId", "status": "status"},
    item_id_sql="{t}.id",
    event_id_sql="{t}.event_id",
    lean_import_create=True,
)
ASSET_KIND = RecordKind(
    "asset",
    "asset",
    "extra_info",
    {"name": "name", "code": "code", "type": "type", "friendly": "friendly", "status": "status"},
    ids_per_site=True,
    lean_import_create=True,
)
USER_KIND = RecordKind(
    "user",
    "user",
    "extra",
    {
        "username": "username",
        "first_name": "firstName",
        "last_name": "lastName",
        "email": "email",
        "phone": "phone",
        "organisation": "organisation",
        "positions": "positions",
        "status": "status",
    },
)


_LEAN_KINDS = tuple(k for k in (ITEM_KIND, ASSET_KIND, USER_KIND) if k.lean_import_create)


def _audit_object(kind: RecordKind, alias: str) -> str:
    parts = [f"'{kind.json_column}', json({alias}.{kind.json_column})"]
    parts += [f"'{key}', {alias}.{column}" for column, key in kind.audit_columns.items()]
    return "json_object(" + ", ".join(parts) + ")"


def _audit_insert(kind: RecordKind, action: str, changes_sql: str, source_sql: str) -> str:
    item_id = kind.item_id_sql.format(t="r")
    event_id = kind.event_id_sql.format(t="r")
    return (
        "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
        "record_id, item_id, event_id, changes, message, import_job_id) "
        f"SELECT r.site_id, ?, ?, '{action}', '{kind.record_type}', r.id, {item_id}, {event_id}, "
        f"{changes_sql}, ?, ? {source_sql}"
    )


def creation_changes(kind: RecordKind, actor: Actor) -> str:
    """SQL of a creation entry's ``changes`` over the new record ``r``.

    An import's entries name the action, the job and the record; what the record was made
    with is read back by :func:`audit_changes_sql` (no second copy of every row)."""
    if kind.lean_import_create and actor.import_job_id is not None:
        return "NULL"
    return _audit_object(kind, "r")


def audit_changes_sql(alias: str) -> str:
    """SQL of the ``changes`` of the audit entry ``alias``: as written, or for an import's
    creation entry (written without them) the values the record was created with.

    Those are its values now with its later audited changes undone: the first later
    update's ``before`` holds them all (else the record as it is), and the status is the
    one the first later update or retire found. Records are never deleted and every
    change of an audited column is an audited update or retire, so this is exactly what
    a full creation entry held. The lookups use the partial index ``audit_change``.
    """
    later = (
        f"FROM main.audit_log u WHERE u.record_type = {alias}.record_type "
        f"AND u.record_id = {alias}.record_id AND u.action <> 'create' "
        f"AND u.site_id = {alias}.site_id AND u.id > {alias}.id"
    )
    # json(): the object as JSON, not text, on PostgreSQL (SQLite's is the same text).
    before = (
        f"(SELECT json(json_extract(u.changes, '$.before')) {later} AND u.action = 'update' "
        "ORDER BY u.id LIMIT 1)"
    )
    status = (
        "(SELECT CASE u.action WHEN 'update' THEN json_extract(u.changes, '$.before.status') "
        f"ELSE json_extract(u.changes, '$.status[0]') END {later} "
        "AND u.action IN ('update', 'retire') ORDER BY u.id LIMIT 1)"
    )
    now = " ".join(
        f"WHEN '{kind.record_type}' THEN (SELECT {_audit_object(kind, 'r')} "
        f"FROM main.{kind.table} r WHERE r.id = {alias}.record_id "
        f"AND r.site_id = {alias}.site_id)"
        for kind in _LEAN_KINDS
    )
    base = f"coalesce({before}, CASE {alias}.record_type {now} END)"
    kinds = ", ".join(f"'{kind.record_type}'" for kind in _LEAN_KINDS)
    return (
        f"CASE WHEN {alias}.changes IS NULL AND {alias}.action = 'create' "
        f"AND {alias}.record_type IN ({kinds}) THEN "
        f"CASE WHEN {status} IS NULL THEN {base} ELSE json_set({base}, '$.status', {status}) "
        f"END ELSE {alias}.changes END"
    )


def _check_numbered(conn: sqlite3.Connection, table: str, ids: Sequence[int]) -> None:
    """Rows inserted without an id into SQLite's ``table`` were numbered ``ids``: as each
    took the largest id + 1, the last one's is ``ids[-1]`` only if the first's was
    ``ids[0]``."""
    last = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
    if last != ids[-1]:
        raise StoreError(
            f"the new {table} records were numbered up to {last}, not {ids[-1]} as expected"
        )


def _literals(columns: Mapping[str, object]) -> dict[str, str]:
    """The SQLite literal of each column given one value for every row (None, a whole
    number or text), which reads back exactly as that value bound would."""
    out: dict[str, str] = {}
    for name, value in columns.items():
        if value is None:
            out[name] = "NULL"
        elif type(value) is int and -(2**63) <= value < 2**63:
            out[name] = str(value)
        elif type(value) is str and "\x00" not in value:  # SQL text holds no NUL
            out[name] = "'" + value.replace("'", "''") + "'"
    return out


def _as_range(ids: Sequence[int]) -> Sequence[int]:
    """``ids`` as a ``range`` when they are consecutive and ascending (a master system's
    ids usually are), so the audit entries select them by ``BETWEEN``, with no list of
    ids to load first; else ``ids`` as given."""
    if isinstance(ids, range) or len(ids) == 0:
        return ids
    first, last = int(ids[0]), int(ids[-1])
    if last - first + 1 != len(ids):
        return ids
    values = np.fromiter(ids, dtype=np.int64, count=len(ids))
    if not bool((np.diff(values) == 1).all()):
        return ids
    return range(first, last + 1)


class RecordTable:
    """Bulk writes of one kind of record in one site."""

    def __init__(self, kind: RecordKind, site_id: int) -> None:
        self.kind = kind
        self.site_id = site_id
        # Every statement names the site as well as the id: an asset id is only unique
        # within its site. ``site_id`` is our own integer, so it is inlined. Joins with the
        # temporary id tables are CROSS JOINs so that SQLite looks each id up rather than
        # scanning every record of the site.
        # Where ids are unique in the file, ``+`` keeps SQLite on the id's own index.
        self._plus = "" if kind.ids_per_site else "+"
        self._in_site = f"{self._plus}r.site_id = {int(site_id)}"

    def insert_many(
        self,
        conn: sqlite3.Connection,
        columns: Mapping[str, Sequence[object] | object],
        count: int,
        actor: Actor,
        now: int,
        *,
        ids: Sequence[int] | None = None,
        on_rows: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Insert ``count`` records; a column is a sequence or one value for every row.
        ``on_rows`` hears how many are in after each batch of :data:`INSERT_BATCH`.

        Without ``ids``, new records get consecutive ids: the write lock is held
        (``BEGIN IMMEDIATE``), so the next ids are ours alone, and knowing them
        lets the audit entries be written with one ``INSERT ... SELECT``.
        """
        if count == 0:
            return []
        if ids is None and is_postgres_connection(conn) and not self.kind.ids_per_site:
            # No write lock there: two imports at once draw ids from the table's sequence
            # (consecutive unless another draws at the same moment).
            ids = next_ids(conn, self.kind.table, count)
        if ids is None:
            if is_postgres_connection(conn):
                # Ids per site are the site's largest + 1; two transactions at once (an
                # asset import and a lookup's upgrade) would both draw it. Until this one
                # ends, another waits here, then reads the largest id this one wrote.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                    (f"ids/{self.kind.table}/{int(self.site_id)}",),
                )
            scope = f" WHERE site_id = {int(self.site_id)}" if self.kind.ids_per_site else ""
            first = conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {self.kind.table}{scope}")
            start = first.fetchone()[0]
            ids = range(start, start + count)
            # A record's id is SQLite's rowid unless ids are numbered per site (an asset's
            # key is its site and id): a row inserted without one takes the largest + 1,
            # ``start`` first. Left unbound, a million items' ids are 0.3 s less of the
            # insert (a bare executemany: 2.9 s against 3.2 s).
            numbered = not is_postgres_connection(conn) and not self.kind.ids_per_site
        else:
            numbered = False
        given: dict[str, object] = {
            "id": ids,
            "site_id": self.site_id,
            **columns,
            "import_job_id": actor.import_job_id,
            "date_created": now,
            "date_modified": now,
        }
        names = list(given)
        # PostgreSQL's bulk load is COPY (geometry keeps the INSERT: its WKB is bytes).
        copy = is_postgres_connection(conn) and "geometry" not in names
        # On SQLite a column of one value for every row is written into the statement,
        # not bound again on each row: at a million assets, nine such columns were 9
        # million bindings, a fifth of the insert's CPU.
        literals = {} if is_postgres_connection(conn) else _literals(given)  # COPY: all
        bound = [n for n in names if n not in literals]
        # Ids SQLite numbers as given are left out, if another column gives the rows.
        numbered = numbered and len(bound) > 1
        if numbered:
            names.remove("id")
            bound.remove("id")
        values = [
            v if isinstance(v, Sequence) and not isinstance(v, str) else [v] * count
            for v in (given[n] for n in bound)
        ]
        sql = (
            f"INSERT INTO {self.kind.table} ({', '.join(names)}) "
            f"VALUES ({', '.join(literals.get(n, '?') for n in names)})"
        )
        rows = zip(*values, strict=True)
        # Every row (and audit entry) here is of this site: its key checked once.
        once = (
            site_checked_once(conn, [self.kind.table, "audit_log"], self.site_id)
            if count >= CHECK_SITE_ONCE_ROWS
            else contextlib.nullcontext(False)
        )
        with once:
            # In batches only to say how far it got: one executemany per batch costs the same.
            for start in range(0, count, INSERT_BATCH):
                batch = itertools.islice(rows, INSERT_BATCH)
                if copy:
                    copy_rows(conn, self.kind.table, names, batch)
                else:
                    conn.executemany(sql, batch)
                if on_rows is not None:
                    on_rows(min(start + INSERT_BATCH, count))
            if numbered:
                _check_numbered(conn, self.kind.table, ids)
            changes = creation_changes(self.kind, actor)
            ids = _as_range(ids)
            if isinstance(ids, range):
                source, params = (
                    f"FROM {self.kind.table} r WHERE r.id BETWEEN ? AND ? AND {self._in_site}",
                    [ids.start, ids.stop - 1],
                )
            else:
                self._fill_temp_ids(conn, ids)
                source, params = (
                    f"FROM temp.record_ids t CROSS JOIN {self.kind.table} r "
                    f"ON r.id = t.id AND {self._in_site}",
                    [],
                )
            conn.execute(
                _audit_insert(self.kind, "create", changes, source),
                (now, actor.user_id, actor.message, actor.import_job_id, *params),
            )
        return list(ids)

    def update_many(
        self,
        conn: sqlite3.Connection,
        ids: Sequence[int],
        patches: Sequence[str],
        columns: Mapping[str, Sequence[object]],
        actor: Actor,
        now: int,
    ) -> int:
        """Patch the JSON column (RFC 7396) and set ``columns`` where their value is not None.

        The audit entry keeps the record as it was and the change applied. Returns how
        many records changed; the others were already as asked.
        """
        if not ids:
            return 0
        names = list(columns)
        conn.execute("DROP TABLE IF EXISTS temp.record_change")
        if is_postgres_connection(conn):
            # PostgreSQL's columns need types: the record table's own.
            conn.execute(
                "CREATE TEMP TABLE record_change AS SELECT id, NULL::jsonb AS patch"
                + "".join(f", {n}" for n in names)
                + f" FROM {self.kind.table} WHERE false"
            )
            conn.execute("ALTER TABLE record_change ADD PRIMARY KEY (id)")
        else:
            conn.execute(
                "CREATE TEMP TABLE record_change (id INTEGER PRIMARY KEY, patch TEXT"
                + "".join(f", {n}" for n in names)
                + ")"
            )
        kind = self.kind
        rows = zip(ids, patches, *columns.values(), strict=True)
        # A row whose patch and columns change nothing is left alone: no audit entry, no new
        # dateModified, so running the same import twice does no work the second time.
        if is_postgres_connection(conn):
            conn.executemany(
                f"INSERT INTO temp.record_change VALUES ({', '.join('?' * (len(names) + 2))})",
                rows,
            )
            unchanged = conn.execute(
                "DELETE FROM temp.record_change WHERE id IN (SELECT c.id "
                f"FROM temp.record_change c CROSS JOIN {kind.table} r "
                f"ON r.id = c.id AND {self._in_site} "
                f"WHERE {self._unchanged('c.patch', [f'c.{n}' for n in names], names, False)})"
            ).rowcount
        else:
            # Only the rows that change go into the table: each is compared with its record
            # as it is given, where inserting every row and deleting the unchanged took a
            # second pass over both tables (a million unchanged items: 4.7-4.9 s against
            # 6.4-6.9 s).
            given = [f"?{i}" for i in range(3, len(names) + 3)]
            conn.executemany(
                f"INSERT INTO temp.record_change SELECT {', '.join(['?1', '?2', *given])} "
                f"WHERE NOT EXISTS (SELECT 1 FROM {kind.table} r WHERE r.id = ?1 "
                f"AND {self._in_site} AND {self._unchanged('?2', given, names, True)})",
                rows,
            )
            unchanged = (
                len(ids) - conn.execute("SELECT count(*) FROM temp.record_change").fetchone()[0]
            )
        patch_parts = [f"'{kind.json_column}', json(c.patch)"] + [
            f"'{kind.audit_columns.get(n, n)}', "
            + (
                f"CASE WHEN c.{n} IS NULL THEN NULL ELSE 'replaced' END"
                if n in BINARY_COLUMNS
                else f"c.{n}"
            )
            for n in names
        ]
        changes = (
            f"json_object('before', {_audit_object(kind, 'r')}, "
            f"'patch', json_object({', '.join(patch_parts)}))"
        )
        conn.execute(
            _audit_insert(
                kind,
                "update",
                changes,
                f"FROM temp.record_change c CROSS JOIN {kind.table} r "
                f"ON r.id = c.id AND {self._in_site}",
            ),
            (now, actor.user_id, actor.message, actor.import_job_id),
        )
        sets = [f"{kind.json_column} = json_patch({kind.table}.{kind.json_column}, c.patch)"]
        sets += [f"{n} = coalesce(c.{n}, {kind.table}.{n})" for n in names]
        conn.execute(
            f"UPDATE {kind.table} SET {', '.join(sets)}, "
            f"import_job_id = coalesce(?, {kind.table}.import_job_id), date_modified = ? "
            f"FROM temp.record_change c WHERE {kind.table}.id = c.id "
            f"AND {self._plus}{kind.table}.site_id = {int(self.site_id)} "
            # The IN steers SQLite to look the changed ids up, not to scan the whole site.
            f"AND {kind.table}.id IN (SELECT id FROM temp.record_change)",
            (actor.import_job_id, now),
        )
        conn.execute("DROP TABLE temp.record_change")
        return len(ids) - unchanged

    def _unchanged(
        self, patch: str, values: Sequence[str], names: Sequence[str], same_text: bool
    ) -> str:
        """The condition that record ``r`` is already as the JSON ``patch`` and ``names``'
        ``values`` (SQL expressions; a NULL value leaves its column alone) would make it.

        ``same_text`` (SQLite): a patch whose text is the stored text changes nothing,
        unless it holds a null (which would remove that key). Comparing bytes first, a
        million unchanged items were compared in 2.4-3.4 s, against 8.3-9.3 s parsing both
        texts and patching one.
        """
        column = f"r.{self.kind.json_column}"
        patched = f"json_patch({column}, {patch}) = json({column})"
        if same_text:
            patched = f"({patch} = {column} AND instr({patch}, 'null') = 0) OR {patched}"
        terms = [f"({patched})"]
        terms += [f"({v} IS NULL OR {v} IS r.{n})" for v, n in zip(values, names, strict=True)]
        return " AND ".join(terms)

    def update_one(
        self,
        conn: sqlite3.Connection,
        record_id: int,
        patch: str,
        columns: Mapping[str, object],
        actor: Actor,
        now: int,
    ) -> bool:
        """Patch the JSON column (RFC 7396) and set ``columns`` exactly, None included.

        Unlike :meth:`update_many` a None here clears the column (a REST PUT or PATCH
        that unlinks an asset). Audited like :meth:`update_many`, except that a change
        setting an active record's status inactive is audited as a retirement (the API's
        only way to retire a record). A change that changes nothing is left alone: no
        audit entry, no new dateModified. Returns whether the record changed.
        """
        kind = self.kind
        names = list(columns)
        j = kind.json_column
        same = [f"json_patch(r.{j}, json(?)) = json(r.{j})"] + [f"? IS r.{n}" for n in names]
        retiring = "FALSE"
        if "status" in columns and columns["status"] is not None:
            retiring = f"(r.status > {INACTIVE_STATUS} AND ? <= {INACTIVE_STATUS})"
        found = conn.execute(
            f"SELECT {' AND '.join(same)}, {retiring} FROM {kind.table} r "
            "WHERE r.id = ? AND r.site_id = ?",
            (
                patch,
                *columns.values(),
                *([columns["status"]] if retiring != "FALSE" else []),
                record_id,
                self.site_id,
            ),
        ).fetchone()
        if found is None or bool(found[0]):
            return False
        action = "retire" if found[1] else "update"
        patch_parts = [f"'{j}', json(?)"] + [f"'{kind.audit_columns.get(n, n)}', ?" for n in names]
        changes = (
            f"json_object('before', {_audit_object(kind, 'r')}, "
            f"'patch', json_object({', '.join(patch_parts)}))"
        )
        item_id = kind.item_id_sql.format(t="r")
        event_id = kind.event_id_sql.format(t="r")
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
            "record_id, item_id, event_id, changes, message, import_job_id) "
            f"SELECT r.site_id, ?, ?, '{action}', '{kind.record_type}', r.id, {item_id}, "
            f"{event_id}, {changes}, ?, ? FROM {kind.table} r WHERE r.id = ? AND r.site_id = ?",
            (
                now,
                actor.user_id,
                patch,
                *columns.values(),
                actor.message,
                actor.import_job_id,
                record_id,
                self.site_id,
            ),
        )
        sets = [f"{j} = json_patch({j}, ?)"]
        sets += [f"{n} = ?" for n in names]
        conn.execute(
            f"UPDATE {kind.table} SET {', '.join(sets)}, date_modified = ? "
            "WHERE id = ? AND site_id = ?",
            (patch, *columns.values(), now, record_id, self.site_id),
        )
        return True

    def retire_many(
        self, conn: sqlite3.Connection, ids: Sequence[int], actor: Actor, now: int
    ) -> int:
        """Set records inactive (records are never deleted), audited."""
        if not ids:
            return 0
        self._fill_temp_ids(conn, ids)
        kind = self.kind
        conn.execute(
            _audit_insert(
                kind,
                "retire",
                f"json_object('status', json_array(r.status, {INACTIVE_STATUS}))",
                f"FROM temp.record_ids t CROSS JOIN {kind.table} r "
                f"ON r.id = t.id AND {self._in_site}",
            ),
            (now, actor.user_id, actor.message, actor.import_job_id),
        )
        conn.execute(
            f"UPDATE {kind.table} SET status = {INACTIVE_STATUS}, date_modified = ?, "
            "import_job_id = coalesce(?, import_job_id) "
            f"WHERE id IN (SELECT id FROM temp.record_ids) "
            f"AND {self._plus}site_id = {int(self.site_id)}",
            (now, actor.import_job_id),
        )
        return len(ids)

    def add_tag(self, conn: sqlite3.Connection, ids: Sequence[int], tag: str) -> None:
        """Add ``tag`` to the tags of the records that do not have it yet."""
        if not ids:
            return
        self._fill_temp_ids(conn, ids)
        table = self.kind.table
        conn.execute(
            f"UPDATE {table} SET tags = json_insert(tags, '$[#]', ?) "
            f"WHERE id IN (SELECT id FROM temp.record_ids) "
            f"AND {self._plus}site_id = {int(self.site_id)} "
            f"AND NOT EXISTS (SELECT 1 FROM json_each({table}.tags) WHERE value = ?)",
            (tag, tag),
        )

    @staticmethod
    def _fill_temp_ids(conn: sqlite3.Connection, ids: Sequence[int]) -> None:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS record_ids (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM temp.record_ids")
        # In ascending order: SQLite appends to the key's b-tree instead of splitting pages
        # all over it (a million ids in shuffled order took seconds).
        ordered = sorted(ids)
        if is_postgres_connection(conn):
            conn.executemany("INSERT INTO temp.record_ids VALUES (?)", zip(ordered))
        else:
            # One statement over a JSON array: no Python call per id.
            conn.execute(
                "INSERT INTO temp.record_ids SELECT value FROM json_each(?)",
                (json.dumps([int(i) for i in ordered]),),
            )
