"""The site: the one interface of the toolkit (:class:`Site`) and its embedded implementation.

Owns :class:`Site` (the protocol both faces implement), :class:`LocalSite` (the spec's
operations over a site file), its writes, user administration and credentials, and the
matching-index cache in the site file. May import ``toolkit.importing``,
``toolkit.reports``, ``toolkit.matching``, ``toolkit.sources``, ``toolkit.store``,
``toolkit.model``, ``toolkit.query`` and the shared top-level modules; never
``toolkit.remote``, ``toolkit.server`` or ``toolkit.cli``. Choosing a face
(``open_site``) lives in ``toolkit.remote``, the layer that knows both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.site.local import LocalSite, init_site
from toolkit.site.protocol import Site

__all__ = ["LocalSite", "Site", "init_site"]

if TYPE_CHECKING:
    # mypy checks the embedded site against the protocol here (the remote one in
    # toolkit.remote.site).
    def _conforms(site: LocalSite) -> Site:
        return site
