"""The built-in reports. Ids are stable: scripts and schedules name reports by them.

1 register items of an event, 2 impacted assets, 3 import jobs, 4 asset-matching
quality of an import, 5 audit log. Rows are gathered set-wise by the store, only of
the events the caller sees (items, impacted assets' items, item jobs, audit entries of
an event); parameters naming an event (an item's, an import job's) are each report's
``scope``. Metadata is computed on the finished snapshot's columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import shapely

from toolkit.errors import NotFoundError, OptionError
from toolkit.matching.probabilistic import COMPONENTS
from toolkit.model.visibility import job_events
from toolkit.names import IMPORT_TYPES, JOB_COUNTS
from toolkit.reports.catalogue import (
    Catalogue,
    Chart,
    Field,
    FieldType,
    Gathered,
    MetaEntry,
    Param,
    ReportDefinition,
    band_counts,
)

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot
    from toolkit.store import SiteStore

STATUSES = ("active", "inactive", "all")
JOB_STATUSES = ("NOT_STARTED", "RUNNING", "COMPLETE", "FAILED")

RECORD_TYPES = ("item", "asset", "user", "event")
AUDIT_ACTIONS = ("create", "update", "retire")
# Register field types of import rules, as report field types.
REGISTER_FIELD_TYPES: dict[str, FieldType] = {
    "integer": "integer",
    "decimal": "number",
    "boolean": "boolean",
}


def _keyed(chunks: Iterator[pd.DataFrame], renames: Mapping[str, str]) -> Iterator[pd.DataFrame]:
    for frame in chunks:
        yield frame.rename(columns=dict(renames))


def _null_count(snapshot: Snapshot, key: str) -> int:
    return int(snapshot.column(key).null_count)


def _true_count(snapshot: Snapshot, key: str) -> int:
    return int(pc.sum(snapshot.column(key)).as_py() or 0)


# --- 1 register items of an event -------------------------------------------------------

ITEM_FIELDS = (
    Field("id", "Item id", "integer"),
    Field("registerId", "Register", "text"),
    Field("eventId", "Event id", "integer"),
    Field("regionId", "Region id", "integer"),
    Field("assetId", "Asset id", "integer"),
    Field("assetName", "Asset", "text"),
    Field("assetFriendly", "Asset address", "text"),
    Field("status", "Status", "integer"),
    Field("isTemplate", "Template", "boolean"),
    Field("tags", "Tags", "text"),
    Field("dateCreated", "Created", "timestamp"),
    Field("dateModified", "Modified", "timestamp"),
)
ITEM_RENAMES = {
    "register_id": "registerId",
    "event_id": "eventId",
    "region_id": "regionId",
    "asset_id": "assetId",
    "asset_name": "assetName",
    "asset_friendly": "assetFriendly",
    "is_template": "isTemplate",
    "date_created": "dateCreated",
    "date_modified": "dateModified",
}


def _event_scope(_store: SiteStore, params: Mapping[str, Any]) -> set[int | None]:
    return set() if params["eventId"] is None else {params["eventId"]}


def _register_items(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    event_id = params["eventId"]
    if store.events.get(event_id) is None:
        raise NotFoundError(f"parameter eventId {event_id}: event {event_id} does not exist")
    register_id = params["registerId"]
    register_fields: list[Field] = []
    if register_id is not None:
        register = store.registers.get(register_id)
        if register is None:
            known = ", ".join(r["id"] for r in store.registers.all()) or "none yet"
            raise NotFoundError(
                f"parameter registerId {register_id!r}: no such register; registers: {known}"
            )
        taken = {f.key for f in ITEM_FIELDS}
        for definition in json.loads(register["fields"]):
            if definition["name"] in taken:
                continue
            register_fields.append(
                Field(
                    definition["name"],
                    definition.get("label") or definition["name"],
                    REGISTER_FIELD_TYPES.get(definition.get("type", "text"), "text"),
                )
            )
    spec = ITEM_FIELDS + (
        tuple(register_fields) if register_id is not None else (Field("fields", "Fields"),)
    )
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
    )

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        rows = snapshot.row_count
        active = int(pc.sum(pc.greater(snapshot.column("status"), 0)).as_py() or 0)
        without_asset = _null_count(snapshot, "assetId")
        return [
            MetaEntry.count("active", "Active items", active),
            MetaEntry.count("inactive", "Inactive (retired) items", rows - active),
            MetaEntry.count("withoutAsset", "Items without an asset", without_asset),
            MetaEntry.share("linkedShare", "Share linked to an asset", rows - without_asset, rows),
            MetaEntry.count(
                "registers", "Registers", len(pc.unique(snapshot.column("registerId")))
            ),
        ]

    return Gathered(spec, _keyed(chunks, renames), meta)


# --- 2 impacted assets ------------------------------------------------------------------

IMPACTED_FIELDS = (
    Field("id", "Asset id", "integer"),
    Field("type", "Type", "text"),
    Field("code", "Code", "text"),
    Field("name", "Name", "text"),
    Field("friendly", "Address", "text"),
    Field("regionId", "Region id", "integer"),
    Field("activeItems", "Active items", "integer"),
    Field("registers", "Registers", "integer"),
    Field("firstItem", "First item", "timestamp"),
    Field("lastChange", "Last change", "timestamp"),
    Field("longitude", "Longitude", "number"),
    Field("latitude", "Latitude", "number"),
)


def _with_location(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Each asset's location as the centroid of its geometry, computed per chunk."""
    for frame in chunks:
        geometry = shapely.from_wkb(frame["geometry"].to_numpy(dtype=object))
        points = shapely.centroid(geometry)
        yield (
            frame.drop(columns=["geometry", "status"])
            .assign(longitude=shapely.get_x(points), latitude=shapely.get_y(points))
            .rename(
                columns={
                    "region_id": "regionId",
                    "active_items": "activeItems",
                    "first_item": "firstItem",
                    "last_change": "lastChange",
                }
            )
        )


def _impacted_assets(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    event_id = params["eventId"]
    if event_id is not None and store.events.get(event_id) is None:
        raise NotFoundError(f"parameter eventId {event_id}: event {event_id} does not exist")
    chunks = store.reports.impacted_asset_rows(
        event_id=event_id,
        register_id=params["registerId"],
        asset_type=params["type"],
        within_events=within,
    )
    active_assets = store.reports.active_asset_count(params["type"])

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        rows = snapshot.row_count
        return [
            MetaEntry.count("activeAssets", "Active assets", active_assets),
            MetaEntry.share(
                "impactedShare", "Share of active assets impacted", rows, active_assets
            ),
            MetaEntry.count(
                "activeItems",
                "Active items on them",
                int(pc.sum(snapshot.column("activeItems")).as_py() or 0),
            ),
            MetaEntry.count(
                "withoutLocation", "Assets without a location", _null_count(snapshot, "longitude")
            ),
        ]

    return Gathered(IMPACTED_FIELDS, _with_location(chunks), meta)


# --- 3 import jobs ----------------------------------------------------------------------

JOB_FIELDS = (
    Field("id", "Job id", "integer"),
    Field("status", "Status", "text"),
    Field("importType", "Import type", "text"),
    Field("importRule", "Rule", "text"),
    Field("userId", "User", "text"),
    Field("source", "Source", "text"),
    Field("overwriteRule", "Overwrite rule", "text"),
    Field("dryRun", "Dry run", "boolean"),
    *(Field(name, name.capitalize(), "integer") for name in JOB_COUNTS),
    Field("reason", "Reason", "text"),
    Field("dateCreated", "Scheduled", "timestamp"),
    Field("dateCompleted", "Completed", "timestamp"),
    Field("seconds", "Seconds", "number"),
)


def _import_jobs(
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

    return Gathered(JOB_FIELDS, _keyed(chunks, renames), meta)


# --- 4 asset-matching quality of an import -----------------------------------------------

MATCHING_FIELDS = (
    Field("row", "Row", "integer"),
    Field("reference", "Reference", "text"),
    Field("query", "Query", "text"),
    Field("assetId", "Asset id", "integer"),
    Field("assetName", "Asset", "text"),
    Field("mode", "Mode", "text"),
    Field("accuracy", "Accuracy", "number"),
    Field("candidates", "Candidates", "integer"),
    Field("error", "Error", "text"),
    # Fuzzy matching's view of the row's best candidate (linked or not): its match
    # probability, and the evidence in bits each address component gave it.
    Field("probability", "Match probability", "number"),
    *(Field(f"evidence{c.title()}", f"Evidence: {c} (bits)", "number") for c in COMPONENTS),
)
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


def _job_scope(store: SiteStore, params: Mapping[str, Any]) -> set[int | None]:
    job = store.jobs.get(params["jobId"])
    return set() if job is None else job_events(job)


def _matching_quality(
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

    return Gathered(MATCHING_FIELDS, _keyed(chunks, renames), meta)


# --- 5 audit log ------------------------------------------------------------------------

AUDIT_FIELDS = (
    Field("id", "Entry id", "integer"),
    Field("dateCreated", "When", "timestamp"),
    Field("userId", "User", "text"),
    Field("action", "Action", "text"),
    Field("recordType", "Record type", "text"),
    Field("recordId", "Record id", "integer"),
    Field("itemId", "Item id", "integer"),
    Field("eventId", "Event id", "integer"),
    Field("importJobId", "Import job", "integer"),
    Field("message", "Message", "text"),
    Field("changes", "Changes", "text"),
)


def _audit_scope(store: SiteStore, params: Mapping[str, Any]) -> set[int | None]:
    """The event asked for, and those of the item and the import job asked for."""
    events = _event_scope(store, params)
    if params["itemId"] is not None:
        item = store.items.get(params["itemId"])
        if item is not None:
            events.add(item["event_id"])
    if params["importJobId"] is not None:
        job = store.jobs.get(params["importJobId"])
        if job is not None:
            events |= job_events(job)
    return events


def _audit_log(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
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

    return Gathered(AUDIT_FIELDS, _keyed(chunks, renames), meta)


def _date_range(what: str) -> tuple[Param, Param]:
    return (
        Param("dateFrom", f"{what} from", "timestamp"),
        Param("dateTo", f"{what} until", "timestamp"),
    )


CATALOGUE = Catalogue(
    (
        ReportDefinition(
            1,
            "Register items of an event",
            "Every item of an event, with its asset; one column per register field when a "
            "register is chosen.",
            (
                Param("eventId", "Event", "integer", required=True),
                Param("registerId", "Register", "text"),
                Param("status", "Status", "choice", STATUSES, default="all"),
                *_date_range("Created"),
                Param("isTemplate", "Templates", "boolean"),
            ),
            _register_items,
            Chart("bars", "Items per status", "status"),
            _event_scope,
        ),
        ReportDefinition(
            2,
            "Impacted assets",
            "Assets with active register items: how many, and where.",
            (
                Param("eventId", "Event", "integer"),
                Param("registerId", "Register", "text"),
                Param("type", "Asset type", "text"),
            ),
            _impacted_assets,
            Chart("map", "Impacted assets"),
            _event_scope,
        ),
        ReportDefinition(
            3,
            "Import jobs",
            "Import jobs of the site with their counts.",
            (
                Param("status", "Status", "choice", JOB_STATUSES),
                Param("importType", "Import type", "choice", IMPORT_TYPES),
            ),
            _import_jobs,
            Chart("bars", "Jobs per status", "status"),
        ),
        ReportDefinition(
            4,
            "Asset-matching quality of an import",
            "How each row of an item import was linked to an asset: mode, accuracy, error.",
            (Param("jobId", "Import job", "integer", required=True),),
            _matching_quality,
            Chart("bars", "Rows per matching mode", "mode"),
            _job_scope,
            (Chart("bands", "Rows per match probability (fuzzy)", "probability"),),
        ),
        ReportDefinition(
            5,
            "Audit log",
            "Who changed what, and when.",
            (
                Param("eventId", "Event", "integer"),
                Param("itemId", "Item", "integer"),
                Param("importJobId", "Import job", "integer"),
                Param("recordType", "Record type", "choice", RECORD_TYPES),
                Param("action", "Action", "choice", AUDIT_ACTIONS),
                *_date_range("Logged"),
            ),
            _audit_log,
            Chart("bars", "Entries per action", "action"),
            _audit_scope,
        ),
    )
)
