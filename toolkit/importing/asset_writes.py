"""The write stage of an asset import: retirements, inserts and updates of assets.

An asset import read in parts (no engine) inserts each part as it is read, in the
import's one write transaction begun at the first part (:class:`EarlyAssets`,
:func:`insert_early`); the end of the write checks that what was inserted is the whole
file's plan and writes the updates. When the parts cannot decide as one part would
(:class:`Unstreamable`), the runner rolls back and reads the file as one part.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.errors import OptionError
from toolkit.importing.outcome import NO_ROWS, WriteJob, no_problems
from toolkit.importing.overwrite import OverwritePlan, normalised_keys
from toolkit.importing.parts import RowNumbers
from toolkit.importing.payload import (
    Payload,
    gives_ids,
    gives_values,
    int_values,
    taken_at,
    text_column,
)
from toolkit.importing.plan import keys_frame, plan_rows
from toolkit.importing.request import ImportRequest
from toolkit.importing.rules import ImportRule
from toolkit.importing.scope import existing_keys, import_scope, matching_field
from toolkit.importing.streamed import EarlyTransaction
from toolkit.model.fieldjson import as_python, id_list
from toolkit.progress import Progress
from toolkit.store import Actor, SiteStore
from toolkit.store.assets import NewAssets


class Unstreamable(Exception):
    """An asset import inserted as it is read cannot go on as one part would: the
    parts inserted so far are rolled back and the import is run again as one part."""


@dataclass
class EarlyAssets:
    """An asset import's parts inserted as they are read, in the import's one write
    transaction (begun at the first part): each part's inserts are planned against the
    keys of the rows before it, which decide them as the whole file's plan does (a key
    repeating an earlier row is refused, the earlier row kept). Its updates wait for the
    end, so records are written in the order one part writes them."""

    transaction: EarlyTransaction[Any]
    existing: pd.DataFrame | None = None
    now: int = 0
    kept: int = 0  # kept rows of the parts so far
    inserted: list[np.ndarray] = field(default_factory=list)  # positions of all kept rows
    retired: np.ndarray = field(default_factory=lambda: NO_ROWS)
    # The parts whose rows update records: their first position and payload.
    updating: list[tuple[int, Payload]] = field(default_factory=list)
    given_ids: bool | None = None  # decided by the first part that inserts
    keys: list[Any] = field(default_factory=list)  # each part's keys (pa.Array, trimmed)
    rows: int = 0  # the file's rows (all parts)
    # The asset indexes dropped for the inserts, made again at the end of the write.
    indexes: list[str] = field(default_factory=list)


def write_assets(
    store: SiteStore,
    early: EarlyAssets | None,
    job: WriteJob,
) -> int:
    """Retirements, inserts, then updates; the parts of an import inserted as they were
    read (``EarlyAssets``) have had their retirements and inserts written already."""
    conn, rule, request, plan, parts = job.conn, job.rule, job.request, job.plan, job.parts
    actor, now, written = job.actor, job.now, job.written
    if early is None:
        payload = parts.only()  # read as one part
        store.assets.retire_many(conn, id_list(plan.retirements), actor, now)
        written.retired()
        indexes = store.assets.set_aside_indexes(conn, len(plan.inserts))
        if len(plan.inserts):
            insert_assets(
                store, conn, rule, request, payload, plan.inserts, actor, now,
                ids_given=gives_ids(payload.filled, plan.inserts),
                on_rows=written.inserted, streaming=False,
            )  # fmt: skip
        changed = update_assets(store, conn, [(payload, plan.updates, plan.update_ids)], actor, now)
        store.assets.restore_indexes(conn, indexes)
        return changed
    done = np.concatenate(early.inserted) if early.inserted else NO_ROWS
    # The whole file's plan (empty when refused: all is rolled back) is what was done.
    if (len(plan.inserts) and not np.array_equal(done, plan.inserts)) or (
        len(plan.retirements) and not np.array_equal(early.retired, plan.retirements)
    ):
        raise RuntimeError("the parts inserted as read differ from the import's plan")
    written.retired()
    written.inserted(len(plan.inserts))
    pieces = []
    for start, payload in early.updating:
        lo, hi = np.searchsorted(plan.updates, [start, start + len(payload.filled)])
        pieces.append((payload, plan.updates[lo:hi] - start, plan.update_ids[lo:hi]))
    changed = update_assets(store, conn, pieces, actor, now)
    store.assets.restore_indexes(conn, early.indexes)
    early.indexes = []
    return changed


def insert_assets(
    store: SiteStore,
    conn: Any,
    rule: ImportRule,
    request: ImportRequest,
    payload: Payload,
    positions: np.ndarray,
    actor: Actor,
    now: int,
    *,
    ids_given: bool,
    on_rows: Callable[[int], None],
    streaming: bool,
) -> None:
    """Insert the rows of ``payload`` at ``positions``; with ``ids_given``, under the
    ids of their ``id`` column (refused if a record has one already; ``streaming``: an
    import inserted as read, run again as one part instead)."""
    assets = store.assets
    filled = payload.filled
    tags = json.dumps([request.import_tag] if request.import_tag else [])
    wkb = payload.geometry_wkb or [None] * len(filled)
    bounds = payload.bounds if payload.bounds is not None else np.full((len(filled), 4), np.nan)
    inserts = filled.iloc[positions]
    given_ids = None
    if ids_given:
        given = inserts["id"]  # every row gives one
        given_ids = (
            given.to_numpy(dtype=np.int64).tolist()  # a rule's integer (Int64): no Python loop
            if pd.api.types.is_integer_dtype(given.dtype)
            else [int(v) for v in as_python(given)]
        )
        taken = assets.ids_taken(given_ids)
        if taken and streaming:
            raise Unstreamable  # the error names the whole file's first ten, as one part
        if taken:
            raise OptionError(
                f"asset id(s) already used: {', '.join(map(str, sorted(taken)[:10]))}; "
                "import with matchingId id to update them"
            )
    assets.insert_many(
        conn,
        NewAssets(
            # A column no row gives is one value for all (written once by the store).
            type=(
                text_column(inserts, "type", rule.asset_type or "Asset")
                if gives_values(inserts, "type")
                else rule.asset_type or "Asset"
            ),
            name=as_python(inserts["name"]),
            code=text_column(inserts, "code", None) if gives_values(inserts, "code") else None,
            friendly=(
                text_column(inserts, "friendly", None)
                if gives_values(inserts, "friendly")
                else None
            ),
            region_id=(
                as_python(inserts["regionId"])
                if gives_values(inserts, "regionId")
                else request.region_id
            ),
            status=int_values(inserts, "status", 1),
            extra_info=payload.insert_json.iloc[positions].tolist(),
            geometry=taken_at(wkb, positions),
            bounds=bounds[positions],
            source=request.name,
            tags=tags,
        ),
        actor,
        now,
        ids=given_ids,
        on_rows=on_rows,
    )


def update_assets(
    store: SiteStore,
    conn: Any,
    pieces: Sequence[tuple[Payload, np.ndarray, np.ndarray]],
    actor: Actor,
    now: int,
) -> int:
    """Update the records ``ids`` from the rows of each payload at its positions, in
    one statement set (the order one part writes them); how many changed."""
    ids: list[int] = []
    patches: list[str] = []
    columns: dict[str, list[object]] = {}
    for payload, positions, update_ids in pieces:
        if not len(positions):
            continue
        updates = payload.filled.iloc[positions]
        for name in ("name", "code", "type", "friendly", "status"):
            if name in updates:
                columns.setdefault(name, []).extend(as_python(updates[name]))
        if payload.geometry_wkb is not None:
            wkb = payload.geometry_wkb
            columns.setdefault("geometry", []).extend(wkb[i] for i in positions.tolist())
            assert payload.bounds is not None
            for i, name in enumerate(("min_x", "min_y", "max_x", "max_y")):
                column = as_python(pd.Series(payload.bounds[positions, i]))
                columns.setdefault(name, []).extend(column)
        patches.extend(payload.patches(positions))
        ids.extend(id_list(update_ids))
    if not ids:
        return 0
    return store.assets.update_many(conn, ids, patches, dict(columns), actor, now)


def insert_early(
    store: SiteStore,
    early: EarlyAssets,
    request: ImportRequest,
    rule: ImportRule,
    payload: Payload,
    keys: Sequence[Any],
    kept_rows: Sequence[RowNumbers],
    *,
    actor: Actor,
    progress: Progress,
) -> None:
    """Insert the rows of the part just read (``payload``, the last of ``keys`` and
    ``kept_rows``) that the whole file's plan inserts, as it is read."""
    conn = early.transaction.conn
    overwrite = request.overwrite_rule or rule.overwrite_rule
    matching_id = matching_field(rule, request.matching_id)
    if early.existing is None:  # the first part: the transaction has just begun
        store.db.lock_scope(conn, import_scope(store, rule, request))
        early.existing = existing_keys(store, rule, request, matching_id)
        early.now = store.db.clock()
        if overwrite == "deleteAndInsert":
            early.retired = early.existing["id"].to_numpy(dtype=np.int64)
            store.assets.retire_many(conn, id_list(early.retired), actor, early.now)
        # The rows beyond the records they may update are about how many will be inserted.
        matched = 0 if overwrite == "deleteAndInsert" else len(early.existing)
        early.indexes = store.assets.set_aside_indexes(conn, early.rows - matched)
    start, early.kept = early.kept, early.kept + len(payload.filled)
    plan = part_plan(early, keys, kept_rows, overwrite, matching_id, start)
    inserts = plan.inserts[plan.inserts >= start]
    if len(plan.updates) and plan.updates[-1] >= start:
        early.updating.append((start, payload))
    if not len(inserts):
        return
    ids_given = gives_ids(payload.filled, inserts - start)
    if early.given_ids is None:
        early.given_ids = ids_given
    elif early.given_ids and not ids_given:
        raise Unstreamable
    before = sum(len(done) for done in early.inserted)
    insert_assets(
        store, conn, rule, request, payload, inserts - start, actor, early.now,
        ids_given=bool(early.given_ids),
        on_rows=lambda n: progress("write", before + n, None, detail="inserting"),
        streaming=True,
    )  # fmt: skip
    early.inserted.append(inserts)


def part_plan(
    early: EarlyAssets,
    keys: Sequence[Any],
    kept_rows: Sequence[RowNumbers],
    overwrite: str,
    matching_id: str,
    start: int,
) -> OverwritePlan:
    """The whole file's plan as far as the last part (its rows from ``start``, in
    positions of every kept row): a key repeating an earlier row is refused, the
    earlier row kept, so the rows so far decide it. The part is planned alone when no
    key of it is in an earlier part (the usual case: time follows the part); else
    with every row so far."""
    assert early.existing is not None
    text = None if keys[-1] is None else normalised_keys(pd.Series(keys[-1]))
    repeats = False
    if text is not None and early.keys:
        # The rows so far are looked up in the part's keys (hashed: the part alone), not
        # the part in theirs: hashing every earlier key again at each part cost 0.16 s at
        # its fourth 250,000-row part, this 0.035 s. A null key is in no set.
        earlier = pa.chunked_array(early.keys, type=text.type)
        repeats = pc.any(pc.is_in(earlier, value_set=text, skip_nulls=True)).as_py()
    if text is not None:
        early.keys.append(text)
    if repeats:
        return plan_rows(
            keys_frame(keys, kept_rows, matching_id), early.existing, overwrite,
            matching_id=matching_id, column=matching_id, rejected=no_problems(),
        ).plan  # fmt: skip
    plan = plan_rows(
        keys_frame(keys[-1:], kept_rows[-1:], matching_id), early.existing, overwrite,
        matching_id=matching_id, column=matching_id, rejected=no_problems(),
    ).plan  # fmt: skip
    return replace(plan, inserts=plan.inserts + start, updates=plan.updates + start)
