"""`toolkit site copy SRC DST`: a site from one store to another (SQLite, PostgreSQL)."""

from __future__ import annotations

from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import StoreParam, embedded_only, global_options, settings
from toolkit.cli.render import render


@cli.group("site")
@global_options
def site() -> None:
    """The sites of the embedded stores as wholes.

    \b
    Examples:
      toolkit site copy toolkit.sqlite backup.sqlite
      toolkit --json site copy toolkit.sqlite copy.sqlite
    """


@site.command("copy")
@click.argument("source", type=StoreParam(), metavar="SRC")
@click.argument("target", type=StoreParam(), metavar="DST")
@global_options
def copy(source: Any, target: Any) -> None:
    """Copy the site (--site) from the store SRC into the store DST: a SQLite file or
    a postgresql:// URL each (password from PGPASSWORD, ~/.pgpass or a service file).

    Records keep their ids, so DST must not hold the site, nor records with its ids
    (a new store always does). One transaction, each table's count checked against
    SRC: the copy is whole or not there.

    To PostgreSQL: toolkit site copy toolkit.sqlite postgresql://HOST/DATABASE

    \b
    Examples:
      toolkit site copy toolkit.sqlite backup.sqlite
      toolkit --json site copy toolkit.sqlite copy.sqlite
    """
    from toolkit.store import Database
    from toolkit.store.copying import copy_site

    embedded_only("site copy works on stores directly")
    name = settings().site
    with Database(source, create=False) as src, Database(target) as dst:
        result = copy_site(src, dst, name)
        render(
            {
                "site": result.site,
                "source": src.display,
                "target": dst.display,
                "counts": result.counts,
            },
            lines=_copy_lines,
        )


def _copy_lines(result: dict[str, Any]) -> list[str]:
    counts = result["counts"]
    shown = ", ".join(f"{counts[t]} {t}" for t in ("event", "asset", "item", "user", "audit_log"))
    return [
        f"Copied site {result['site']!r} from {result['source']} to {result['target']}",
        f"  {shown} (every table's count checked)",
    ]
