"""`toolkit item add|update|retire`: the API's item writes (POST, PATCH, PUT) from the shell.

The body is built from ``--values FILE.json`` (``-`` for stdin), then ``--field``
pairs, then the named options, each overriding the one before; the site checks
every name and value (an unknown register or field is an error listing the known
ones), on the embedded site and a server alike.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from toolkit.cli.context import cell_text, global_options, open_site
from toolkit.cli.files import is_stdio
from toolkit.cli.records_cmd import item_group
from toolkit.cli.render import render

# A --values file is one request body: at most what one request of the API may carry.
MAX_VALUES_BYTES = 10 * 1024 * 1024
# Keys of a record that say nothing about its values.
_BOOKKEEPING = ("dateModified",)


def parse_fields(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` (the value as text) and ``NAME:=JSON`` (the value as JSON, e.g.
    ``photos:=[3]``, ``notes:=null``), as httpie reads them; a name given twice is an error."""
    from toolkit.errors import OptionError
    from toolkit.query import safejson

    fields: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(
                f"{pair!r} is not NAME=VALUE (or NAME:=JSON)", param_hint="--field"
            )
        as_json = name.endswith(":")
        name = name.removesuffix(":").strip()
        if not name:
            raise click.BadParameter(f"{pair!r} has no field name", param_hint="--field")
        if name in fields:
            raise click.BadParameter(f"field {name!r} is given twice", param_hint="--field")
        if as_json:
            try:
                fields[name] = safejson.loads(value, f"the value of {name}")
            except OptionError as exc:
                raise click.BadParameter(str(exc), param_hint="--field") from None
        else:
            fields[name] = value
    return fields


def read_values(path: Path | None) -> dict[str, Any]:
    """The JSON object of ``--values`` (``-``: stdin); an error naming the file if it is
    not one."""
    from toolkit.errors import OptionError
    from toolkit.query import safejson

    if path is None:
        return {}
    name = "stdin" if is_stdio(path) else str(path)
    try:
        if is_stdio(path):
            if sys.stdin.isatty():
                raise click.UsageError("--values - reads JSON from stdin, but nothing is piped in")
            raw = sys.stdin.buffer.read(MAX_VALUES_BYTES + 1)
        else:
            with path.open("rb") as handle:
                raw = handle.read(MAX_VALUES_BYTES + 1)
    except OSError as exc:
        raise OptionError(f"{name}: cannot read the values: {exc.strerror or exc}") from exc
    if len(raw) > MAX_VALUES_BYTES:
        raise OptionError(
            f"{name}: over {MAX_VALUES_BYTES:,} bytes, more than one request of the API carries"
        )
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark is not part of the JSON
    except UnicodeDecodeError as exc:
        raise OptionError(f"{name} is not UTF-8 text (byte {exc.start})") from exc
    values = safejson.loads(text, name)
    if not isinstance(values, dict):
        raise OptionError(
            f"{name}: the values must be one JSON object of field names and values, "
            f"not {type(values).__name__}"
        )
    return values


def values_options(func: Any) -> Any:
    """``--values`` and ``--field``, the same on ``item add`` and ``item update``."""
    options = [
        click.option(
            "--values",
            "values_file",
            type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
            metavar="FILE.json",
            help="A JSON object of fields and values (- for stdin), e.g. an `item get --json` "
            "record; --field and the options below win over it.",
        ),
        click.option(
            "--field",
            "field_pairs",
            multiple=True,
            metavar="NAME=VALUE",
            help="A field's value as text (repeatable); NAME:=JSON for a JSON value "
            "(photos:=[3], notes:=null to clear).",
        ),
        click.option("--message", help="Text recorded in the audit log with the change."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _body(values_file: Path | None, field_pairs: tuple[str, ...], **named: Any) -> dict[str, Any]:
    body = read_values(values_file)
    body.update(parse_fields(field_pairs))
    body.update({k: v for k, v in named.items() if v is not None})
    return body


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The fields whose value a write changed."""
    names = [*after, *(k for k in before if k not in after)]
    return [n for n in names if n not in _BOOKKEEPING and before.get(n) != after.get(n)]


def _record_lines(record: dict[str, Any]) -> list[str]:
    width = max((len(k) for k in record), default=0)
    return [f"  {key.ljust(width)}  {cell_text(value)}".rstrip() for key, value in record.items()]


def _show(headline: str, item: dict[str, Any]) -> None:
    """The spec's item under ``--json``; otherwise what was done, then the record."""
    render(item, lines=lambda record: [headline, *_record_lines(record)])


@item_group.command("add")
@click.option("--register", "register_id", help="The register (registerId) of the new item.")
@click.option("--event-id", type=int, help="The event the item belongs to (required).")
@click.option("--asset-id", help="Link the item to this asset.")
@click.option("--region-id", type=int)
@click.option("--status", type=int, help="Status of the new item (default 1, active).")
@values_options
@global_options
def item_add(
    register_id: str | None,
    event_id: int | None,
    asset_id: str | None,
    region_id: int | None,
    status: int | None,
    values_file: Path | None,
    field_pairs: tuple[str, ...],
    message: str | None,
) -> None:
    """Create one register item (the API's POST) and print it with its new id.

    Field names are the register's (see `toolkit register list`); values are checked
    and stored as an import would store them. Link an asset with --asset-id, or
    --field asset_lookup=CODE (with asset_codefield=NAME) or asset_friendly=ADDRESS.

    \b
    Examples:
      toolkit item add --register damage-assessment --event-id 1 \\
          --field damageLevel=Severe --field habitable=no --message "phoned in"
      toolkit item add --register damage-assessment --event-id 1 \\
          --field asset_lookup=815320 --field asset_codefield=propnum
      toolkit item add --values new-item.json --event-id 1 --json | jq .id
      toolkit item add --register damage-assessment --event-id 1 --field photos:=[1]
    """
    body = _body(
        values_file,
        field_pairs,
        registerId=register_id,
        eventId=event_id,
        assetId=asset_id,
        regionId=region_id,
        status=status,
    )
    if not (body.get("registerId") or body.get("type")):
        raise click.UsageError("give the register: --register NAME (or registerId in --values)")
    if body.get("eventId") in (None, ""):
        raise click.UsageError("give the event: --event-id ID (or eventId in --values)")
    with open_site() as site:
        item = site.create_item(body, message=message)
    _show(
        f"Added item {item['id']} to register {item['registerId']} in event {item['eventId']}",
        item,
    )


@item_group.command("update")
@click.argument("item_id", type=int)
@click.option("--event-id", type=int, help="Move the item to this event.")
@click.option("--asset-id", help="Link the item to this asset.")
@click.option("--region-id", type=int)
@click.option("--status", type=int, help="New status (0 or less retires: see `item retire`).")
@click.option(
    "--replace",
    is_flag=True,
    help="Send a full record (the API's PUT): every field not given becomes empty, the asset "
    "link too; needs eventId and status. Without it only the fields given change (PATCH).",
)
@values_options
@global_options
def item_update(
    item_id: int,
    event_id: int | None,
    asset_id: str | None,
    region_id: int | None,
    status: int | None,
    replace: bool,
    values_file: Path | None,
    field_pairs: tuple[str, ...],
    message: str | None,
) -> None:
    """Change item ITEM_ID: only the fields given (PATCH), or all of it with --replace (PUT).

    Prints the saved item and which fields changed.

    \b
    Examples:
      toolkit item update 42 --field damageLevel=Minor --message "re-inspected"
      toolkit item update 42 --field notes:=null              # clear a field
      toolkit item get 42 --json > item.json   # edit it, then send it back whole:
      toolkit item update 42 --replace --values item.json
    """
    body = _body(
        values_file,
        field_pairs,
        eventId=event_id,
        assetId=asset_id,
        regionId=region_id,
        status=status,
    )
    if not body:
        raise click.UsageError("nothing to change: give --field, --values or an option")
    with open_site() as site:
        before = site.get_item(item_id)
        if replace:
            item = site.replace_item(item_id, body, message=message)
        else:
            item = site.patch_item(item_id, body, message=message)
    changed = _changed(before, item)
    how = "replaced (PUT)" if replace else "updated (PATCH)"
    _show(
        f"Item {item_id} {how}: "
        + (f"changed {', '.join(changed)}" if changed else "no value changed"),
        item,
    )


@item_group.command("retire")
@click.argument("item_id", type=int)
@click.option(
    "--status",
    type=click.IntRange(max=0),
    default=0,
    show_default=True,
    help="The inactive status to set (0 or less).",
)
@click.option("--message", help="Text recorded in the audit log with the change.")
@global_options
def item_retire(item_id: int, status: int, message: str | None) -> None:
    """Retire item ITEM_ID: set an inactive status, the API's only way (records are never
    deleted). An item already inactive is left as it is.

    \b
    Examples:
      toolkit item retire 42 --message "duplicate of 41"
      toolkit item retire 42 --status -1 --json
    """
    with open_site() as site:
        before = site.get_item(item_id)
        if before["status"] is not None and int(before["status"]) <= 0:
            already = f"Item {item_id} is already retired (status {before['status']}); unchanged"
            _show(already, before)
            return
        item = site.patch_item(item_id, {"status": status}, message=message)
    _show(f"Retired item {item_id} (status {before['status']} -> {item['status']})", item)
