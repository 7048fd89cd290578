"""`--engine local|dask` and `--scheduler ADDRESS`: where `import` and `lookup` run their
heavy stages (toolkit.engine, imported only when Dask is asked for)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from toolkit.cli.context import note, settings

F = TypeVar("F", bound=Callable[..., Any])

ENGINES = ("local", "dask")

# Mode fuzzy fits its model (EM) on the queries at hand, so on Dask it fits one per
# partition; the warning says so rather than letting the difference go unseen.
FUZZY_ON_DASK = (
    "mode fuzzy fits its model on each partition's queries with --engine dask: its "
    "probabilities, and so a few links near the threshold, can differ from --engine local"
)


def engine_options(command: F) -> F:
    """Add ``--engine`` (env TOOLKIT_ENGINE) and ``--scheduler`` (env TOOLKIT_SCHEDULER)."""
    command = click.option(
        "--scheduler",
        envvar="TOOLKIT_SCHEDULER",
        metavar="ADDRESS",
        help="With --engine dask: a running Dask scheduler (tcp://host:8786) instead of a "
        "local cluster started for the command. Env TOOLKIT_SCHEDULER.",
    )(command)
    command = click.option(
        "--engine",
        type=click.Choice(ENGINES),
        envvar="TOOLKIT_ENGINE",
        default="local",
        show_default=True,
        help="local: in this process. dask: rule, link and matching per partition on a Dask "
        "cluster; the plan and the write stay one transaction here. Env TOOLKIT_ENGINE.",
    )(command)
    return command


@contextmanager
def chosen_engine(engine: str, scheduler: str | None) -> Iterator[Any]:
    """The Dask engine for ``--engine dask`` (its cluster open while in the block), or
    None for the local engine. A cluster started here prints its dashboard's address."""
    if engine != "dask":
        if scheduler:
            raise click.UsageError("--scheduler goes with --engine dask")
        yield None
        return
    from toolkit.engine import dask_engine

    def started(dask: Any) -> None:
        if dask.dashboard_link and not settings().json:
            note(f"Dask dashboard: {dask.dashboard_link}")

    with dask_engine(scheduler, on_start=started) as dask:
        yield dask
