"""`--engine local|dask` and `--scheduler ADDRESS`: where `import` and `lookup` run their
heavy stages (toolkit.engine, imported only when Dask is asked for)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from toolkit.cli.context import note
from toolkit.names import ENGINES

F = TypeVar("F", bound=Callable[..., Any])


def is_dask(engine: str | None, scheduler: str | None) -> bool:
    """Whether the options ask for Dask: ``--engine dask``, or a scheduler without
    ``--engine`` (``--engine local`` keeps a TOOLKIT_SCHEDULER of the environment unused)."""
    return (engine or ("dask" if scheduler else "local")) == "dask"


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
        help="local (the default; dask when --scheduler is given): in this process. dask: "
        "rule, link and matching per partition on a Dask cluster, a local one started for "
        "the command unless --scheduler names one; the plan and the write stay one "
        "transaction here. Env TOOLKIT_ENGINE.",
    )(command)
    return command


@contextmanager
def chosen_engine(engine: str | None, scheduler: str | None) -> Iterator[Any]:
    """The Dask engine for ``--engine dask`` (its cluster open while in the block), or
    None for the local engine. A cluster started here prints its dashboard's address."""
    if not is_dask(engine, scheduler):
        yield None
        return
    from toolkit.engine import dask_engine

    def started(dask: Any) -> None:
        if dask.dashboard_link:
            note(f"Dask dashboard: {dask.dashboard_link}")

    with dask_engine(scheduler, on_start=started) as dask:
        yield dask
