"""JSON string literals of whole Arrow columns: every cell spelled as the json module
spells it, whichever cells need escapes and wherever the column starts in its buffers."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from toolkit.model.jsontext import json_strings

CELLS = ["12 SMITH ST", 'say "hi"', None, "back\\slash", "line\nbreak", "bell\x07", "Straße", ""]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_each_cell_is_spelled_as_json_spells_it(kind: pa.DataType) -> None:
    got = json_strings(pa.array(CELLS, kind)).to_pylist()
    assert got == [None if c is None else json.dumps(c, ensure_ascii=False) for c in CELLS]


@pytest.mark.parametrize("start", range(len(CELLS)))
def test_a_slice_is_spelled_by_its_own_cells(start: int) -> None:
    # A slice shares its parent's text: a cell outside it that needs an escape must not
    # change its cells, and one inside it must be escaped.
    for end in range(start, len(CELLS) + 1):
        part = pa.array(CELLS, pa.large_string()).slice(start, end - start)
        want = [None if c is None else json.dumps(c, ensure_ascii=False) for c in CELLS[start:end]]
        assert json_strings(part).to_pylist() == want


def test_a_chunked_column_is_spelled_whole() -> None:
    column = pa.chunked_array([pa.array(CELLS[:3]), pa.array(CELLS[3:])])
    assert json_strings(column).to_pylist() == [
        None if c is None else json.dumps(c, ensure_ascii=False) for c in CELLS
    ]
