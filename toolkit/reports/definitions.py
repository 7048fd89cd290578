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

Folders come from ``toolkit report --reports DIR`` or ``TOOLKIT_REPORTS`` (several
joined with ``:``); the runner reads them when it starts, so a detached worker and
``toolkit serve`` see the same definitions.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import pandas as pd

from toolkit.errors import NotFoundError, OptionError
from toolkit.reports.catalogue import (
    FIELD_TYPES,
    Catalogue,
    Chart,
    Field,
    Gathered,
    MetaEntry,
    Param,
    ParamType,
    ReportDefinition,
)
from toolkit.store.reports import AnalystQueryError, analyst_rows

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot
    from toolkit.store import SiteStore

REPORTS_ENV = "TOOLKIT_REPORTS"
FIRST_ID = 100
PARAM_TYPES: tuple[str, ...] = get_args(ParamType)
TOP_KEYS = {"id", "name", "description", "param", "query", "column", "chart"}
CHART_KINDS = ("bars", "stacked", "map")


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


def _param(source: _File, number: int, table: Mapping[str, Any]) -> tuple[Param, bool]:
    where = f"param[{number}]."
    unknown = sorted(
        set(table) - {"key", "label", "type", "required", "choices", "default", "event"}
    )
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
    param = Param(
        key,
        source.text(table, "label", where, required=False) or key,
        kind,
        tuple(choices),
        bool(table.get("required", False)),
        table.get("default"),
    )
    return param, bool(table.get("event", False))


def _column(source: _File, number: int, table: Mapping[str, Any]) -> Field:
    where = f"column[{number}]."
    unknown = sorted(set(table) - {"key", "label", "type"})
    if unknown:
        raise source.error(f"{where}{unknown[0]}", "is not a column setting")
    key = source.text(table, "key", where)
    kind = table.get("type", "text")
    if kind not in FIELD_TYPES:
        raise source.error(f"{where}type", f"{kind!r} is not one of: {', '.join(FIELD_TYPES)}")
    return Field(key, source.text(table, "label", where, required=False) or key, kind)


def _chart(source: _File, table: Any, columns: set[str]) -> Chart | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise source.error("chart", "must be a table ([chart])")
    kind = table.get("kind", "bars")
    if kind not in CHART_KINDS:
        raise source.error("chart.kind", f"{kind!r} is not one of: {', '.join(CHART_KINDS)}")
    key = source.text(table, "key", "chart.")
    stacks = table.get("stacks", [])
    levels = table.get("levels", [])
    if not isinstance(levels, list) or not all(isinstance(v, str) for v in levels):
        raise source.error("chart.levels", "must be a list of text (none first, worst last)")
    for name in [key, *stacks]:
        if name not in columns:
            raise source.error(
                "chart.key" if name == key else "chart.stacks", f"{name!r} is not a column"
            )
    if kind == "stacked" and not stacks:
        raise source.error("chart.stacks", "stacked bars need the count columns they stack")
    palette: Literal["severity", "categorical"] = "severity" if kind == "map" else "categorical"
    return Chart(kind, source.text(table, "title", "chart."), key, tuple(stacks), palette=palette)


def load_definition(path: Path) -> ReportDefinition:
    """One definition file, checked; an OptionError names the file and the key at fault."""
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
    if not isinstance(report_id, int) or isinstance(report_id, bool) or report_id < FIRST_ID:
        raise source.error("id", f"must be a whole number from {FIRST_ID} (1-99 are built in)")
    name = source.text(data, "name", "")
    params = [_param(source, n, t) for n, t in enumerate(source.table_list(data, "param"))]
    keys = [p.key for p, _ in params]
    if len(set(keys)) != len(keys):
        raise source.error("param", "two parameters share a key")
    query = data.get("query")
    if not isinstance(query, dict):
        raise source.error("query", "needs a [query] table with its sql")
    sql = source.text(query, "sql", "query.")
    columns = tuple(_column(source, n, t) for n, t in enumerate(source.table_list(data, "column")))
    if not columns:
        raise source.error("column", "needs at least one [[column]]")
    if len({c.key for c in columns}) != len(columns):
        raise source.error("column", "two columns share a key")
    chart = _chart(source, data.get("chart"), {c.key for c in columns})
    events = [p.key for p, is_event in params if is_event]
    return ReportDefinition(
        report_id,
        name,
        source.text(data, "description", "", required=False),
        tuple(p for p, _ in params),
        _gather(path, sql, columns, tuple((data.get("chart") or {}).get("levels", ()))),
        chart,
        _scope(events),
        source=str(path),
    )


def _scope(keys: list[str]) -> Any:
    def scope(_store: SiteStore, params: Mapping[str, Any]) -> set[int | None]:
        return {int(params[k]) for k in keys if params.get(k) is not None}

    return scope


def _gather(path: Path, sql: str, columns: tuple[Field, ...], levels: tuple[str, ...]) -> Any:
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

        return Gathered(columns, rows(), meta, geometry=spatial, levels=levels)

    return gather


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
