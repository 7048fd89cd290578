"""``toolkit serve``: the service's HTTP API as an ASGI app over an embedded site file.

A thin face over ``LocalSite``: it adds authentication (tokens, accounts, duty),
tenancy (``X-Site``), limits (request size, rate) and the mapping of library
errors to HTTP statuses. Modules: ``app`` (the factory), ``state`` (settings,
a site per thread, workers), ``calls`` (one request end to end), ``auth``
(tokens), ``errors``, ``encoding`` (JSON answers), ``limits`` (and ``tables``,
where their counts live), ``transport`` (uvicorn), ``processes`` (``--processes``)
and ``routes_*`` per family of endpoints.
"""

from __future__ import annotations

from toolkit.server.app import create_app, openapi_document
from toolkit.server.state import ServerSettings

__all__ = ["ServerSettings", "create_app", "openapi_document"]
