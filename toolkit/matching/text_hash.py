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

from toolkit.matching.address import mix64, string_hashes

# Text hashed in one pass, in bytes: its temporaries (8 bytes a byte, a few of them) stay
# tens of MiB however many strings a table holds.
CHUNK_BYTES = 1 << 22
# A string longer than this (bytes) is hashed through pandas instead, from its Python
# string: the powers of the polynomial stop here, and one huge cell (a broken file's) does
# not make temporaries eight times its size.
LONG_TEXT = 1 << 12
# The odd multiplier of the bytes' polynomial, and of the length mixed into it.
_BASE = np.uint64(0x100000001B3)
_LENGTH = np.uint64(0x9E3779B97F4A7C15)


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """uint64 hash of each string of ``texts`` (text or large text); null as ``""``. A
    string's hash depends on its text alone (its length chooses the way it is made)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    array = pc.fill_null(texts.cast(pa.large_string()), "")
    lengths = pc.binary_length(array).to_numpy(zero_copy_only=False)
    long = lengths > LONG_TEXT
    if not long.any():
        return _short_hashes(array)
    hashes = np.empty(len(array), dtype=np.uint64)
    hashes[long] = string_hashes(array.filter(pa.array(long)).to_numpy(zero_copy_only=False))
    hashes[~long] = _short_hashes(array.filter(pa.array(~long)))
    return hashes


def _short_hashes(array: pa.LargeStringArray) -> np.ndarray:
    """``text_hashes`` of strings of at most ``LONG_TEXT`` bytes, ``CHUNK_BYTES`` of text
    (and at least one string) at a time."""
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
    powers = _powers(int(np.diff(offsets).max()))
    first = 0
    while first < n:
        last = int(np.searchsorted(offsets, offsets[first] + CHUNK_BYTES, side="right")) - 1
        last = min(max(last, first + 1), n)
        hashes[first:last] = _chunk_hashes(data, offsets[first : last + 1], powers)
        first = last
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
