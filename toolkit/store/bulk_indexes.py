"""Setting a table's indexes aside for a bulk insert, and making them again after.

SQLite keeps every index of a table as rows are inserted, each new entry a descent of
that index's B-tree. Into a table holding no more rows than are coming, dropping the
indexes and making each again at the end (one sort of every row's entry) costs less:
measured at a million rows, assets' code and box indexes took ~2.5 s more CPU kept as
rows came; items' scope and asset indexes 5.8-6.1 s more than without them, where
making both after took 0.3-1.6 s.
The drop and the making are in the caller's transaction: a rollback, or another
connection reading meanwhile, sees the indexes as they were. SQLite only (PostgreSQL
builds its own way).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from toolkit.store.dialect import is_postgres_connection

# Fewer new rows than this are inserted into the table's indexes as they go.
BULK_INDEX_ROWS = 10_000


def set_aside_indexes(
    conn: sqlite3.Connection, table: str, adding: int, *, least: int = BULK_INDEX_ROWS
) -> list[str]:
    """Before ``adding`` new rows are inserted in ``conn``'s transaction into ``table``
    (every site's rows; records are never deleted, so its largest rowid is about how many
    it holds, found without counting them), if it holds no more than that many and
    ``adding`` is at least ``least``: drop its indexes other than its key, and return the
    statements that make them again (:func:`restore_indexes`, in the same transaction);
    else drop nothing and return none."""
    if adding < least or is_postgres_connection(conn):
        return []
    quoted = '"' + table.replace('"', '""') + '"'
    (held,) = conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {quoted}").fetchone()
    if held > adding:
        return []
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
        "AND sql IS NOT NULL ORDER BY rowid",  # not the key's own (no sql)
        (table,),
    ).fetchall()
    for name, _ in indexes:
        conn.execute('DROP INDEX "' + str(name).replace('"', '""') + '"')
    return [str(sql) for _, sql in indexes]


def restore_indexes(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    """Make again the indexes :func:`set_aside_indexes` dropped."""
    for statement in statements:
        conn.execute(statement)
