"""The prepare stage's result: what an import writes, built before the write lock.

A part's kept rows with their defaults, each row's JSON as a new record and as a merge
patch, an asset's geometry as WKB with its bounds (:func:`prepare_payload`), and the
column helpers the writers read a payload with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import pandas as pd

from toolkit.importing.rules import ImportRule
from toolkit.model.fieldjson import as_python, fields_json
from toolkit.store.assets import geometry_columns

ITEM_RECORD_FIELDS = ("status", "isTemplate", "assetId")
ASSET_RECORD_FIELDS = ("id", "name", "code", "type", "friendly", "regionId", "status")
USER_RECORD_FIELDS = (
    "username",
    "firstName",
    "lastName",
    "email",
    "phone",
    "organisation",
    "positions",
    "status",
)


@dataclass
class Payload:
    """What an import writes, built before the write lock: values with defaults, and the
    JSON of every row both as a new record and as a merge patch."""

    filled: pd.DataFrame
    cleared: pd.DataFrame
    values: pd.DataFrame
    json_columns: list[str]
    insert_json: pd.Series
    patch_json: pd.Series | None
    geometry_wkb: list[bytes | None] | None = None
    bounds: np.ndarray | None = None
    # An item part's asset ids (of its kept rows), staged with it rather than kept for
    # every row of the file until the write; None: the write is given them whole.
    asset_ids: pd.Series | None = None

    @classmethod
    def concat(cls, parts: Sequence[Payload]) -> Payload:
        """The payloads of consecutive partitions as one (same rule, same columns)."""
        first = parts[0]
        wkb = (
            None if first.geometry_wkb is None else [w for p in parts for w in p.geometry_wkb or []]
        )
        return cls(
            filled=pd.concat([p.filled for p in parts]),
            cleared=pd.concat([p.cleared for p in parts]),
            values=pd.concat([p.values for p in parts]),
            json_columns=first.json_columns,
            insert_json=pd.concat([p.insert_json for p in parts]),
            patch_json=None
            if first.patch_json is None
            else pd.concat([p.patch_json for p in parts if p.patch_json is not None]),
            geometry_wkb=wkb,
            bounds=None if first.bounds is None else np.concatenate([p.bounds for p in parts]),
        )

    def take(self, keep: np.ndarray) -> Payload:
        """The payload of the rows ``keep`` marks (a boolean mask in row order)."""
        return Payload(
            filled=self.filled[keep],
            cleared=self.cleared[keep],
            values=self.values[keep],
            json_columns=self.json_columns,
            insert_json=self.insert_json[keep],
            patch_json=None if self.patch_json is None else self.patch_json[keep],
            geometry_wkb=None
            if self.geometry_wkb is None
            else [w for w, k in zip(self.geometry_wkb, keep, strict=True) if k],
            bounds=None if self.bounds is None else self.bounds[keep],
        )

    def patches(self, positions: np.ndarray) -> list[str]:
        """Merge patches of the rows at ``positions`` (built now if not built ahead)."""
        if self.patch_json is not None:
            return self.patch_json.iloc[positions].tolist()
        columns = self.json_columns
        return fields_json(
            self.values.iloc[positions][columns], self.cleared.iloc[positions][columns]
        ).tolist()


def prepare_payload(
    rule: ImportRule,
    values: pd.DataFrame,
    cleared: pd.DataFrame,
    frame: pd.DataFrame | None,
    *,
    may_update: bool,
) -> Payload:
    """The payload of some rows: values with defaults, each row's JSON as a new record
    and (``may_update``) as a merge patch, an asset's geometry as WKB with its bounds
    (from ``frame``, the rows as read; None for a payload with no geometry)."""
    record_fields = {
        "item": ITEM_RECORD_FIELDS,
        "asset": ASSET_RECORD_FIELDS,
        "user": USER_RECORD_FIELDS,
    }[rule.import_type]
    json_columns = [c for c in values.columns if c not in record_fields]
    defaults = {k: v for k, v in rule.defaults().items() if k in values}
    filled = values.fillna(defaults) if defaults else values
    payload = Payload(
        filled=filled,
        cleared=cleared,
        values=values,
        json_columns=json_columns,
        insert_json=fields_json(filled[json_columns]),
        patch_json=fields_json(values[json_columns], cleared[json_columns]) if may_update else None,
    )
    if rule.import_type == "asset" and frame is not None and "geometry" in frame.columns:
        payload.geometry_wkb, payload.bounds = geometry_columns(np.asarray(frame.geometry.values))
    return payload


def int_column(frame: pd.DataFrame, name: str, default: int) -> list[int]:
    """An integer column's values, missing ones (or the whole column) as ``default``."""
    if name not in frame:
        return [default] * len(frame)
    column = frame[name]
    if column.dtype == "boolean":
        column = column.astype("Int64")
    return [int(v) for v in column.fillna(default).to_numpy()]


def int_values(frame: pd.DataFrame, name: str, default: int) -> list[int] | int:
    """``int_column``, or ``default`` alone when no row gives a value: one value for every
    row, which the store writes into its INSERT rather than bind on each row (a million
    items' status and template flag: 2,000,000 bindings)."""
    return int_column(frame, name, default) if gives_values(frame, name) else default


def gives_values(frame: pd.DataFrame, name: str) -> bool:
    """Whether some row of ``frame`` gives a value of the column ``name``."""
    return name in frame and bool(frame[name].notna().any())


@overload
def text_column(frame: pd.DataFrame, name: str, default: str) -> list[str]: ...


@overload
def text_column(frame: pd.DataFrame, name: str, default: None) -> list[str | None]: ...


def text_column(
    frame: pd.DataFrame, name: str, default: str | None
) -> list[str] | list[str | None]:
    """A text column's values, missing ones as ``default`` (so none are missing if given)."""
    if name not in frame:
        return [default] * len(frame)
    return as_python(frame[name].fillna(default) if default is not None else frame[name])


def gives_ids(filled: pd.DataFrame, positions: np.ndarray) -> bool:
    """Whether the rows at ``positions`` all give their asset's id (kept as given)."""
    return "id" in filled and bool(filled["id"].iloc[positions].notna().all())


def taken_at(values: list[bytes | None], positions: np.ndarray) -> list[bytes | None]:
    """``values`` at ``positions``; the list itself when those are all of it in order (a
    first import inserts every row)."""
    if len(positions) == len(values) and bool(
        (positions == np.arange(len(values), dtype=positions.dtype)).all()
    ):
        return values
    return [values[i] for i in positions.tolist()]
