"""The four overwrite rules of the spec (section 4.4) as one pure plan.

What each rule does is decided here and nowhere else:

- ``updateOnly``: update matches, skip non-matches.
- ``insertOnly``: skip matches, insert non-matches.
- ``updateAndInsert``: update matches, insert non-matches.
- ``deleteAndInsert``: records are never deleted, so every active record in the
  import's scope is retired, then every row is inserted as new.

Matching compares the incoming key with the keys of the *active* records in
scope, as trimmed text. A key that repeats an earlier row of the same file, or
that matches several existing records, is rejected rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.errors import OptionError
from toolkit.names import OVERWRITE_RULES, OverwriteRule, member

_EMPTY = np.empty(0, dtype=np.int64)


def check_overwrite_rule(value: str) -> OverwriteRule:
    """Return ``value`` as an :data:`OverwriteRule`, or raise naming the allowed set."""
    rule = member(value, OVERWRITE_RULES)
    if rule is None:
        raise OptionError(f"overwriteRule {value!r} is not one of: {', '.join(OVERWRITE_RULES)}")
    return rule


@dataclass(frozen=True)
class Rejection:
    """Positions of incoming rows the plan refuses, each with its reason."""

    positions: np.ndarray
    reasons: list[str]


@dataclass(frozen=True)
class OverwritePlan:
    """What applying an import will do; positions index the incoming rows."""

    rule: OverwriteRule
    inserts: np.ndarray = field(default_factory=lambda: _EMPTY)
    updates: np.ndarray = field(default_factory=lambda: _EMPTY)
    update_ids: np.ndarray = field(default_factory=lambda: _EMPTY)
    skips: np.ndarray = field(default_factory=lambda: _EMPTY)
    retirements: np.ndarray = field(default_factory=lambda: _EMPTY)
    rejected: Rejection = field(default_factory=lambda: Rejection(_EMPTY, []))

    def counts(self) -> dict[str, int]:
        return {
            "inserted": len(self.inserts),
            "updated": len(self.updates),
            "unchanged": 0,  # known once the updates are applied (store.records)
            "skipped": len(self.skips),
            "retired": len(self.retirements),
            "rejected": len(self.rejected.positions),
        }


def _normalise(keys: pd.Series) -> pd.Series:
    text = keys.astype("string").str.strip()
    return text.mask(text == "")


def plan_overwrite(
    incoming_keys: pd.Series,
    existing: pd.DataFrame,
    rule: str,
    *,
    key_name: str = "key",
) -> OverwritePlan:
    """Plan ``rule`` for rows with ``incoming_keys`` against ``existing`` (columns ``id``, ``key``).

    ``existing`` holds the active records in the import's scope. ``key_name``
    only words the rejection reasons. Pure: reads nothing, writes nothing.
    """
    overwrite_rule = check_overwrite_rule(rule)
    keys = _normalise(incoming_keys.reset_index(drop=True))
    positions = np.arange(len(keys), dtype=np.int64)

    if overwrite_rule == "deleteAndInsert":
        return OverwritePlan(
            rule=overwrite_rule,
            inserts=positions,
            retirements=existing["id"].to_numpy(dtype=np.int64),
        )

    # A key seen earlier in the same file: the later row is refused.
    codes, _ = pd.factorize(keys, use_na_sentinel=True)
    has_key = codes >= 0
    first_of_code = pd.Series(positions[has_key]).groupby(codes[has_key]).min()
    first = np.full(len(keys), -1, dtype=np.int64)
    first[has_key] = first_of_code.reindex(codes[has_key]).to_numpy(dtype=np.int64)
    duplicate = has_key & (first != positions)

    existing_keys = _normalise(existing["key"].reset_index(drop=True))
    existing_ids = existing["id"].reset_index(drop=True).to_numpy(dtype=np.int64)
    present = existing_keys.notna().to_numpy()
    existing_keys = existing_keys[present]
    existing_ids = existing_ids[present]
    per_key = existing_keys.value_counts()
    match_count = keys.map(per_key).fillna(0).to_numpy(dtype=np.int64)
    ambiguous = ~duplicate & (match_count > 1)
    matched = ~duplicate & (match_count == 1)
    unmatched = ~duplicate & (match_count == 0)

    unique_ids = pd.Series(existing_ids, index=existing_keys.to_numpy())
    unique_ids = unique_ids[~unique_ids.index.duplicated(keep=False)]

    reject_positions = np.flatnonzero(duplicate | ambiguous)
    reasons = []
    key_values = keys.to_numpy(dtype=object)
    for position in reject_positions:  # only rejected rows: few, and each needs its own words
        value = key_values[position]
        if duplicate[position]:
            reasons.append(f"{key_name} {value!r} repeats row {first[position] + 1} of this file")
        else:
            reasons.append(
                f"{key_name} {value!r} matches {match_count[position]} existing records; "
                "make the key unique before importing"
            )
    rejected = Rejection(reject_positions.astype(np.int64), reasons)

    matched_positions = np.flatnonzero(matched)
    matched_ids = unique_ids.reindex(keys.iloc[matched_positions].to_numpy()).to_numpy(
        dtype=np.int64
    )
    unmatched_positions = np.flatnonzero(unmatched)

    if overwrite_rule == "updateOnly":
        return OverwritePlan(
            overwrite_rule,
            updates=matched_positions,
            update_ids=matched_ids,
            skips=unmatched_positions,
            rejected=rejected,
        )
    if overwrite_rule == "insertOnly":
        return OverwritePlan(
            overwrite_rule, inserts=unmatched_positions, skips=matched_positions, rejected=rejected
        )
    return OverwritePlan(
        overwrite_rule,
        inserts=unmatched_positions,
        updates=matched_positions,
        update_ids=matched_ids,
        rejected=rejected,
    )
