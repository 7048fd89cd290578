"""The remote face: the HTTP client, the site over HTTP, pushing imports, credentials and
configuration profiles.

Owns everything that talks to a server of the service's API; ``client`` is the only module
of the toolkit that sends HTTP. May import ``toolkit.site`` (for the interface),
``toolkit.importing`` (offline checks before a push), ``toolkit.matching``,
``toolkit.sources`` and the layers below; never ``toolkit.server`` or ``toolkit.cli``.
"""

from __future__ import annotations

from toolkit.remote.site import RemoteSite

__all__ = ["RemoteSite"]
