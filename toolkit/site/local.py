"""The one interface of the toolkit: the spec's operations, in the spec's JSON shapes.

:class:`LocalSite` implements it in-process over a site file; ``RemoteSite``
(``toolkit.remote.site``) implements it over HTTP; the CLI and ``toolkit serve``
call it. Collection methods take the GET parameters as text, exactly as a URL
carries them, so every face checks them the same way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from toolkit.errors import NotFoundError, OptionError
from toolkit.importing.results import JobOutcome, job_object
from toolkit.model.shapes import (
    asset_from_row,
    audit_from_row,
    envelope,
    event_from_row,
    item_from_row,
)
from toolkit.model.visibility import EVERYTHING, Visibility, job_events
from toolkit.names import FULLTEXT_OPERATORS
from toolkit.progress import Progress, no_progress
from toolkit.query.cql import parse_cql
from toolkit.query.filters import format_time, parse_int, parse_query, parse_time, shown
from toolkit.site import known
from toolkit.site.admin import SiteAdmin
from toolkit.site.protocol import DEFAULT_DELIVERY, Delivery
from toolkit.site.writes import SiteWrites, checked_message
from toolkit.store import Actor, Database, SiteStore

# The import pipeline, reports, matching and geocoding are imported where they are used:
# with pandas, geopandas and pyogrio under them they took a second and a half of every
# command, `toolkit ping` included (issue 17; tests/test_cold_start.py).
if TYPE_CHECKING:
    import pandas as pd

    from toolkit.geocoding import GazetteerCache
    from toolkit.importing.pipeline import ImportRequest, StageEngine
    from toolkit.importing.tasks import ImportExecutor, ImportTask
    from toolkit.matching import AssetIndex, Geocoder, LookupOptions
    from toolkit.reports import ReportExecutor, ReportRunner, ReportTask
    from toolkit.site.index_cache import IndexCache

ITEM_FILTERS = {
    "registerId": "text",
    "eventId": "int",
    "isTemplate": "bool",
    "cql": "text",
    "assetId": "int",
}
ITEM_ALIASES = {"type": "registerId", "query": "cql"}
ASSET_FILTERS = {
    "id": "int",
    "fulltext": "text",
    "soundex": "text",
    "active": "bool",
    "type": "text",
    "code": "text",
    "isImpacted": "bool",
    "latitude": "float",
    "longitude": "float",
    "range": "float",
}
ASSET_ALIASES = {"name": "soundex"}
DEFAULT_RANGE_M = 100.0
EVENT_FILTERS = {
    "id": "int",
    "fulltext": "text",
    "fulltext_operator": "text",
    "status": "int",
    "active": "bool",
    "startDateAfter": "time",
    "startDateBefore": "time",
    "tag": "text",
    "isTemplate": "bool",
    "isGlobal": "bool",
}

AUDIT_FILTERS = {"id": "int", "eventId": "int", "itemId": "int", "importJobId": "int"}
EVENT_UPDATABLE = {
    "name": "name",
    "description": "description",
    "status": "status",
    "startDate": "start_date",
    "tags": "tags",
    "isTemplate": "is_template",
    "isGlobal": "is_global",
    "regionId": "region_id",
}
# Event fields that always hold a value: a change-set cannot null them.
EVENT_REQUIRED = ("name", "status")


def init_site(path: str | Path, name: str) -> dict[str, Any]:
    """Make the site ``name`` in the file at ``path`` (the file too) unless it is there.

    The one way to make an empty site on purpose; what was found and done.
    """
    with Database(path) as db:
        created = db.site_id(name) is None
        if created:
            db.site_id(name, create=True)
        return {"store": db.display, "site": name, "created": created, "sites": db.sites()}


def inline_import_executor(task: ImportTask) -> None:
    """Run a scheduled import at once, in this thread (the default executor)."""
    from toolkit.importing.tasks import inline_executor

    inline_executor(task)


def inline_report_executor(task: ReportTask) -> None:
    """Run a queued report at once, in this thread (the default executor)."""
    from toolkit.reports import inline_executor

    inline_executor(task)


class LocalSite(SiteWrites, SiteAdmin):
    """The spec's operations on one site of an embedded site file."""

    # Who runs scheduled imports (``toolkit serve`` sets a thread pool), and a matching
    # index kept in memory across calls (``toolkit serve`` shares one between threads).
    import_executor: ImportExecutor = staticmethod(inline_import_executor)
    index_cache: IndexCache | None = None
    # Set by ``toolkit serve``: requests name rules of the catalogue, never rule files.
    rule_names_only: bool = False
    # External lookups: the geocoding service (``toolkit serve --geocoder``, the config
    # file), and loaded gazetteers kept in memory (``toolkit serve`` shares one cache).
    geocoding_service: Geocoder | None = None
    gazetteer_cache: GazetteerCache | None = None

    def __init__(
        self,
        path: str | Path,
        site: str,
        *,
        user_id: str | None = None,
        rule_paths: Iterable[str | Path] = (),
        create: bool = True,
        db: Database | None = None,
        report_executor: ReportExecutor = inline_report_executor,
        schema_base_url: str | None = None,
    ) -> None:
        self.db = db or Database(path, create=create)
        self._owns_db = db is None
        try:
            self.store = SiteStore(self.db, site, create=create)
        except Exception:
            self.close()
            raise
        self.user_id = user_id
        self.rule_paths = tuple(rule_paths)
        # Who executes queued report runs (inline, a thread, a detached worker), and the
        # base URL a server puts in the reports' $schema (None: the packaged file).
        self.report_executor = report_executor
        self.schema_base_url = schema_base_url
        # One connection serves every thread of `toolkit serve`; SQLite calls on it are
        # serialised here, while long jobs run on their own connections.
        self.lock = threading.RLock()

    def close(self) -> None:
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> LocalSite:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return self.store.name

    # --- ping ---------------------------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        return {"status": 200, "timestamp": format_time(self.db.clock()), "auth": None}

    # --- rules and imports --------------------------------------------------------------

    def import_file(
        self,
        request: ImportRequest,
        *,
        progress: Progress = no_progress,
        delivery: Delivery = DEFAULT_DELIVERY,
        engine: StageEngine | None = None,
    ) -> JobOutcome:
        """Import a file in place, as one job (``delivery`` is for a server: unused), its
        per-partition stages on ``engine`` when given."""
        return JobOutcome(self.run_import(request, progress=progress, engine=engine))

    def run_import(
        self,
        request: ImportRequest,
        *,
        progress: Progress = no_progress,
        engine: StageEngine | None = None,
    ) -> dict[str, Any]:
        """Run an import now, in this process (its per-partition stages on ``engine``
        when given); returns the finished job object."""
        if request.import_type == "user":
            self.require_account_admin("an import of type user")
        from toolkit.geocoding import LazyGeocoder
        from toolkit.importing.pipeline import ImportRunner

        runner = ImportRunner(
            self.store,
            rule_paths=self.rule_paths,
            user_id=self.user_id,
            progress=progress,
            asset_index=self.asset_index,
            rule_names_only=self.rule_names_only,
            geocoder=LazyGeocoder(self.geocoder),
            engine=engine,
        )
        return runner.run(request)

    def remember_decisions(self, decisions: pd.DataFrame) -> int:
        """Keep a reviewer's match decisions (columns ``query``, ``asset_id``) for every
        later lookup and import of this site; returns how many were kept."""
        return self.store.decisions.remember(decisions)

    def match_decisions(self) -> pd.DataFrame:
        """Every remembered match decision of this site (columns ``query``, ``asset_id``)."""
        return self.store.decisions.all()

    def asset_index(self) -> AssetIndex:
        """The matching index of this site's active assets (cached in the site file)."""
        if self.index_cache is not None:
            return self.index_cache.get(self.store)
        from toolkit.site.index_cache import site_asset_index

        return site_asset_index(self.store)

    def asset_lookup(
        self,
        queries: str | list[dict[str, Any]],
        options: dict[str, Any] | None = None,
        output: str = "asset",
        *,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """The spec's asset lookup (4.3): one query string, or ``[{code, str}, ...]``;
        ``progress`` counts the queries answered (all in one batch here)."""
        import pandas as pd

        from toolkit.matching import checked_options, queries_from_spec, resolve, to_spec_result
        from toolkit.site.ties import mark_ties

        index = self.asset_index()
        if isinstance(queries, str):  # the GET form: one query, answered as "1"
            checked = checked_options(index, options)
            frame = pd.DataFrame({"query": pd.array([queries], dtype="str")})
        else:
            frame = queries_from_spec(queries)
            checked = checked_options(index, options)
        progress("lookup", 0, len(frame), unit="queries")
        resolved = resolve(index, frame, checked, geocoder=self.geocoder())
        index, resolved = self.upgrade_places(index, resolved, checked)
        progress("lookup", len(frame), len(frame), unit="queries")
        return mark_ties(to_spec_result(index, resolved, output), resolved)

    def geocoder(self) -> Geocoder:
        """Where a lookup turns when no asset matches: the site's gazetteer, then the
        geocoding service (``NOT_CONFIGURED`` when it has neither)."""
        from toolkit.geocoding import GazetteerCache, site_sources

        if self.gazetteer_cache is None:
            self.gazetteer_cache = GazetteerCache()
        return site_sources(self.store, self.gazetteer_cache, self.geocoding_service)

    def load_gazetteer(
        self,
        paths: list[Path],
        *,
        name: str | None = None,
        columns: Mapping[str, str] | None = None,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """Make the address points of ``paths`` the site's gazetteer (``toolkit.geocoding``);
        what it holds and what was left out."""
        from toolkit.geocoding import describe, load_files

        with self.lock:
            _, report = load_files(self.store, paths, name=name, columns=columns, progress=progress)
            info = describe(self.store) or {}
        return {**info, "read": report.read, "kept": report.kept, "examples": report.examples}

    def gazetteer_info(self) -> dict[str, Any] | None:
        """The site's gazetteer (name, files, points by feature, size), or None."""
        from toolkit.geocoding import describe

        with self.lock:
            return describe(self.store)

    def remove_gazetteer(self) -> bool:
        """Drop the site's gazetteer; whether there was one."""
        with self.lock:
            return self.store.gazetteers.remove()

    def upgrade_places(
        self, index: AssetIndex, resolved: Any, options: LookupOptions
    ) -> tuple[AssetIndex, Any]:
        """With ``upgradeExternalLookupToInternalAsset``, the geocoded places of
        ``resolved`` that no asset holds become assets (see ``toolkit.site.external``)."""
        from toolkit.site.external import upgrade_message
        from toolkit.site.external import upgrade_places as upgrade

        if not options.upgrade_external_lookup_to_internal_asset:
            return index, resolved

        def reindex() -> AssetIndex:
            if self.index_cache is not None:
                self.index_cache.forget(self.store.site_id)
            return self.asset_index()

        with self.lock:
            return upgrade(
                self.store,
                index,
                resolved,
                options,
                Actor(self.user_id, upgrade_message(options)),
                reindex,
            )

    def unfinished_reports(self) -> int:
        """How many of this user's report runs have not ended yet."""
        with self.lock:
            return self.store.reports.unfinished(self.user_id)

    def import_status(
        self, job_id: int | None = None, *, visibility: Visibility = EVERYTHING
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """One job (spec 2.7), or with no id a summary of every job of the site.

        An item job's record holds rows of its event (the first errors with their
        values), so one is refused (403), and left out of the summary, unless
        ``visibility`` sees its event.
        """
        if job_id is None:
            return [
                job_object(row)
                for row in self.store.jobs.all()
                if visibility.covers(job_events(row))
            ]
        row = self.store.jobs.get(job_id)
        if row is None:
            raise NotFoundError(f"import job {job_id} does not exist")
        visibility.require(job_events(row), f"import job {job_id}")
        return job_object(row)

    # --- events and registers -----------------------------------------------------------

    def create_event(self, values: Mapping[str, Any], message: str | None = None) -> dict[str, Any]:
        message = checked_message(message)
        columns = self._event_columns(values)
        if not columns.get("name"):
            raise OptionError("an event needs a name")
        columns.setdefault("status", 1)
        with self.lock, self.db.transaction() as conn:
            event_id = self.store.events.insert(
                conn, columns, Actor(self.user_id, message), self.db.clock()
            )
        return self.get_event(event_id)

    def get_event(self, event_id: int) -> dict[str, Any]:
        row = self.store.events.get(event_id)
        if row is None:
            raise NotFoundError(f"event {event_id} does not exist")
        return event_from_row(row)

    def list_events(self, params: Mapping[str, str]) -> dict[str, Any]:
        query = parse_query(params, EVENT_FILTERS)
        f = query.filters
        operator = str(f.get("fulltext_operator", "contains"))
        if operator not in FULLTEXT_OPERATORS:
            raise OptionError(
                f"fulltext_operator {operator!r} is not one of: {', '.join(FULLTEXT_OPERATORS)}"
            )
        rows, total = self.store.events.query(
            page=query.page,
            event_id=query.filter("id", int),
            fulltext=query.filter("fulltext", str),
            fulltext_operator=operator,
            status=query.filter("status", int),
            active=query.filter("active", bool),
            start_after=query.filter("startDateAfter", int),
            start_before=query.filter("startDateBefore", int),
            tag=query.filter("tag", str),
            is_template=query.filter("isTemplate", bool),
            is_global=query.filter("isGlobal", bool),
            since=query.since,
            until=query.until,
        )
        return envelope((event_from_row(r) for r in rows), total)

    def update_event(
        self,
        event_id: int,
        changes: Mapping[str, Any],
        *,
        replace: bool = False,
        message: str | None = None,
    ) -> dict[str, Any]:
        """PATCH (a change-set) or, with ``replace``, PUT (missing fields become null)."""
        message = checked_message(message)
        self.get_event(event_id)
        if replace:
            missing = [n for n in EVENT_REQUIRED if changes.get(n) in (None, "")]
            if missing:
                raise OptionError(
                    f"a full update (PUT) of an event needs {' and '.join(missing)}; "
                    "to change some fields only, use PATCH"
                )
            changes = {name: changes.get(name) for name in EVENT_UPDATABLE}
        columns = self._event_columns(changes)
        if columns:
            with self.lock, self.db.transaction() as conn:
                self.store.events.update(
                    conn, event_id, columns, Actor(self.user_id, message), self.db.clock()
                )
        return self.get_event(event_id)

    @staticmethod
    def _event_columns(values: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(
            set(values) - set(EVENT_UPDATABLE) - {"id", "active", "dateCreated", "dateModified"}
        )
        if unknown:
            raise OptionError(
                f"unknown event field(s) {', '.join(unknown)}; known: " + ", ".join(EVENT_UPDATABLE)
            )
        columns: dict[str, Any] = {}
        for name, column in EVENT_UPDATABLE.items():
            if name not in values:
                continue
            value = values[name]
            if value is None and name in EVENT_REQUIRED:
                raise OptionError(
                    f"event {name} cannot be null"
                    + ("; retire an event with status 0" if name == "status" else "")
                )
            if name in ("name", "description"):
                if value is not None and not isinstance(value, str):
                    raise OptionError(f"event {name} {shown(value)} must be text")
                if name == "name" and not str(value).strip():
                    raise OptionError("event name cannot be empty")
            elif name == "startDate" and value is not None:
                if isinstance(value, bool) or not isinstance(value, str | int):
                    raise OptionError(f"event startDate {shown(value)} must be a date or time")
                value = parse_time("startDate", str(value))
            elif name == "tags":
                if value is not None and (
                    not isinstance(value, list) or not all(isinstance(t, str) for t in value)
                ):
                    raise OptionError(f"event tags {shown(value)} must be a list of strings")
                value = json.dumps(value or [], ensure_ascii=False)
            elif name in ("isTemplate", "isGlobal"):
                # null is false (a PUT nulls what it omits); anything else must be a boolean.
                if value is not None and not isinstance(value, bool):
                    raise OptionError(f"event {name} {shown(value)} must be true or false")
                value = int(bool(value))
            elif name in ("status", "regionId") and value is not None:
                value = parse_int(name, value)
            columns[column] = value
        return columns

    def list_registers(self) -> list[dict[str, Any]]:
        return [
            {
                "id": r["id"],
                "name": r["name"],
                "fields": json.loads(r["fields"]),
                "itemCount": r["item_count"],
            }
            for r in self.store.registers.all()
        ]

    def _register_fields(self, register_id: str) -> list[str]:
        row = self.store.registers.get(register_id)
        return [] if row is None else [f["name"] for f in json.loads(row["fields"])]

    # --- items --------------------------------------------------------------------------

    def list_items(
        self, params: Mapping[str, str], *, within_events: Collection[int] | None = None
    ) -> dict[str, Any]:
        """The item collection (4.6); ``within_events`` limits it to those events (duty)."""
        query = parse_query(params, ITEM_FILTERS, aliases=ITEM_ALIASES)
        f = query.filters
        if "registerId" not in f:
            raise OptionError("registerId (alias type) is required for item collections")
        register_id = str(f["registerId"])
        fields = known.register_fields(self.store, register_id)
        cql = parse_cql(str(f["cql"])) if f.get("cql") else None
        if cql is not None:
            known.cql_fields(self.store, register_id, fields, cql)
        if "eventId" in f:
            known.event(self.store, f["eventId"])
        if "assetId" in f:
            asset_id = f["assetId"]
            known.record("an asset", "assetId", asset_id, self._asset_exists(asset_id))
        rows, total = self.store.items.query(
            page=query.page,
            register_id=register_id,
            event_id=query.filter("eventId", int),
            is_template=query.filter("isTemplate", bool),
            asset_id=query.filter("assetId", int),
            since=query.since,
            until=query.until,
            cql=cql,
            within_events=within_events,
        )
        return envelope((item_from_row(r, fields) for r in rows), total)

    def get_item(self, item_id: int) -> dict[str, Any]:
        row = self.store.items.get(item_id)
        if row is None:
            raise NotFoundError(f"item {item_id} does not exist")
        return item_from_row(row, self._register_fields(row["register_id"]))

    # --- assets -------------------------------------------------------------------------

    def list_assets(self, params: Mapping[str, str]) -> dict[str, Any]:
        query = parse_query(params, ASSET_FILTERS, aliases=ASSET_ALIASES)
        f = query.filters
        near = None
        latitude, longitude = query.filter("latitude", float), query.filter("longitude", float)
        if latitude is not None or longitude is not None:
            if latitude is None or longitude is None:
                raise OptionError("latitude and longitude go together")
            if not (-90 <= latitude <= 90 and -180 <= longitude <= 180):
                raise OptionError(f"latitude {latitude}, longitude {longitude} is not a place")
            range_m = query.filter("range", float)
            range_m = DEFAULT_RANGE_M if range_m is None else range_m
            if range_m <= 0:
                raise OptionError(f"range {range_m} must be more than 0 (metres)")
            near = (latitude, longitude, range_m)
        elif "range" in f:
            raise OptionError("range needs latitude and longitude")
        if "type" in f:
            known.asset_type(self.store, f["type"])
        rows, total = self.store.assets.query(
            page=query.page,
            asset_id=query.filter("id", int),
            fulltext=query.filter("fulltext", str),
            soundex=query.filter("soundex", str),
            active=query.filter("active", bool),
            asset_type=query.filter("type", str),
            code=query.filter("code", str),
            is_impacted=query.filter("isImpacted", bool),
            near=near,
            since=query.since,
            until=query.until,
        )
        return envelope((asset_from_row(r) for r in rows), total)

    def _asset_exists(self, asset_id: object) -> bool:
        return isinstance(asset_id, int) and self.store.assets.get(asset_id) is not None

    def get_asset(self, asset_id: int | str) -> dict[str, Any]:
        number = parse_int("asset id", str(asset_id))
        row = self.store.assets.get(number)
        if row is None:
            raise NotFoundError(f"asset {asset_id} does not exist")
        return asset_from_row(row)

    def asset_types(self) -> list[dict[str, Any]]:
        return [{"name": r["name"], "friendly": r["friendly"]} for r in self.store.assets.types()]

    # --- audit log ----------------------------------------------------------------------

    def list_audit_logs(
        self, params: Mapping[str, str], *, within_events: Collection[int] | None = None
    ) -> dict[str, Any]:
        """Audit entries (4.9); ``within_events`` keeps those of these events or of none."""
        query = parse_query(params, AUDIT_FILTERS)
        f = query.filters
        if "eventId" in f:
            known.event(self.store, f["eventId"])
        if "itemId" in f:
            item_id = f["itemId"]
            exists = isinstance(item_id, int) and self.store.items.get(item_id) is not None
            known.record("an item", "itemId", item_id, exists)
        if "importJobId" in f:
            job_id = f["importJobId"]
            exists = isinstance(job_id, int) and self.store.jobs.get(job_id) is not None
            known.record("an import job", "importJobId", job_id, exists)
        rows, total = self.store.audit.query(
            page=query.page,
            audit_id=query.filter("id", int),
            event_id=query.filter("eventId", int),
            item_id=query.filter("itemId", int),
            import_job_id=query.filter("importJobId", int),
            within_events=within_events,
            since=query.since,
            until=query.until,
        )
        return envelope((audit_from_row(r) for r in rows), total)

    def get_audit_log(self, audit_id: int) -> dict[str, Any]:
        row = self.store.audit.get(audit_id)
        if row is None:
            raise NotFoundError(f"audit log {audit_id} does not exist")
        return audit_from_row(row)

    # --- reports ------------------------------------------------------------------------

    # ``visibility``: what the caller sees (``toolkit serve`` gives an API user's duty and
    # own instances); runs are refused or filtered by it, instances read only within it.

    def _reports(self, visibility: Visibility = EVERYTHING) -> ReportRunner:
        from toolkit.reports import ReportRunner

        return ReportRunner(self.store, user_id=self.user_id, visibility=visibility)

    def report_list(self) -> list[dict[str, Any]]:
        """The catalogue: each report's id, name, description, parameters and chart."""
        return self._reports().describe()

    def report_run(
        self, body: Mapping[str, Any], *, visibility: Visibility = EVERYTHING
    ) -> dict[str, Any]:
        """The spec's ``run``: queue an instance and hand it to the report executor."""
        with self.lock:
            instance_id = self._reports(visibility).queue(body)
            queued = self.store.reports.get(instance_id)
            assert queued is not None  # queued just now, under the same lock
            scheduled = queued["result"]
        from toolkit.reports import ReportTask

        owner = self.report_executor(
            ReportTask(self.db.path, self.store.name, instance_id, self.user_id, visibility)
        )
        if owner is not None:
            with self.lock:
                self.store.reports.hand_over(instance_id, owner)
        return {"code": 200, "result": scheduled, "id": str(instance_id)}

    def report_work(self, instance_id: int | str) -> dict[str, Any]:
        """Execute a queued instance in this process (what a worker does); the instance."""
        return self._reports().execute(parse_int("id", str(instance_id)))

    def report_status(
        self, instance_id: int | str, *, visibility: Visibility = EVERYTHING
    ) -> dict[str, Any]:
        """The spec's ``status``: the instance object (2.8)."""
        with self.lock:
            return self._reports(visibility).status(instance_id)

    def report_fetch(
        self, instance_id: int | str, format: str = "json", *, visibility: Visibility = EVERYTHING
    ) -> dict[str, Any]:
        """The spec's ``fetch``: the instance plus ``contents`` (+ ``format`` unless JSON)."""
        with self.lock:
            return self._reports(visibility).fetch(
                instance_id, format, schema_base_url=self.schema_base_url
            )

    def report_write(
        self,
        instance_id: int | str,
        format: str,
        out: BinaryIO,
        *,
        visibility: Visibility = EVERYTHING,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """Stream the contents, as the file itself, to ``out``; returns the instance."""
        with self.lock:
            return self._reports(visibility).write(
                instance_id, format, out, schema_base_url=self.schema_base_url, progress=progress
            )
