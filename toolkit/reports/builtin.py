"""How the built-in reports gather their rows: the sources their definition files
(``toolkit/reports/defined/*.toml``) call by name (see :mod:`toolkit.reports.sources`).

Rows are gathered set-wise by the store, only of the events the caller sees (items,
impacted assets' items, item jobs, audit entries of an event). Each source yields its
rows keyed by the column keys its definition labels (``*_KEYS``), plus columns read
from the data (a register's fields) which it describes itself. Metadata is computed on
the finished snapshot's columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import shapely

from toolkit.errors import NotFoundError, OptionError
from toolkit.matching.probabilistic import COMPONENTS
from toolkit.names import JOB_COUNTS
from toolkit.reports.audit_text import readable_changes
from toolkit.reports.catalogue import Chart, Field, Gathered, MetaEntry, band_counts
from toolkit.reports.registers import (
    Register,
    all_registers,
    get_register,
)

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot
    from toolkit.store import SiteStore

STATUSES = ("active", "inactive", "all")
JOB_STATUSES = ("NOT_STARTED", "RUNNING", "COMPLETE", "FAILED")

RECORD_TYPES = ("item", "asset", "user", "event")
AUDIT_ACTIONS = ("create", "update", "retire")


def _keyed(chunks: Iterator[pd.DataFrame], renames: Mapping[str, str]) -> Iterator[pd.DataFrame]:
    for frame in chunks:
        yield frame.rename(columns=dict(renames))


def _null_count(snapshot: Snapshot, key: str) -> int:
    return int(snapshot.column(key).null_count)


def _true_count(snapshot: Snapshot, key: str) -> int:
    return int(pc.sum(snapshot.column(key)).as_py() or 0)


# --- 1 register items of an event -------------------------------------------------------

# The keys of the rows' fixed columns (the definition file labels them); a register's
# fields follow as columns of their own.
ITEM_KEYS = (
    "id", "eventId", "event", "register", "regionId", "assetId", "assetName",
    "assetFriendly", "locality", "status", "isTemplate", "tags", "dateCreated",
    "dateModified",
)  # fmt: skip
ITEM_RENAMES = {
    "register_name": "register",
    "event_id": "eventId",
    "event_name": "event",
    "region_id": "regionId",
    "asset_id": "assetId",
    "asset_name": "assetName",
    "asset_friendly": "assetFriendly",
    "is_template": "isTemplate",
    "date_created": "dateCreated",
    "date_modified": "dateModified",
}


def _require_event(store: SiteStore, event_id: int | None) -> None:
    if event_id is not None and store.events.get(event_id) is None:
        raise NotFoundError(f"parameter eventId {event_id}: event {event_id} does not exist")


def _require_asset_type(store: SiteStore, name: str | None) -> None:
    if name is None:
        return
    known = [str(r["name"]) for r in store.assets.types()]
    if name not in known:
        raise NotFoundError(
            f"parameter type {name!r}: no such asset class; classes: "
            f"{', '.join(known) or 'none yet'}"
        )


def _inspected_field(
    register: Register | None, params: Mapping[str, Any], *, filtering: bool = True
) -> str | None:
    """The register's inspection-date field (only when the run filters on it, unless
    not ``filtering``); a filter on a register without one fails the run, never
    matches everything."""
    field = None if register is None else register.role("inspected")
    ranged = params.get("inspectedFrom") is not None or params.get("inspectedTo") is not None
    if filtering and not ranged:
        return None
    if field is None and ranged:
        where = "the items' registers" if register is None else f"register {register.id}"
        raise NotFoundError(
            f"parameters inspectedFrom/inspectedTo: {where} has no inspection date "
            "(a date field with role inspected, or inspectionDate); choose a registerId "
            "that has one"
        )
    return None if field is None else str(field["name"])


def register_items(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    event_id = params["eventId"]
    _require_event(store, event_id)
    register_id = params["registerId"]
    register: Register | None = None
    if register_id is not None:
        register = get_register(store, register_id)
    else:
        # One register among the event's items: its fields are the columns by default.
        present = store.reports.item_registers(event_id)
        if len(present) == 1:
            register = get_register(store, present[0])
    register_fields = register.columns(list(ITEM_KEYS)) if register else ()
    spec = register_fields if register is not None else (Field("fields", "Fields"),)
    renames = {**ITEM_RENAMES, **{f"f{n}": f.key for n, f in enumerate(register_fields)}}
    chunks = store.reports.item_rows(
        event_id=event_id,
        register_id=register_id,
        register_fields=[f.key for f in register_fields],
        status=params["status"],
        created_from=params["dateFrom"],
        created_to=params["dateTo"],
        is_template=params["isTemplate"],
        within_events=within,
        date_field=_inspected_field(register, params),
        date_from=params["inspectedFrom"],
        date_to=params["inspectedTo"],
    )

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        rows = snapshot.row_count
        active = int(pc.sum(pc.equal(snapshot.column("status"), "active")).as_py() or 0)
        without_asset = _null_count(snapshot, "assetId")
        return [
            MetaEntry.count("active", "Active items", active),
            MetaEntry.count("inactive", "Inactive (retired) items", rows - active),
            MetaEntry.count("withoutAsset", "Items without an asset", without_asset),
            MetaEntry.share("linkedShare", "Share linked to an asset", rows - without_asset, rows),
            MetaEntry.count("registers", "Registers", len(pc.unique(snapshot.column("register")))),
        ]

    severity = None if register is None else register.severity
    charts = None
    if severity is not None:
        label = str(severity.get("label") or severity["name"])
        charts = (Chart("bars", f"Items per {label.lower()}", str(severity["name"])),)
    return Gathered(
        spec,
        _keyed(chunks, renames),
        meta,
        charts=charts,
        levels=() if register is None else register.levels,
    )


# --- 2 impacted assets ------------------------------------------------------------------

IMPACTS = ("damaged", "any")
IMPACTED_KEYS = (
    "id", "type", "code", "name", "address", "locality", "regionId", "worstLevel",
    "damagedItems", "activeItems", "registers", "lastInspected", "firstItem", "lastChange",
    "longitude", "latitude",
)  # fmt: skip


class _Tally:
    """Counts kept while chunks stream past (the metadata reads them afterwards)."""

    def __init__(self) -> None:
        self.assessed = 0
        self.damaged = 0


def _impacted_frames(
    chunks: Iterator[pd.DataFrame], levels: tuple[str, ...], damaged_only: bool, tally: _Tally
) -> Iterator[pd.DataFrame]:
    """Each asset's worst level by name, its location as the centroid of its geometry
    (computed per chunk), and only the damaged assets when so asked."""
    names = np.array([*levels, None], dtype=object)
    for frame in chunks:
        rank = pd.to_numeric(frame["worst_rank"], errors="coerce")
        damaged = (rank > 0).fillna(False).to_numpy(dtype=bool)
        tally.assessed += len(frame)
        tally.damaged += int(damaged.sum())
        if damaged_only:
            frame, rank = frame[damaged], rank[damaged]
        index = rank.fillna(len(levels)).astype(np.int64).to_numpy()
        geometry = shapely.from_wkb(frame["geometry"].to_numpy(dtype=object))
        points = shapely.centroid(geometry)
        yield (
            frame.drop(columns=["status", "worst_rank"])
            .assign(
                worstLevel=names[index] if len(levels) else None,
                longitude=shapely.get_x(points),
                latitude=shapely.get_y(points),
                damaged_items=pd.to_numeric(frame["damaged_items"]).fillna(0),
            )
            .rename(
                columns={
                    "region_id": "regionId",
                    "damaged_items": "damagedItems",
                    "active_items": "activeItems",
                    "first_item": "firstItem",
                    "last_change": "lastChange",
                    "last_inspected": "lastInspected",
                }
            )
        )


def impacted_assets(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    event_id = params["eventId"]
    _require_event(store, event_id)
    _require_asset_type(store, params["type"])
    register: Register | None = None
    if params["registerId"] is not None:
        register = get_register(store, params["registerId"])
    else:
        with_severity = [r for r in all_registers(store) if r.severity is not None]
        if len(with_severity) > 1 and params["impact"] == "damaged":
            raise NotFoundError(
                "impacted assets: several registers have a severity field; choose one with "
                f"registerId: {', '.join(r.id for r in with_severity)}"
            )
        register = with_severity[0] if with_severity else None
    severity = None if register is None else register.severity
    levels = register.levels if register is not None else ()
    # Damage needs a severity to read; without one, impacted is the spec's "has an active
    # register item", and the metadata says so.
    damaged_only = params["impact"] == "damaged" and severity is not None
    meaning = (
        f"damaged: an active item of {register.id} above {levels[0]}"
        if damaged_only and register is not None
        else "any active register item"
        + ("" if params["impact"] == "any" else " (no register with a severity field)")
    )
    tally = _Tally()
    chunks = store.reports.impacted_asset_rows(
        event_id=event_id,
        register_id=params["registerId"],
        asset_type=params["type"],
        within_events=within,
        severity=None if severity is None else str(severity["name"]),
        levels=levels,
        date_field=_inspected_field(register, params, filtering=False),
        date_from=params["inspectedFrom"],
        date_to=params["inspectedTo"],
    )
    active_assets = store.reports.active_asset_count(params["type"])

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        rows = snapshot.row_count
        entries = [
            MetaEntry("impactMeans", "Impacted means", damaged_only, meaning),
            MetaEntry.count("activeAssets", "Active assets", active_assets),
            MetaEntry.share(
                "impactedShare", "Share of active assets impacted", rows, active_assets
            ),
        ]
        if levels:
            entries += [
                MetaEntry.count(
                    "assessedAssets", "Assets with active items (assessed)", tally.assessed
                ),
                MetaEntry.count(
                    "damagedAssets", f"Assets damaged (above {levels[0]})", tally.damaged
                ),
                MetaEntry.count(
                    "undamagedAssets",
                    f"Assessed, no damage ({levels[0]} or not recorded)",
                    tally.assessed - tally.damaged,
                ),
            ]
        return [
            *entries,
            MetaEntry.count(
                "activeItems",
                "Active items on them",
                int(pc.sum(snapshot.column("activeItems")).as_py() or 0),
            ),
            MetaEntry.count(
                "withoutLocation", "Assets without a location", _null_count(snapshot, "longitude")
            ),
        ]

    return Gathered(
        (),
        _impacted_frames(chunks, levels, damaged_only, tally),
        meta,
        geometry=True,
        levels=levels,
        headline=("damagedAssets", "assessedAssets", "impactedShare") if levels else (),
    )


# --- 3 import jobs ----------------------------------------------------------------------

JOB_KEYS = (
    "id", "status", "importType", "importRule", "userId", "source", "overwriteRule",
    "dryRun", *JOB_COUNTS, "reason", "dateCreated", "dateCompleted", "seconds",
)  # fmt: skip


def import_jobs(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    chunks = store.reports.import_job_rows(
        status=params["status"], import_type=params["importType"], within_events=within
    )
    renames = {
        "import_type": "importType",
        "import_rule": "importRule",
        "user_id": "userId",
        "overwrite_rule": "overwriteRule",
        "dry_run": "dryRun",
        "date_created": "dateCreated",
        "date_completed": "dateCompleted",
    }

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        statuses = snapshot.column("status")
        return [
            MetaEntry.count(
                "failed", "Failed jobs", int(pc.sum(pc.equal(statuses, "FAILED")).as_py() or 0)
            ),
            MetaEntry.count("dryRuns", "Dry runs", _true_count(snapshot, "dryRun")),
            MetaEntry.count(
                "rowsRead", "Rows read", int(pc.sum(snapshot.column("read")).as_py() or 0)
            ),
            MetaEntry.count(
                "rowsRejected",
                "Rows rejected",
                int(pc.sum(snapshot.column("rejected")).as_py() or 0),
            ),
        ]

    return Gathered((), _keyed(chunks, renames), meta)


# --- 4 asset-matching quality of an import -----------------------------------------------

# Fuzzy matching's view of the row's best candidate (linked or not): its match
# probability, and the evidence in bits each address component gave it.
MATCHING_KEYS = (
    "row", "reference", "query", "assetId", "assetName", "mode", "accuracy", "candidates",
    "error", "probability", *(f"evidence{c.title()}" for c in COMPONENTS),
)  # fmt: skip
EVIDENCE_RENAMES = {f"evidence_{c}": f"evidence{c.title()}" for c in COMPONENTS}
# How many rows the metadata explains component by component, spread over the probabilities.
EVIDENCE_SAMPLE = 5
QUANTILES = {
    "min": 0.0,
    "p10": 0.1,
    "p25": 0.25,
    "median": 0.5,
    "p75": 0.75,
    "p90": 0.9,
    "max": 1.0,
}


def _probability_meta(snapshot: Snapshot) -> list[MetaEntry]:
    """The distribution of fuzzy match probabilities (per tenth and quantiles) and, for a
    sample of rows from the least to the most probable, each component's evidence."""
    p = np.asarray(snapshot.column("probability").to_numpy(), dtype=float)
    scored = np.flatnonzero(~np.isnan(p))
    bands = band_counts(p[scored])
    quantiles = (
        {k: round(float(np.quantile(p[scored], q)), 4) for k, q in QUANTILES.items()}
        if len(scored)
        else {}
    )
    order = scored[np.argsort(p[scored], kind="stable")]
    spread = np.linspace(0, max(len(order) - 1, 0), min(EVIDENCE_SAMPLE, len(order)))
    picked = order[np.unique(spread.astype(np.int64))]
    rows = snapshot.column("row").take(picked).to_pylist()
    bits = {
        c: np.asarray(snapshot.column(f"evidence{c.title()}").take(picked).to_numpy(), dtype=float)
        for c in COMPONENTS
    }
    sample = []
    for i, row in enumerate(rows):
        evidence = {c: (None if np.isnan(b[i]) else float(b[i])) for c, b in bits.items()}
        total = round(sum(v for v in evidence.values() if v is not None), 3)
        sample.append(
            {"row": row, "probability": float(p[picked[i]]), "bits": total, "evidence": evidence}
        )
    return [
        MetaEntry(
            "probabilityBands",
            "Rows per match probability (fuzzy)",
            bands,
            ", ".join(f"{band} {count:,}" for band, count in bands.items() if count) or "none",
        ),
        MetaEntry(
            "probabilityQuantiles",
            "Match probability quantiles",
            quantiles,
            ", ".join(f"{k} {v:.3f}" for k, v in quantiles.items()) or "n/a",
        ),
        MetaEntry(
            "evidenceSample",
            "Evidence of sampled rows (bits per component)",
            sample,
            "; ".join(
                f"row {s['row']}: p {s['probability']:.3f} = "
                + " + ".join(f"{c} {v:g}" for c, v in s["evidence"].items() if v)
                + f" = {s['bits']:g} bits"
                for s in sample
            )
            or "none",
        ),
    ]


def matching_quality(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    # Its rows are one job's, so the job's event (scope) is all there is to check.
    job_id = params["jobId"]
    job = store.jobs.get(job_id)
    if job is None:
        raise NotFoundError(f"parameter jobId {job_id}: import job {job_id} does not exist")
    if job["import_type"] != "item":
        raise OptionError(
            f"parameter jobId {job_id}: job {job_id} imported {job['import_type']}s; "
            "only item imports link rows to assets"
        )
    chunks = store.reports.link_rows(job_id, COMPONENTS)
    renames = {
        "asset_id": "assetId",
        "asset_name": "assetName",
        "err": "error",
        **EVIDENCE_RENAMES,
    }

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        rows = snapshot.row_count
        unlinked = _null_count(snapshot, "assetId")
        accuracy = pc.mean(snapshot.column("accuracy")).as_py()
        modes = pc.value_counts(snapshot.column("mode").combine_chunks()).to_pylist()
        by_mode = {
            ("none" if m["values"] is None else str(m["values"])): int(m["counts"]) for m in modes
        }
        return [
            MetaEntry.count("linked", "Rows linked to an asset", rows - unlinked),
            MetaEntry.count("unlinked", "Rows without an asset", unlinked),
            MetaEntry.share("linkedShare", "Share linked", rows - unlinked, rows),
            MetaEntry(
                "meanAccuracy",
                "Mean accuracy",
                accuracy,
                "n/a" if accuracy is None else f"{accuracy:.3f}",
            ),
            MetaEntry(
                "byMode",
                "Rows per mode",
                by_mode,
                ", ".join(f"{mode} {count:,}" for mode, count in sorted(by_mode.items())) or "none",
            ),
            *_probability_meta(snapshot),
        ]

    return Gathered((), _keyed(chunks, renames), meta)


# --- 5 audit log ------------------------------------------------------------------------

AUDIT_KEYS = (
    "id", "dateCreated", "userId", "action", "recordType", "recordId", "itemId", "eventId",
    "event", "importJobId", "message", "changes", "changesJson",
)  # fmt: skip


def _readable(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for frame in chunks:
        yield frame.assign(
            changesJson=frame["changes"],
            changes=readable_changes(frame["action"], frame["changes"]),
        )


def audit_log(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    _require_event(store, params["eventId"])
    if params["itemId"] is not None and store.items.get(params["itemId"]) is None:
        raise NotFoundError(f"parameter itemId {params['itemId']}: no such item")
    job_id = params["importJobId"]
    if job_id is not None and store.jobs.get(job_id) is None:
        raise NotFoundError(f"parameter importJobId {job_id}: import job {job_id} does not exist")
    chunks = store.reports.audit_rows(
        event_id=params["eventId"],
        item_id=params["itemId"],
        import_job_id=params["importJobId"],
        record_type=params["recordType"],
        action=params["action"],
        created_from=params["dateFrom"],
        created_to=params["dateTo"],
        within_events=within,
    )
    renames = {
        "date_created": "dateCreated",
        "user_id": "userId",
        "record_type": "recordType",
        "record_id": "recordId",
        "item_id": "itemId",
        "event_id": "eventId",
        "event_name": "event",
        "import_job_id": "importJobId",
    }

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        users = pc.unique(snapshot.column("userId"))
        return [
            MetaEntry.count("users", "Users", len(users.drop_null())),
            MetaEntry.count(
                "withoutUser", "Entries without a user", _null_count(snapshot, "userId")
            ),
        ]

    return Gathered((), _readable(_keyed(chunks, renames)), meta)
