"""The hash of each string of an Arrow array (``text_hash.text_hashes``), made from its
buffers: equal texts hash equal however Arrow holds them, and different texts differ."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.matching import text_hash
from toolkit.matching.text_hash import text_hashes

texts = st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=40)


@settings(max_examples=80, deadline=None)
@given(values=texts, cut=st.integers(0, 40))
def test_equal_texts_hash_equal_however_arrow_holds_them(
    values: list[str | None], cut: int
) -> None:
    """Text and large text, a slice of a longer array and a chunked array all give each
    text the hash it has alone; null is ``""``."""
    expected = [int(text_hashes(pa.array([v or ""]))[0]) for v in values]
    assert text_hashes(pa.array(values, pa.string())).tolist() == expected
    assert text_hashes(pa.array(values, pa.large_string())).tolist() == expected
    padded = pa.array(["before", *values, "after"], pa.large_string())
    assert text_hashes(padded.slice(1, len(values))).tolist() == expected
    cut = min(cut, len(values))
    chunked = pa.chunked_array([values[:cut], values[cut:]], pa.string())
    assert text_hashes(chunked).tolist() == expected


def test_hashed_in_chunks_as_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text hashed a few bytes at a time (the chunks that bound the temporaries; a string
    longer than a chunk is a chunk of its own) hashes as it does all at once, empty
    strings and the longest included."""
    values = pa.array(["", "a", "", "long " * 20, "é", "b", ""], pa.large_string())
    whole = text_hashes(values).tolist()
    monkeypatch.setattr(text_hash, "CHUNK_BYTES", 3)
    assert text_hashes(values).tolist() == whole


def test_long_texts_hash_by_their_text_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A string longer than ``LONG_TEXT`` is hashed another way (not by powers as long as
    itself): equal long texts still hash equal, alone or among short ones, and apart from
    a text one byte different; a short text keeps the hash it has alone."""
    monkeypatch.setattr(text_hash, "LONG_TEXT", 8)
    long, other = "x" * 20 + "tail", "x" * 20 + "taiL"
    values = pa.array(["ab", long, None, other, long, "abcdefgh"], pa.large_string())
    hashes = text_hashes(values).tolist()
    alone = [int(text_hashes(pa.array([v or ""]))[0]) for v in values.to_pylist()]
    assert hashes == alone
    assert hashes[1] == hashes[4] != hashes[3]
    assert len({hashes[0], hashes[1], hashes[2], hashes[3], hashes[5]}) == 5


def test_a_huge_cell_is_hashed_without_temporaries_its_size_times_eight() -> None:
    """A 64 MiB code (a broken file's) beside short ones: hashed as a Python string, the
    short ones as before, in well under the 0.5 GiB the byte-wise way would take."""
    import tracemalloc

    huge = "7" * (64 << 20)
    values = pa.array(["12", huge, "34"], pa.large_string())
    tracemalloc.start()
    try:
        hashes = text_hashes(values)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert hashes[0] == text_hashes(pa.array(["12"]))[0]
    assert hashes[2] == text_hashes(pa.array(["34"]))[0]
    assert peak < 256 << 20


def test_different_texts_hash_apart() -> None:
    """A hundred thousand distinct codes, and texts that differ only in order, length or
    one byte, all have hashes of their own."""
    codes = [str(n) for n in range(100_000)]
    near = ["ab", "ba", "a", "aa", "a\x00", "\x00a", "", "é", "e", "AB", "ab ", " ab"]
    hashes = text_hashes(pa.array(codes + near))
    assert len(np.unique(hashes)) == len(codes) + len(near)
