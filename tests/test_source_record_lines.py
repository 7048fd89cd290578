"""Where each record of a CSV starts (the line a problem names): from the file's bytes at
once where RFC 4180's quoting lets them tell it, else by the csv module's scan, which is
the truth both must give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import toolkit.sources.csv as record_lines_module
from toolkit.sources.csv import (
    _record_lines_from_bytes,
    _record_lines_scanned,
    _Split,
    record_lines,
)

COMMA = _Split(",", '"')

# Files the bytes tell: (content, the lines where records 1..5 start; 0 past the last).
TOLD = {
    "plain": (b"a,b\n1,2\n3,4\n5,6\n", [2, 3, 4, 0, 0]),
    "crlf and no last newline": (b"a,b\r\n1,2\r\n3,4\r\n5,6", [2, 3, 4, 0, 0]),
    "quoted newlines": (b'a,b\n1,"x\ny"\n"p\r\nq\nr",2\n3,4\n', [2, 4, 7, 0, 0]),
    "blank lines": (b"\na,b\n\n1,2\n\r\n\n3,4\n\n", [4, 7, 0, 0, 0]),
    "doubled quotes": (b'a,b\n1,"say ""hi""\nthere"\n"""",""\n"",3\n', [2, 4, 5, 0, 0]),
    "a byte order mark": (b'\xef\xbb\xbf"a",b\n"1",2\n3,"4"\n', [2, 3, 0, 0, 0]),
    "no quotes at all": (b"a;b\n1;2\n\n3;4\n", [2, 4, 0, 0, 0]),
    "more records than asked": (b"a\n1\n2\n3\n4\n5\n6\n7\n", [2, 3, 4, 5, 6]),
}

# Files whose bytes might not tell it: the csv module's scan answers.
SCANNED = {
    "a quote inside an unquoted field": b'a,b\n1,5" pipe\n2,x\n3,4\n',
    "text after a closing quote": b'a,b\n"1"x,2\n3,4\n',
    "a quote after a space": b'a,b\n1, "x\ny"\n3,4\n',
    "a lone carriage return": b'a,b\n1,"x\ry"\n3,4\n',
    "an unterminated quote": b'a,b\n1,2\n3,"4\n',
    "a NUL byte": b"a,b\n1,\x002\n3,4\n",
}


@pytest.mark.parametrize("block", [1, 2, 3, 5, 1 << 24])
@pytest.mark.parametrize("name", sorted(TOLD))
def test_the_bytes_tell_where_records_start(
    tmp_path: Path, name: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read a few bytes at a time too: a quote, a CRLF or a blank line across two blocks.
    monkeypatch.setattr(record_lines_module, "_SCAN_BLOCK", block)
    content, want = TOLD[name]
    path = tmp_path / "f.csv"
    path.write_bytes(content)
    split = _Split(";", '"') if name == "no quotes at all" else COMMA
    fast = _record_lines_from_bytes(path, "utf-8", split, 5)
    assert fast is not None
    assert fast.tolist() == want
    assert _record_lines_scanned(path, "utf-8", split, 5).tolist() == want
    assert record_lines(path, "utf-8", split, 5).tolist() == want


@pytest.mark.parametrize("block", [1, 4, 1 << 24])
@pytest.mark.parametrize("name", sorted(SCANNED))
def test_other_files_are_scanned(
    tmp_path: Path, name: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_lines_module, "_SCAN_BLOCK", block)
    path = tmp_path / "f.csv"
    path.write_bytes(SCANNED[name])
    assert _record_lines_from_bytes(path, "utf-8", COMMA, 4) is None
    assert (
        record_lines(path, "utf-8", COMMA, 4).tolist()
        == _record_lines_scanned(path, "utf-8", COMMA, 4).tolist()
    )


def test_without_quoting_every_newline_ends_a_record(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(b'a,b\n1,"x\ny"\n3,4\n')
    none = _Split(",", None)
    assert record_lines(path, "utf-8", none, 3).tolist() == [2, 3, 4]
    assert _record_lines_scanned(path, "utf-8", none, 3).tolist() == [2, 3, 4]


def test_another_encoding_is_scanned(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-16")
    assert _record_lines_from_bytes(path, "utf-16", COMMA, 1) is None
    assert record_lines(path, "utf-16", COMMA, 1).tolist() == [2]


@pytest.mark.parametrize("block", [7, 4096, 1 << 24])
def test_a_generated_file_agrees_with_the_scan(
    tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_lines_module, "_SCAN_BLOCK", block)
    # Random fields: plain, quoted with newlines, doubled quotes and delimiters, blanks.
    rng = np.random.default_rng(7)
    pieces = ["x", "12 SMITH ST", '"a,b"', '"line\nbreak"', '"say ""hi"""', '""', "", '"\r\n"']
    lines = ["h1,h2,h3"]
    for _ in range(400):
        lines.append(",".join(pieces[i] for i in rng.integers(0, len(pieces), 3)))
        if rng.random() < 0.05:
            lines.append("")
    path = tmp_path / "f.csv"
    path.write_bytes(("\r\n" if rng.random() < 0.5 else "\n").join(lines).encode())
    fast = _record_lines_from_bytes(path, "utf-8", COMMA, 420)
    assert fast is not None
    assert fast.tolist() == _record_lines_scanned(path, "utf-8", COMMA, 420).tolist()
    assert (fast[:400] > 0).all()
