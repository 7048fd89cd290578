"""Audit changes as people read them: ``damageLevel: Minor → Severe; status: 1 → 0``.

The store keeps each entry's ``changes`` as JSON (a create's values; an update's record
before and the patch applied, or an event's before and after; a retirement's old and new
status). Reports show them as ``field: before → after``, one clause per field changed,
nested register fields flattened to their own names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

ARROW = "→"
CLEARED = "(empty)"
MAX_VALUE = 80  # characters of one value shown; the JSON column keeps the whole


def _value(value: Any) -> str:
    if value is None:
        return CLEARED
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level members, with the JSON column's members (``fields``, ``extra``,
    ``extraInfo``) lifted beside them."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping) and key in ("fields", "extra", "extraInfo", "extra_info"):
            flat.update(value)
        else:
            flat[key] = value
    return flat


def describe_change(action: str, changes: Any) -> str:
    """One entry's changes as text; anything unexpected is shown as it is."""
    if changes is None or (isinstance(changes, float) and pd.isna(changes)):
        return ""
    try:
        data = json.loads(changes) if isinstance(changes, str) else changes
    except ValueError:
        return str(changes)
    if not isinstance(data, Mapping):
        return _value(data)
    if "before" in data and ("patch" in data or "after" in data):
        before = _flat(data.get("before") or {})
        after = _flat(data.get("patch") or data.get("after") or {})
        clauses = [
            f"{key}: {_value(before.get(key))} {ARROW} {_value(value)}"
            for key, value in after.items()
            if before.get(key) != value
        ]
        return "; ".join(clauses) or "no change"
    if action == "retire" or all(isinstance(v, list) and len(v) == 2 for v in data.values()):
        return "; ".join(
            f"{key}: {_value(pair[0])} {ARROW} {_value(pair[1])}"
            for key, pair in data.items()
            if isinstance(pair, list) and len(pair) == 2
        )
    created = data.get("after") if set(data) == {"after"} else data  # an event's create
    values = _flat(created if isinstance(created, Mapping) else data)
    return "; ".join(f"{key}: {_value(v)}" for key, v in values.items() if v is not None)


def readable_changes(actions: pd.Series, changes: pd.Series) -> pd.Series:
    """The changes column as text (one JSON document per entry must be read: no column
    form exists for free-form JSON; entries are small)."""
    texts = [describe_change(str(a), c) for a, c in zip(actions, changes, strict=True)]
    return pd.Series(texts, index=changes.index, dtype="string")
