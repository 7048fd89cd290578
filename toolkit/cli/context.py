"""What every command shares: settings, the common output options, printing and progress.

This module (with the command modules) is the only place that prints.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from toolkit.remote.profiles import StoreProfile
    from toolkit.site import LocalSite, Site

import click

from toolkit.model.location import StoreLocation, is_postgres, parse_location
from toolkit.progress import Progress, no_progress

DEFAULT_STORE_NAME = "toolkit.sqlite"
DEFAULT_SITE = "default"

F = TypeVar("F", bound=Callable[..., Any])


class StoreParam(click.ParamType[StoreLocation, Any]):
    """``--store``: a PostgreSQL URL as given, anything else a file path (not a folder)."""

    name = "store"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> StoreLocation:
        if is_postgres(value):
            return parse_location(str(value))
        path = click.Path(dir_okay=False, path_type=Path).convert(value, param, ctx)
        return Path(path)


@dataclass
class Settings:
    """Options of the top-level group, plus the output flags any command may set."""

    store: StoreLocation = field(default_factory=lambda: Path(DEFAULT_STORE_NAME))
    site: str = DEFAULT_SITE
    site_given: str | None = None
    url: str | None = None
    profile: str | None = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    rule_paths: tuple[Path, ...] = ()
    # Values given on the command line, by attribute: the same option before and after
    # a command must agree.
    given: dict[str, Any] = field(default_factory=dict)
    # --store or TOOLKIT_STORE was given (not the default): a store profile yields to it.
    store_given: bool = False
    # The profile, when it names a store rather than a server (see apply_store_profile).
    store_profile: StoreProfile | None = None
    _profile_read: tuple[str | None, str | None] | None = None

    def apply_store_profile(self) -> None:
        """A profile naming a store (``store = ...``, not ``base_url``) selects that store
        (with the password it holds) and its site; ``--store``/``TOOLKIT_STORE`` and
        ``--site``/``TOOLKIT_SITE`` win over it. The password is kept only for the
        profile's own store. Read once per profile."""
        if self.profile is None or self.url or self._profile_read == (self.profile, self.url):
            return
        from toolkit.remote.profiles import store_profile

        self._profile_read = (self.profile, self.url)
        found = self.store_profile = store_profile(self.profile)
        if found is None:
            return
        if not self.store_given or str(self.store) == str(found.store):
            self.store = found.store
        if self.site_given is None and found.site:
            self.site = found.site

    def set(self, attribute: str, value: Any) -> None:
        """Set a global option's value (``--site``, ``--url`` and ``--store`` as used)."""
        if attribute == "site":
            self.site = value or DEFAULT_SITE
            self.site_given = value
        elif attribute == "url":
            self.url = value.rstrip("/") if value else None
        elif attribute == "store":
            self.store = parse_location(value)
        else:
            setattr(self, attribute, value)


class JobFailed(click.ClickException):
    """A job the command ran (an import, a report run) ended FAILED: after its summary on
    stdout, its reason as ``Error: ...`` on stderr and exit status 1, so a batch log that
    keeps only stderr still says why."""

    exit_code = 1


def job_reason(job: dict[str, Any]) -> str:
    """Why an import job failed, from its summary (or its status, when it has none)."""
    summary = job.get("summary") or {}
    return str(summary.get("reason") or f"the job ended {job.get('status')}")


@dataclass(frozen=True)
class _GlobalOption:
    """One option every command takes, before or after its name, with one meaning."""

    attribute: str  # the Settings attribute it sets
    decls: tuple[str, ...]
    help: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    envvar: str | None = None
    default: Any = None

    @property
    def name(self) -> str:
        return self.decls[-1]


GLOBAL_OPTIONS: tuple[_GlobalOption, ...] = (
    _GlobalOption(
        "store",
        ("--store",),
        "SQLite file of the embedded site, or a postgresql:// URL of a PostgreSQL store "
        "(password from PGPASSWORD, ~/.pgpass, a service file or a --profile) (env "
        "TOOLKIT_STORE; default ./toolkit.sqlite).",
        {"type": StoreParam(), "metavar": "PATH|URL"},
        envvar="TOOLKIT_STORE",
        default=DEFAULT_STORE_NAME,
    ),
    _GlobalOption(
        "site",
        ("--site",),
        f"Tenancy to work in: the X-Site of the API (env TOOLKIT_SITE; default "
        f"{DEFAULT_SITE!r}, or the profile's).",
        {"metavar": "NAME"},
        envvar="TOOLKIT_SITE",
    ),
    _GlobalOption(
        "url",
        ("--url",),
        "Base URL of a server of the API; without it the embedded site is used (env TOOLKIT_URL).",
        {"metavar": "URL"},
        envvar="TOOLKIT_URL",
    ),
    _GlobalOption(
        "profile",
        ("--profile",),
        "Profile of the config file (TOOLKIT_CONFIG, else ~/.config/toolkit/config.toml) "
        "naming a server (base_url) or a store (store = a postgresql:// URL), a site and "
        "the credentials (env TOOLKIT_PROFILE).",
        {"metavar": "NAME"},
        envvar="TOOLKIT_PROFILE",
    ),
    _GlobalOption(
        "rule_paths",
        ("--rules",),
        "A rule file or a folder of rule files to add to the built-in ones (repeatable; "
        "env TOOLKIT_RULES, separated by ':').",
        {"type": click.Path(exists=True, path_type=Path), "multiple": True, "metavar": "PATH"},
        envvar="TOOLKIT_RULES",
    ),
    _GlobalOption("json", ("--json",), "Print machine-readable JSON on stdout.", {"is_flag": True}),
    _GlobalOption(
        "quiet",
        ("-q", "--quiet"),
        "No progress bars or summaries on stderr.",
        {"is_flag": True},
    ),
    _GlobalOption(
        "verbose",
        ("-v", "--verbose"),
        "Debug logging, and the traceback of any error.",
        {"is_flag": True},
    ),
)


def _is_given(value: Any) -> bool:
    return value not in (None, (), False)


def _set_global(option: _GlobalOption) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of ``option``: write its value into the shared :class:`Settings`.

    On the top-level group it runs first, with the value from the command line, the
    environment or the default. On a command it only counts when given there; a value
    given both before and after the command must agree (``--rules`` adds up instead).
    """

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        current = ctx.ensure_object(Settings)
        top = ctx.parent is None
        if not top and not _is_given(value):
            return
        if option.attribute == "rule_paths":
            current.rule_paths = (*current.rule_paths, *value)
        elif option.kwargs.get("is_flag"):
            if value:
                setattr(current, option.attribute, True)
                if option.attribute == "verbose":
                    # -v after the command too: debug logging from here on.
                    logging.getLogger().setLevel(logging.DEBUG)
        else:
            earlier = current.given.get(option.attribute)
            if not top and earlier is not None and earlier != value:
                raise click.UsageError(
                    f"{option.name} is given twice, {earlier} before the command and {value} "
                    "after it; give it once",
                    ctx=ctx,
                )
            current.set(option.attribute, value)
        source = ctx.get_parameter_source(option.attribute)
        if _is_given(value) and source == click.core.ParameterSource.COMMANDLINE:
            current.given[option.attribute] = value
        if option.attribute == "store" and source in (
            click.core.ParameterSource.COMMANDLINE,
            click.core.ParameterSource.ENVIRONMENT,
        ):
            current.store_given = True

    return callback


def _add_global_options(func: F, *, top: bool) -> F:
    for option in reversed(GLOBAL_OPTIONS):
        # Only the top-level group reads the environment and has defaults: a command
        # changes a setting only when the option is given after its name.
        extra = {"envvar": option.envvar, "default": option.default} if top else {}
        func = click.option(
            *option.decls,
            option.attribute,
            expose_value=False,
            callback=_set_global(option),
            help=option.help,
            **option.kwargs,
            **extra,
        )(func)
    return func


def global_options(func: F) -> F:
    """Add the options every command shares (``--store``, ``--site``, ``--url``,
    ``--profile``, ``--rules``, ``--json``, ``--quiet``, ``--verbose``), so that each
    means the same after a command's name as before it."""
    return _add_global_options(func, top=False)


def top_level_options(func: F) -> F:
    """The global options of the top-level group, with their environment variables and
    defaults."""
    return _add_global_options(func, top=True)


# The name commands used before every global option could follow them; one decorator.
output_options = global_options


def settings() -> Settings:
    """The settings of the running command (a store profile applied)."""
    current = click.get_current_context().ensure_object(Settings)
    current.apply_store_profile()
    return current


def print_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=json_default))


def json_default(value: Any) -> Any:
    # numpy scalars and paths reach us from pandas; make them plain JSON.
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def warn(message: str) -> None:
    """``Warning: <message>`` on stderr: something done to the data that its user must
    know (curves made straight, numbers where text was expected). Shown with --json
    and --quiet too, which silence progress and summaries, not this."""
    click.echo(f"Warning: {message}", err=True)


def note(message: str) -> None:
    """A human summary line on stderr, silent under ``--quiet``."""
    if not settings().quiet:
        click.echo(message, err=True)


@contextmanager
def progress_bar() -> Iterator[Progress]:
    """A :class:`Progress` drawn with rich on stderr: one bar per stage with its count of
    the total, rate and time left. Drawn only on an interactive terminal (rich's test, so
    ``TTY_COMPATIBLE=1``/``TTY_INTERACTIVE=1`` force it and ``TERM=dumb`` does not), never
    with ``--quiet``; anywhere else the library reports into nothing."""
    console = _stderr_console()
    if settings().quiet or not console.is_interactive:
        yield no_progress
        return
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    tasks: dict[str, Any] = {}
    details: dict[str, str] = {}
    with RichProgress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=16),
        _count_column(),
        _rate_column(),
        _time_left_column(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[detail]}"),
        transient=True,
        console=console,
    ) as bar:

        def report(
            label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
        ) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total, unit=unit, detail=detail)
            # A new detail (what the stage is doing now, e.g. "900 rows by soundex") is drawn
            # at once: a step faster than rich's refresh rate would otherwise never show it.
            changed = bool(detail) and details.get(label) != detail
            details[label] = detail
            bar.update(
                tasks[label],
                completed=done,
                total=total,
                unit=unit,
                detail=detail,
                refresh=changed,
            )

        yield report


def _amount(value: float, unit: str) -> str:
    if unit == "bytes":
        from rich.filesize import decimal

        return decimal(int(value))
    return f"{value:,.0f}"


def _count_column() -> Any:
    """``done/total unit``: ``1,200/5,000 rows``, ``12.0/45.1 MB``; without a total, done."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Count(ProgressColumn):
        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "rows")
            done = _amount(task.completed, unit)
            text = done if task.total is None else f"{done}/{_amount(task.total, unit)}"
            return Text(text if unit == "bytes" else f"{text} {unit}", style="progress.download")

    return Count()


def _rate_column() -> Any:
    """How fast the stage goes (its average once finished): ``41,000 rows/s``, ``30 MB/s``."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            # A finished stage shows its average over its whole time; rich's own estimate
            # needs two steps, and a vectorised stage may make one.
            took = task.finished_time if task.finished else None
            speed = task.completed / took if took else task.speed
            if not speed:
                return Text("")
            unit = task.fields.get("unit", "rows")
            shown = _amount(speed, unit) + ("/s" if unit == "bytes" else f" {unit}/s")
            return Text(shown, style="progress.data.speed")

    return Rate()


def _time_left_column() -> Any:
    """``left 0:00:12`` while it can be estimated, nothing before or after."""
    import datetime as dt

    from rich.progress import ProgressColumn
    from rich.text import Text

    class Left(ProgressColumn):
        def render(self, task: Any) -> Text:
            left = task.time_remaining
            if task.finished or left is None:
                return Text("")
            return Text(f"left {dt.timedelta(seconds=round(left))}", style="progress.remaining")

    return Left()


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def is_remote() -> bool:
    """Whether the command works against a server (``--url``, ``TOOLKIT_URL`` or a profile
    naming a server; a profile naming a store is the embedded face on that store)."""
    current = settings()
    return bool(current.url or (current.profile and current.store_profile is None))


def embedded_only(what: str) -> None:
    """Refuse ``--url`` for an operation of the embedded site file, saying so (``Error:``,
    exit status 1) instead of quietly working on a local file."""
    if is_remote():
        from toolkit.errors import OptionError

        raise OptionError(f"{what}; the API has no route for it (run it without --url)")


def open_site(*, create: bool = False) -> Site:
    """The site the command works on: the embedded site, or a server with ``--url``.

    Only the commands that make a site pass ``create`` (``init``, ``demo``, ``import``,
    ``event create``, ``user add``); any other finds no site an error, never a new one.
    """
    import getpass

    from toolkit.remote import open_site as open_either
    from toolkit.site import LocalSite

    current = settings()
    site = open_either(
        current.store,
        current.site,
        url=current.url,
        profile=current.profile if is_remote() else None,
        remote_site=current.site_given,
        user_id=getpass.getuser(),
        create=create,
        rule_paths=current.rule_paths,
    )
    return with_geocoding_service(site) if isinstance(site, LocalSite) else site


def open_local_site(*, create: bool = False) -> LocalSite:
    """The embedded site, whatever ``--url`` says (for what only exists locally); made
    when missing only with ``create`` (see :func:`open_site`)."""
    import getpass

    from toolkit.site import LocalSite

    current = settings()
    return with_geocoding_service(
        LocalSite(
            current.store,
            current.site,
            user_id=getpass.getuser(),
            create=create,
            rule_paths=current.rule_paths,
        )
    )


def with_geocoding_service(site: LocalSite) -> LocalSite:
    """``site`` asking the geocoding service of the config file or TOOLKIT_GEOCODER (if
    any) when a lookup matches no asset and no gazetteer entry (nothing connects to it
    until a lookup needs it)."""
    from toolkit.geocoding import service_from_config

    service = service_from_config()
    if service is not None:
        site.geocoding_service = service.open()
    return site


def toolkit_invocation() -> str:
    """How to run this toolkit again from a shell, without activating its environment:
    the full path of the console script that is running, else this interpreter's full
    path with ``-m toolkit`` (as under ``python -m toolkit``). Quoted for the shell."""
    import shlex
    import shutil

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.stem == "toolkit":
        found = shutil.which(str(script))  # a bare name, as some launchers leave it
        return shlex.quote(str(Path(found or script).absolute()))
    return f"{shlex.quote(str(Path(sys.executable).absolute()))} -m toolkit"


def print_table(
    rows: list[dict[str, Any]], columns: list[str], *, title: str | None = None
) -> None:
    """Rows as an aligned table on stdout."""
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(cell_text(row.get(c)) for c in columns))
    print_renderable(table)


def cell_text(value: Any) -> str:
    """A value as text for a person: blank when missing (never Python's ``None``), lists
    and objects as JSON (``null`` inside them), everything else as ``str``."""
    if value is None:
        return ""
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


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
