"""The columns an import's payload hands to the store's inserts."""

from __future__ import annotations

import pandas as pd
import pytest

from toolkit.importing.payload import int_values


@pytest.mark.parametrize(
    ("status", "expected"),
    [(None, 1), ([pd.NA, pd.NA], 1), ([2, pd.NA], [2, 1]), ([3, 3], [3, 3])],
)
def test_int_values_are_one_value_when_no_row_gives_one(
    status: list[object] | None, expected: list[int] | int
) -> None:
    frame = pd.DataFrame({"x": [1, 2]})
    if status is not None:
        frame["status"] = pd.array(status, dtype="Int64")
    assert int_values(frame, "status", 1) == expected
