"""Named sources: Python functions a report definition calls with ``[source] name = ...``
when its rows need more than one SQL query (streamed joins, per-chunk geometry,
metadata computed from the rows, columns read from a register).

Every built-in report is a definition file calling one of these; an analyst's file can
call them too, with its own parameters' labels and defaults, its own column labels and
charts. A source says which parameters it reads (key, type, the choices it accepts,
its default when a definition leaves one out) and the keys of the columns its rows
carry; columns it reads from the data (a register's fields, one per damage level) it
describes itself and they follow the definition's. :func:`register_source` adds one
(a site's own Python, imported before the reports are loaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkit.names import IMPORT_TYPES
from toolkit.reports import builtin
from toolkit.reports.catalogue import Gather, Param, ParamType
from toolkit.reports.damage import damage_summary


@dataclass(frozen=True)
class Source:
    """A named gather function and what a definition calling it may declare."""

    name: str
    gather: Gather
    params: tuple[Param, ...]
    # Keys of the fixed columns of its rows (a definition lists some or all of them).
    columns: tuple[str, ...]
    summary: str

    def param(self, key: str) -> Param | None:
        return next((p for p in self.params if p.key == key), None)


SOURCES: dict[str, Source] = {}


def register_source(source: Source) -> None:
    """Make ``source`` callable from definition files (a name is given once)."""
    if source.name in SOURCES and SOURCES[source.name] is not source:
        raise ValueError(f"report source {source.name!r} is already registered")
    SOURCES[source.name] = source


def _p(
    key: str,
    kind: ParamType = "text",
    choices: tuple[str, ...] = (),
    *,
    required: bool = False,
    default: Any = None,
) -> Param:
    return Param(key, key, kind, choices, required, default)


EVENT = _p("eventId", "integer")
REGISTER = _p("registerId")
INSPECTED = (_p("inspectedFrom", "date"), _p("inspectedTo", "date"))

for _source in (
    Source(
        "register_items",
        builtin.register_items,
        (
            _p("eventId", "integer", required=True),
            REGISTER,
            _p("status", "choice", builtin.STATUSES, default="all"),
            _p("dateFrom", "timestamp"),
            _p("dateTo", "timestamp"),
            *INSPECTED,
            _p("isTemplate", "boolean"),
        ),
        builtin.ITEM_KEYS,
        "the items of an event with their asset; a register's fields as columns",
    ),
    Source(
        "impacted_assets",
        builtin.impacted_assets,
        (
            EVENT,
            REGISTER,
            _p("type"),
            _p("impact", "choice", builtin.IMPACTS, default="damaged"),
            *INSPECTED,
        ),
        builtin.IMPACTED_KEYS,
        "assets with damage (or any active item): worst level, location, parcel geometry",
    ),
    Source(
        "import_jobs",
        builtin.import_jobs,
        (_p("status", "choice", builtin.JOB_STATUSES), _p("importType", "choice", IMPORT_TYPES)),
        builtin.JOB_KEYS,
        "the site's import jobs with their row counts",
    ),
    Source(
        "matching_quality",
        builtin.matching_quality,
        (_p("jobId", "integer", required=True),),
        builtin.MATCHING_KEYS,
        "how each row of an item import was linked to an asset",
    ),
    Source(
        "audit_log",
        builtin.audit_log,
        (
            EVENT,
            _p("itemId", "integer"),
            _p("importJobId", "integer"),
            _p("recordType", "choice", builtin.RECORD_TYPES),
            _p("action", "choice", builtin.AUDIT_ACTIONS),
            _p("dateFrom", "timestamp"),
            _p("dateTo", "timestamp"),
        ),
        builtin.AUDIT_KEYS,
        "audit entries with changes as before -> after",
    ),
    Source(
        "damage_summary",
        damage_summary,
        (EVENT, REGISTER, *INSPECTED),
        ("eventId", "event", "locality"),
        "items per damage level and locality, people displaced, parcels damaged",
    ),
):
    register_source(_source)
