"""Mode fuzzy's reasons, written on whole columns, read as the f-strings they replace."""

from __future__ import annotations

import numpy as np

from toolkit.matching.modes import _percent, _texts


def test_reasons_made_on_whole_columns_read_as_an_f_string_writes_them() -> None:
    """Mode fuzzy's reasons give percentages as ``f"{p:.0%}"`` does: ties to even, and
    shares near every half percent."""
    rng = np.random.default_rng(7)
    shares = np.concatenate(
        [
            [0.0, 0.005, 0.015, 0.125, 0.375, 0.665, 0.7949999, 0.795, 0.9999, 1.0],
            rng.random(20_000),
            np.arange(0, 201) / 200,
            np.nextafter(np.arange(0, 201) / 200, 2.0),
        ]
    )
    got = _texts("the best candidate is ", _percent(shares), " likely")
    assert got.dtype == object
    assert got.tolist() == [f"the best candidate is {p:.0%} likely" for p in shares]
