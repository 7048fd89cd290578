"""`toolkit report`: the catalogue, runs, their status, and their contents as files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import (
    JobFailed,
    embedded_only,
    global_options,
    note,
    open_local_site,
    open_site,
    print_json,
    progress_bar,
    settings,
)
from toolkit.cli.files import STDIO, is_stdio, output_file, refuse_binary_on_a_terminal
from toolkit.cli.render import Columns, render
from toolkit.names import REPORT_FORMATS as FORMATS

# Formats that are not text: never written to a terminal.
BINARY_FORMATS = ("xlsx", "gpkg", "parquet")


def _use_reports(ctx: click.Context, _param: click.Parameter, value: tuple[Path, ...]) -> None:
    """Analysts' report definitions: checked now (an error names the file and the key),
    then handed on through TOOLKIT_REPORTS to the runner and any background worker."""
    if not value:
        return
    from toolkit.errors import OptionError
    from toolkit.reports import CATALOGUE
    from toolkit.reports.definitions import REPORTS_ENV, load_catalogue

    try:
        load_catalogue(list(value), CATALOGUE)
    except OptionError as exc:
        raise click.ClickException(str(exc)) from None
    os.environ[REPORTS_ENV] = os.pathsep.join(str(Path(p).resolve()) for p in value)


def reports_option(func: Any) -> Any:
    return click.option(
        "--reports",
        type=click.Path(exists=True, path_type=Path),
        multiple=True,
        expose_value=False,
        callback=_use_reports,
        envvar="TOOLKIT_REPORTS",
        help="A folder (or file) of report definitions (TOML) added to the built-in "
        "reports (repeatable; env TOOLKIT_REPORTS).",
    )(func)


def _params(pairs: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--param")
        params[key.strip()] = value
    return params


def _instance_lines(instance: dict[str, Any]) -> list[str]:
    params = ", ".join(f"{k}={v}" for k, v in (instance.get("params") or {}).items())
    lines = [
        f"Report instance {instance['id']} (report {instance['reportId']}, {instance['name']}): "
        f"{instance['status']}",
        f"  {instance['result']}",
        f"  params: {params or 'none'}",
    ]
    if instance["dateRun"]:
        lines.append(
            f"  run {instance['dateRun']}, completed {instance['dateCompleted'] or '-'}, "
            f"rows {instance['rowCount'] or '-'}, took {instance['timeTaken'] or '-'} s"
        )
    return lines


def _show(instance: dict[str, Any]) -> None:
    render(instance, lines=_instance_lines)


def _fail_if_failed(instance: dict[str, Any]) -> None:
    """A run that ended FAILED: its reason on stderr, exit status 1."""
    if instance["status"] == "FAILED":
        raise JobFailed(f"report instance {instance['id']} FAILED: {instance['result']}")


@cli.group("report")
@global_options
def report_group() -> None:
    """Run reports and fetch their contents as JSON, CSV, XLSX or HTML.

    \b
    Examples:
      toolkit report list
      toolkit report run 1 --param eventId=1 --wait
      toolkit report fetch 1 --format xlsx -o items.xlsx
    """


@report_group.command("list")
@reports_option
@global_options
def report_list() -> None:
    """List the reports: id, name, parameters (* = required) and what each shows.

    \b
    Examples:
      toolkit report list
      toolkit report list --json
    """
    with open_site() as site:
        reports = site.report_list()
    render(reports, table=Columns(["id", "name", "params", "description"], "Reports", _report_rows))


def _report_rows(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row a report, its parameters in one cell (* = required)."""
    rows = []
    for report in reports:
        params = []
        for p in report["params"]:
            kind = "|".join(p["choices"]) if p["choices"] else p["type"]
            default = f"={p['default']}" if p["default"] is not None else ""
            params.append(f"{p['key']}{'*' if p['required'] else ''} ({kind}{default})")
        rows.append({**report, "params": ", ".join(params) or "none"})
    return rows


@report_group.command("run")
@reports_option
@click.argument("report_id", type=int, required=False)
@click.option("--instance", "instance_id", type=int, help="Repeat this earlier run instead.")
@click.option(
    "--param",
    "pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A report parameter (repeatable); with --instance, overrides the earlier run's.",
)
@click.option("--wait", is_flag=True, help="Return only when the run has ended.")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="With --wait: give up waiting after this long (exit status 1; the run goes on).",
)
@global_options
def report_run(
    report_id: int | None,
    instance_id: int | None,
    pairs: tuple[str, ...],
    wait: bool,
    timeout_s: float | None,
) -> None:
    """Run report REPORT_ID (or repeat --instance ID) and print the new instance's id.

    Without --wait the run is QUEUED and a background worker executes it after this
    command returns; follow it with `toolkit report status ID`. With --wait the command
    returns when the run has ended (on a server, asking its status until then) and
    prints its final state; exit status 1 when it FAILED, or when --timeout passed
    first.

    \b
    Examples:
      toolkit report run 1 --param eventId=1 --param status=active
      toolkit report run 2 --wait --json
      toolkit --url https://staging.example.org report run 1 --param eventId=1 \\
          --wait --timeout 600
      toolkit report run --instance 3 --param dateFrom=2026-02-01 --wait
    """
    if (report_id is None) == (instance_id is None):
        raise click.UsageError("give a REPORT_ID or --instance ID (one of them)")
    if timeout_s is not None and not wait:
        raise click.UsageError("--timeout is how long --wait waits; give --wait too")
    body: dict[str, Any] = {"params": _params(pairs)}
    if report_id is not None:
        body["reportId"] = report_id
    else:
        body["reportInstanceId"] = instance_id
    from toolkit.reports import DetachedProcessExecutor, inline_executor
    from toolkit.reports.waiting import ReportWaitTimedOut, wait_for_report
    from toolkit.site import LocalSite

    with open_site() as site:
        if isinstance(site, LocalSite):  # a server runs reports its own way
            # Waited without a limit, the run happens here and now; with a limit it runs
            # in a worker of its own, so that waiting can stop.
            inline = wait and timeout_s is None
            site.report_executor = inline_executor if inline else DetachedProcessExecutor()
        queued = site.report_run(body)
        if not wait:
            render(queued, lines=lambda q: f"Report instance {q['id']}: {q['result']}")
            note(f"Follow it with: toolkit report status {queued['id']}")
            return
        with progress_bar() as progress:
            try:
                instance = wait_for_report(
                    lambda: site.report_status(queued["id"]),
                    timeout_s=timeout_s,
                    progress=progress,
                )
            except ReportWaitTimedOut as exc:
                _show(exc.instance)
                raise JobFailed(str(exc)) from exc
    _show(instance)
    _fail_if_failed(instance)


@report_group.command("status")
@reports_option
@click.argument("instance_id", type=int)
@global_options
def report_status(instance_id: int) -> None:
    """Show report instance INSTANCE_ID: QUEUED, RUNNING, COMPLETED or FAILED.

    \b
    Examples:
      toolkit report status 1
      toolkit report status 1 --json
    """
    with open_site() as site:
        _show(site.report_status(instance_id))


@report_group.command("fetch")
@reports_option
@click.argument("instance_id", type=int)
@click.option("--format", "format_", type=click.Choice(FORMATS), default="json", show_default=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write the file itself here (streamed; - for stdout).",
)
@click.option(
    "--excel",
    is_flag=True,
    help="With --format csv: CSV for Excel (UTF-8 BOM, CRLF, local times Excel reads as "
    "dates, codes like 007 and formula-looking text kept as text, no visible apostrophe).",
)
@global_options
def report_fetch(instance_id: int, format_: str, output: Path | None, excel: bool) -> None:
    """Fetch the contents of COMPLETED report instance INSTANCE_ID.

    The file itself (CSV, XLSX, HTML, a GIS layer, or the JSON contents) goes to
    -o FILE, or to stdout with -o -; a large report streams. Without -o a CSV or HTML
    goes to stdout (XLSX, GeoPackage and GeoParquet only when stdout is not a
    terminal), and JSON prints the spec's fetch object: the instance plus `contents`.
    --json always prints the fetch object (`contents` in Base64 for the file formats).

    CSV is plain RFC 4180 text for programs; --excel makes it for Excel. gpkg,
    geojson and parquet (GeoParquet) export reports whose rows are assets (impacted
    assets) with their geometry in EPSG:4326, for QGIS or ArcGIS.

    \b
    Examples:
      toolkit report fetch 3 --format xlsx -o items.xlsx
      toolkit report fetch 3 --format csv > items.csv
      toolkit report fetch 3 --format csv --excel -o items.csv
      toolkit report fetch 2 --format gpkg -o impacted.gpkg
      toolkit report fetch 3 --format csv -o - | head -5
      toolkit report fetch 3 > contents.json
    """
    if excel:
        if format_ not in ("csv", "csv-excel"):
            raise click.BadParameter(
                f"--excel is for --format csv, not {format_}", param_hint="--excel"
            )
        format_ = "csv-excel"
    if output is None and (settings().json or format_ == "json"):
        with open_site() as site:
            print_json(site.report_fetch(instance_id, format_))
        return
    target = output if output is not None else Path(STDIO)
    if is_stdio(target) and format_ in BINARY_FORMATS:
        refuse_binary_on_a_terminal(f"A report as {format_}")
    with open_site() as site, progress_bar() as progress, output_file(target) as out:
        instance = site.report_write(instance_id, format_, out, progress=progress)
    if is_stdio(target):
        note(f"Wrote report instance {instance_id} as {format_} ({instance['rowCount']} rows)")
        return
    render({**instance, "format": format_, "file": str(target)})  # the note is the human answer
    note(f"Wrote {target} ({target.stat().st_size:,} bytes, {instance['rowCount']} rows)")


@report_group.command("work", hidden=True)
@reports_option
@click.argument("instance_id", type=int)
@global_options
def report_work(instance_id: int) -> None:
    """Execute queued report instance INSTANCE_ID in this process (the background worker).

    \b
    Examples:
      toolkit report work 7
    """
    embedded_only("report work runs a queued report of the embedded site file")
    with open_local_site(create=False) as site:
        instance = site.report_work(instance_id)
    _show(instance)
    _fail_if_failed(instance)
