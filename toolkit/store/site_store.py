"""One site of the file: its record stores bound to its id."""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import NotFoundError
from toolkit.store.assets import AssetStore
from toolkit.store.audit import AuditStore
from toolkit.store.auth import AuthStore
from toolkit.store.caches import IndexCacheStore
from toolkit.store.database import Database, no_site
from toolkit.store.decisions import DecisionStore
from toolkit.store.events import EventStore, RegisterStore
from toolkit.store.gazetteers import GazetteerStore
from toolkit.store.items import ItemStore
from toolkit.store.jobs import JobStore
from toolkit.store.media import MediaStore
from toolkit.store.reports import ReportStore
from toolkit.store.users import UserStore


class SiteStore:
    """The records of the site called ``name`` in ``db``."""

    def __init__(self, db: Database, name: str, *, create: bool = True) -> None:
        site_id = db.site_id(name, create=create)
        if site_id is None:
            known = db.sites()
            if not known:  # a file with no site in it (left by an older toolkit)
                raise no_site(db.path)
            raise NotFoundError(
                f"site {name!r} does not exist in {db.path}; its sites: {', '.join(known)} "
                f"(choose one with --site, or make {name!r} with `toolkit --site {name} init`)"
            )
        self.db = db
        self.name = name
        self.site_id = site_id
        connection = db.connection
        # A SQLite file's large reads may be made in a process apart.
        path = db.path if isinstance(db.path, Path) else None
        self.items = ItemStore(connection, site_id, path=path)
        self.assets = AssetStore(connection, site_id, path=path)
        self.events = EventStore(connection, site_id)
        self.registers = RegisterStore(connection, site_id)
        self.jobs = JobStore(db, site_id)
        self.users = UserStore(connection, site_id)
        self.audit = AuditStore(connection, site_id)
        self.auth = AuthStore(db, site_id)
        self.media = MediaStore(db, site_id)
        self.reports = ReportStore(db, site_id)
        self.decisions = DecisionStore(db, site_id)
        self.index_cache = IndexCacheStore(db, site_id)
        self.gazetteers = GazetteerStore(db, site_id)
