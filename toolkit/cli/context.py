"""What every command shares: settings, the common output options, printing and progress.

This module (with the command modules) is the only place that prints.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from toolkit.site import LocalSite, Site

import click

from toolkit.progress import Progress, no_progress

DEFAULT_STORE_NAME = "toolkit.sqlite"
DEFAULT_SITE = "default"

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Settings:
    """Options of the top-level group, plus the output flags any command may set."""

    store: Path = field(default_factory=lambda: Path(DEFAULT_STORE_NAME))
    site: str = DEFAULT_SITE
    site_given: str | None = None
    url: str | None = None
    profile: str | None = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    rule_paths: tuple[Path, ...] = ()


class JobFailed(click.ClickException):
    """A job the command ran (an import, a report run) ended FAILED: after its summary on
    stdout, its reason as ``Error: ...`` on stderr and exit status 1, so a batch log that
    keeps only stderr still says why."""

    exit_code = 1


def job_reason(job: dict[str, Any]) -> str:
    """Why an import job failed, from its summary (or its status, when it has none)."""
    summary = job.get("summary") or {}
    return str(summary.get("reason") or f"the job ended {job.get('status')}")


def _set_flag(name: str) -> Callable[[click.Context, click.Parameter, bool], bool]:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        if value:
            setattr(ctx.ensure_object(Settings), name, True)
        return value

    return callback


def output_options(func: F) -> F:
    """Add ``--json``, ``--quiet`` and ``--verbose``; the same meaning before or after a command."""
    options = [
        click.option(
            "--json",
            "json_output",
            is_flag=True,
            expose_value=False,
            callback=_set_flag("json"),
            help="Print machine-readable JSON on stdout.",
        ),
        click.option(
            "-q",
            "--quiet",
            is_flag=True,
            expose_value=False,
            callback=_set_flag("quiet"),
            help="No progress bars or summaries on stderr.",
        ),
        click.option(
            "-v",
            "--verbose",
            is_flag=True,
            expose_value=False,
            callback=_set_flag("verbose"),
            help="Debug logging, and the traceback of any error.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def settings() -> Settings:
    """The settings of the running command."""
    return click.get_current_context().ensure_object(Settings)


def print_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=_json_default))


def _json_default(value: Any) -> Any:
    # numpy scalars and paths reach us from pandas; make them plain JSON.
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def note(message: str) -> None:
    """A human summary line on stderr, silent under ``--quiet``."""
    if not settings().quiet:
        click.echo(message, err=True)


@contextmanager
def progress_bar() -> Iterator[Progress]:
    """A :class:`Progress` drawn with rich on a terminal; silent when not a terminal or quiet."""
    if settings().quiet or not sys.stderr.isatty():
        yield no_progress
        return

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as RichProgress

    tasks: dict[str, Any] = {}
    with RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=_stderr_console(),
    ) as bar:

        def report(label: str, done: int, total: int | None) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done, total=total)

        yield report


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def is_remote() -> bool:
    """Whether the command works against a server (``--url``, ``TOOLKIT_URL`` or a profile)."""
    current = settings()
    return bool(current.url or current.profile)


def open_site(*, create: bool = False) -> Site:
    """The site the command works on: the embedded site, or a server with ``--url``.

    Only the commands that make a site pass ``create`` (``init``, ``demo``, ``import``,
    ``event create``, ``user add``); any other finds no site an error, never a new one.
    """
    import getpass

    from toolkit.remote import open_site as open_either

    current = settings()
    return open_either(
        current.store,
        current.site,
        url=current.url,
        profile=current.profile,
        remote_site=current.site_given,
        user_id=getpass.getuser(),
        create=create,
        rule_paths=current.rule_paths,
    )


def open_local_site(*, create: bool = False) -> LocalSite:
    """The embedded site, whatever ``--url`` says (for what only exists locally); made
    when missing only with ``create`` (see :func:`open_site`)."""
    import getpass

    from toolkit.site import LocalSite

    current = settings()
    return LocalSite(
        current.store,
        current.site,
        user_id=getpass.getuser(),
        create=create,
        rule_paths=current.rule_paths,
    )


def print_table(
    rows: list[dict[str, Any]], columns: list[str], *, title: str | None = None
) -> None:
    """Rows as an aligned table on stdout."""
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    print_renderable(table)


def print_renderable(renderable: Any) -> None:
    """Render with rich, print with click.

    rich would turn a closed pipe into exit status 1; printed with click, it reaches the
    command group, which ends quietly. Off a terminal the width is generous, so a pager
    or a file gets whole rows.
    """
    import io
    import shutil

    from rich.console import Console

    width = shutil.get_terminal_size((250, 24)).columns if sys.stdout.isatty() else 250
    buffer = io.StringIO()
    Console(file=buffer, width=width, soft_wrap=False, force_terminal=sys.stdout.isatty()).print(
        renderable
    )
    click.echo(buffer.getvalue(), nl=False)
