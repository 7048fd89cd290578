"""The `toolkit` command line: a thin Click face over the library.

Each command module registers its commands on :data:`cli`; the modules are
listed in :data:`COMMAND_MODULES` and imported here. Command modules import
heavy libraries (pandas, geopandas) inside their functions so that
``toolkit --help`` stays fast.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback

import click

from toolkit import __version__
from toolkit.cli.context import JobFailed, Settings, top_level_options
from toolkit.cli.words import in_cli_words
from toolkit.errors import ToolkitError

# One module per command group keeps each command's owner obvious.
COMMAND_MODULES: tuple[str, ...] = (
    "toolkit.cli.init_cmd",
    "toolkit.cli.inspect_cmd",
    "toolkit.cli.sample_cmd",
    "toolkit.cli.lookup_cmd",
    "toolkit.cli.gazetteer_cmd",
    "toolkit.cli.import_cmd",
    "toolkit.cli.records_cmd",
    "toolkit.cli.writes_cmd",
    "toolkit.cli.media_cmd",
    "toolkit.cli.report_cmd",
    "toolkit.cli.demo_cmd",
    "toolkit.cli.ping_cmd",
    "toolkit.cli.users_cmd",
    "toolkit.cli.serve_cmd",
    "toolkit.cli.site_cmd",
)

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class UserFacingError(click.ClickException):
    """A library error as the user sees it: ``Error: <message>``, exit status 1, in the
    command's words (its options' names for the API's fields)."""

    def __init__(self, error: ToolkitError, ctx: click.Context | None = None) -> None:
        super().__init__(in_cli_words(str(error), ctx))
        # Per instance, as click reads it; click's stubs declare it a ClassVar.
        self.exit_code = error.exit_code  # type: ignore[misc]


class ToolkitCommand(click.Command):
    """A command whose library errors and failed jobs speak the command's words."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ToolkitError as exc:
            if ctx.ensure_object(Settings).verbose:
                traceback.print_exc()
            raise UserFacingError(exc, ctx) from exc
        except JobFailed as exc:
            raise JobFailed(in_cli_words(exc.message, ctx)) from exc.__cause__


class InternalError(click.ClickException):
    """An error the toolkit did not expect (a bug): one line, the traceback with -v."""

    def __init__(self, error: Exception, *, verbose: bool) -> None:
        super().__init__(
            f"an unexpected internal error occurred ({type(error).__name__}: {error}); the "
            "traceback is above: please report it"
            if verbose
            else INTERNAL_ERROR
        )


INTERNAL_ERROR = (
    "an unexpected internal error occurred; run again with -v (--verbose) for the "
    "traceback and report it."
)


class ToolkitGroup(click.Group):
    """Turns library errors into clean messages, whichever way the CLI is invoked; its
    commands and groups are of the same kind, at any depth."""

    command_class = ToolkitCommand
    group_class = type  # a group made with @group.group() is a ToolkitGroup too

    def invoke(self, ctx: click.Context) -> object:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows up here, inside the command
            return result
        except BrokenPipeError:
            # `toolkit ... | head` closed stdout: stop quietly with status 0, as Unix tools
            # do. Click's own main() would turn this into status 1, so it is caught here.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except ToolkitError as exc:
            if ctx.ensure_object(Settings).verbose:
                traceback.print_exc()
            raise UserFacingError(exc) from exc
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            # A bug: one line, or with -v (anywhere on the line) its traceback first.
            verbose = ctx.ensure_object(Settings).verbose
            if verbose:
                traceback.print_exc()
            raise InternalError(exc, verbose=verbose) from exc


@click.group(cls=ToolkitGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="toolkit")
@top_level_options
def cli() -> None:
    """Import, match and report on incident-management data, offline or against a server.

    The options below work before or after a command's name:
    `toolkit --store a.sqlite import-status` and `toolkit import-status --store a.sqlite`
    are the same command.

    \b
    Examples:
      toolkit demo
      toolkit inspect sample_data/parcels.zip
      toolkit import sample_data/damage_assessments.csv --type item \\
          --rule damage-assessments --event-id 1 --region-id 1 --dry-run
      toolkit item list --register damage-assessment --limit 5 --json
    """


for _module in COMMAND_MODULES:
    importlib.import_module(_module)


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _asks_verbose(args: list[str]) -> bool:
    """Whether the command line asks for -v/--verbose (alone or among short flags, as
    in -qv), before it is parsed: for errors raised before any command runs."""
    for arg in args:
        if arg == "--":
            break
        if arg == "--verbose" or (
            arg.startswith("-")
            and not arg.startswith("--")
            and "v" in arg[1:]
            and arg[1:].isalpha()
        ):
            return True
    return False


def main(argv: list[str] | None = None) -> None:
    """Run the CLI: library errors become ``Error: ...`` and exit 1; usage errors exit 2."""
    verbose = _asks_verbose(argv if argv is not None else sys.argv[1:])
    _configure_logging(verbose)
    try:
        # Without standalone mode Click returns the code of ctx.exit() instead of exiting.
        status = cli.main(args=argv, prog_name="toolkit", standalone_mode=False)
        sys.stdout.flush()
    except ToolkitError as exc:  # raised outside a command, e.g. while parsing options
        if verbose:
            traceback.print_exc()
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        # `toolkit ... | head` closed our stdout: stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except Exception:
        if verbose:
            raise
        click.echo(f"Error: {INTERNAL_ERROR}", err=True)
        sys.exit(1)
    sys.exit(status if isinstance(status, int) else 0)
