"""Where the server's limits keep their counts: in this process, or shared by processes.

A limiter (:mod:`toolkit.server.limits`) keeps a row of numbers per key (a client
address, a user, an account name) in a :class:`Table`. ``toolkit serve`` in one
process keeps them in a dict (:class:`MemoryTable`); with ``--processes N`` every
process maps the same file (:class:`SharedTable`), so a user's rate, an address's
auth calls and an account's failed logins are counted once over all processes, as
the client sees one server.

The shared file holds an open-addressing hash table per limiter: 8-byte keys (a
keyed BLAKE2b of the key text, so no client can make two keys collide on purpose)
and a fixed number of floats per row. A process takes the file's ``flock`` (and
its own thread lock) around each read-and-update; the kernel lets go of a lock
whose process dies, so a killed worker never leaves the others waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import mmap
import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

Row = tuple[float, ...]


class Table(Protocol):
    """Rows of ``width`` floats by key text; every call is made holding :meth:`locked`."""

    width: int
    max_rows: int  # rows the table can hold (a dict: no bound); limiters forget rows before

    def locked(self) -> contextlib.AbstractContextManager[object]: ...
    def get(self, key: str) -> Row | None: ...
    def put(self, key: str, row: Row) -> None: ...
    def pop(self, key: str) -> None: ...
    def __len__(self) -> int: ...
    def rows(self) -> list[Row]: ...
    def keep(self, rows_to_keep: int, order: int, live: float) -> None:
        """Forget the rows whose column ``order`` is at most ``live``, then the rows lowest
        in that column until at most ``rows_to_keep`` are left."""
        ...


class MemoryTable:
    """The rows of one process, in a dict (oldest insertion first)."""

    def __init__(self, width: int, max_rows: int = 2**62) -> None:
        self.width = width
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._rows: dict[str, Row] = {}

    def locked(self) -> contextlib.AbstractContextManager[object]:
        return self._lock

    def get(self, key: str) -> Row | None:
        return self._rows.get(key)

    def put(self, key: str, row: Row) -> None:
        self._rows.pop(key, None)  # to the end: insertion order is the order of last change
        self._rows[key] = row

    def pop(self, key: str) -> None:
        self._rows.pop(key, None)

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self) -> list[Row]:
        return list(self._rows.values())

    def keep(self, rows_to_keep: int, order: int, live: float) -> None:
        kept = {k: r for k, r in self._rows.items() if r[order] > live}
        if len(kept) > rows_to_keep:
            ranked = sorted(kept.items(), key=lambda item: item[1][order])
            kept = dict(ranked[len(kept) - rows_to_keep :])
        self._rows = kept


# --- shared between processes ------------------------------------------------------------

SLOTS = 1 << 17  # per table: 131,072 slots
FILL = 0.75  # rows at most, as a share of the slots (open addressing slows past that)
_KEY = struct.Struct("<Q")


@dataclass(frozen=True)
class SharedFile:
    """What a worker process needs to map the tables its parent made."""

    path: Path
    secret: bytes  # the key of the keys' hash
    widths: tuple[int, ...]

    @staticmethod
    def create(folder: Path, widths: tuple[int, ...]) -> SharedFile:
        """A new file of empty tables (mode 0600) in ``folder``."""
        handle, name = _mkstemp(folder)
        size = sum(SLOTS * 8 * (1 + width) + 8 for width in widths)
        os.ftruncate(handle, size)
        os.close(handle)
        return SharedFile(Path(name), os.urandom(16), widths)

    def open(self) -> list[SharedTable]:
        """The tables, mapped in this process."""
        handle = os.open(self.path, os.O_RDWR)
        size = os.fstat(handle).st_size
        memory = mmap.mmap(handle, size)
        process_lock = threading.Lock()
        tables = []
        offset = 0
        for width in self.widths:
            tables.append(SharedTable(memory, offset, width, handle, process_lock, self.secret))
            offset += SLOTS * 8 * (1 + width) + 8
        return tables


def _mkstemp(folder: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(prefix="toolkit-serve-limits-", dir=folder)


class SharedTable:
    """One limiter's rows in a file every process of the server maps.

    Layout from ``offset``: a row count (8 bytes), ``SLOTS`` keys (8 bytes, 0 = empty),
    then ``SLOTS`` rows of ``width`` doubles.
    """

    def __init__(
        self,
        memory: mmap.mmap,
        offset: int,
        width: int,
        handle: int,
        process_lock: threading.Lock,
        secret: bytes,
    ) -> None:
        self.width = width
        self.max_rows = int(SLOTS * FILL)
        self._memory = memory
        self._count_at = offset
        self._keys = memoryview(memory)[offset + 8 : offset + 8 + SLOTS * 8].cast("Q")
        start = offset + 8 + SLOTS * 8
        self._values = memoryview(memory)[start : start + SLOTS * 8 * width].cast("d")
        self._handle = handle
        self._process_lock = process_lock
        self._secret = secret

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        # The thread lock first: flock is held by the open file, which all threads share.
        with self._process_lock:
            fcntl.flock(self._handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._handle, fcntl.LOCK_UN)

    def _hash(self, key: str) -> int:
        digest = hashlib.blake2b(
            key.encode("utf-8", "surrogatepass"), digest_size=8, key=self._secret
        ).digest()
        return int(_KEY.unpack(digest)[0]) or 1

    def _slot(self, hashed: int) -> int:
        """The slot holding ``hashed``, or the empty slot where it would go."""
        slot = hashed & (SLOTS - 1)
        keys = self._keys
        while keys[slot] != hashed and keys[slot] != 0:
            slot = (slot + 1) & (SLOTS - 1)
        return slot

    def _count(self) -> int:
        return int(_KEY.unpack_from(self._memory, self._count_at)[0])

    def _set_count(self, count: int) -> None:
        _KEY.pack_into(self._memory, self._count_at, count)

    def get(self, key: str) -> Row | None:
        hashed = self._hash(key)
        slot = self._slot(hashed)
        if self._keys[slot] != hashed:
            return None
        start = slot * self.width
        return tuple(self._values[start : start + self.width])

    def put(self, key: str, row: Row) -> None:
        hashed = self._hash(key)
        slot = self._slot(hashed)
        if self._keys[slot] != hashed:
            if self._count() >= self.max_rows:
                # Full (the limiters forget rows before this): forget the older half.
                self.keep(self.max_rows // 2, 0, float("-inf"))
                slot = self._slot(hashed)
            self._keys[slot] = hashed
            self._set_count(self._count() + 1)
        start = slot * self.width
        for column, number in enumerate(row):
            self._values[start + column] = number

    def pop(self, key: str) -> None:
        hashed = self._hash(key)
        slot = self._slot(hashed)
        if self._keys[slot] != hashed:
            return
        # Backward-shift deletion: later rows of the same run move up into the hole, so that
        # every row stays reachable from its home slot without tombstones.
        keys, values, width, mask = self._keys, self._values, self.width, SLOTS - 1
        hole, probe = slot, slot
        while True:
            probe = (probe + 1) & mask
            moving = keys[probe]
            if moving == 0:
                break
            home = moving & mask
            between = hole < home <= probe if hole <= probe else (home > hole or home <= probe)
            if not between:  # its home is at or before the hole: it may move up
                keys[hole] = moving
                values[hole * width : hole * width + width] = values[
                    probe * width : probe * width + width
                ]
                hole = probe
        keys[hole] = 0
        self._set_count(self._count() - 1)

    def __len__(self) -> int:
        return self._count()

    def _pairs(self) -> list[tuple[int, Row]]:
        width, values = self.width, self._values
        return [
            (hashed, tuple(values[slot * width : slot * width + width]))
            for slot, hashed in enumerate(self._keys)
            if hashed
        ]

    def rows(self) -> list[Row]:
        return [row for _, row in self._pairs()]

    def keep(self, rows_to_keep: int, order: int, live: float) -> None:
        pairs = [pair for pair in self._pairs() if pair[1][order] > live]
        if len(pairs) > rows_to_keep:
            pairs.sort(key=lambda pair: pair[1][order])
            pairs = pairs[len(pairs) - rows_to_keep :]
        self._rebuild(pairs)

    def _rebuild(self, pairs: list[tuple[int, Row]]) -> None:
        keys, values, width = self._keys, self._values, self.width
        start = self._count_at + 8
        self._memory[start : start + SLOTS * 8] = bytes(SLOTS * 8)
        for hashed, row in pairs:
            slot = self._slot(hashed)
            keys[slot] = hashed
            for column, number in enumerate(row):
                values[slot * width + column] = number
        self._set_count(len(pairs))
