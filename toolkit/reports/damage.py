"""Report 6, the damage summary: how much damage, and where.

Rows are one per event and locality (the locality of the item's parcel): how many items
at each damage level, how many places are uninhabitable and how many occupants they
displace, how many parcels were assessed and how many are damaged. The metadata holds
the totals and a table of items per damage level per inspection date (the time series).

"Damaged" means a severity above the register's first level (``None``): an assessment
that found no damage is counted as assessed, never as damage. Items are read in chunks
and counted with group-bys; only per-parcel worst levels are kept between chunks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.errors import NotFoundError
from toolkit.reports.catalogue import Chart, Field, Gathered, MetaEntry
from toolkit.reports.registers import Register, severity_register

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot
    from toolkit.store import SiteStore

NO_ASSET = "(no parcel)"
NO_LOCALITY = "(locality not known)"
NO_DATE = "(no date)"
BY_DATE = "byInspectionDate"


def level_keys(levels: tuple[str, ...]) -> list[str]:
    """A field key per level: ``levelNone``, ``levelMinor``, ... (by position when two
    levels would share a key)."""
    keys = ["level" + "".join(w.title() for w in re.findall(r"[A-Za-z0-9]+", lv)) for lv in levels]
    if len(set(keys)) != len(keys) or "level" in keys:
        keys = [f"level{n}" for n in range(len(levels))]
    return keys


class _Counts:
    """What the summary keeps while the items stream past."""

    def __init__(self, levels: int) -> None:
        self.levels = levels
        self.by_place: list[pd.DataFrame] = []
        self.by_date: list[pd.DataFrame] = []
        self.parcels: list[pd.DataFrame] = []
        self.people: list[pd.DataFrame] = []
        self.items = 0
        self.without_asset = 0
        self.without_date = 0

    def add(self, frame: pd.DataFrame) -> None:
        self.items += len(frame)
        self.without_asset += int(frame["asset_id"].isna().sum())
        locality = frame["locality"].astype("string")
        locality = locality.mask(locality.isna() & frame["asset_id"].notna(), NO_LOCALITY)
        locality = locality.fillna(NO_ASSET)
        rank = pd.to_numeric(frame["rank"], errors="coerce").fillna(-1).astype(np.int64)
        inspected = frame["inspected"].astype("string")
        self.without_date += int(inspected.isna().sum())
        event = frame["event_id"].astype("Int64")
        name = frame["event_name"].astype("string")
        keys = pd.DataFrame({"event": event, "name": name, "locality": locality, "rank": rank})
        self.by_place.append(keys.value_counts(dropna=False).rename("n").reset_index())
        dates = pd.DataFrame({"date": inspected.fillna(NO_DATE), "rank": rank})
        self.by_date.append(dates.value_counts(dropna=False).rename("n").reset_index())
        habitable = pd.to_numeric(frame["habitable"], errors="coerce")
        unhoused = (habitable == 0).fillna(False)
        occupants = pd.to_numeric(frame["occupants"], errors="coerce").fillna(0)
        people = pd.DataFrame(
            {
                "event": event,
                "locality": locality,
                "uninhabitable": unhoused.astype(np.int64),
                "displaced": occupants.where(unhoused, 0).astype(np.int64),
            }
        )
        self.people.append(people.groupby(["event", "locality"], dropna=False).sum().reset_index())
        located = frame["asset_id"].notna()
        parcels = pd.DataFrame(
            {
                "event": event[located],
                "locality": locality[located],
                "asset": frame["asset_id"][located].astype(np.int64),
                "rank": rank[located],
            }
        )
        self.parcels.append(
            parcels.groupby(["event", "locality", "asset"], dropna=False)["rank"]
            .max()
            .reset_index()
        )


def _table(counts: _Counts, keys: list[str]) -> pd.DataFrame:
    """The rows: one per event and locality, a count column per level."""
    index = ["event", "name", "locality"]
    if not counts.by_place:
        columns = ["eventId", "event", "locality", *keys, "notRecorded", "items", "damagedItems"]
        columns += ["uninhabitable", "occupantsDisplaced", "assessedParcels", "damagedParcels"]
        return pd.DataFrame(columns=columns)
    place = pd.concat(counts.by_place).groupby([*index, "rank"], dropna=False)["n"].sum()
    wide = place.unstack("rank", fill_value=0)
    for rank in range(-1, counts.levels):
        if rank not in wide.columns:
            wide[rank] = 0
    table = pd.DataFrame(index=wide.index)
    for rank, key in enumerate(keys):
        table[key] = wide[rank]
    table["notRecorded"] = wide[-1]
    table["items"] = wide.sum(axis=1)
    table["damagedItems"] = wide[list(range(1, counts.levels))].sum(axis=1)
    table = table.reset_index()
    people = pd.concat(counts.people).groupby(["event", "locality"], dropna=False).sum()
    parcels = pd.concat(counts.parcels).groupby(["event", "locality", "asset"], dropna=False)
    worst = parcels["rank"].max().reset_index()
    worst["damaged"] = (worst["rank"] > 0).astype(np.int64)
    per_place = worst.groupby(["event", "locality"], dropna=False).agg(
        assessedParcels=("asset", "size"), damagedParcels=("damaged", "sum")
    )
    table = table.merge(people, on=["event", "locality"], how="left").merge(
        per_place, on=["event", "locality"], how="left"
    )
    table = table.rename(
        columns={
            "event": "eventId",
            "name": "event",
            "uninhabitable": "uninhabitable",
            "displaced": "occupantsDisplaced",
        }
    )
    for column in ("uninhabitable", "occupantsDisplaced", "assessedParcels", "damagedParcels"):
        table[column] = table[column].fillna(0).astype(np.int64)
    # Most damaged places first: that is where help goes.
    return table.sort_values(
        ["eventId", "damagedItems", "items", "locality"], ascending=[True, False, False, True]
    )


def _by_date(counts: _Counts, keys: list[str]) -> list[dict[str, Any]]:
    if not counts.by_date:
        return []
    dates = pd.concat(counts.by_date).groupby(["date", "rank"])["n"].sum().unstack(fill_value=0)
    rows = []
    for day, row in dates.sort_index().iterrows():
        entry: dict[str, Any] = {"date": str(day)}
        for rank, key in enumerate(keys):
            entry[key] = int(row.get(rank, 0))
        entry["notRecorded"] = int(row.get(-1, 0))
        rows.append(entry)
    return rows


def _spec(register: Register, keys: list[str]) -> tuple[Field, ...]:
    """The columns after the definition's ``eventId``, ``event`` and ``locality``: one per
    level, then the totals (their labels name the register's levels)."""
    return (
        *(Field(k, level, "integer") for k, level in zip(keys, register.levels, strict=True)),
        Field("notRecorded", "Level not recorded", "integer"),
        Field("items", "Items", "integer"),
        Field("damagedItems", f"Damaged (above {register.levels[0]})", "integer"),
        Field("uninhabitable", "Uninhabitable", "integer"),
        Field("occupantsDisplaced", "Occupants displaced", "integer"),
        Field("assessedParcels", "Parcels assessed", "integer"),
        Field("damagedParcels", "Parcels damaged", "integer"),
    )


def damage_summary(
    store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
) -> Gathered:
    """Gather report 6 (see the module's docstring)."""
    event_id = params["eventId"]
    if event_id is not None and store.events.get(event_id) is None:
        raise NotFoundError(f"parameter eventId {event_id}: event {event_id} does not exist")
    register = severity_register(store, params["registerId"], report="the damage summary")
    severity = register.severity
    assert severity is not None  # severity_register returns registers that have one
    levels = register.levels
    keys = level_keys(levels)
    fields = {role: register.role(role) for role in ("inspected", "habitable", "occupants")}
    ranged = params["inspectedFrom"] is not None or params["inspectedTo"] is not None
    if ranged and fields["inspected"] is None:
        raise NotFoundError(
            f"parameters inspectedFrom/inspectedTo: register {register.id} has no "
            "inspection date (a date field with role inspected, or inspectionDate)"
        )
    chunks = store.reports.damage_item_rows(
        event_id=event_id,
        register_id=register.id,
        severity=str(severity["name"]),
        levels=levels,
        date_field=None if fields["inspected"] is None else str(fields["inspected"]["name"]),
        habitable_field=None if fields["habitable"] is None else str(fields["habitable"]["name"]),
        occupants_field=None if fields["occupants"] is None else str(fields["occupants"]["name"]),
        date_from=params["inspectedFrom"],
        date_to=params["inspectedTo"],
        within_events=within,
    )
    counts = _Counts(len(levels))

    def rows() -> Iterator[pd.DataFrame]:
        for frame in chunks:
            counts.add(frame)
        yield _table(counts, keys)

    def meta(snapshot: Snapshot) -> list[MetaEntry]:
        column = {f.key: snapshot.column(f.key).to_numpy() for f in snapshot.spec[3:]}

        def total(key: str) -> int:
            return int(np.sum(column[key])) if len(column[key]) else 0

        by_level = {level: total(key) for level, key in zip(levels, keys, strict=True)}
        by_date = _by_date(counts, keys)
        dated = [r["date"] for r in by_date if r["date"] != NO_DATE]
        return [
            MetaEntry("register", "Register", register.id, f"{register.name} ({register.id})"),
            MetaEntry.count("items", "Items (active assessments)", total("items")),
            MetaEntry(
                "byLevel",
                "Items per damage level",
                by_level,
                ", ".join(f"{level} {n:,}" for level, n in by_level.items()),
            ),
            MetaEntry.count(
                "damagedItems", f"Items damaged (above {levels[0]})", total("damagedItems")
            ),
            MetaEntry.count("notRecorded", "Items without a damage level", total("notRecorded")),
            MetaEntry.count("uninhabitable", "Uninhabitable", total("uninhabitable")),
            MetaEntry.count(
                "occupantsDisplaced", "Occupants displaced", total("occupantsDisplaced")
            ),
            MetaEntry.count("assessedParcels", "Parcels assessed", total("assessedParcels")),
            MetaEntry.count("damagedParcels", "Parcels damaged", total("damagedParcels")),
            MetaEntry.share(
                "damagedShare",
                "Share of assessed parcels damaged",
                total("damagedParcels"),
                total("assessedParcels"),
            ),
            MetaEntry.count("withoutParcel", "Items without a parcel", counts.without_asset),
            MetaEntry.count("withoutDate", "Items without an inspection date", counts.without_date),
            MetaEntry(
                BY_DATE,
                "Items per damage level by inspection date",
                by_date,
                f"{len(dated)} dates, {dated[0]} to {dated[-1]}" if dated else "no dates",
            ),
        ]

    return Gathered(
        _spec(register, keys),
        rows(),
        meta,
        charts=(
            Chart("stacked", "Items by damage level and locality", "locality", tuple(keys)),
            Chart("series", "Items by damage level over inspection date", BY_DATE, tuple(keys)),
        ),
        levels=levels,
        tables=((BY_DATE, "By inspection date"),),
    )
