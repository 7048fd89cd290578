"""Reading and curating what a site holds: events, registers, items, assets, audit logs.

Collection commands take the spec's GET parameters as options and print the
spec's envelope ``{models, count, total}`` with ``--json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import cell_text, global_options, open_site
from toolkit.cli.listing import list_options, show_collection
from toolkit.cli.render import Columns, render
from toolkit.names import DIRECTIONS, FULLTEXT_OPERATORS, OPERATORS, ORDER_COLUMNS


def paging_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Paging (``--limit``, ``--offset``, ``--order``, ``--direction``) and the time bounds
    (``--since``, ``--until`` and their operators), the same on every list."""
    for option in reversed(
        [
            click.option(
                "--limit",
                type=int,
                default=100,
                show_default=True,
                help="Page size (at most 1000).",
            ),
            click.option(
                "--offset", type=int, default=0, show_default=True, help="Start position."
            ),
            click.option(
                "--order",
                type=click.Choice(ORDER_COLUMNS),
                default="id",
                show_default=True,
                help="Column to order by.",
            ),
            click.option(
                "--direction", type=click.Choice(DIRECTIONS), default="asc", show_default=True
            ),
            click.option(
                "--since", help="dateModified from this time (ISO 8601 or epoch seconds)."
            ),
            click.option("--since-operator", type=click.Choice(OPERATORS), help="Default gte."),
            click.option("--until", help="dateModified up to this time."),
            click.option("--until-operator", type=click.Choice(OPERATORS), help="Default lte."),
        ]
    ):
        func = option(func)
    return func


def _params(**values: Any) -> dict[str, str]:
    """Options as the spec's GET parameters: text, and only those given."""
    params: dict[str, str] = {}
    for name, value in values.items():
        if value is None or value == ():
            continue
        params[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return params


def _show_record(record: dict[str, Any]) -> None:
    render(record, lines=_record_lines)


def _record_lines(record: dict[str, Any]) -> list[str]:
    """One ``key  value`` line a field, keys aligned; a missing value is blank."""
    width = max((len(k) for k in record), default=0)
    return [f"{key.ljust(width)}  {cell_text(value)}".rstrip() for key, value in record.items()]


# --- events ------------------------------------------------------------------------------


@cli.group("event")
@global_options
def event_group() -> None:
    """Create, find and update events (incidents), which hold register items.

    \b
    Examples:
      toolkit event create "Flood 2026" --description "Yarrowee River flood"
      toolkit event list --active
      toolkit event update 1 --status 0 --description "Closed after recovery"
    """


@event_group.command("create")
@click.argument("name")
@click.option("--description")
@click.option("--start-date", help="ISO 8601 date or time, e.g. 2026-02-01T08:00+11:00.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--template", is_flag=True, help="Make a template event.")
@click.option("--global", "is_global", is_flag=True, help="Make a global event.")
@click.option("--region-id", type=int)
@global_options
def event_create(
    name: str,
    description: str | None,
    start_date: str | None,
    tags: tuple[str, ...],
    template: bool,
    is_global: bool,
    region_id: int | None,
) -> None:
    """Create an event called NAME and print it.

    \b
    Examples:
      toolkit event create "Flood 2026" --start-date 2026-02-01 --tag flood
    """
    values: dict[str, Any] = {
        "name": name,
        "tags": list(tags),
        "isTemplate": template,
        "isGlobal": is_global,
    }
    if description is not None:
        values["description"] = description
    if start_date is not None:
        values["startDate"] = start_date
    if region_id is not None:
        values["regionId"] = region_id
    with open_site(create=True) as site:
        _show_record(site.create_event(values))


@event_group.command("list")
@click.option("--id", "event_id", type=int)
@click.option("--fulltext", help="Text in the name or description.")
@click.option("--fulltext-operator", type=click.Choice(FULLTEXT_OPERATORS))
@click.option("--status", type=int)
@click.option("--active/--inactive", default=None, help="Only active or only inactive events.")
@click.option("--start-date-after")
@click.option("--start-date-before")
@click.option("--tag")
@click.option("--template/--no-template", default=None)
@click.option("--global/--no-global", "is_global", default=None)
@paging_options
@list_options
@global_options
def event_list(
    event_id: int | None,
    fulltext: str | None,
    fulltext_operator: str | None,
    status: int | None,
    active: bool | None,
    start_date_after: str | None,
    start_date_before: str | None,
    tag: str | None,
    template: bool | None,
    is_global: bool | None,
    as_csv: bool,
    as_nl: bool,
    every_page: bool,
    **paging: Any,
) -> None:
    """Search events with the spec's filters.

    \b
    Examples:
      toolkit event list --active --tag flood
      toolkit --json event list --fulltext flood --start-date-after 2026-01-01
      toolkit event list --all --csv > events.csv
    """
    params = _params(
        id=event_id,
        fulltext=fulltext,
        fulltext_operator=fulltext_operator,
        status=status,
        active=active,
        startDateAfter=start_date_after,
        startDateBefore=start_date_before,
        tag=tag,
        isTemplate=template,
        isGlobal=is_global,
        **paging,
    )
    with open_site() as site:
        show_collection(
            site.list_events,
            params,
            columns=["id", "name", "status", "startDate", "tags", "description"],
            title="Events",
            every_page=every_page,
            as_csv=as_csv,
            as_nl=as_nl,
        )


@event_group.command("get")
@click.argument("event_id", type=int)
@global_options
def event_get(event_id: int) -> None:
    """Show one event.

    \b
    Examples:
      toolkit event get 1
    """
    with open_site() as site:
        _show_record(site.get_event(event_id))


@event_group.command("update")
@click.argument("event_id", type=int)
@click.option("--name")
@click.option("--description")
@click.option("--status", type=int, help="0 or less closes the event.")
@click.option("--start-date")
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeatable).")
@click.option("--message", help="Text recorded in the audit log.")
@global_options
def event_update(
    event_id: int,
    name: str | None,
    description: str | None,
    status: int | None,
    start_date: str | None,
    tags: tuple[str, ...],
    message: str | None,
) -> None:
    """Change some fields of an event (a PATCH); for example close it.

    \b
    Examples:
      toolkit event update 1 --status 0 --description "Closed" --message "end of response"
    """
    changes: dict[str, Any] = {
        k: v
        for k, v in {
            "name": name,
            "description": description,
            "status": status,
            "startDate": start_date,
        }.items()
        if v is not None
    }
    if tags:
        changes["tags"] = list(tags)
    if not changes:
        raise click.UsageError("nothing to change: give at least one of the options")
    with open_site() as site:
        _show_record(site.update_event(event_id, changes, message=message))


# --- registers and items -----------------------------------------------------------------


@cli.group("register")
@global_options
def register_group() -> None:
    """The registers of the site and the fields their items carry.

    \b
    Examples:
      toolkit register list
    """


@register_group.command("list")
@global_options
def register_list() -> None:
    """List the registers, their fields and how many items each holds.

    \b
    Examples:
      toolkit register list --json
    """
    with open_site() as site:
        registers = site.list_registers()
    table = Columns(
        ["id", "name", "itemCount", "fields"],
        "Registers",
        lambda rs: [{**r, "fields": ", ".join(f["name"] for f in r["fields"])} for r in rs],
    )
    render(registers, table=table)


@cli.group("item")
@global_options
def item_group() -> None:
    """Read, add, change and retire register items.

    \b
    Examples:
      toolkit item list --register damage-assessment --cql 'damageLevel:Severe'
      toolkit item get 42
      toolkit item add --register damage-assessment --event-id 1 --field damageLevel=Severe
      toolkit item update 42 --field damageLevel=Minor --message "re-inspected"
      toolkit item retire 42 --message "duplicate of 41"
    """


@item_group.command("list")
@click.option("--register", "register_id", required=True, help="The register (registerId).")
@click.option("--event-id", type=int)
@click.option("--asset-id", type=int, help="Only items linked to this asset.")
@click.option("--template/--no-template", default=None, help="Only templates, or none.")
@click.option(
    "--cql", help="Query: field:value, field:*part*, field:~sounds, is:active, AND/OR/NOT, ()."
)
@paging_options
@list_options
@global_options
def item_list(
    register_id: str,
    event_id: int | None,
    asset_id: int | None,
    template: bool | None,
    cql: str | None,
    as_csv: bool,
    as_nl: bool,
    every_page: bool,
    **paging: Any,
) -> None:
    """List the items of a register (one page, or every item with --all).

    \b
    Examples:
      toolkit item list --register damage-assessment --event-id 1 --limit 20
      toolkit item list --register damage-assessment --cql 'damageLevel:Severe AND habitable:false'
      toolkit --json item list --register damage-assessment --since 2026-02-01 \\
          --order dateModified
      toolkit item list --register damage-assessment --all --csv > items.csv
    """
    params = _params(
        registerId=register_id,
        eventId=event_id,
        assetId=asset_id,
        isTemplate=template,
        cql=cql,
        **paging,
    )
    from toolkit.model.shapes import ITEM_OWN_FIELDS

    def columns(models: list[dict[str, Any]]) -> list[str]:
        extra = [k for k in (models[0] if models else {}) if k not in ITEM_OWN_FIELDS][:4]
        return ["id", "eventId", "assetId", "status", *extra]

    with open_site() as site:
        show_collection(
            site.list_items,
            params,
            columns=columns,
            title="Items",
            every_page=every_page,
            as_csv=as_csv,
            as_nl=as_nl,
        )


@item_group.command("get")
@click.argument("item_id", type=int)
@global_options
def item_get(item_id: int) -> None:
    """Show one item with its register fields.

    \b
    Examples:
      toolkit item get 42
    """
    with open_site() as site:
        _show_record(site.get_item(item_id))


# --- assets ------------------------------------------------------------------------------


@cli.group("asset")
@global_options
def asset_group() -> None:
    """Find assets with the spec's filters.

    \b
    Examples:
      toolkit asset list --impacted
      toolkit asset list --latitude -37.56 --longitude 143.85 --range 200
      toolkit asset get 100001
    """


@asset_group.command("list")
@click.option("--id", "asset_id", type=int)
@click.option("--fulltext", help="Text anywhere in the name, code or extra codes.")
@click.option("--name", "soundex", help="Name sounds like (the spec's soundex filter).")
@click.option("--active/--inactive", default=None)
@click.option("--type", "asset_type", help="Asset class (see `toolkit asset types`).")
@click.option("--code")
@click.option("--impacted/--not-impacted", default=None, help="Has an active register item.")
@click.option("--latitude", type=float)
@click.option("--longitude", type=float)
@click.option("--range", "range_m", type=float, help="Metres around the point (default 100).")
@paging_options
@list_options
@global_options
def asset_list(
    asset_id: int | None,
    fulltext: str | None,
    soundex: str | None,
    active: bool | None,
    asset_type: str | None,
    code: str | None,
    impacted: bool | None,
    latitude: float | None,
    longitude: float | None,
    range_m: float | None,
    as_csv: bool,
    as_nl: bool,
    every_page: bool,
    **paging: Any,
) -> None:
    """Search the site's assets.

    \b
    Examples:
      toolkit asset list --type Property --name "smith street"
      toolkit --json asset list --impacted --limit 1000
      toolkit asset list --all --nl | jq -r .code
    """
    params = _params(
        id=asset_id,
        fulltext=fulltext,
        soundex=soundex,
        active=active,
        type=asset_type,
        code=code,
        isImpacted=impacted,
        latitude=latitude,
        longitude=longitude,
        range=range_m,
        **paging,
    )
    with open_site() as site:
        show_collection(
            site.list_assets,
            params,
            columns=["id", "type", "code", "name", "active", "isImpacted"],
            title="Assets",
            every_page=every_page,
            as_csv=as_csv,
            as_nl=as_nl,
        )


@asset_group.command("get")
@click.argument("asset_id")
@global_options
def asset_get(asset_id: str) -> None:
    """Show one asset in the shape of the spec.

    \b
    Examples:
      toolkit asset get 100001 --json
    """
    with open_site() as site:
        _show_record(site.get_asset(asset_id))


@asset_group.command("types")
@global_options
def asset_types() -> None:
    """List the asset classes of the site.

    \b
    Examples:
      toolkit asset types
    """
    with open_site() as site:
        types = site.asset_types()
    render(types, table=Columns(["name", "friendly"], "Asset types"))


# --- audit log ---------------------------------------------------------------------------


@cli.group("audit-log")
@global_options
def audit_group() -> None:
    """Who changed what, when and why.

    \b
    Examples:
      toolkit audit-log list --item-id 42
      toolkit audit-log list --event-id 1 --limit 50
    """


@audit_group.command("list")
@click.option("--id", "audit_id", type=int)
@click.option("--item-id", type=int)
@click.option("--event-id", type=int)
@click.option("--import-job-id", type=int, help="Only the changes of one import job.")
@paging_options
@list_options
@global_options
def audit_list(
    audit_id: int | None,
    item_id: int | None,
    event_id: int | None,
    import_job_id: int | None,
    as_csv: bool,
    as_nl: bool,
    every_page: bool,
    **paging: Any,
) -> None:
    """List audit log entries, for an item, an event, an import job, or the whole site.

    \b
    Examples:
      toolkit audit-log list --item-id 42
      toolkit --json audit-log list --import-job-id 3 --limit 1000
      toolkit audit-log list --import-job-id 3 --all --nl > changes.jsonl
    """
    params = _params(
        id=audit_id, itemId=item_id, eventId=event_id, importJobId=import_job_id, **paging
    )
    with open_site() as site:
        show_collection(
            site.list_audit_logs,
            params,
            columns=["id", "dateCreated", "userId", "action", "recordType", "recordId", "message"],
            title="Audit log",
            every_page=every_page,
            as_csv=as_csv,
            as_nl=as_nl,
        )


@audit_group.command("get")
@click.argument("audit_id", type=int)
@global_options
def audit_get(audit_id: int) -> None:
    """Show one audit log entry with its changes.

    \b
    Examples:
      toolkit audit-log get 7 --json
    """
    with open_site() as site:
        _show_record(site.get_audit_log(audit_id))
