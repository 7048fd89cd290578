"""The site: the one interface of the toolkit and its embedded implementation.

Owns :class:`LocalSite` (the spec's operations over a site file), its writes, user
administration and credentials, and the matching-index cache beside the site file. May
import ``toolkit.importing``, ``toolkit.reports``, ``toolkit.matching``, ``toolkit.sources``,
``toolkit.store``, ``toolkit.model``, ``toolkit.query`` and the shared top-level modules;
never ``toolkit.remote``, ``toolkit.server`` or ``toolkit.cli``.
"""

from __future__ import annotations

from toolkit.site.local import LocalSite

__all__ = ["LocalSite"]
