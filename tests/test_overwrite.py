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


def _reference_plan(incoming: list[str | None], existing: list[tuple[int, str | None]]) -> tuple:
    """The rules of updateAndInsert spelled out one Python string at a time."""

    def norm(key: str | None) -> str | None:
        return None if key is None or not key.strip() else key.strip()

    ids_of: dict[str, list[int]] = {}
    for record_id, key in existing:
        if norm(key) is not None:
            ids_of.setdefault(norm(key), []).append(record_id)  # type: ignore[arg-type]
    seen: dict[str, int] = {}
    inserts, updates, update_ids, rejected = [], [], [], []
    for position, raw in enumerate(incoming):
        key = norm(raw)
        if key is not None and key in seen:
            rejected.append((position, f"key {key!r} repeats row {seen[key] + 1} of this file"))
            continue
        if key is not None:
            seen[key] = position
        found = ids_of.get(key, []) if key is not None else []
        if len(found) > 1:
            rejected.append(
                (
                    position,
                    f"key {key!r} matches {len(found)} existing records; "
                    "make the key unique before importing",
                )
            )
        elif found:
            updates.append(position)
            update_ids.append(found[0])
        else:
            inserts.append(position)
    return inserts, updates, update_ids, rejected


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("dtype", [object, "string", "str"])
def test_the_plan_agrees_with_the_rules_spelled_out_row_by_row(seed: int, dtype: object) -> None:
    """Random keys with repeats, padding (Python's whitespace, Arrow's differs), empties and
    keys held by two existing records, in shuffled order, in each text dtype."""
    rng = np.random.default_rng(seed)
    pads = ["", " ", "\t", "\x1c", "\u3000", "\xa0"]

    def key() -> str | None:
        if rng.random() < 0.05:
            return None
        if rng.random() < 0.05:
            return str(rng.choice(pads))
        core = f"K{int(rng.integers(0, 300))}"
        return str(rng.choice(pads)) + core + str(rng.choice(pads))

    incoming = [key() for _ in range(500)]
    existing = [(int(i), key()) for i in rng.permutation(np.arange(1, 401))]
    plan = plan_overwrite(
        pd.Series(incoming, dtype=dtype),
        pd.DataFrame({"id": [i for i, _ in existing], "key": [k for _, k in existing]}),
        "updateAndInsert",
    )
    inserts, updates, update_ids, rejected = _reference_plan(incoming, existing)
    assert _list(plan.inserts) == inserts
    assert _list(plan.updates) == updates
    assert _list(plan.update_ids) == update_ids
    assert list(zip(_list(plan.rejected.positions), plan.rejected.reasons, strict=True)) == rejected
