"""Opening the site store (a SQLite file, or a PostgreSQL database named by a
``postgresql://`` URL): pragmas, migrations, transactions, crash recovery."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, cast

from toolkit.errors import DiskFullError, NoSiteError, StoreError
from toolkit.model.location import PostgresURL, StoreLocation, display_name, is_postgres
from toolkit.store.checkpoint import WalCheckpointer
from toolkit.store.legacy import absorb_side_folders
from toolkit.store.schema import MIGRATIONS, SCHEMA_VERSION
from toolkit.store.sql import sounds_like

if TYPE_CHECKING:
    from toolkit.store.pg import PgConnection

log = logging.getLogger(__name__)

# A second import into the same site waits for the first instead of failing with
# "database is locked"; imports of a million rows take tens of seconds.
DEFAULT_BUSY_TIMEOUT_S = 600.0

Clock = Callable[[], int]

# Never the file's path: a server's clients must not learn where its files live.
# The page cache of an import's write transaction (Database.transaction(bulk=True)), KiB:
# enough for the index pages a write of millions of rows keeps changing.
BULK_CACHE_KIB = 256 * 1024
DISK_FULL = (
    "the disk is full: the site file could not grow, so nothing of this change was "
    "written and the site is as it was; free some space and try again"
)
# What to do when a command finds no site: the commands that make one, or the right file.
MAKE_A_SITE = (
    "make one there with `toolkit init` (or `toolkit demo`, or by importing a file), or "
    "give the file of an existing site with --store (env TOOLKIT_STORE)"
)


def no_site(path: str | Path) -> NoSiteError:
    """The error for a site file that is not there (the command may not make one)."""
    return NoSiteError(f"no site at {display_name(path)}; {MAKE_A_SITE}")


def now_ms() -> int:
    """The current time as integer epoch milliseconds (UTC)."""
    return time.time_ns() // 1_000_000


class Database:
    """One open store (a SQLite file or a PostgreSQL database) holding any number of sites.

    Use :meth:`transaction` for every write: on SQLite it takes the write lock up front
    (``BEGIN IMMEDIATE``) so a job either commits whole or leaves nothing.
    """

    # "sqlite" or "postgresql": which dialect the connection speaks.
    dialect = "sqlite"
    # What a failed statement raises (psycopg's errors too, on PostgreSQL).
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    # The file, or the URL as given (jobs run elsewhere open the store again by it).
    path: StoreLocation
    # Copies a SQLite file's log after a bulk write (None on PostgreSQL).
    checkpointer: WalCheckpointer | None = None

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        clock: Clock = now_ms,
        recover: bool = True,
        create: bool = True,
    ) -> None:
        self.clock = clock
        if is_postgres(path):
            # Kept as a PostgresURL: a profile's password travels beside its text.
            self._open_postgres(PostgresURL.of(path), recover=recover, create=create)
            return
        self.path = Path(path)
        self.display = str(self.path)
        if self.path.exists() and self.path.is_dir():
            raise StoreError(f"{self.path}: is a folder, not a site file")
        # Without ``create`` a missing file is an error, not a new empty site: a mistyped
        # --store, or a command run in the wrong folder, must not answer "0 of 0".
        if not create and not self.path.exists():
            raise no_site(self.path)
        try:
            self.connection = sqlite3.connect(
                self.path,
                timeout=busy_timeout_s,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,
            )
            self.connection.row_factory = sqlite3.Row
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=NORMAL")
            self.connection.execute("PRAGMA foreign_keys=ON")
            self.checkpointer = WalCheckpointer(self.path, timeout_s=busy_timeout_s)
            self.connection.create_function("sounds_like", 2, sounds_like, deterministic=True)
            self._migrate()
            absorb_side_folders(self)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot open the site file: {exc}") from exc
        if recover:
            self.fail_orphaned_jobs()

    def _open_postgres(self, url: PostgresURL, *, recover: bool, create: bool) -> None:
        """Connect with libpq's own credential sources, or a profile's password."""
        import psycopg

        from toolkit.store.pg import PgConnection

        self.dialect = "postgresql"
        self.errors = (sqlite3.Error, psycopg.Error)
        self._url = url
        self.display = display_name(url)
        # Jobs run elsewhere open the store again by ``path``: the URL as given.
        self.path = url
        try:
            # The wrapper offers the part of sqlite3.Connection's surface the stores use.
            self.connection = cast(sqlite3.Connection, PgConnection(url))
        except psycopg.Error as exc:
            raise StoreError(f"{self.display}: cannot connect: {_first_line(exc)}") from exc
        try:
            if not create and not self._has_schema():
                # Like a missing file: a read never turns a database into an empty store.
                self.connection.close()
                raise no_site(url)
            self._migrate_postgres()
        except psycopg.Error as exc:
            self.connection.close()
            raise StoreError(f"{self.display}: cannot open the store: {_first_line(exc)}") from exc
        if recover:
            self.fail_orphaned_jobs()

    def sync_ids(self) -> None:
        """After rows were written with the ids they had (a site copy): on PostgreSQL the
        id sequences move past them."""
        if self.dialect == "postgresql":
            from toolkit.store.dialect import sync_ids_sql
            from toolkit.store.schema_pg import TABLES_WITH_IDS

            raw = cast("PgConnection", self.connection).raw
            raw.execute(sync_ids_sql(TABLES_WITH_IDS).encode("utf-8"))

    def lock_scope(self, connection: sqlite3.Connection, scope: str) -> None:
        """Hold ``scope`` (a text naming what a transaction reads and then writes, e.g. an
        import's keys) until the transaction ends. SQLite's write lock already holds
        everything; on PostgreSQL an advisory lock makes a second import of the same
        keys wait, then find the first one's records instead of inserting them again."""
        if self.dialect == "postgresql":
            connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (scope,))

    def _has_schema(self) -> bool:
        row = self.connection.execute("SELECT to_regclass('toolkit_schema')").fetchone()
        return row is not None and row[0] is not None

    def _migrate_postgres(self) -> None:
        import psycopg

        from toolkit.store.dialect import POSTGRES_FUNCTIONS, sync_ids_sql
        from toolkit.store.schema_pg import (
            POSTGRES_EXTENSIONS,
            POSTGRES_MIGRATIONS,
            TABLES_WITH_IDS,
        )

        raw = cast("PgConnection", self.connection).raw
        with raw.transaction():
            # One process migrates at a time; the others wait, then find it done.
            raw.execute("SELECT pg_advisory_xact_lock(16160001)")
            for extension in POSTGRES_EXTENSIONS:
                try:
                    with raw.transaction():  # a savepoint: a refusal is reported below
                        raw.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
                except psycopg.Error as exc:
                    raise StoreError(
                        f"{self.display}: the store needs the extension {extension}, which "
                        f"its user may not make ({_first_line(exc)}); an administrator "
                        f"runs: CREATE EXTENSION {extension};"
                    ) from exc
            raw.execute("CREATE TABLE IF NOT EXISTS toolkit_schema (version INTEGER NOT NULL)")
            row = raw.execute("SELECT max(version) FROM toolkit_schema").fetchone()
            version = int(row[0]) if row and row[0] is not None else 0
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.display}: was written by a newer toolkit (schema {version}, "
                    f"this toolkit knows {SCHEMA_VERSION}); upgrade the toolkit"
                )
            for number in range(version, SCHEMA_VERSION):
                if POSTGRES_MIGRATIONS[number]:
                    raw.execute(POSTGRES_MIGRATIONS[number].encode())
                raw.execute("DELETE FROM toolkit_schema")
                raw.execute("INSERT INTO toolkit_schema VALUES (%s)", (number + 1,))
                log.info("migrated %s to schema %d", self.display, number + 1)
            # SQLite's functions over jsonb: replaced whenever this toolkit's text differs.
            checksum = hashlib.sha256(POSTGRES_FUNCTIONS.encode("utf-8")).hexdigest()
            raw.execute("CREATE TABLE IF NOT EXISTS toolkit_functions (checksum TEXT NOT NULL)")
            row = raw.execute("SELECT checksum FROM toolkit_functions").fetchone()
            if row is None or row[0] != checksum:
                raw.execute(sync_ids_sql(TABLES_WITH_IDS).encode("utf-8"))
                raw.execute(POSTGRES_FUNCTIONS.encode("utf-8"))
                raw.execute("DELETE FROM toolkit_functions")
                raw.execute("INSERT INTO toolkit_functions VALUES (%s)", (checksum,))

    def log_copied(self) -> None:
        """Return once a bulk write's log has been copied into the file (at once if none
        is being copied). A large read waits for it: while the log holds pages not yet in
        the file, each page read is looked up in the log's index first, and a million
        assets' read for their index took 8.6 s after the copy, 11-12 s during it."""
        if self.checkpointer is not None:
            self.checkpointer.wait()

    def close(self) -> None:
        self.log_copied()  # a bulk write's log copied before the file is let go
        self.connection.close()

    def connect_again(self, *, timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> sqlite3.Connection:
        """A second connection to the same store, for writes that must not join a
        transaction the main connection has open (caller closes it)."""
        if self.dialect == "postgresql":
            from toolkit.store.pg import PgConnection

            return cast(sqlite3.Connection, PgConnection(self._url))
        connection = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        connection.execute("PRAGMA foreign_keys=ON")
        return connection

    def begin_write(self, connection: sqlite3.Connection) -> None:
        """Start a write transaction on ``connection`` (SQLite: take the write lock now)."""
        connection.execute("BEGIN" if self.dialect == "postgresql" else "BEGIN IMMEDIATE")

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        version = self.connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: was written by a newer toolkit (schema {version}, "
                f"this toolkit knows {SCHEMA_VERSION}); upgrade the toolkit"
            )
        for number in range(version, SCHEMA_VERSION):
            with self.transaction() as conn:
                # Another process may have applied it while we waited for the write lock.
                if conn.execute("PRAGMA user_version").fetchone()[0] > number:
                    continue
                # executescript would commit our transaction; run statement by statement.
                for statement in _statements(MIGRATIONS[number]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")
            log.info("migrated %s to schema %d", self.path, number + 1)

    @contextmanager
    def transaction(
        self, *, commit: bool = True, bulk: bool = False
    ) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed on success, rolled back on any exception.

        With ``commit=False`` it is rolled back on success too: the writes are made and
        counted, then undone (an import's dry run). ``bulk``: an import's write of up to
        millions of rows, given a page cache of ``BULK_CACHE_KIB`` for the transaction;
        on SQLite its commit leaves copying the log into the file to a thread
        (:class:`WalCheckpointer`).

        A full disk is a :class:`StoreError` saying so (every write of the store comes
        through here), and the transaction is rolled back: the site is as it was.
        """
        conn = self.connection
        if self.checkpointer is not None:
            self.checkpointer.release(conn)
        # SQLite's bulk write: its commit leaves the checkpoint to a thread of its own.
        bulk_write = self.checkpointer if bulk else None
        if bulk_write is not None:
            bulk_write.hold(conn)
        with (
            self._bulk_cache(conn) if bulk_write is not None else nullcontext(),
            self.transaction_on(conn, commit=commit),
        ):
            yield conn
        if bulk_write is not None and commit:
            bulk_write.request()

    @contextmanager
    def transaction_on(
        self, conn: sqlite3.Connection, *, commit: bool = True
    ) -> Iterator[sqlite3.Connection]:
        """:meth:`transaction` on ``conn``: the site's connection, or one of
        :meth:`connect_again` (a writer thread's own)."""
        try:
            self.begin_write(conn)
            with _undone_on_error(conn):
                yield conn
            if not commit:
                conn.execute("ROLLBACK")
                return
            try:
                conn.execute("COMMIT")
            except self.errors:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_FULL:
                raise
            raise DiskFullError(DISK_FULL) from exc

    @staticmethod
    @contextmanager
    def _bulk_cache(conn: sqlite3.Connection) -> Iterator[None]:
        """SQLite's page cache at ``BULK_CACHE_KIB`` until the block ends, then as it was.

        A transaction's changed pages wait in the cache; once it is full SQLite writes them
        to the write-ahead log and, as index pages of rows in no order are changed again
        and again, writes them again. With the default 2 MiB, a million rows into a site
        that already holds a few million spilled hundreds of MiB to the log and took twice
        the CPU (tests/benchmarks/bench_import.py, store stage). Only the pages used are
        held, and they are let go when the cache is set back.
        """
        (before,) = conn.execute("PRAGMA cache_size").fetchone()
        conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA cache_size = {int(before)}")

    def site_id(self, name: str, *, create: bool = False) -> int | None:
        """The id of the site called ``name``; with ``create``, made when missing."""
        row = self.connection.execute("SELECT id FROM site WHERE name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO site (name, date_created) VALUES (?, ?)",
                (name, self.clock()),
            )
        return int(
            self.connection.execute("SELECT id FROM site WHERE name = ?", (name,)).fetchone()[0]
        )

    def sites(self) -> list[str]:
        return [r[0] for r in self.connection.execute("SELECT name FROM site ORDER BY name")]

    def fail_orphaned_jobs(self) -> int:
        """Mark jobs left ``NOT_STARTED`` or ``RUNNING`` by a process that no longer exists
        as ``FAILED``.

        A crash mid-import rolls its data transaction back, but the job record
        (committed when the job started) would read ``RUNNING`` for ever; a job a server
        had queued but not started would read ``NOT_STARTED`` for ever.
        """
        host = socket.gethostname()
        failed = 0
        rows = self.connection.execute(
            "SELECT 'import_job' AS tbl, id, pid, host, status FROM import_job "
            "WHERE status IN ('NOT_STARTED', 'RUNNING') "
            "UNION ALL SELECT 'report_instance', id, pid, host, status FROM report_instance "
            "WHERE status IN ('QUEUED', 'RUNNING')"
        ).fetchall()
        for row in rows:
            if row["host"] != host or _process_alive(row["pid"]):
                continue
            reason = (
                "the process running this job stopped before it finished; nothing it did was kept"
            )
            with self.transaction() as conn:
                if row["tbl"] == "import_job":
                    if row["status"] == "NOT_STARTED":
                        reason = (
                            "the process that was to run this job stopped before it started; "
                            "nothing was written: schedule it again"
                        )
                    # The summary recorded when the job was created keeps its rule, type
                    # and source; only its status and reason change.
                    conn.execute(
                        "UPDATE import_job SET status = 'FAILED', code = 500, result = ?, "
                        "summary = json_set(summary, '$.status', 'FAILED', '$.reason', ?), "
                        "date_completed = ? WHERE id = ? AND status = ?",
                        (
                            f"<p>FAILED: {reason}</p>",
                            reason,
                            self.clock(),
                            row["id"],
                            row["status"],
                        ),
                    )
                else:
                    conn.execute(
                        "UPDATE report_instance SET status = 'FAILED', code = 500, result = ?, "
                        "date_completed = ? WHERE id = ? AND status IN ('QUEUED', 'RUNNING')",
                        (reason, self.clock(), row["id"]),
                    )
            failed += 1
        return failed


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _process_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (our DDL has no ';' inside literals)."""
    statements = []
    for chunk in script.split(";"):
        lines = [line for line in chunk.splitlines() if not line.strip().startswith("--")]
        statement = "\n".join(lines).strip()
        if statement:
            statements.append(statement)
    return statements


@contextmanager
def _undone_on_error(conn: sqlite3.Connection) -> Iterator[None]:
    """The open transaction rolled back if the block raises (anything, Ctrl+C too)."""
    try:
        yield
    except BaseException:
        # SQLite may already have rolled back on its own (it does on a full disk).
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
