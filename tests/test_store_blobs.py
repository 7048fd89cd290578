"""Byte strings kept in the site file in parts, read back as one seekable file."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolkit.store.blobs import BlobFile, open_parts, parts_of, parts_of_buffers


@pytest.fixture
def connection(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "blobs.sqlite", isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE t (k INTEGER, part INTEGER, data BLOB, PRIMARY KEY (k, part))")
    return conn


def _store(conn: sqlite3.Connection, key: int, data: bytes, part_bytes: int) -> BlobFile:
    for part, chunk in enumerate(parts_of(io.BytesIO(data), part_bytes)):
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", (key, part, chunk))
    stored = open_parts(conn, "t", "k = ?", (key,))
    assert stored is not None
    return stored


def test_parts_read_back_as_the_bytes_in_any_range(connection: sqlite3.Connection) -> None:
    data = bytes(range(256)) * 7 + b"tail"
    stored = _store(connection, 1, data, part_bytes=100)
    assert stored.size == len(data)
    assert stored.read() == data
    # Ranges that start, end and cross part boundaries, from each end.
    for start, size in ((0, 1), (99, 2), (100, 100), (150, 333), (len(data) - 5, 50)):
        stored.seek(start)
        assert stored.read(size) == data[start : start + size]
        assert stored.tell() == min(start + size, len(data))
    assert stored.seek(-4, io.SEEK_END) == len(data) - 4
    assert stored.read() == b"tail"
    assert stored.read(10) == b""
    stored.seek(10)
    stored.seek(5, io.SEEK_CUR)
    assert stored.read(3) == data[15:18]
    with pytest.raises(ValueError, match="negative seek"):
        stored.seek(-1)
    stored.close()


def test_buffers_are_stored_in_parts_sliced_from_them_without_a_copy(
    connection: sqlite3.Connection,
) -> None:
    big = bytes(range(256)) * 2  # 512 bytes: five whole parts of 100 and a tail
    buffers = [b"head", big, b"", bytearray(b"x" * 30), memoryview(b"y" * 250), b"end"]
    data = b"".join(bytes(b) for b in buffers)
    parts = list(parts_of_buffers(buffers, part_bytes=100))
    assert b"".join(bytes(p) for p in parts) == data
    assert all(0 < len(p) <= 100 for p in parts)
    # The whole parts of a large buffer are views of it; the small ones are joined.
    views = [p for p in parts if isinstance(p, memoryview)]
    assert len(views) == 5 + 2 and all(v.obj is big or v.obj == b"y" * 250 for v in views)
    assert parts[0] == b"head"
    for part, chunk in enumerate(parts):
        connection.execute("INSERT INTO t VALUES (?, ?, ?)", (7, part, chunk))
    stored = open_parts(connection, "t", "k = ?", (7,))
    assert stored is not None and stored.read_whole() == data
    # Nothing to store is still one (empty) part.
    assert [bytes(p) for p in parts_of_buffers([], part_bytes=100)] == [b""]
    assert [bytes(p) for p in parts_of_buffers([b""], part_bytes=100)] == [b""]


def test_the_rest_read_into_one_buffer_from_any_position(connection: sqlite3.Connection) -> None:
    data = bytes(range(256)) * 3
    stored = _store(connection, 4, data, part_bytes=100)
    whole = stored.read_whole()
    assert isinstance(whole, bytearray) and whole == data
    assert stored.tell() == len(data)
    stored.seek(250)
    assert stored.read_whole() == data[250:]
    # Arrow reads the buffer in place.
    assert pa.py_buffer(whole).to_pybytes() == data
    assert stored.read_whole() == bytearray()


def test_an_empty_string_is_one_empty_part_and_a_missing_key_is_none(
    connection: sqlite3.Connection,
) -> None:
    stored = _store(connection, 2, b"", part_bytes=10)
    assert stored.read() == b""
    assert connection.execute("SELECT count(*) FROM t WHERE k = 2").fetchone()[0] == 1
    assert open_parts(connection, "t", "k = ?", (3,)) is None


def test_parquet_reads_a_stored_file_in_row_groups(connection: sqlite3.Connection) -> None:
    table = pa.table({"n": list(range(10_000)), "s": [f"row {i}" for i in range(10_000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=1_000)
    # Parts far smaller than a row group: every read crosses parts.
    stored = _store(connection, 4, sink.getvalue(), part_bytes=4_096)
    parquet = pq.ParquetFile(stored)
    assert parquet.metadata.num_row_groups == 10
    assert parquet.read().equals(table)
    assert parquet.read(columns=["n"]).column(0).to_pylist() == list(range(10_000))
    assert sum(b.num_rows for b in parquet.iter_batches(batch_size=3_000)) == 10_000
