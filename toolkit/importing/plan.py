"""The plan stage: the overwrite rule's plan for the kept rows (:func:`plan_rows`, pure),
and the compact keys of every part it is given (issue 17: the plan needs only the
matching column of each part, not its rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from toolkit.importing.outcome import Planned
from toolkit.importing.overwrite import plan_overwrite
from toolkit.importing.parts import RowNumbers


def plan_rows(
    values: pd.DataFrame,
    existing: pd.DataFrame,
    overwrite: str,
    *,
    matching_id: str,
    column: str,
    rejected: pd.DataFrame,
) -> Planned:
    """Plan the overwrite rule for the kept rows against the existing keys (pure); the
    rows it refuses join ``rejected``, reported under the source ``column``."""
    keys = (
        values[matching_id]
        if matching_id in values
        else pd.Series(pd.NA, index=values.index, dtype="string")
    )
    plan = plan_overwrite(keys, existing, overwrite, key_name=matching_id)
    if len(plan.rejected.positions):
        refused = pd.DataFrame(
            {
                "row": values.index[plan.rejected.positions],
                "column": column,
                "value": keys.iloc[plan.rejected.positions].astype("string").to_numpy(),
                "reason": plan.rejected.reasons,
            }
        )
        rejected = pd.concat([rejected, refused], ignore_index=True)
    return Planned(
        plan=plan,
        rejections=rejected.sort_values(["row", "column"], kind="stable"),
        rejected_count=int(rejected["row"].nunique()),
    )


def compact_keys(values: pd.DataFrame, matching_id: str) -> Any:
    """The matching column of a part's values, kept until the plan: its array alone (not a
    slice keeping the part's other columns alive, nor an index of row numbers), text as
    Arrow text (a python-storage string column would hold a Python object per row); None
    when the rule has no such column."""
    if matching_id not in values:
        return None
    column = values[matching_id]
    if isinstance(column.dtype, pd.StringDtype) and column.dtype.storage != "pyarrow":
        column = column.astype(pd.StringDtype("pyarrow", na_value=column.dtype.na_value))
    return column.array.copy()


def keys_frame(keys: Sequence[Any], rows: Sequence[RowNumbers], matching_id: str) -> pd.DataFrame:
    """The kept rows' keys of every part as one frame indexed by row number (the plan's
    input), from what :func:`compact_keys` kept of each part."""
    index = pd.Index(
        np.concatenate([r.array() for r in rows]) if rows else np.empty(0, np.int64), name="row"
    )
    if any(k is None for k in keys):
        return pd.DataFrame(index=index)
    column = pd.concat([pd.Series(k) for k in keys], ignore_index=True)
    return pd.DataFrame({matching_id: column.set_axis(index)})
