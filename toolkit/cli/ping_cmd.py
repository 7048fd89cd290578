"""`toolkit ping`: is the site there, and what time does it say it is."""

from __future__ import annotations

from toolkit.cli import cli
from toolkit.cli.context import global_options, open_site, settings
from toolkit.cli.render import render
from toolkit.model.location import display_name


@cli.command("ping")
@global_options
def ping() -> None:
    """Check the connection to the site: the embedded file, or a server with --url.

    \b
    Examples:
      toolkit ping
      toolkit --url https://staging.example.org --site demo ping --json
    """
    with open_site() as site:
        answer = site.ping()
    where = settings().url or settings().profile or display_name(settings().store)
    render(answer, lines=lambda a: f"{where}: status {a.get('status')}, time {a.get('timestamp')}")
