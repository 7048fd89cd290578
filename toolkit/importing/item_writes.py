"""The write stage of an item import: its register, then retirements, inserts and updates
of the items, part by part from the staged payloads."""

from __future__ import annotations

import json

import pandas as pd

from toolkit.importing.outcome import WriteJob
from toolkit.importing.payload import ITEM_RECORD_FIELDS, Payload, int_values
from toolkit.importing.rules import ImportRule
from toolkit.model.fieldjson import as_python, id_list
from toolkit.store import SiteStore
from toolkit.store.items import ItemChanges, NewItems


def write_items(
    store: SiteStore,
    job: WriteJob,
) -> int:
    """Retirements, then the inserts part by part, then the updates part by part: the
    order one payload of every row would write them in (positions are ascending)."""
    conn, rule, request, plan, parts = job.conn, job.rule, job.request, job.plan, job.parts
    actor, now, written = job.actor, job.now, job.written
    asset_ids = job.asset_ids
    assert rule.register is not None
    store.registers.upsert(
        conn, rule.register, rule.register_name or rule.register, register_fields(rule)
    )
    tags = json.dumps([request.import_tag] if request.import_tag else [])
    store.items.retire_many(conn, id_list(plan.retirements), actor, now)
    written.retired()

    def links_of(payload: Payload) -> pd.Series:
        filled = payload.filled
        if asset_ids is not None:
            return asset_ids.reindex(filled.index)
        if payload.asset_ids is not None:
            return payload.asset_ids
        return pd.Series(pd.NA, index=filled.index, dtype="Int64")

    # Into an item table holding no more items than are coming, its indexes are made
    # once the items are in, not kept as each goes in.
    indexes = store.items.set_aside_indexes(conn, len(plan.inserts))
    done = 0
    for payload, inserts, _ in parts.select(plan.inserts):
        filled = payload.filled
        rows = filled.iloc[inserts]

        def on_rows(n: int, before: int = done) -> None:
            written.inserted(before + n)  # the rows of earlier parts count too

        store.items.insert_many(
            conn,
            NewItems(
                register_id=rule.register,
                event_id=request.event_id,
                region_id=request.region_id,
                asset_id=as_python(links_of(payload).iloc[inserts]),
                status=int_values(rows, "status", 1),
                is_template=int_values(rows, "isTemplate", 0),
                tags=tags,
                fields=payload.insert_json.iloc[inserts].tolist(),
            ),
            actor,
            now,
            on_rows=on_rows,
        )
        done += len(inserts)
    store.items.restore_indexes(conn, indexes)
    changed = 0
    for payload, updates, (ids,) in parts.select(plan.updates, plan.update_ids):
        rows = payload.filled.iloc[updates]
        update_ids = id_list(ids)
        changed += store.items.update_many(
            conn,
            ItemChanges(
                ids=update_ids,
                fields_patch=payload.patches(updates),
                asset_id=as_python(links_of(payload).iloc[updates]),
                status=as_python(rows["status"]) if "status" in rows else [None] * len(rows),
            ),
            actor,
            now,
        )
        if request.import_tag:
            store.items.table.add_tag(conn, update_ids, request.import_tag)
    return changed


def register_fields(rule: ImportRule) -> list[dict[str, object]]:
    """The register's field definitions, as the rule declares them."""
    return [
        {
            "name": f.name,
            "type": f.type,
            "label": f.column,
            "choices": list(f.choices),
            **({"role": f.role} if f.role else {}),
        }
        for f in rule.fields
        if f.name not in ITEM_RECORD_FIELDS
    ]
