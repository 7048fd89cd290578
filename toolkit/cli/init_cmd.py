"""`toolkit init`: make an empty embedded site on purpose."""

from __future__ import annotations

from typing import Any

from toolkit.cli import cli
from toolkit.cli.context import embedded_only, global_options, settings
from toolkit.cli.render import render


@cli.command("init")
@global_options
def init() -> None:
    """Make the site (--site, default 'default') in the site file (--store), and the
    file too if it is missing. Safe to repeat: an existing site is left as it is.

    Commands that only read or change a site never make one: run in the wrong
    folder or with a mistyped --store they fail with "no site at PATH" instead of
    answering from a new empty site.

    \b
    Examples:
      toolkit init
      toolkit --store council.sqlite --site staging init
      toolkit --json init
    """
    from toolkit.site import init_site

    embedded_only("init makes an embedded site file")
    current = settings()
    render(init_site(current.store, current.site), lines=_init_lines)


def _init_lines(result: dict[str, Any]) -> list[str]:
    if not result["created"]:
        return [f"Site {result['site']!r} is already in {result['store']}; nothing changed"]
    return [
        f"Made site {result['site']!r} in {result['store']}",
        "Next: toolkit import FILE --type asset --rule RULE   (toolkit rules list)",
    ]
