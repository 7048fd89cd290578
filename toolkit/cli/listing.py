"""Printing collections: a table, the spec's JSON envelope, CSV or JSON lines, one page or all.

``--csv`` and ``--nl`` (one JSON object a line, as sqlite-utils and jq like it) write
the records as they come; ``--all`` pages through the whole collection (the API's
``limit``/``offset``, on either face) and writes each page before fetching the next,
so a million records never sit in memory, except for a table, which is drawn whole.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import click

from toolkit.cli.context import json_default, note, print_json, print_table, settings

F = TypeVar("F", bound=Callable[..., Any])


def list_options(func: F) -> F:
    """``--csv``, ``--nl`` and ``--all``, the same on every list command."""
    options = [
        click.option(
            "--csv",
            "as_csv",
            is_flag=True,
            help="Write the records as CSV (nested values as JSON text; no cell can become "
            "a spreadsheet formula).",
        ),
        click.option(
            "--nl",
            "as_nl",
            is_flag=True,
            help="Write one JSON object a line (newline-delimited JSON).",
        ),
        click.option(
            "--all",
            "every_page",
            is_flag=True,
            help="Every record from --offset on, fetched a page at a time (--limit is the "
            "page size, 1000 unless given); written as each page comes with --csv, --nl "
            "or --json.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def output_format(as_csv: bool, as_nl: bool) -> str:
    """``csv``, ``nl``, ``json`` or ``table``; more than one asked for is a usage error."""
    chosen = [name for name, on in (("--csv", as_csv), ("--nl", as_nl)) if on]
    if settings().json:
        chosen.append("--json")
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} each choose the output; give one")
    if as_csv:
        return "csv"
    if as_nl:
        return "nl"
    return "json" if settings().json else "table"


def page_size(limit: int) -> int:
    """With --all, the page size: --limit when given on the command line, else 1000."""
    from toolkit.query.filters import MAX_LIMIT

    source = click.get_current_context().get_parameter_source("limit")
    return limit if source == click.core.ParameterSource.COMMANDLINE else MAX_LIMIT


def show_collection(
    list_page: Callable[[Mapping[str, str]], dict[str, Any]],
    params: dict[str, str],
    *,
    columns: list[str] | Callable[[list[dict[str, Any]]], list[str]],
    title: str,
    every_page: bool,
    as_csv: bool,
    as_nl: bool,
) -> None:
    """Print a collection as asked: one page (``params``' limit and offset) or every page."""
    fmt = output_format(as_csv, as_nl)
    if every_page:
        from toolkit.site.paging import pages

        answers: Iterable[dict[str, Any]] = pages(
            list_page, params, page_size=page_size(int(params.get("limit", 100)))
        )
    else:
        answers = [list_page(params)]
    if fmt == "json" and not every_page:
        print_json(next(iter(answers)))
        return
    writer = {"csv": _write_csv, "nl": _write_nl, "json": _write_envelope, "table": _table}[fmt]
    shown, total = writer(_records(answers), columns=columns, title=title)
    if not every_page and shown < total:
        note(f"{shown:,} of {total:,} records; --all for every one")


class _Counted:
    """The records of the pages, counting them and keeping the last ``total``."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0


Records = tuple[Iterator[tuple[str, dict[str, Any]]], _Counted]


def _records(answers: Iterable[dict[str, Any]]) -> Records:
    """Each record with its key in ``models``, page after page."""
    counted = _Counted()

    def records() -> Iterator[tuple[str, dict[str, Any]]]:
        for page in answers:
            counted.total = int(page["total"])
            for key, record in page["models"].items():
                counted.count += 1
                yield str(key), record

    return records(), counted


def _write_nl(records: Records, **_: Any) -> tuple[int, int]:
    rows, counted = records
    for _key, record in rows:
        click.echo(json.dumps(record, ensure_ascii=False, default=json_default))
    return counted.count, counted.total


def _write_envelope(records: Records, **_: Any) -> tuple[int, int]:
    """The spec's envelope ``{models, count, total}``, written as the records come."""
    rows, counted = records
    click.echo('{"models": {', nl=False)
    for number, (key, record) in enumerate(rows):
        value = json.dumps(record, ensure_ascii=False, default=json_default)
        click.echo(f"{',' if number else ''}\n  {json.dumps(key)}: {value}", nl=False)
    click.echo(f'\n}}, "count": {counted.count}, "total": "{counted.total}"}}')
    return counted.count, counted.total


def _cell(value: Any) -> str:
    from toolkit.safe_output import safe_cell

    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return safe_cell(json.dumps(value, ensure_ascii=False, default=json_default))
    return safe_cell(str(value)) if isinstance(value, str) else str(value)


def _write_csv(records: Records, **_: Any) -> tuple[int, int]:
    """The records' own keys as columns, from the first record; a key that only appears
    later cannot join a header already written, and is named on stderr."""
    rows, counted = records
    writer = csv.writer(sys.stdout, lineterminator="\n")
    header: list[str] | None = None
    left_out: set[str] = set()
    for _key, record in rows:
        if header is None:
            header = list(record)
            writer.writerow(header)
        extra = set(record) - set(header) - left_out
        if extra:
            left_out |= extra
            note(f"column(s) {', '.join(sorted(extra))} appear after the header; not written")
        writer.writerow([_cell(record.get(key)) for key in header])
    return counted.count, counted.total


def _table(
    records: Records,
    *,
    columns: list[str] | Callable[[list[dict[str, Any]]], list[str]],
    title: str,
) -> tuple[int, int]:
    rows, counted = records
    everything = [record for _key, record in rows]  # a table is drawn whole
    chosen = columns(everything) if callable(columns) else columns
    print_table(everything, chosen, title=f"{title}: {counted.count} of {counted.total}")
    return counted.count, counted.total


def write_rows(rows: list[dict[str, Any]], fmt: str) -> None:
    """Rows already in hand (``import-status``) as CSV or JSON lines."""
    records = _records([{"models": dict(enumerate(rows)), "total": len(rows)}])
    (_write_csv if fmt == "csv" else _write_nl)(records)
