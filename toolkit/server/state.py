"""What a running server holds: its settings, a site per thread, tokens, limits, workers."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import AuthenticationError
from toolkit.geocoding import GazetteerCache, ServiceSettings
from toolkit.importing.rules import available_rules
from toolkit.importing.tasks import ImportTask, ThreadPoolImportExecutor, run_import_task
from toolkit.model.location import StoreLocation
from toolkit.reports import ThreadExecutor
from toolkit.server.auth import TOKEN_TTL_S, TokenService, server_secret
from toolkit.server.limits import (
    MAX_BODY_BYTES,
    Backoff,
    LoginBackoff,
    RateLimiter,
    parse_rate,
)
from toolkit.server.tables import SharedFile, Table
from toolkit.site import LocalSite
from toolkit.site.admin import BAD_CREDENTIALS, NO_CALLER
from toolkit.site.index_cache import IndexCache
from toolkit.store import Database, now_ms

log = logging.getLogger("toolkit.server")

# The width of each limit's rows (see ServerState): user rate, auth calls, refused tokens
# (a time each), failed logins (count, locked until, last failure).
LIMIT_TABLES = (1, 1, 1, 3)

UNKNOWN_SITE = BAD_CREDENTIALS  # which sites a file holds is not told


@dataclass(frozen=True)
class ServerSettings:
    """How ``toolkit serve`` behaves; every field has the default the command uses."""

    rate_limit: str | None = "600/minute"  # per user (and site), over all its tokens
    # auth calls per client address; refused tokens per address have a budget of the same rate
    auth_rate_limit: str | None = "60/minute"
    login_backoff: Backoff = field(default_factory=Backoff)  # failed logins per account
    max_body_bytes: int = MAX_BODY_BYTES
    # The transport (toolkit.server.transport): slow clients, connection caps, proxies.
    header_timeout_s: float = 10.0  # request line and headers, from connect or first byte
    body_timeout_s: float = 60.0  # the whole body, from the end of the headers
    keep_alive_s: float = 5.0  # idle time between requests on one connection
    max_connections: int = 512
    max_connections_per_client: int = 64  # per peer address; proxies in forwarded_allow_ips exempt
    max_head_bytes: int = 16 * 1024  # request line plus headers
    forwarded_allow_ips: str | None = None  # peers whose X-Forwarded-For/-Proto are believed
    token_ttl_s: int = TOKEN_TTL_S
    workers: int = 2  # background import jobs at once, and report runs at once
    # A user's report runs not yet ended, over all its tokens; more are 429. None: no cap.
    # Without one, one user's queue of runs could keep every other user's waiting. (Imports
    # have none: a push sends all its chunks before it awaits them.)
    max_unfinished_reports: int | None = 16
    rule_paths: tuple[str | Path, ...] = ()
    # Epoch milliseconds, the store's clock type; injected by tests to expire tokens.
    clock: Callable[[], int] = field(default=now_ms)
    base_url: str | None = None  # where clients reach us, for report contents' $schema
    # The geocoding service a lookup asks when neither an asset nor the site's gazetteer
    # matches (``toolkit serve --geocoder``); None: none.
    geocoder: ServiceSettings | None = None


class SitePool:
    """One ``LocalSite`` (one SQLite connection) per thread and site, made on first use.

    SQLite connections are never shared between threads; the matching index is.
    """

    def __init__(self, path: StoreLocation, configure: Callable[[LocalSite], None]) -> None:
        self.path = path
        self.configure = configure
        self._local = threading.local()
        self._lock = threading.Lock()
        self._databases: list[Database] = []

    def get(self, name: str) -> LocalSite:
        sites: dict[str, LocalSite] | None = getattr(self._local, "sites", None)
        if sites is None:
            sites = self._local.sites = {}
        site = sites.get(name)
        if site is not None:
            return site
        db: Database | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = Database(self.path)
            with self._lock:
                self._databases.append(db)
        if db.site_id(name) is None:
            # The same answer as bad credentials: which sites a file holds is not told.
            raise AuthenticationError(UNKNOWN_SITE)
        site = LocalSite(self.path, name, db=db, create=False)
        self.configure(site)
        sites[name] = site
        return site

    def close(self) -> None:
        with self._lock:
            for db in self._databases:
                db.close()
            self._databases.clear()


class ServerState:
    """Everything the endpoints share."""

    def __init__(
        self,
        store_path: StoreLocation,
        settings: ServerSettings,
        shared_limits: SharedFile | None = None,
    ) -> None:
        self.store_path = store_path
        self.settings = settings
        # The rule catalogue is checked once, so a bad --rules path fails at start.
        available_rules(settings.rule_paths)
        self.clock_s: Callable[[], float] = lambda: settings.clock() / 1000
        self.tokens = TokenService(
            self.clock_s, settings.token_ttl_s, server_secret=server_secret(store_path)
        )
        # The limits' counts: this process's own, or those every process of the server
        # shares (toolkit serve --processes), in the order of LIMIT_TABLES.
        tables: list[Table | None] = [None] * len(LIMIT_TABLES)
        if shared_limits is not None:
            tables = list(shared_limits.open())
        user_rate, auth_rate = parse_rate(settings.rate_limit), parse_rate(settings.auth_rate_limit)
        self.limiter = RateLimiter(user_rate, self.clock_s, tables[0])
        self.auth_limiter = RateLimiter(auth_rate, self.clock_s, tables[1])
        self.refused_tokens = RateLimiter(auth_rate, self.clock_s, tables[2])
        self.logins = LoginBackoff(settings.login_backoff, self.clock_s, tables[3])
        self.index_cache = IndexCache()
        # Shared by every thread: one gazetteer in memory per site, one service client
        # (its answers cached for an hour, its rate kept across requests).
        self.gazetteers = GazetteerCache()
        self.geocoding_service = (
            None if settings.geocoder is None else settings.geocoder.open(cache_ttl_s=3600.0)
        )
        self.imports = ThreadPoolImportExecutor(settings.workers)
        self.reports = ThreadExecutor(settings.workers)
        self.sites = SitePool(store_path, self._configure)

    def _configure(self, site: LocalSite) -> None:
        site.rule_paths = tuple(self.settings.rule_paths)
        # Over the API a rule is a name from the catalogue, never a path to run.
        site.rule_names_only = True
        # No account changes until a request names its user (and then by its admin flag).
        site.caller = NO_CALLER
        site.index_cache = self.index_cache
        site.gazetteer_cache = self.gazetteers
        site.geocoding_service = self.geocoding_service
        site.import_executor = self._run_import
        site.report_executor = self.reports

    def _run_import(self, task: ImportTask) -> None:
        site_id = self.sites.get(task.site).store.site_id  # the request's thread has it open

        def done(finished: ImportTask) -> None:
            if finished.request.import_type == "asset":
                # New assets: the next lookup rebuilds the index instead of waiting.
                self.index_cache.forget(site_id)

        self.imports(dataclasses.replace(task, done=done))

    def shutdown(self) -> None:
        """Let background jobs finish, then close every connection."""
        self.imports.shutdown(wait=True)
        self.reports.shutdown(wait=True)
        self.sites.close()
        if self.geocoding_service is not None:
            self.geocoding_service.close()


__all__ = ["LIMIT_TABLES", "ServerSettings", "ServerState", "SitePool", "run_import_task"]
