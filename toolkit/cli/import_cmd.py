"""`toolkit import`, `toolkit import-status` and `toolkit rules`: the data officer's main job."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from toolkit.cli import cli
from toolkit.cli.context import (
    JobFailed,
    Settings,
    global_options,
    is_remote,
    note,
    open_local_site,
    open_site,
    print_table,
    progress_bar,
    settings,
    warn,
)
from toolkit.cli.files import input_file, source_options
from toolkit.cli.listing import output_format, write_rows
from toolkit.cli.render import Columns, counts_line, render
from toolkit.cli.words import in_cli_words
from toolkit.errors import OptionError
from toolkit.importing.reject_limit import RejectLimit
from toolkit.names import IMPORT_TYPES, JOB_COUNTS, OVERWRITE_RULES

if TYPE_CHECKING:
    from toolkit.site.protocol import Delivery


def complete_rule_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Shell completion of a rule's name: the built-in rules and those of --rules."""
    from click.shell_completion import CompletionItem

    from toolkit.importing.rules import available_rules

    paths = ctx.ensure_object(Settings).rule_paths
    return [
        CompletionItem(name, help=rule.description)
        for name, rule in sorted(available_rules(paths).items())
        if name.startswith(incomplete)
    ]


class RejectLimitType(click.ParamType[RejectLimit, Any]):
    """``--max-rejects N`` or ``N%``; anything else is a usage error."""

    name = "N|N%"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> RejectLimit:
        if isinstance(value, RejectLimit):
            return value
        try:
            return RejectLimit.parse(value, name="")
        except OptionError as exc:
            self.fail(str(exc).strip(), param, ctx)


def _summary_lines(job: dict[str, Any]) -> list[str]:
    summary = job.get("summary") or {}
    params = job.get("params") or {}
    counts = summary.get("counts", {})
    # A job recorded before summaries were kept from the start has only its own fields.
    rule = summary.get("importRule") or job.get("importRule")
    import_type = summary.get("importType") or job.get("importType")
    overwrite = summary.get("overwriteRule") or params.get("overwriteRule") or "the rule's"
    matching = summary.get("matchingId") or params.get("matchingId") or "the rule's"
    lines = [
        f"Import job {job['id']}: {job['status']}"
        + (" (dry run, nothing written)" if summary.get("dryRun") else ""),
        f"  rule {rule} ({import_type}), overwrite rule {overwrite}, matching on {matching}",
    ]
    if summary.get("source") or params.get("source"):
        lines.append(f"  source: {summary.get('source') or params.get('source')}")
    if summary.get("reason"):
        lines.append(f"  reason: {in_cli_words(summary['reason'])}")
    if counts:
        lines.append("  " + counts_line(counts))
    if summary.get("linking"):
        linking = summary["linking"]
        lines.append("  assets: " + ", ".join(f"{k} {v}" for k, v in linking.items()))
    for warning in summary.get("warnings", []):
        lines.append(f"  warning: {warning}")
    for note_text in summary.get("notes", []):
        lines.append(f"  note: {in_cli_words(note_text)}")
    errors = summary.get("errors", [])
    if errors:
        lines.append(f"  first {len(errors)} of {summary.get('errorCount', len(errors))} problems:")
        for error in errors:
            column = f" {error['column']}" if error.get("column") else ""
            value = f" {error['value']!r}" if error.get("value") is not None else ""
            lines.append(f"    row {error['row']}{column}{value}: {error['reason']}")
    return lines


@cli.command("import")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option(
    "--type",
    "import_type",
    type=click.Choice(IMPORT_TYPES),
    required=True,
    help="What the file holds (the spec's importType).",
)
@click.option(
    "--rule",
    "import_rule",
    required=True,
    shell_complete=complete_rule_names,
    help="Import rule by name (see `toolkit rules list`) or a rule file (.py).",
)
@click.option(
    "--matching-id",
    help="Field that matches existing records, by its name in the rule or the file's "
    "heading for it (default: the rule's).",
)
@click.option(
    "--overwrite-rule",
    type=click.Choice(OVERWRITE_RULES),
    help="What to do with matches and non-matches (default: the rule's).",
)
@click.option("--event-id", type=int, help="Event the items belong to (item imports).")
@click.option("--region-id", type=int, help="Region the items belong to (item imports).")
@click.option("--dry-run", is_flag=True, help="Do everything but write; report what would happen.")
@click.option(
    "--server-dry-run",
    is_flag=True,
    help="With --url: send every chunk with the API's dryRun=1, so the server checks, "
    "links and plans it and writes nothing; prints the counts a real push would give.",
)
@click.option(
    "--rollback-on-error", is_flag=True, help="Write nothing at all if any row is rejected."
)
@click.option(
    "--max-rejects",
    type=RejectLimitType(),
    help="Fail the job, writing nothing, when more rows than N (or N% of the rows read) "
    "are rejected. Default: write the good rows, whatever the rejects.",
)
@click.option("--tag", "import_tag", help="Tag every imported record with this tag.")
@click.option("--message", help="Text recorded in the audit log with every change.")
@click.option(
    "--rejects",
    "rejects_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the rejected rows, with their reasons, to this CSV to fix and re-import.",
)
@click.option("--layer", help="Layer (Shapefile in a zip, GeoPackage) or sheet (XLSX) to read.")
@source_options
@click.option("--crs", help="CRS of a source that does not say, e.g. EPSG:7855.")
@click.option(
    "--assets",
    "assets_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --url: assets to link items to offline before sending (default: the "
    "embedded site's assets, if it has any).",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --url: push again even if the journal says this file was pushed.",
)
@click.option(
    "--poll-interval",
    type=float,
    default=None,
    help="With --url: seconds between status checks (at least 60, the spec's limit).",
)
@click.option(
    "--links",
    "links_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A review file marked by a reviewer (see lookup --review): its decisions are "
    "remembered by the site and used by this import and every later one.",
)
@global_options
def import_command(
    file: Path,
    server_dry_run: bool,
    assets_file: Path | None,
    force: bool,
    poll_interval: float | None,
    links_file: Path | None,
    **options: Any,
) -> None:
    """Import FILE (- for stdin) into the site as one job, and report what happened.

    The job reads the file, checks every row against the rule, links items to
    assets, plans the overwrite rule, then writes everything in one transaction:
    a failure leaves the site as it was. Exit status 0 when the job is COMPLETE,
    1 when it FAILED. Stdin is read as CSV unless --format says otherwise.

    \b
    Examples:
      toolkit import sample_data/parcels.zip --type asset --rule property-assets
      toolkit import sample_data/damage_assessments.csv --type item --rule damage-assessments \\
          --event-id 1 --region-id 1 --dry-run --rejects rejects.csv
      toolkit --json import fixed.csv --type item --rule damage-assessments \\
          --event-id 1 --region-id 1 --overwrite-rule updateOnly
      ./export.sh | toolkit import - --format csv --delimiter ';' --type asset --rule assets-csv
      toolkit --url https://staging.example.org import damage.csv --type item \\
          --rule damage-assessments --event-id 1 --region-id 1 --server-dry-run
    """
    if server_dry_run:
        if options["dry_run"]:
            raise click.UsageError(
                "give --dry-run (checks here, sends nothing) or --server-dry-run (the "
                "server checks and plans), not both"
            )
        if not is_remote():
            raise click.UsageError(
                "--server-dry-run asks a server (--url); on the embedded site --dry-run "
                "does the same"
            )
    with input_file(file, options["file_format"]) as (source, name):
        _import(
            source, name, assets_file, force, poll_interval, links_file, options, server_dry_run
        )


def _import(
    source: Path,
    name: str | None,
    assets_file: Path | None,
    force: bool,
    poll_interval: float | None,
    links_file: Path | None,
    options: dict[str, Any],
    server_dry_run: bool = False,
) -> None:
    from toolkit.importing.pipeline import ImportRequest
    from toolkit.importing.results import JobOutcome

    request = ImportRequest(source=source, source_name=name, **options)
    if links_file is not None:
        if is_remote():
            raise click.UsageError("--links works on the embedded site, not with --url")
        from toolkit.matching.review import read_review

        with open_local_site(create=True) as site:
            kept = site.remember_decisions(read_review(links_file))
        note(f"Remembered {kept} review decisions from {links_file.name}")
    delivery = _delivery(assets_file, force, poll_interval, server_dry_run)
    with open_site(create=True) as site, progress_bar() as progress:
        outcome = site.import_file(request, progress=progress, delivery=delivery)
    for warning in outcome.warnings():
        warn(warning)
    document = outcome.to_dict()
    if isinstance(outcome, JobOutcome):  # one job, run in place
        render(document, lines=_summary_lines)
        if request.rejects_path is not None and (document.get("summary") or {}).get(
            "counts", {}
        ).get("rejected"):
            note(f"Rejected rows written to {request.rejects_path}")
    else:  # a push: its chunks' jobs and the offline checks
        render(document, lines=lambda d: _push_lines(d, outcome))
    failure = outcome.failure()
    if failure is not None:
        raise JobFailed(failure)


@cli.command("import-status")
@click.argument("job_id", type=int, required=False)
@click.option(
    "--csv",
    "as_csv",
    is_flag=True,
    help="Write the jobs as CSV: id, status, type, rule, source, created, then the counts.",
)
@click.option("--nl", "as_nl", is_flag=True, help="Write each job object as one JSON line.")
@global_options
def import_status(job_id: int | None, as_csv: bool, as_nl: bool) -> None:
    """Show one import job, or a summary of every job of the site (every one: the API
    answers them all at once, so there are no pages).

    \b
    Examples:
      toolkit import-status
      toolkit --json import-status 3
      toolkit import-status --csv > jobs.csv
    """
    fmt = output_format(as_csv, as_nl)
    with open_site() as site:
        result = site.import_status(job_id)
    if not isinstance(result, list):
        if fmt in ("csv", "nl"):
            write_rows([result] if fmt == "nl" else _job_rows([result]), fmt)
            return
        render(result, lines=_summary_lines)
        return
    if fmt in ("csv", "nl"):
        write_rows(result if fmt == "nl" else _job_rows(result), fmt)
        return
    columns = ["id", "status", "rule", "created", *JOB_COUNTS]
    render(result, table=Columns(columns, "Import jobs", _job_rows))


def _job_rows(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row a job: what it ran and its counts (every count a column, blank if none)."""
    rows: list[dict[str, Any]] = []
    for job in jobs:
        summary = job.get("summary") or {}
        counts = summary.get("counts") or {}
        rows.append(
            {
                "id": job["id"],
                "status": job["status"],
                "type": summary.get("importType") or job.get("importType"),
                "rule": job["importRule"],
                "source": summary.get("source") or (job.get("params") or {}).get("source"),
                "created": job["dateCreated"],
                **{name: counts.get(name) for name in JOB_COUNTS},
            }
        )
    return rows


@cli.group("rules")
@global_options
def rules_group() -> None:
    """What import rules there are and what each expects.

    \b
    Examples:
      toolkit rules list
      toolkit rules show damage-assessments
    """


@rules_group.command("list")
@global_options
def rules_list() -> None:
    """List the import rules: the built-in ones and those added with --rules.

    \b
    Examples:
      toolkit rules list
      toolkit --rules ./my_rules rules list --json
    """
    from toolkit.importing.rules import available_rules

    # Rules are files, not site records: listing them opens no site.
    rules = [rule.describe() for rule in available_rules(settings().rule_paths).values()]
    columns = ["name", "importType", "register", "matchingId", "overwriteRule", "fields"]
    table = Columns(
        [*columns, "description"],
        "Import rules",
        lambda rs: [{**r, "fields": len(r["fields"])} for r in rs],
    )
    render(rules, table=table)


@rules_group.command("show")
@click.argument("name", shell_complete=complete_rule_names)
@global_options
def rules_show(name: str) -> None:
    """Show what the rule NAME expects: columns, types, required fields, asset links.

    \b
    Examples:
      toolkit rules show damage-assessments
      toolkit rules show ./my_rules/trees.py --json
    """
    from toolkit.importing.rules import load_rule

    render(load_rule(name, settings().rule_paths).describe(), human=_show_rule)


def _show_rule(rule: dict[str, Any]) -> None:
    """A heading, a table of the fields, then how rows link to assets."""
    click.echo(f"{rule['name']} ({rule['importType']}): {rule['description']}")
    click.echo(
        f"  register {rule['register'] or '-'}, matching on {rule['matchingId']}, "
        f"overwrite rule {rule['overwriteRule']}, from {rule['source']}"
    )
    rows = [
        {
            "field": f["name"],
            "column": " | ".join([f["column"], *f["aliases"]]),
            "type": f["type"]
            + (f" ({', '.join(f['choices'])})" if f["choices"] else "")
            + ("" if f.get("trim", True) else ", spaces kept"),
            "required": "yes" if f["required"] else "",
            "default": f["default"],
        }
        for f in rule["fields"]
    ]
    print_table(rows, ["field", "column", "type", "required", "default"])
    link = rule.get("assetLink")
    if link:
        ways = []
        if link["idColumn"]:
            ways.append(f"asset id in {link['idColumn']!r}")
        if link["lookupColumn"]:
            ways.append(f"code in {link['lookupColumn']!r} on {link['codefield'] or 'any code'}")
        if link["useGeometry"]:
            ways.append("the row's point inside an asset")
        if link["friendlyColumns"]:
            ways.append(
                f"address from {' + '.join(link['friendlyColumns'])} with options {link['options']}"
            )
        click.echo("  assets linked by, in order: " + "; then ".join(ways))
    geometry = rule["geometry"]
    if geometry["used"]:
        click.echo(
            f"  geometry ({geometry['use']}): a Shapefile's, GeoPackage's or GeoJSON's own; "
            f"in a table, a WKT column ({', '.join(geometry['wktColumns'])}) and/or "
            f"latitude ({', '.join(geometry['latitudeColumns'])}) and longitude "
            f"({', '.join(geometry['longitudeColumns'])}) columns, any case"
        )
    else:
        click.echo("  geometry: not used (coordinate and WKT columns are left unused)")
    if rule.get("keepOtherColumns"):
        click.echo("  other columns are kept as text fields under their heading")


def _delivery(
    assets_file: Path | None,
    force: bool,
    poll_interval: float | None,
    server_dry_run: bool = False,
) -> Delivery:
    """How ``toolkit import --url ...`` sends the file: the options of a push (the
    embedded site reads the file in place and uses none of them)."""
    import os

    from toolkit.remote.push import MIN_POLL_INTERVAL_S
    from toolkit.site.protocol import Delivery

    minimum = float(os.environ.get("TOOLKIT_MIN_POLL_INTERVAL", MIN_POLL_INTERVAL_S))
    interval = minimum if poll_interval is None else poll_interval
    if interval < minimum:
        raise click.UsageError(
            f"--poll-interval {interval:g}: the service allows a status check at most once "
            f"every {minimum:g} seconds"
        )

    def local_index() -> Any:
        if assets_file is not None:
            from toolkit.matching.lookup import index_from_file

            return index_from_file(assets_file)
        if settings().store.exists():
            with open_local_site(create=False) as local:
                return local.asset_index()
        return None

    return Delivery(
        asset_index=local_index,
        force=force,
        poll_interval_s=interval,
        server_dry_run=server_dry_run,
    )


def _push_lines(document: dict[str, Any], result: Any) -> list[str]:
    """The push summary: offline checks, then each chunk's job."""
    lines: list[str] = []
    offline = document["offline"]
    lines.append(
        f"Push of {document['source']}: {document['status']}"
        + (" (dry run: nothing sent)" if result.dry_run else "")
        + (
            " (server dry run: the server checked and planned every chunk, nothing written)"
            if result.server_dry_run
            else ""
        )
        + (" (already pushed: nothing sent; --force to push again)" if result.already_done else "")
    )
    lines.append(
        f"  offline: read {offline['read']}, rejected {offline['rejectedRows']}"
        + (
            ", assets " + ", ".join(f"{k} {v}" for k, v in offline["linking"].items())
            if offline.get("linking")
            else ""
        )
    )
    for problem in offline["rejected"]:
        column = f" {problem['column']}" if problem.get("column") else ""
        lines.append(f"    row {problem['row']}{column}: {problem['reason']}")
    hidden = offline.get("problemCount", 0) - len(offline["rejected"])
    if hidden > 0:
        lines.append(f"    and {hidden} more problem(s)")
    for check in document.get("serverCheck") or []:
        lines.append(
            f"  server dry run of chunk {check['index'] + 1}: job {check['jobId']} "
            f"{check['status']}, rejected {check['rejected']}"
        )
    if document.get("reason"):
        lines.append(f"  reason: {in_cli_words(document['reason'])}")
    for chunk in document["chunks"]:
        counts = ((chunk.get("job") or {}).get("summary") or {}).get("counts") or {}
        lines.append(
            f"  chunk {chunk['index'] + 1} rows {chunk['rows'][0]}-{chunk['rows'][1]}: "
            f"job {chunk.get('jobId')} {chunk.get('status')} " + counts_line(counts)
        )
    if document["counts"]:
        # The file's rows: those sent, and those refused offline (counted as rejected).
        label = "would be" if result.server_dry_run else "total"
        lines.append(f"  {label}: " + counts_line(document["counts"]))
    return lines
