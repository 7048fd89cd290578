"""Large results of an SQLite site file read straight into Arrow, in a process apart.

The sqlite3 module makes a Python object of every value it reads: a million assets'
thirteen index columns took 7.1 s that way, and 3.5 s read by the ADBC SQLite driver into
Arrow in C, started and handed back through a pipe (``tests/benchmarks/bench_index_build.py``).

The driver brings its own copy of SQLite. Two copies in one process do not know each
other's open files, and closing a file in one drops the POSIX locks the other holds on
it, which can corrupt the file ("How To Corrupt An SQLite Database File", 2.2.1, at
sqlite.org). So the driver runs only in a child process (:mod:`toolkit.store.arrow_child`),
which writes the result to its standard output as an Arrow IPC stream.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.lazy import lazy

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy("pyarrow")

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("arrow_child.py")
# Rows from which a read is made in a process apart: the sqlite3 module's read of a
# million assets' index columns costs about 7 us an asset, the process apart 0.25 s to
# start.
APART_ROWS = 100_000


def apart_from(
    connection: sqlite3.Connection,
    path: Path | None,
    from_where: str,
    params: Sequence[object],
    *,
    locked: bool = False,
) -> Path | None:
    """The SQLite file to read the rows of ``from_where`` (``FROM ... WHERE ...``, of
    ``params``) from in a process apart, or None to read them on ``connection``.

    None when there is no file (PostgreSQL: ``path`` None); when ``connection`` has a
    transaction open, whose changes a read apart would miss (unless ``locked``: it holds
    the write lock and has changed none of those rows yet, so what is committed is what it
    would read); and when there are fewer than :data:`APART_ROWS` rows, too few for the
    read apart to gain more than starting it costs.
    """
    if path is None or (connection.in_transaction and not locked):
        return None
    beyond = connection.execute(
        f"SELECT 1 {from_where} LIMIT 1 OFFSET ?", [*params, APART_ROWS - 1]
    ).fetchone()
    return path if beyond is not None else None


def read_apart(
    path: Path, query: str, params: Sequence[object], schema: pa.Schema
) -> pa.Table | None:
    """The rows of ``query`` (one statement; ``params``, text or numbers, bound to its ``?``
    in order) in the SQLite file ``path``, as a table of ``schema`` (its columns named and
    ordered as the query's).

    None when they could not be read that way (the driver not installed, the file locked
    by a writer in rollback-journal mode, a value not of its column's type): the caller
    reads them itself. Only what is committed is read: a caller with a transaction open
    reads in it instead.
    """
    with ApartRead(path, query, params) as read:
        return read.table(schema)


class ApartRead:
    """:func:`read_apart` begun: the process apart reads while its caller goes on, and
    :meth:`table` takes what it read (the process holds it until then). :meth:`close`
    (or leaving the ``with`` block) stops a read whose table was never taken."""

    def __init__(self, path: Path, query: str, params: Sequence[object]) -> None:
        self.path = path
        self._child: subprocess.Popen[bytes] | None = None
        # The child's standard error, for the log if it fails; closed by close().
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115
        if not sys.executable:  # an embedding program: no interpreter to start
            return
        # -P: the child's folder (this package's) is not put first on its import path.
        command = [sys.executable, "-P", str(CHILD), str(path)]
        try:
            self._child = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors
            )
        except OSError as exc:
            log.debug("reading %s in a process apart could not start: %s", path, exc)
            return
        assert self._child.stdin is not None
        try:
            # (A few hundred bytes: the pipe takes them without waiting for the child.)
            self._child.stdin.write(json.dumps({"query": query, "params": list(params)}).encode())
            self._child.stdin.close()
        except OSError as exc:
            log.debug("reading %s in a process apart failed: %s", path, exc)
            self.close()

    def table(self, schema: pa.Schema) -> pa.Table | None:
        """What the process read, as a table of ``schema``; None as :func:`read_apart`."""
        child, self._child = self._child, None
        if child is None:
            return None
        assert child.stdout is not None
        table: pa.Table | None = None
        try:
            table = pa.ipc.open_stream(child.stdout).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            log.debug("reading %s in a process apart failed: %s", self.path, exc)
        finally:
            child.stdout.close()
            if table is None:
                child.kill()  # stopped here, or given up: not left reading
            returncode = child.wait()
        if returncode != 0 or table is None:
            self._errors.seek(0)
            said = self._errors.read().decode("utf-8", "replace").strip().splitlines()
            log.debug(
                "reading %s in a process apart failed (exit status %s): %s",
                self.path,
                returncode,
                said[-1] if said else "",
            )
            return None
        try:
            return table.cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
            # A value of another type than its column's (text in a number column): SQLite
            # allows it, the driver then reads the whole column as text.
            log.debug("reading %s in a process apart gave other types: %s", self.path, exc)
            return None

    def close(self) -> None:
        """Stop the process if its table was not taken; let go of its error file."""
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            if child.stdout is not None:
                child.stdout.close()
            child.wait()
        self._errors.close()

    def __enter__(self) -> ApartRead:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
