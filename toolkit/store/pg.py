"""A PostgreSQL connection with the surface of ``sqlite3.Connection`` the store uses.

Statements are rewritten by :func:`toolkit.store.dialect.to_postgres`; rows answer by
position and by column name (like ``sqlite3.Row``); ``jsonb`` comes back as its text (the
store parses JSON itself, as it does from SQLite); ``lastrowid`` is the id an
``INSERT ... VALUES`` returned. Values are bound client-side, so a parameter takes the
type its place in the statement needs, as SQLite's untyped parameters do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.rows import RowMaker
from psycopg.types.string import TextLoader

from toolkit.model.location import PostgresURL
from toolkit.store.dialect import to_postgres

# The tables whose INSERT ... VALUES report the id they made (cursor.lastrowid).
_RETURNS_ID = re.compile(
    r"^\s*INSERT INTO \"?(site|event|user|api_key|audit_log|media|import_job|"
    r"report_instance|gazetteer)\"? \([^)]*\)\s*VALUES\s*\([^;]*\)\s*$",
    re.IGNORECASE | re.DOTALL,
)


class Row(tuple[Any, ...]):
    """A row by position or by column name (each result's columns are a subclass's)."""

    _names: dict[str, int] = {}  # noqa: RUF012  # set on each result's subclass

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: psycopg.Cursor[Any]) -> RowMaker[Row]:
    names = {c.name: i for i, c in enumerate(cursor.description or ())}
    row_class: type[Row] = type("Row", (Row,), {"_names": names})
    return row_class


class Cursor:
    """What ``execute`` returns: rows, ``rowcount`` and ``lastrowid``."""

    def __init__(self, cursor: psycopg.ClientCursor[Row], lastrowid: int | None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount

    @property
    def description(self) -> Any:
        return self._cursor.description

    def fetchone(self) -> Row | None:
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Row]:
        return self._cursor.fetchall() if self._cursor.description else []

    def fetchmany(self, size: int = 1) -> list[Row]:
        return self._cursor.fetchmany(size) if self._cursor.description else []

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())


class PgConnection:
    """One PostgreSQL session; transactions are the store's own BEGIN/COMMIT."""

    def __init__(self, url: str) -> None:
        # A profile's password goes to libpq as a parameter beside the URL's text.
        password = url.password if isinstance(url, PostgresURL) else None
        self.raw = psycopg.connect(
            str(url), autocommit=True, cursor_factory=psycopg.ClientCursor, password=password
        )
        self.raw.adapters.register_loader("jsonb", TextLoader)
        self.raw.adapters.register_loader("json", TextLoader)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def _cursor(self) -> psycopg.ClientCursor[Row]:
        cursor: psycopg.ClientCursor[Row] = psycopg.ClientCursor(self.raw, row_factory=_row_factory)
        return cursor

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Cursor:
        statement = to_postgres(sql)
        returning = _RETURNS_ID.match(statement) is not None
        if returning:
            statement += " RETURNING id"
        cursor = self._cursor()
        cursor.execute(statement, tuple(params or ()))
        lastrowid = None
        if returning:
            row = cursor.fetchone()
            lastrowid = int(row[0]) if row is not None else None
        return Cursor(cursor, lastrowid)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor:
        cursor = self._cursor()
        cursor.executemany(to_postgres(sql), [tuple(r) for r in rows])
        return Cursor(cursor, None)

    def close(self) -> None:
        self.raw.close()
