"""One way to print a command's answer: JSON under ``--json``, otherwise a table or lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from toolkit.cli.context import note, print_json, print_table, settings


@dataclass(frozen=True)
class Columns:
    """A table spec: which keys become columns, and how the answer becomes rows."""

    columns: Sequence[str]
    title: str | None = None
    # The answer is usually the row list; a command with a richer answer says how to get rows.
    rows: Callable[[Any], list[dict[str, Any]]] | None = None


def render(
    value: Any,
    *,
    table: Columns | None = None,
    lines: Callable[[Any], str | Iterable[str]] | None = None,
    notes: Callable[[Any], str | Iterable[str]] | None = None,
    human: Callable[[Any], None] | None = None,
) -> None:
    """Print ``value`` as JSON under ``--json``; otherwise as ``table`` and/or ``lines``.

    ``notes`` are human summary lines on stderr, printed only without ``--json`` (and
    silenced by ``--quiet``); stdout then holds only the lines and the table, in that
    order. ``human`` prints the human form itself, for answers that mix lines and tables.
    """
    if settings().json:
        print_json(value)
        return
    if notes is not None:
        for message in _as_lines(notes(value)):
            note(message)
    if lines is not None:
        for line in _as_lines(lines(value)):
            click.echo(line)
    if table is not None:
        rows = table.rows(value) if table.rows is not None else value
        print_table(rows, list(table.columns), title=table.title)
    if human is not None:
        human(value)


def _as_lines(text: str | Iterable[str]) -> Iterable[str]:
    return [text] if isinstance(text, str) else text


def counts_line(counts: dict[str, Any]) -> str:
    """A job's counts in the one order, zeros included, so a reader sees them add up to
    ``read``: ``read 3, inserted 1, updated 0, unchanged 1, skipped 0, retired 0, ...``."""
    from toolkit.names import JOB_COUNTS

    return ", ".join(f"{name} {counts[name]}" for name in JOB_COUNTS if name in counts)
