"""`toolkit gazetteer load|info|remove`: the site's address gazetteer for external lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import embedded_only, global_options, open_local_site, progress_bar
from toolkit.cli.render import render


@cli.group("gazetteer")
@global_options
def gazetteer() -> None:
    """The site's address gazetteer: address points a lookup falls back to when no asset
    matches (useExternalLookups), kept inside the site file.

    \b
    Examples:
      toolkit gazetteer load VIC_ADDRESS_DETAIL_GNAF_CORE.psv --name gnaf-2026-02
      toolkit gazetteer info
    """


def _local_only(what: str) -> None:
    embedded_only(f"gazetteer {what} is an operation of the embedded site file")


def _columns(pairs: tuple[str, ...]) -> dict[str, str]:
    columns = {}
    for pair in pairs:
        role, sep, heading = pair.partition("=")
        if not sep or not role.strip() or not heading.strip():
            raise click.BadParameter(f"{pair!r} is not ROLE=HEADING", param_hint="--column")
        columns[role.strip()] = heading.strip()
    return columns


@gazetteer.command("load")
@click.argument(
    "files",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option(
    "--name",
    help="The gazetteer's name, which results carry as their source "
    "(gazetteer:NAME). Default: the first file's name.",
)
@click.option(
    "--column",
    "columns",
    multiple=True,
    metavar="ROLE=HEADING",
    help="The file's column for a role when its name is not recognised (repeatable). Roles: "
    "id, label, flat_type, unit, number, number_last, street_name, street_type, "
    "street_suffix, locality, state, postcode, feature.",
)
@global_options
def load(files: tuple[Path, ...], name: str | None, columns: tuple[str, ...]) -> None:
    """Index the address points of FILES (CSV/PSV, Parquet, GeoPackage or GeoJSON; several
    files make one gazetteer) and keep the index in the site file, replacing any earlier
    gazetteer. Lookups that match no asset then fall back to it, with the same matcher,
    so typos, abbreviations and unit forms behave as they do for assets.

    Columns are recognised by their G-NAF or OpenAddresses names (NUMBER_FIRST,
    STREET_NAME, STREET_TYPE, LOCALITY_NAME, POSTCODE, GEOCODE_TYPE, LONGITUDE and
    LATITUDE; or NUMBER, STREET, UNIT, CITY, REGION, POSTCODE, LON and LAT). Rows without
    a point or an address are left out and counted.

    \b
    Examples:
      toolkit gazetteer load VIC_ADDRESS_DETAIL_GNAF_CORE.psv --name gnaf-2026-02
      toolkit lookup "12 Avalon Crt Buninyong" --required-feature premise \\
          --upgrade --asset-class Property   # no asset: the gazetteer's, made one
      toolkit gazetteer load vic.csv nsw.csv --name openaddresses
      toolkit gazetteer load points.gpkg --column number=HOUSE_NO --column locality=SUBURB
      toolkit --json gazetteer load points.parquet
    """
    _local_only("load")
    with open_local_site() as site, progress_bar() as progress:
        result = site.load_gazetteer(
            list(files), name=name, columns=_columns(columns), progress=progress
        )
    render(result, lines=_load_lines)


def _load_lines(result: dict[str, Any]) -> list[str]:
    features = ", ".join(f"{count:,} {kind}" for kind, count in result["features"].items())
    lines = [
        f"Loaded gazetteer {result['name']!r}: {result['kept']:,} address points of "
        f"{result['read']:,} rows ({features}) in {result['loadSeconds']:.1f} s; "
        f"{result['storedBytes'] / 1e6:,.1f} MB in the site file",
    ]
    for reason, count in result["skipped"].items():
        lines.append(f"  left out {count:,} rows: {reason}")
    lines.extend(f"    {example}" for example in result["examples"])
    lines.append(f"Lookups that match no asset now ask it (results' source: {result['source']})")
    return lines


@gazetteer.command("info")
@global_options
def info() -> None:
    """Show the site's gazetteer: its name, files, points by feature, size, and whether
    it was indexed by this toolkit's matcher (else it is re-indexed on each load: load
    it again).

    \b
    Examples:
      toolkit gazetteer info
      toolkit --json gazetteer info
    """
    _local_only("info")
    with open_local_site() as site:
        result = site.gazetteer_info()
        where = f"site {site.name!r} of {site.db.path}"
    render(result, lines=lambda r: _info_lines(r, where))


def _info_lines(result: dict[str, Any] | None, where: str) -> list[str]:
    if result is None:
        return [f"No gazetteer in {where}; load one with `toolkit gazetteer load FILE`"]
    features = ", ".join(f"{count:,} {kind}" for kind, count in result["features"].items())
    return [
        f"Gazetteer {result['name']!r} ({result['source']}) in {where}",
        f"  {result['points']:,} address points: {features}",
        f"  from {', '.join(result['files'])}; {result['storedBytes'] / 1e6:,.1f} MB",
        "  indexed by this toolkit's matcher"
        if result["current"]
        else "  indexed by another toolkit version: load it again to avoid re-indexing",
    ]


@gazetteer.command("remove")
@global_options
def remove() -> None:
    """Drop the site's gazetteer; lookups then no longer fall back to it.

    \b
    Examples:
      toolkit gazetteer remove
    """
    _local_only("remove")
    with open_local_site() as site:
        removed = site.remove_gazetteer()
    render(
        {"removed": removed},
        lines=lambda r: ["Removed the gazetteer" if r["removed"] else "There was no gazetteer"],
    )
