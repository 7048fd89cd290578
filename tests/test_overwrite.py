"""The overwrite plan: each rule of spec 4.4, duplicates and ambiguous keys refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import OptionError
from toolkit.importing.overwrite import OVERWRITE_RULES, plan_overwrite

INCOMING = pd.Series(["A", "B", " C ", None, "Z"])
EXISTING = pd.DataFrame({"id": [10, 11, 12], "key": ["A", "C", "Q"]})


def _list(values: np.ndarray) -> list[int]:
    return [int(v) for v in values]


def test_update_and_insert_updates_matches_and_inserts_the_rest() -> None:
    plan = plan_overwrite(INCOMING, EXISTING, "updateAndInsert")
    assert _list(plan.updates) == [0, 2]
    assert _list(plan.update_ids) == [10, 11]
    assert _list(plan.inserts) == [1, 3, 4]
    assert plan.counts() == {
        "inserted": 3,
        "updated": 2,
        "unchanged": 0,
        "skipped": 0,
        "retired": 0,
        "rejected": 0,
    }


def test_update_only_skips_rows_that_match_nothing() -> None:
    plan = plan_overwrite(INCOMING, EXISTING, "updateOnly")
    assert _list(plan.updates) == [0, 2]
    assert _list(plan.skips) == [1, 3, 4]
    assert len(plan.inserts) == 0


def test_insert_only_skips_matches() -> None:
    plan = plan_overwrite(INCOMING, EXISTING, "insertOnly")
    assert _list(plan.inserts) == [1, 3, 4]
    assert _list(plan.skips) == [0, 2]
    assert len(plan.updates) == 0


def test_delete_and_insert_retires_every_existing_record_and_inserts_every_row() -> None:
    plan = plan_overwrite(INCOMING, EXISTING, "deleteAndInsert")
    assert _list(plan.retirements) == [10, 11, 12]
    assert _list(plan.inserts) == [0, 1, 2, 3, 4]
    assert len(plan.updates) == 0


def test_a_key_repeated_in_the_file_is_rejected_naming_the_first_row() -> None:
    plan = plan_overwrite(pd.Series(["A", "B", "A", "B", "B"]), EXISTING, "updateAndInsert")
    assert _list(plan.rejected.positions) == [2, 3, 4]
    assert plan.rejected.reasons[0] == "key 'A' repeats row 1 of this file"
    assert plan.rejected.reasons[2] == "key 'B' repeats row 2 of this file"
    assert _list(plan.updates) == [0]
    assert _list(plan.inserts) == [1]


def test_a_key_matching_two_existing_records_is_rejected_not_guessed() -> None:
    existing = pd.DataFrame({"id": [1, 2, 3], "key": ["A", "A", "B"]})
    plan = plan_overwrite(pd.Series(["A", "B"]), existing, "updateAndInsert", key_name="Reference")
    assert _list(plan.rejected.positions) == [0]
    assert "Reference 'A' matches 2 existing records" in plan.rejected.reasons[0]
    assert _list(plan.update_ids) == [3]


def test_empty_keys_never_match_and_never_count_as_duplicates() -> None:
    existing = pd.DataFrame({"id": [1], "key": [""]})
    plan = plan_overwrite(pd.Series(["", "  ", None]), existing, "updateAndInsert")
    assert _list(plan.inserts) == [0, 1, 2]
    assert len(plan.rejected.positions) == 0


def test_an_unknown_rule_names_the_allowed_set() -> None:
    with pytest.raises(OptionError) as caught:
        plan_overwrite(INCOMING, EXISTING, "upsert")
    assert str(caught.value) == (
        "overwriteRule 'upsert' is not one of: " + ", ".join(OVERWRITE_RULES)
    )
