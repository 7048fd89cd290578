"""Analyst-defined reports: a report as a declarative TOML file, loaded from a folder.

A definition names its id (100 or more; 1-99 are the built-in reports'), name,
description, typed parameters, a read-only SQL query over the site's views (see
:data:`toolkit.store.reports.ANALYST_VIEWS`: ``events``, ``registers``, ``assets``,
``items``, ``audit``, ``jobs``, each only this site's rows and, for a caller limited by
duty, only the events it sees), the columns it shows, and optionally a chart::

    id = 101
    name = "Damage by street"
    description = "Assessed items per street and damage level"

    [[param]]
    key = "eventId"
    label = "Event"
    type = "integer"          # integer, text, timestamp, boolean, choice, date
    required = true
    event = true              # names an event: the run needs duty in it

    [query]
    sql = '''
    SELECT json_extract(a.extraInfo, '$.street') AS street, count(*) AS items
    FROM items i JOIN assets a ON a.id = i.assetId
    WHERE i.eventId = :eventId AND i.status > 0 GROUP BY 1 ORDER BY 2 DESC
    '''

    [[column]]
    key = "street"
    label = "Street"          # type: text (default), integer, number, boolean, timestamp, date

    [[column]]
    key = "items"
    label = "Items"
    type = "integer"

    [chart]
    kind = "bars"             # bars (counts per value of key) or stacked (key + stacks)
    title = "Items per street"
    key = "street"

Parameters are bound by name (``:eventId``; one not given is NULL); timestamps are
epoch milliseconds, dates ISO text. A query that returns a ``geometry`` column (an
asset's, WKB) makes the report's rows spatial: a map and the GIS exports. Every problem
is an error naming the file and the key.

Instead of ``[query]``, a definition can call a named Python source
(:mod:`toolkit.reports.sources`), as every built-in report does
(``toolkit/reports/defined/*.toml``, loaded by this same code)::

    [source]
    name = "impacted_assets"  # register_items, impacted_assets, import_jobs,
                              # matching_quality, audit_log, damage_summary

Its parameters are a choice of those the source reads (same key and type; choices a
subset; those left out take the source's default), its columns a choice of the
source's in any order and with any label (a column without a label keeps the
source's, and without any columns those of the built-in report calling the source);
columns the source reads from the data (a register's fields) follow. The charts are
the definition's unless the source draws from the data (register_items: items per
damage level when the register has one; damage_summary: stacked levels and a series
over inspection date). Also:

    scope = "event"            # in a [[param]]: names an event ("event = true"), an
                               # item or an import job ("item", "job"): the run needs
                               # duty in its event(s)
    [[chart]]                  # several charts: the first is the catalogue's; kinds
    kind = "bands"             # bars, stacked, map, bands (tenths of a 0-1 column),
    palette = "categorical"    # series; palette severity or categorical
    headline = ["items"]       # metadata keys shown large at the top of the page
    totals = true              # the HTML table ends with a row of totals

Folders come from ``toolkit report --reports DIR`` or ``TOOLKIT_REPORTS`` (several
joined with ``:``); the runner reads them when it starts, so a detached worker and
``toolkit serve`` see the same definitions.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import pandas as pd

from toolkit.errors import NotFoundError, OptionError
from toolkit.model.visibility import job_events
from toolkit.reports.catalogue import (
    FIELD_TYPES,
    Catalogue,
    Chart,
    ChartKind,
    Field,
    Gathered,
    MetaEntry,
    Param,
    ParamType,
    ReportDefinition,
)
from toolkit.reports.sources import SOURCES, Source
from toolkit.store.reports import AnalystQueryError, analyst_rows

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot
    from toolkit.store import SiteStore

REPORTS_ENV = "TOOLKIT_REPORTS"
FIRST_ID = 100
PARAM_TYPES: tuple[str, ...] = get_args(ParamType)
TOP_KEYS = {
    "id",
    "name",
    "description",
    "param",
    "query",
    "source",
    "column",
    "chart",
    "headline",
    "totals",
}
CHART_KINDS: tuple[str, ...] = get_args(ChartKind)
PALETTES = ("severity", "categorical")
# What a parameter with a scope names: its event(s) need the caller's duty.
SCOPES = ("event", "item", "job")
BUILT_IN = "built-in"


class _File:
    """Errors of one definition file, each naming it and the key at fault."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, key: str, problem: str) -> OptionError:
        return OptionError(f"{self.path}: {key}: {problem}")

    def text(self, table: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
        value = table.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value.strip()):
            raise self.error(f"{where}{key}", "needs text")
        return value

    def table_list(self, data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(key, f"must be a list of tables ([[{key}]])")
        return value


def _param(source: _File, number: int, table: Mapping[str, Any]) -> tuple[Param, str | None]:
    """A parameter and what it names for the run's scope (an event, item or job)."""
    where = f"param[{number}]."
    settings = {"key", "label", "type", "required", "choices", "default", "event", "scope"}
    unknown = sorted(set(table) - settings)
    if unknown:
        raise source.error(f"{where}{unknown[0]}", "is not a parameter setting")
    key = source.text(table, "key", where)
    if not key.isidentifier():
        raise source.error(f"{where}key", f"{key!r} is not a name (letters, digits, _)")
    kind = table.get("type", "text")
    if kind not in PARAM_TYPES:
        raise source.error(f"{where}type", f"{kind!r} is not one of: {', '.join(PARAM_TYPES)}")
    choices = table.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise source.error(f"{where}choices", "must be a list of text")
    if kind == "choice" and not choices:
        raise source.error(f"{where}choices", "a choice parameter needs its choices")
    scope = table.get("scope", "event" if table.get("event") is True else None)
    if scope is not None and scope not in SCOPES:
        raise source.error(f"{where}scope", f"{scope!r} is not one of: {', '.join(SCOPES)}")
    if scope is not None and kind != "integer":
        raise source.error(f"{where}scope", f"names an {scope} by its id: needs type integer")
    param = Param(
        key,
        source.text(table, "label", where, required=False) or key,
        kind,
        tuple(choices),
        bool(table.get("required", False)),
        table.get("default"),
    )
    return param, scope


def _column(source: _File, number: int, table: Mapping[str, Any]) -> tuple[Field, bool]:
    """A column (without a label, "": see :func:`_inherit`) and whether it has a type."""
    where = f"column[{number}]."
    unknown = sorted(set(table) - {"key", "label", "type"})
    if unknown:
        raise source.error(f"{where}{unknown[0]}", "is not a column setting")
    key = source.text(table, "key", where)
    kind = table.get("type", "text")
    if kind not in FIELD_TYPES:
        raise source.error(f"{where}type", f"{kind!r} is not one of: {', '.join(FIELD_TYPES)}")
    return Field(key, source.text(table, "label", where, required=False), kind), "type" in table


# The columns of each source as its built-in report labels them: a definition calling a
# source inherits a label and type it leaves out, and all of them when it lists none.
_SOURCE_COLUMNS: dict[str, dict[str, Field]] = {}


def _inherit(called: Source, columns: list[tuple[Field, bool]]) -> tuple[Field, ...]:
    known = _SOURCE_COLUMNS.get(called.name, {})
    if not columns:
        return tuple(known.values())
    return tuple(
        Field(
            c.key,
            c.label or (known[c.key].label if c.key in known else ""),
            c.type if typed or c.key not in known else known[c.key].type,
        )
        for c, typed in columns
    )


def _charts(source: _File, value: Any, columns: set[str], *, declared: bool) -> tuple[Chart, ...]:
    """``[chart]`` or ``[[chart]]``. ``declared`` False (a source's): the stacks are not
    checked here and may be left to the source."""
    if value is None:
        return ()
    tables = value if isinstance(value, list) else [value]
    if not all(isinstance(t, dict) for t in tables):
        raise source.error("chart", "must be a table ([chart]) or tables ([[chart]])")
    return tuple(
        _chart(
            source, f"chart[{n}]." if isinstance(value, list) else "chart.", t, columns, declared
        )
        for n, t in enumerate(tables)
    )


def _chart(
    source: _File, where: str, table: Mapping[str, Any], columns: set[str], declared: bool
) -> Chart:
    unknown = sorted(set(table) - {"kind", "title", "key", "stacks", "levels", "palette"})
    if unknown:
        raise source.error(f"{where}{unknown[0]}", "is not a chart setting")
    kind = table.get("kind", "bars")
    if kind not in CHART_KINDS:
        raise source.error(f"{where}kind", f"{kind!r} is not one of: {', '.join(CHART_KINDS)}")
    key = source.text(table, "key", where)
    stacks = table.get("stacks", [])
    if not isinstance(stacks, list) or not all(isinstance(v, str) for v in stacks):
        raise source.error(f"{where}stacks", "must be a list of column keys")
    levels = table.get("levels", [])
    if not isinstance(levels, list) or not all(isinstance(v, str) for v in levels):
        raise source.error(f"{where}levels", "must be a list of text (none first, worst last)")
    # A series reads metadata rows; a source's stacks can be columns it reads from the
    # data (one per damage level), known only when it runs.
    checked = ([] if kind == "series" else [key]) + (stacks if declared else [])
    for name in checked:
        if name not in columns:
            raise source.error(
                f"{where}key" if name == key else f"{where}stacks", f"{name!r} is not a column"
            )
    if kind == "stacked" and not stacks and declared:
        raise source.error(f"{where}stacks", "stacked bars need the count columns they stack")
    palette = table.get("palette", "severity" if kind == "map" else "categorical")
    if palette not in PALETTES:
        raise source.error(f"{where}palette", f"{palette!r} is not one of: {', '.join(PALETTES)}")
    return Chart(kind, source.text(table, "title", where), key, tuple(stacks), palette=palette)


def _call(source: _File, table: Any) -> Source:
    if not isinstance(table, dict):
        raise source.error("source", "must be a table ([source]) with the source's name")
    unknown = sorted(set(table) - {"name"})
    if unknown:
        raise source.error(f"source.{unknown[0]}", "is not a source setting; settings: name")
    name = source.text(table, "name", "source.")
    if name not in SOURCES:
        raise source.error(
            "source.name", f"{name!r} is not a source; sources: {', '.join(SOURCES)}"
        )
    return SOURCES[name]


def _check_params(source: _File, called: Source, params: list[tuple[Param, str | None]]) -> None:
    """Each parameter is one the source reads, of its type and choices; the source's
    required ones are declared required."""
    for number, (param, _scope) in enumerate(params):
        where = f"param[{number}]."
        reads = called.param(param.key)
        if reads is None:
            raise source.error(
                f"{where}key",
                f"source {called.name} reads no parameter {param.key!r}; it reads: "
                + ", ".join(p.key for p in called.params),
            )
        if param.type != reads.type:
            raise source.error(
                f"{where}type", f"source {called.name} reads {param.key} as {reads.type}"
            )
        extra = [c for c in param.choices if reads.choices and c not in reads.choices]
        if extra:
            raise source.error(
                f"{where}choices",
                f"{extra[0]!r} is not one source {called.name} knows: {', '.join(reads.choices)}",
            )
    declared = {p.key: p for p, _ in params}
    for reads in called.params:
        if reads.required and not (reads.key in declared and declared[reads.key].required):
            raise source.error(
                "param",
                f"source {called.name} needs parameter {reads.key!r} ({reads.type}, required)",
            )


def load_definition(path: Path, *, built_in: bool = False) -> ReportDefinition:
    """One definition file, checked; an OptionError names the file and the key at fault.
    ``built_in``: one of the toolkit's own (ids 1-99, listed as built-in)."""
    source = _File(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(f"{path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise OptionError(f"{path}: not TOML: {exc}") from None
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise source.error(unknown[0], f"is not a setting; settings: {', '.join(sorted(TOP_KEYS))}")
    report_id = data.get("id")
    low, high = (1, FIRST_ID - 1) if built_in else (FIRST_ID, None)
    if (
        not isinstance(report_id, int)
        or isinstance(report_id, bool)
        or report_id < low
        or (high is not None and report_id > high)
    ):
        raise source.error(
            "id",
            f"must be a whole number from {low} to {high}"
            if high
            else f"must be a whole number from {FIRST_ID} (1-99 are built in)",
        )
    name = source.text(data, "name", "")
    params = [_param(source, n, t) for n, t in enumerate(source.table_list(data, "param"))]
    keys = [p.key for p, _ in params]
    if len(set(keys)) != len(keys):
        raise source.error("param", "two parameters share a key")
    declared = [_column(source, n, t) for n, t in enumerate(source.table_list(data, "column"))]
    columns = tuple(c for c, _ in declared)
    if len({c.key for c in columns}) != len(columns):
        raise source.error("column", "two columns share a key")
    headline = data.get("headline")
    if headline is not None and (
        not isinstance(headline, list) or not all(isinstance(k, str) for k in headline)
    ):
        raise source.error("headline", "must be a list of metadata keys")
    totals = data.get("totals")
    if totals is not None and not isinstance(totals, bool):
        raise source.error("totals", "must be true or false")
    page = _Page(None if headline is None else tuple(headline), totals)
    if ("query" in data) == ("source" in data):
        raise source.error("query", "needs a [query] table with its sql, or a [source] (not both)")
    if "source" in data:
        called = _call(source, data["source"])
        _check_params(source, called, params)
        columns = _inherit(called, declared)
        if built_in:
            _SOURCE_COLUMNS.setdefault(called.name, {c.key: c for c in columns})
        for number, column in enumerate(columns):
            if column.key not in called.columns:
                raise source.error(
                    f"column[{number}].key",
                    f"{column.key!r} is not a column of source {called.name}; it gives: "
                    + ", ".join(called.columns),
                )
        known = {c.key for c in columns} | set(called.columns)
        charts = _charts(source, data.get("chart"), known, declared=False)
        gather = _source_gather(path, called, columns, page)
    else:
        query = data["query"]
        if not isinstance(query, dict):
            raise source.error("query", "needs a [query] table with its sql")
        sql = source.text(query, "sql", "query.")
        if not columns:
            raise source.error("column", "needs at least one [[column]]")
        columns = tuple(Field(c.key, c.label or c.key, c.type) for c in columns)
        charts = _charts(source, data.get("chart"), {c.key for c in columns}, declared=True)
        levels = next((tuple(t.get("levels", ())) for t in _chart_tables(data) if t), ())
        gather = _gather(path, sql, columns, levels, page)
    return ReportDefinition(
        report_id,
        name,
        source.text(data, "description", "", required=False),
        tuple(p for p, _ in params),
        gather,
        charts[0] if charts else None,
        _scope([(p.key, scope) for p, scope in params if scope is not None]),
        more_charts=charts[1:],
        source=BUILT_IN if built_in else str(path),
    )


def _chart_tables(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    value = data.get("chart")
    return [] if value is None else value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class _Page:
    """How the page shows the rows when the definition says (else the source's way)."""

    headline: tuple[str, ...] | None
    totals: bool | None

    def apply(self, gathered: Gathered) -> Gathered:
        if self.headline is not None:
            gathered.headline = self.headline
        if self.totals is not None:
            gathered.totals = self.totals
        return gathered


def _scope(named: list[tuple[str, str]]) -> Any:
    """The events the parameters name: an event's id, an item's event, an import job's."""

    def scope(store: SiteStore, params: Mapping[str, Any]) -> set[int | None]:
        events: set[int | None] = set()
        for key, kind in named:
            value = params.get(key)
            if value is None:
                continue
            if kind == "event":
                events.add(int(value))
            elif kind == "item":
                item = store.items.get(int(value))
                if item is not None:
                    events.add(item["event_id"])
            else:
                job = store.jobs.get(int(value))
                if job is not None:
                    events |= job_events(dict(zip(job.keys(), job, strict=True)))
        return events

    return scope


def _source_gather(path: Path, called: Source, columns: tuple[Field, ...], page: _Page) -> Any:
    """Call the source with every parameter it reads (defaults for those not declared);
    the columns are the definition's (labelled as it says, else as the source does)
    followed by those the source reads from the data."""

    def gather(
        store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
    ) -> Gathered:
        full = {p.key: p.default for p in called.params} | dict(params)
        gathered = called.gather(store, full, within)
        own = {f.key: f for f in gathered.spec}
        listed = tuple(
            Field(c.key, c.label or (own[c.key].label if c.key in own else c.key), c.type)
            for c in columns
        )
        shown = {c.key for c in columns}
        gathered.spec = listed + tuple(f for f in gathered.spec if f.key not in shown)
        # The source's metadata may read columns the definition leaves out: kept unshown.
        known = _SOURCE_COLUMNS.get(called.name, {})
        gathered.hidden = tuple(
            known.get(key, Field(key, key)) for key in called.columns if key not in shown
        )
        chunks = gathered.chunks

        def checked() -> Iterator[pd.DataFrame]:
            for frame in chunks:
                missing = [c.key for c in listed if c.key not in frame.columns]
                if missing:
                    raise NotFoundError(
                        f"{path}: column.key {missing[0]!r} is not a column of source "
                        f"{called.name}'s rows; they carry: {', '.join(map(str, frame.columns))}"
                    )
                yield frame

        gathered.chunks = checked()
        return page.apply(gathered)

    return gather


def _gather(
    path: Path, sql: str, columns: tuple[Field, ...], levels: tuple[str, ...], page: _Page
) -> Any:
    def gather(
        store: SiteStore, params: Mapping[str, Any], within: frozenset[int] | None
    ) -> Gathered:
        def checked() -> Iterator[pd.DataFrame]:
            rows = analyst_rows(store.db, store.site_id, sql, dict(params), within)
            try:
                for frame in rows:
                    missing = [c.key for c in columns if c.key not in frame.columns]
                    if missing:
                        raise NotFoundError(
                            f"{path}: column.key {missing[0]!r} is not a column of the "
                            f"query's result; it returns: {', '.join(map(str, frame.columns))}"
                        )
                    yield frame
            except AnalystQueryError as exc:
                raise OptionError(f"{path}: query.sql: {exc}") from None

        # The first chunk says whether the rows carry geometry (before the snapshot is made).
        chunks = checked()
        first = next(chunks, None)
        spatial = first is not None and "geometry" in first.columns

        def rows() -> Iterator[pd.DataFrame]:
            if first is not None:
                yield first
            yield from chunks

        def meta(snapshot: Snapshot) -> list[MetaEntry]:
            return [MetaEntry("definition", "Defined in", str(path), path.name)]

        return page.apply(Gathered(columns, rows(), meta, geometry=spatial, levels=levels))

    return gather


def load_built_in() -> Catalogue:
    """The toolkit's own reports: the definition files shipped in ``defined/``."""
    folder = Path(__file__).with_name("defined")
    loaded = [load_definition(p, built_in=True) for p in folder.glob("*.toml")]
    return Catalogue(tuple(sorted(loaded, key=lambda d: d.id)))


CATALOGUE = load_built_in()


def load_folder(folder: Path) -> list[ReportDefinition]:
    if folder.is_file():
        return [load_definition(folder)]
    if not folder.is_dir():
        raise OptionError(f"{folder}: no such folder of report definitions")
    return [load_definition(p) for p in sorted(folder.glob("*.toml"))]


def load_catalogue(paths: list[Path], builtin: Catalogue) -> Catalogue:
    """The built-in reports and those defined in ``paths`` (folders or files)."""
    definitions = list(builtin)
    taken = {d.id: d.source for d in definitions}
    for path in paths:
        for definition in load_folder(path):
            if definition.id in taken:
                raise OptionError(
                    f"{definition.source}: id: {definition.id} is already report "
                    f"{definition.id} of {taken[definition.id]}"
                )
            taken[definition.id] = definition.source
            definitions.append(definition)
    return Catalogue(tuple(definitions))


_cache: dict[tuple[tuple[str, float], ...], Catalogue] = {}


def active_catalogue(builtin: Catalogue, environ: Mapping[str, str] | None = None) -> Catalogue:
    """The catalogue of this process: built in plus ``TOOLKIT_REPORTS`` (read again when a
    file changes)."""
    env = os.environ if environ is None else environ
    paths = [Path(p) for p in env.get(REPORTS_ENV, "").split(os.pathsep) if p.strip()]
    if not paths:
        return builtin
    files = sorted(f for p in paths for f in ([p] if p.is_file() else sorted(p.glob("*.toml"))))
    stamp = tuple((str(f), f.stat().st_mtime) for f in files) + tuple((str(p), 0.0) for p in paths)
    if stamp not in _cache:
        _cache.clear()
        _cache[stamp] = load_catalogue(paths, builtin)
    return _cache[stamp]
