"""`toolkit init`: make an empty embedded site on purpose."""

from __future__ import annotations

from typing import Any

from toolkit.cli import cli
from toolkit.cli.context import global_options, is_remote, settings
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
    from toolkit.errors import OptionError
    from toolkit.site import init_site

    if is_remote():
        raise OptionError(
            "init makes an embedded site file; the API has no route for it (run it without --url)"
        )
    current = settings()
    render(init_site(current.store, current.site), lines=_init_lines)


def _init_lines(result: dict[str, Any]) -> list[str]:
    if not result["created"]:
        return [f"Site {result['site']!r} is already in {result['store']}; nothing changed"]
    return [
        f"Made site {result['site']!r} in {result['store']}",
        "Next: toolkit import FILE --type asset --rule RULE   (toolkit rules list)",
    ]
