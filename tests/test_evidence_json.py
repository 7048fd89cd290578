"""Each row's evidence as JSON text (``fieldjson.rounded_numbers_json``), by Arrow: the
text pandas' ``to_json`` writes, byte for byte, whatever the values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.matching.probabilistic import COMPONENTS
from toolkit.model.fieldjson import rounded_numbers_json

finite = st.floats(-99_999.0, 99_999.0, allow_nan=False)
any_value = st.one_of(
    finite,
    st.sampled_from([0.0, -0.0, 2.0, -12.0, 1e-4, -4e-4, 99_999.9995, 123_456.789, 12_345_678.123]),
    st.floats(allow_nan=True, allow_infinity=True),
)


def pandas_json(bits: pd.DataFrame) -> list[str]:
    return bits.to_json(orient="records", lines=True).splitlines()


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.lists(finite, min_size=len(COMPONENTS), max_size=len(COMPONENTS)),
                     min_size=1, max_size=20))  # fmt: skip
def test_finite_evidence_is_written_as_pandas_writes_it(rows: list[list[float]]) -> None:
    """Rounded to 3 places, as the linker rounds it: negative zero, whole numbers and
    values near the bound included, each row's text equals pandas'."""
    bits = pd.DataFrame(rows, columns=list(COMPONENTS)).round(3)
    assert rounded_numbers_json(bits).tolist() == pandas_json(bits)


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.lists(any_value, min_size=2, max_size=2), min_size=1, max_size=10))
def test_any_evidence_gives_pandas_text(rows: list[list[float]]) -> None:
    """Missing, infinite and large values too (those frames go pandas' way): every row is
    the same text, and each parses to its values (NaN and infinity as null; a large value
    as pandas writes it, to ten places)."""
    bits = pd.DataFrame(rows, columns=["number", "street"]).round(3)
    texts = rounded_numbers_json(bits).tolist()
    assert texts == pandas_json(bits)
    for text, row in zip(texts, bits.to_numpy(), strict=True):
        parsed = json.loads(text)
        for got, value in zip([parsed["number"], parsed["street"]], row, strict=True):
            if not np.isfinite(value):
                assert got is None
            elif abs(value) < 1e5:
                assert got == value


def test_a_large_frame_is_one_text_per_row() -> None:
    """Ten thousand rows of typical evidence: one text each, in row order."""
    rng = np.random.default_rng(7)
    values = np.where(rng.random((10_000, len(COMPONENTS))) < 0.2, 0.0,
                      rng.normal(0, 6, (10_000, len(COMPONENTS))))  # fmt: skip
    bits = pd.DataFrame(values, columns=list(COMPONENTS)).round(3)
    texts = rounded_numbers_json(bits)
    assert texts.dtype == object and len(texts) == 10_000
    assert texts.tolist() == pandas_json(bits)
