"""Large byte strings kept inside the site file, in parts, read back as one seekable file.

Report snapshots and the matching-index cache live in the site file itself, so that
copying the file copies the whole site. A byte string is stored as rows of
``PART_BYTES`` each (SQLite caps one value at about 1 GB, and a part is all a
write holds in memory) and read back through SQLite's incremental BLOB I/O, so a
reader fetches only the byte ranges it asks for: Parquet's footer, then the
column chunks it needs.
"""

from __future__ import annotations

import bisect
import io
import sqlite3
from collections.abc import Iterable, Iterator
from typing import IO

# Large enough that a multi-gigabyte report is a few hundred rows, small enough to hold.
PART_BYTES = 16 * 2**20


def parts_of(source: IO[bytes] | io.RawIOBase, part_bytes: int = PART_BYTES) -> Iterator[bytes]:
    """``source`` from where it stands to its end, ``part_bytes`` at a time (at least one
    part, so an empty string is still stored)."""
    chunk = source.read(part_bytes)
    yield chunk
    while True:
        chunk = source.read(part_bytes)
        if not chunk:
            return
        yield chunk


def parts_of_buffers(
    buffers: Iterable[bytes | bytearray | memoryview], part_bytes: int = PART_BYTES
) -> Iterator[bytes | memoryview]:
    """The concatenation of ``buffers`` as parts of at most ``part_bytes``, sliced out of
    the buffers without copying them (small ones are joined: one part each would be a
    row each); at least one part, so an empty string is still stored."""
    pending = bytearray()
    emitted = False
    for buffer in buffers:
        view = memoryview(buffer).cast("B")
        if len(pending) + len(view) <= part_bytes:
            pending += view
            continue
        if pending:
            yield bytes(pending)
            emitted = True
            pending = bytearray()
        for start in range(0, len(view), part_bytes):
            piece = view[start : start + part_bytes]
            if len(piece) < part_bytes:  # the tail joins the next buffers
                pending += piece
            else:
                yield piece
                emitted = True
    if pending or not emitted:
        yield bytes(pending)


class BlobFile(io.RawIOBase):
    """The parts of one stored byte string, in order, as a read-only seekable file.

    ``rowids`` and ``sizes`` name the rows of ``table`` holding the parts (column
    ``data``). Reads go through :meth:`sqlite3.Connection.blobopen`, one part open at a
    time; the caller serialises use of the connection as for any other query.
    """

    def __init__(
        self, connection: sqlite3.Connection, table: str, rowids: list[int], sizes: list[int]
    ) -> None:
        super().__init__()
        self._connection = connection
        self._table = table
        self._rowids = rowids
        self._starts = [0]
        for size in sizes:
            self._starts.append(self._starts[-1] + size)
        self._position = 0
        self._open_part = -1
        self._blob: sqlite3.Blob | io.BytesIO | None = None
        # Where the parts are (PostgreSQL has no incremental BLOB I/O: a part is read whole).
        self._where: tuple[str, tuple[object, ...]] | None = None

    @property
    def size(self) -> int:
        return self._starts[-1]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        # (RawIOBase types the buffer as a WriteableBuffer; these are the ones io passes.)
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._position < self.size:
            part = bisect.bisect_right(self._starts, self._position) - 1
            blob = self._part(part)
            offset = self._position - self._starts[part]
            count = min(len(view) - done, self._starts[part + 1] - self._position)
            blob.seek(offset)
            view[done : done + count] = blob.read(count)
            done += count
            self._position += count
        return done

    def readall(self) -> bytes:
        """The rest of the bytes in one read (io's default reads 8 KiB at a time)."""
        return bytes(self.read_whole())

    # (Not read_buffer: pyarrow calls a method of that name on a file with a size.)
    def read_whole(self) -> bytearray:
        """The rest of the bytes in one buffer, allocated once and filled in place.

        :meth:`readall` must return immutable ``bytes``, which costs a second copy of
        the whole string; a caller that only reads the bytes (Arrow wraps a bytearray
        without copying it) keeps one copy of a few hundred MiB instead of two.
        """
        buffer = bytearray(max(self.size - self._position, 0))
        done = self.readinto(buffer)
        if done < len(buffer):  # the parts were shorter than their lengths said
            del buffer[done:]
        return buffer

    def _part(self, part: int) -> sqlite3.Blob | io.BytesIO:
        if part != self._open_part or self._blob is None:
            self._close_blob()
            if self._where is not None:
                where, params = self._where
                row = self._connection.execute(
                    f"SELECT data FROM {self._table} WHERE {where} AND part = ?",
                    (*params, self._rowids[part]),
                ).fetchone()
                self._blob = io.BytesIO(bytes(row[0]))
            else:
                self._blob = self._connection.blobopen(
                    self._table, "data", self._rowids[part], readonly=True
                )
            self._open_part = part
        return self._blob

    def _close_blob(self) -> None:
        if self._blob is not None:
            self._blob.close()
            self._blob = None
            self._open_part = -1

    def close(self) -> None:
        self._close_blob()
        super().close()


def open_parts(
    connection: sqlite3.Connection, table: str, where: str, params: tuple[object, ...]
) -> BlobFile | None:
    """The parts of ``table`` matching ``where`` (ordered by ``part``) as one file; None
    when there are none. ``table`` and ``where`` are the store's own SQL, never input."""
    sqlite = isinstance(connection, sqlite3.Connection)
    # SQLite opens a part by its rowid; PostgreSQL selects it by its part number.
    key = "rowid" if sqlite else "part"
    rows = connection.execute(
        f"SELECT {key}, length(data) FROM {table} WHERE {where} ORDER BY part", params
    ).fetchall()
    if not rows:
        return None
    blob = BlobFile(connection, table, [int(r[0]) for r in rows], [int(r[1]) for r in rows])
    if not sqlite:
        blob._where = (where, params)
    return blob
