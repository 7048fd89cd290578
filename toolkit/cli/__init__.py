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
from toolkit.cli.context import Settings, top_level_options
from toolkit.errors import ToolkitError

# One module per command group keeps each command's owner obvious.
COMMAND_MODULES: tuple[str, ...] = (
    "toolkit.cli.init_cmd",
    "toolkit.cli.inspect_cmd",
    "toolkit.cli.sample_cmd",
    "toolkit.cli.lookup_cmd",
    "toolkit.cli.import_cmd",
    "toolkit.cli.records_cmd",
    "toolkit.cli.report_cmd",
    "toolkit.cli.demo_cmd",
    "toolkit.cli.ping_cmd",
    "toolkit.cli.users_cmd",
    "toolkit.cli.serve_cmd",
)

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class UserFacingError(click.ClickException):
    """A library error as the user sees it: ``Error: <message>``, exit status 1."""

    def __init__(self, error: ToolkitError) -> None:
        super().__init__(str(error))
        # Per instance, as click reads it; click's stubs declare it a ClassVar.
        self.exit_code = error.exit_code  # type: ignore[misc]


class ToolkitGroup(click.Group):
    """Turns library errors into clean messages, whichever way the CLI is invoked."""

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


def main(argv: list[str] | None = None) -> None:
    """Run the CLI: library errors become ``Error: ...`` and exit 1; usage errors exit 2."""
    verbose = "--verbose" in (argv if argv is not None else sys.argv[1:])
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
        click.echo(
            "Error: an unexpected internal error occurred; run again with --verbose "
            "for the traceback and report it.",
            err=True,
        )
        sys.exit(1)
    sys.exit(status if isinstance(status, int) else 0)
