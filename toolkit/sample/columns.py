"""Whole-column helpers for the sample generator (pyarrow strings), and its CSV writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def write_csv(table: pa.Table, path: Path, batch_rows: int = 200_000) -> None:
    """UTF-8 CSV as a spreadsheet writes it: fields quoted only when they hold a quote, comma or
    line break; empty for missing values; one ``\n`` per row."""
    with path.open("wb") as out:
        out.write((",".join(table.column_names) + "\n").encode("utf-8"))
        for start in range(0, table.num_rows, batch_rows):
            batch = table.slice(start, batch_rows)
            fields = [_csv_field(flat_strings(column)) for column in batch.columns]
            lines = pc.binary_join_element_wise(
                *fields, ",", null_handling="replace", null_replacement=""
            )
            lines = pc.binary_join_element_wise(lines, "", "\n")
            # The rows lie end to end in the array's data buffer: write it in one piece.
            offsets = np.frombuffer(lines.buffers()[1], np.int32, lines.offset + len(lines) + 1)
            begin, end = int(offsets[lines.offset]), int(offsets[-1])
            out.write(memoryview(lines.buffers()[2])[begin:end])


def _csv_field(values: pa.Array) -> pa.Array:
    needs_quotes = pc.match_substring_regex(values, '[",\r\n]')
    quoted = join_text('"', pc.replace_substring(values, '"', '""'), '"', sep="")
    return pc.if_else(needs_quotes, quoted, values)


def take_strings(vocabulary: Any, index: np.ndarray) -> pa.Array:
    """Strings of ``vocabulary`` at ``index``, without making a Python string per row."""
    return pc.take(pa.array(list(vocabulary), pa.string()), pa.array(index))


def to_text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def repeated(value: str, count: int) -> pa.Array:
    return take_strings((value,), np.zeros(count, np.int64))


def join_text(*parts: Any, sep: str = " ") -> pa.Array:
    """Element-wise join of string arrays (and plain strings, repeated)."""
    return pc.binary_join_element_wise(*parts, sep)


def choose(which: np.ndarray, options: list[pa.Array]) -> pa.Array:
    """Per element, the value of ``options[which[i]]``."""
    return pc.choose(pa.array(which.astype(np.int8)), *options)


def assemble(
    m: int,
    parts: list[tuple[np.ndarray, pa.Array]],
    default: pa.Array | pa.ChunkedArray | None = None,
) -> pa.Array:
    """One column of ``m`` values from parts given as (row positions, values); the rest from
    ``default``, or null (written as an empty field). Values may come chunked: pyarrow
    splits an array made from a large numpy string array (the item dates from about 1.7
    million rows), and computing over it keeps the chunks."""
    rows = [r for r, _ in parts]
    values = [flat_strings(v) for _, v in parts]
    covered = np.zeros(m, bool)
    for r in rows:
        covered[r] = True
    rest = np.flatnonzero(~covered)
    rows.append(rest)
    values.append(
        flat_strings(default).take(pa.array(rest))
        if default is not None
        else pa.nulls(rest.size, pa.string())
    )
    order = np.concatenate(rows) if rows else np.empty(0, np.int64)
    inverse = np.empty(m, np.int64)
    inverse[order] = np.arange(m)
    return pc.take(pa.concat_arrays(values), pa.array(inverse))


def flat_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One string array, whether compute handed back an array or a chunked array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values.cast(pa.string())


def probabilities(weights: tuple[float, ...]) -> np.ndarray:
    array = np.asarray(weights, float)
    return array / float(array.sum())
