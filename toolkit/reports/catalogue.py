"""What a report is: its row fields, its typed parameters, how it gathers rows.

A report definition is data plus a ``gather`` function and a ``scope`` function.
Parameters arrive as JSON values or command-line text and are checked here, so
every face (CLI, server, Python) refuses the same bad values with the same message.
``scope`` names the events whose register data the parameters ask for (refused
unless the caller sees them); ``gather`` keeps only rows of the events the caller
sees, so a report without such parameters is filtered, never refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import pandas as pd

from toolkit.errors import NotFoundError, OptionError
from toolkit.query.filters import format_time, parse_bool, parse_int, parse_time

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot
    from toolkit.store import SiteStore

# ``date`` is a calendar date (a register's date field): ISO text in JSON and CSV, a
# typed date in XLSX; ``timestamp`` a moment, shown in the site's time zone.
FieldType = Literal["integer", "number", "text", "timestamp", "boolean", "date"]
FIELD_TYPES: tuple[str, ...] = get_args(FieldType)
ParamType = Literal["integer", "text", "timestamp", "boolean", "choice", "date"]


@dataclass(frozen=True)
class Field:
    """One row field of a report: the spec's ``{key, label, type}``."""

    key: str
    label: str
    type: FieldType = "text"

    def describe(self) -> dict[str, str]:
        return {"key": self.key, "label": self.label, "type": self.type}


@dataclass(frozen=True)
class Param:
    """One parameter (filter) of a report."""

    key: str
    label: str
    type: ParamType = "text"
    choices: tuple[str, ...] = ()
    required: bool = False
    default: Any = None

    def parse(self, value: Any) -> Any:
        """The typed value (timestamps as epoch milliseconds), or an OptionError."""
        name = f"parameter {self.key}"
        if self.type == "integer":
            if isinstance(value, bool):
                raise OptionError(f"{name} {value!r} is not a whole number")
            return parse_int(name, value)
        if self.type == "boolean":
            return parse_bool(name, value)
        if self.type == "timestamp":
            return parse_time(name, value)
        if self.type == "date":
            return parse_date(name, value)
        text = str(value)
        if self.type == "choice" and text not in self.choices:
            raise OptionError(f"{name} {text!r} is not one of: {', '.join(self.choices)}")
        return text

    def to_json(self, value: Any) -> Any:
        """How the value is kept in the instance's ``params``."""
        return format_time(value) if self.type == "timestamp" and value is not None else value

    def display(self, value: Any) -> str:
        if value is None:
            return "any"
        if self.type == "timestamp":
            return str(format_time(value))
        if self.type == "boolean":
            return "yes" if value else "no"
        return str(value)

    def describe(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "type": self.type,
            "choices": list(self.choices),
            "required": self.required,
            "default": self.default,
        }


def parse_date(name: str, value: Any) -> str:
    """An ISO calendar date (``2026-02-14``), kept as that text."""
    try:
        return date.fromisoformat(str(value).strip()).isoformat()
    except ValueError:
        raise OptionError(f"{name} {value!r} is not a date (YYYY-MM-DD)") from None


ChartKind = Literal["bars", "bands", "map", "stacked", "series"]


@dataclass(frozen=True)
class Chart:
    """A chart an HTML page draws: ``bars`` of counts per value of ``key``, ``bands`` of
    counts per tenth of a 0-1 number ``key`` (a distribution, every band drawn in order),
    a ``map`` of the assets (their parcels coloured by ``key``, the worst damage level,
    when the snapshot has geometry; else points), ``stacked`` bars per value of ``key``
    made of the count columns ``stacks`` (a severity scale, least first), or a ``series``
    over time of the rows of the metadata entry ``key`` (each ``{date, <stack>: n}``)."""

    kind: ChartKind
    title: str
    key: str | None = None
    stacks: tuple[str, ...] = ()
    # Severity: grey then light to dark; categorical: Okabe-Ito (unordered kinds).
    palette: Literal["severity", "categorical"] = "severity"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "key": self.key,
            "stacks": list(self.stacks),
            "palette": self.palette,
        }


def band_counts(values: np.ndarray) -> dict[str, int]:
    """How many of ``values`` (0-1, no NaN) fall in each tenth, "0.0-0.1" .. "0.9-1.0"
    (1 counts in the last band)."""
    band = np.clip(np.floor(values * 10).astype(np.int64), 0, 9)
    counts = np.bincount(band, minlength=10)
    return {f"{i / 10:.1f}-{(i + 1) / 10:.1f}": int(counts[i]) for i in range(10)}


@dataclass
class Gathered:
    """What a report's ``gather`` returns: the fields of this run (they can depend on the
    parameters), the rows as frames keyed by field key, and the data-quality metadata
    computed from the finished snapshot."""

    spec: tuple[Field, ...]
    chunks: Iterator[pd.DataFrame]
    meta: Callable[[Snapshot], list[MetaEntry]] = field(default=lambda _snapshot: [])
    # Charts of this run when they depend on the parameters (else the definition's).
    charts: tuple[Chart, ...] | None = None
    # The chunks carry ``geometry`` (WKB, EPSG:4326) beside the fields: kept in the
    # snapshot, not a field, for the map and the spatial exports.
    geometry: bool = False
    # Severity levels (none first) when the rows carry a worst level: the map's legend.
    levels: tuple[str, ...] = ()
    # Metadata entries whose value is a list of row objects: extra tables (XLSX sheets,
    # HTML tables), as (key, title).
    tables: tuple[tuple[str, str], ...] = ()
    # The HTML table ends with a row of totals of its count columns.
    totals: bool = False
    # Metadata keys shown large at the top of the HTML page.
    headline: tuple[str, ...] = ()
    # Columns kept in the snapshot for the metadata but not shown (those of a source a
    # definition leaves out).
    hidden: tuple[Field, ...] = ()


@dataclass(frozen=True)
class MetaEntry:
    """One data-quality fact: the spec's ``{key, label, value, display}``."""

    key: str
    label: str
    value: Any
    display: str

    @classmethod
    def count(cls, key: str, label: str, value: int) -> MetaEntry:
        return cls(key, label, int(value), f"{int(value):,}")

    @classmethod
    def share(cls, key: str, label: str, part: int, whole: int) -> MetaEntry:
        ratio = part / whole if whole else None
        return cls(key, label, ratio, "n/a" if ratio is None else f"{ratio:.1%}")

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "value": self.value, "display": self.display}


# (store, typed parameters, the events the caller sees or None for all) -> the rows.
Gather = Callable[["SiteStore", Mapping[str, Any], "frozenset[int] | None"], Gathered]
# (store, typed parameters) -> the events whose register data the parameters name
# (None: an event not known, e.g. an item job without one).
Scope = Callable[["SiteStore", Mapping[str, Any]], "set[int | None]"]


def no_scope(_store: SiteStore, _params: Mapping[str, Any]) -> set[int | None]:
    return set()


@dataclass(frozen=True)
class ReportDefinition:
    """A built-in report: stable integer id, name, parameters, chart, and how to gather."""

    id: int
    name: str
    description: str
    params: tuple[Param, ...]
    gather: Gather
    chart: Chart | None = None
    scope: Scope = no_scope
    # Further charts the HTML page draws after the first (the catalogue lists only that).
    more_charts: tuple[Chart, ...] = ()
    # Where the definition comes from: built-in, or the file an analyst wrote.
    source: str = "built-in"

    def parse_params(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """Typed parameters with defaults filled; unknown, missing or bad ones are errors."""
        raw = dict(raw or {})
        known = {p.key: p for p in self.params}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise OptionError(
                f"report {self.id} ({self.name}) has no parameter {', '.join(unknown)}; "
                f"its parameters: {', '.join(known) or 'none'}"
            )
        typed: dict[str, Any] = {}
        problems: list[str] = []  # every bad parameter at once, not one per attempt
        for param in self.params:
            value = raw.get(param.key)
            if value is None or value == "":
                if param.required:
                    problems.append(f"needs parameter {param.key} ({param.label})")
                typed[param.key] = param.default
                continue
            try:
                typed[param.key] = param.parse(value)
            except OptionError as exc:
                problems.append(str(exc))
        if problems:
            raise OptionError(f"report {self.id} ({self.name}): " + "; ".join(problems))
        return typed

    def params_json(self, typed: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters as the instance keeps them: only those with a value."""
        return {
            p.key: p.to_json(typed.get(p.key)) for p in self.params if typed.get(p.key) is not None
        }

    def filters(self, typed: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The contents' ``filter``: every parameter and its value in this run."""
        return [
            MetaEntry(
                p.key, p.label, p.to_json(typed.get(p.key)), p.display(typed.get(p.key))
            ).describe()
            for p in self.params
        ]

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "params": [p.describe() for p in self.params],
            "chart": None if self.chart is None else self.chart.kind,
            "source": self.source,
        }


class Catalogue:
    """The reports by id."""

    def __init__(self, definitions: tuple[ReportDefinition, ...]) -> None:
        self.by_id = {d.id: d for d in definitions}
        if len(self.by_id) != len(definitions):
            raise ValueError("two reports share an id")

    def get(self, report_id: Any) -> ReportDefinition:
        number = parse_int("reportId", report_id)
        definition = self.by_id.get(number)
        if definition is None:
            known = ", ".join(f"{d.id} ({d.name})" for d in self.by_id.values())
            raise NotFoundError(f"report {number} does not exist; reports: {known}")
        return definition

    def __iter__(self) -> Iterator[ReportDefinition]:
        return iter(self.by_id.values())
