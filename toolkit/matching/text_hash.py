"""A 64-bit hash of each string of an Arrow array, made from its buffers on whole columns.

Text key tables (``index.KeyTable`` of codes) group and find their keys by hash. Hashing
through pandas first made a Python string of every value: a code field's two tables of a
million codes spent about 0.7 s of CPU making those strings and hashing them, at every
import. These hashes are read from the Arrow buffers without a Python object, for tables
and lookups made in one process: they are not stable across versions, and not kept
anywhere. Two texts may share a hash; callers compare the texts they find.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.matching.address import mix64

# Strings hashed at once: their bytes' temporaries (8 bytes a byte, a few of them) stay
# tens of MiB for long texts.
CHUNK_STRINGS = 1 << 16
# The odd multiplier of the bytes' polynomial, and of the length mixed into it.
_BASE = np.uint64(0x100000001B3)
_LENGTH = np.uint64(0x9E3779B97F4A7C15)


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """uint64 hash of each string of ``texts`` (text or large text); null as ``""``."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    array = pc.fill_null(texts.cast(pa.large_string()), "")
    n = len(array)
    hashes = np.empty(n, dtype=np.uint64)
    if n == 0:
        return hashes
    _, offset_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int64)[array.offset : array.offset + n + 1]
    data = (
        np.zeros(0, dtype=np.uint8)
        if data_buffer is None
        else np.frombuffer(data_buffer, dtype=np.uint8)
    )
    lengths = np.diff(offsets)
    powers = _powers(int(lengths.max()))
    for first in range(0, n, CHUNK_STRINGS):
        last = min(first + CHUNK_STRINGS, n)
        hashes[first:last] = _chunk_hashes(data, offsets[first : last + 1], powers)
    return hashes


def _powers(longest: int) -> np.ndarray:
    """``_BASE`` to the power 0 .. ``longest - 1``, wrapping at 2**64."""
    powers = np.full(max(longest, 1), _BASE, dtype=np.uint64)
    powers[0] = 1
    return np.cumprod(powers, dtype=np.uint64)


def _chunk_hashes(data: np.ndarray, offsets: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """The hash of each string between consecutive ``offsets`` into ``data``: the sum of
    its bytes (plus one) times the powers of their places, and its length, mixed
    (``mix64``: every bit of the sum reaches every bit of the hash)."""
    lengths = offsets[1:] - offsets[:-1]
    start = int(offsets[0])
    body = data[start : int(offsets[-1])].astype(np.uint64) + np.uint64(1)
    starts = offsets[:-1] - start
    place = np.arange(len(body), dtype=np.int64) - np.repeat(starts, lengths)
    body *= powers[place]
    sums = np.zeros(len(lengths), dtype=np.uint64)
    present = lengths > 0
    if len(body):
        sums[present] = np.add.reduceat(body, starts[present])
    return mix64(sums ^ (lengths.astype(np.uint64) * _LENGTH), copy=False)
