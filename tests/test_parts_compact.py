"""What an import read in parts keeps of each part until the plan: row numbers as runs
with gaps, and frames of set-aside rows on disk, given back exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.importing.parts import RowNumbers, StagedFrames


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [7],
        list(range(3, 250_003)),
        [1, 2, 3, 5, 8, 9, 10, 14],
        [4, 2, 9],  # not ascending: kept as given
        [2, 2, 3],  # repeated: kept as given
    ],
)
def test_row_numbers_give_back_the_rows(rows: list[int]) -> None:
    given = np.array(rows, dtype=np.int64)
    kept = RowNumbers(given)
    assert kept.array().tolist() == rows
    assert kept.size == len(rows)


def test_a_run_with_gaps_keeps_only_its_gaps() -> None:
    rows = np.delete(np.arange(1, 1_000_001), [10, 500_000, 999_998])
    kept = RowNumbers(rows)
    assert kept._array is None and kept._gaps.tolist() == [11, 500_001, 999_999]
    assert np.array_equal(kept.array(), rows)


def test_staged_frames_come_back_in_order_without_the_empty_ones(tmp_path: Path) -> None:
    staged = StagedFrames(tmp_path / "rejected", "rule")
    first = pd.DataFrame({"row": [3, 4], "reason": ["bad date", "no such level"]})
    second = pd.DataFrame({"row": [90], "reason": ["empty reference"]})
    staged.add(first)
    staged.add(first.iloc[:0])
    staged.add(second)
    frames = staged.frames()
    assert len(frames) == 2
    pd.testing.assert_frame_equal(frames[0], first)
    pd.testing.assert_frame_equal(frames[1], second)
    assert sorted(p.name for p in (tmp_path / "rejected").iterdir()) == [
        "rule-00000.pickle",
        "rule-00001.pickle",
    ]


def test_parts_pickled_elsewhere_are_staged_as_they_came(tmp_path: Path) -> None:
    """A worker's pickled part is written as it came, between parts kept here, and every
    part comes back in order, at its positions."""
    import pickle

    from toolkit.importing.parts import StagedParts

    staged: StagedParts[pd.DataFrame] = StagedParts(tmp_path / "prepared")
    first = pd.DataFrame({"a": [1, 2]}, index=[10, 11])
    second = pd.DataFrame({"a": [3, 4, 5]}, index=[12, 14, 15])
    third = pd.DataFrame({"a": [6]}, index=[20])
    staged.add(first, 2, keep=False)
    data = pickle.dumps(second, protocol=pickle.HIGHEST_PROTOCOL)
    staged.add_pickled(data, 3)
    assert (tmp_path / "prepared" / "prepared-00001.pickle").read_bytes() == data
    staged.add(third, 1)
    assert len(staged) == 3 and staged.starts == [0, 2, 5] and staged.rows == 6
    for i, part in enumerate([first, second, third]):
        pd.testing.assert_frame_equal(staged.load(i), part)
    picked = [
        (part["a"].tolist(), at.tolist()) for part, at, _ in staged.select(np.array([1, 3, 5]))
    ]
    assert picked == [([1, 2], [1]), ([3, 4, 5], [1]), ([6], [0])]
