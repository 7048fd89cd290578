"""`toolkit demo`: the main job on the sample data."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import (
    JobFailed,
    embedded_only,
    global_options,
    job_reason,
    open_local_site,
    progress_bar,
    settings,
    toolkit_invocation,
)
from toolkit.cli.render import counts_line, render
from toolkit.model.location import PostgresURL, display_name

# What SQLite makes beside a site file in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


@cli.command("demo")
@click.option(
    "--sample-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="A folder of sample files to use instead of the sample installed with the toolkit "
    "(the same file names as sample_data/).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("toolkit-output"),
    show_default=True,
    help="Where rejected rows and other outputs are written.",
)
@global_options
def demo(sample_dir: Path | None, out_dir: Path) -> None:
    """Build a demo site from the sample data: an event, parcels, assets, users, and
    damage assessments linked to their parcels, each as an import job.

    The sample is installed with the toolkit, so this works from any folder. Safe to
    repeat: a second run finds every row unchanged. Exit status 0 when every job is
    COMPLETE; a demo that fails before its first job leaves no site file behind.

    \b
    Examples:
      toolkit demo
      toolkit --store demo.sqlite demo --out demo-output
      toolkit --json demo --quiet
    """
    from toolkit.sample.demo import check_sample_dir, packaged_sample_dir, run_demo

    embedded_only("demo builds an embedded site from the sample data")
    sample_dir = sample_dir or packaged_sample_dir()
    check_sample_dir(sample_dir)  # before the site file is made
    with (
        _site_file_kept_only_on_success(settings().store),
        open_local_site(create=True) as site,
        progress_bar() as progress,
    ):
        result = run_demo(site, sample_dir, out_dir, progress=progress)
    document = {"event": result.event, "jobs": result.jobs, "outputs": result.outputs}
    render(document, lines=_demo_lines)
    if not result.ok:
        raise JobFailed(
            "; ".join(
                f"import job {job['id']} ({(job.get('summary') or {}).get('source')}) "
                f"{job['status']}: {job_reason(job)}"
                for job in result.jobs
                if job["status"] != "COMPLETE"
            )
        )


@contextmanager
def _site_file_kept_only_on_success(store: Path | PostgresURL) -> Iterator[None]:
    """A site file this run makes is removed again when the run raises: a failed demo
    must not leave an empty ``toolkit.sqlite`` that later commands would take for a site.
    A file that was there before is left alone (its transactions keep it whole); a
    PostgreSQL store is a server's, never removed."""
    if isinstance(store, PostgresURL):
        yield
        return
    existed = store.exists()
    try:
        yield
    except BaseException:
        if not existed:
            for path in (store, *(store.with_name(store.name + s) for s in SQLITE_SIDE_FILES)):
                path.unlink(missing_ok=True)
        raise


def _demo_lines(document: dict[str, Any]) -> list[str]:
    """The demo's event, each job's counts, the outputs and what to try next."""
    lines: list[str] = []
    event = document["event"]
    lines.append(f"Demo site {settings().site!r}: event {event['id']} {event['name']!r}")
    for job in document["jobs"]:
        summary = job.get("summary") or {}
        counts = summary.get("counts", {})
        lines.append(
            f"  job {job['id']} {job['status']:<8} {summary.get('source')}: " + counts_line(counts)
        )
        if summary.get("linking"):
            linking = summary["linking"]
            lines.append(
                "      assets linked by " + ", ".join(f"{k} {v}" for k, v in linking.items())
            )
        if summary.get("reason"):
            lines.append(f"      {summary['reason']}")
    lines.append("Outputs:")
    for label, path in document["outputs"].items():
        lines.append(f"  {label}: {path}")
    # Whole commands that run as printed, with or without the environment activated.
    toolkit = f"{toolkit_invocation()} --store {shlex.quote(display_name(settings().store))}"
    lines.append(
        f"Next: {toolkit} item list --register damage-assessment --limit 5\n"
        f"      {toolkit} asset list --impacted --limit 5"
    )
    return lines
