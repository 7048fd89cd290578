"""The remote face: the HTTP client, the site over HTTP, pushing imports, credentials and
configuration profiles; and :func:`open_site`, which picks a face.

Owns everything that talks to a server of the service's API; ``client`` is the only module
of the toolkit that sends HTTP. May import ``toolkit.site`` (for the interface),
``toolkit.importing`` (offline checks before a push), ``toolkit.matching``,
``toolkit.sources`` and the layers below; never ``toolkit.server`` or ``toolkit.cli``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.site import LocalSite, Site

if TYPE_CHECKING:
    from toolkit.remote.site import RemoteSite

__all__ = ["RemoteSite", "open_site"]


def open_site(
    store: str | Path,
    site: str,
    *,
    url: str | None = None,
    profile: str | None = None,
    remote_site: str | None = None,
    user_id: str | None = None,
    create: bool = True,
    rule_paths: Iterable[str | Path] = (),
) -> Site:
    """The site to work on: a server when ``url`` or ``profile`` is given, else the
    embedded site ``site`` in the file ``store``. Both answer to :class:`~toolkit.site.Site`.
    """
    if url or profile:
        from toolkit.remote.client import load_profile
        from toolkit.remote.site import RemoteSite

        return RemoteSite(
            load_profile(profile, base_url=url, site=remote_site), rule_paths=rule_paths
        )
    return LocalSite(store, site, user_id=user_id, create=create, rule_paths=rule_paths)


def __getattr__(name: str) -> Any:
    # RemoteSite loads httpx (most of a second cold): only the commands that reach a server
    # pay for it, not those working on the embedded site (issue 17, cold start).
    if name == "RemoteSite":
        from toolkit.remote.site import RemoteSite

        return RemoteSite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
