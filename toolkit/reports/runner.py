"""Report runs: queue an instance, execute it into a snapshot, render the snapshot.

``queue`` checks the request and records a QUEUED instance; ``execute`` (in
whatever thread or process an executor chose) moves it to RUNNING, gathers the
rows into a Parquet snapshot (a temporary file), computes the metadata and marks
it COMPLETED with the snapshot stored in the site file, in one transaction, or
FAILED with the reason. Rendering reads only the snapshot and the instance.

Every step acts for one :class:`~toolkit.model.visibility.Visibility`. A run is refused
(403) when its parameters name an event the caller does not see, and its rows are
only those of the events the caller sees; the instance's header records which events
the snapshot drew on. Reading an instance (status, fetch, a repeat run) needs it to
be the caller's own (else 404, as if absent) and, since a snapshot is made once, every
event it drew on still visible (else 403: run it again).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import tempfile
import time
from collections.abc import Mapping
from typing import IO, Any, BinaryIO

from toolkit.errors import (
    DiskFullError,
    NotFoundError,
    OptionError,
    PermissionDeniedError,
    ToolkitError,
)
from toolkit.model.visibility import EVERYTHING, Visibility
from toolkit.names import REPORT_FORMATS as FORMATS
from toolkit.names import ReportFormat
from toolkit.progress import Progress, no_progress
from toolkit.query.filters import format_time, parse_int
from toolkit.reports.catalogue import Catalogue, Field, MetaEntry, ReportDefinition
from toolkit.reports.csv_file import header_zone, write_csv
from toolkit.reports.definitions import CATALOGUE, active_catalogue
from toolkit.reports.html_page import write_html
from toolkit.reports.json_contents import write_json
from toolkit.reports.schema import schema_url
from toolkit.reports.snapshot import Snapshot, SnapshotWriter
from toolkit.reports.spatial_file import SPATIAL_FORMATS, write_spatial
from toolkit.reports.times import local_text, site_zone
from toolkit.reports.xlsx_file import write_xlsx
from toolkit.store import SiteStore

log = logging.getLogger(__name__)

Format = ReportFormat


MEDIA_TYPES = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "csv-excel": "text/csv; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "gpkg": "application/geopackage+sqlite3",
    "geojson": "application/geo+json",
    "parquet": "application/vnd.apache.parquet",
}


def instance_object(row: Mapping[str, Any], catalogue: Catalogue | None = None) -> dict[str, Any]:
    """The spec's report instance (2.8), plus ``reportId`` and ``name``."""
    catalogue = catalogue or active_catalogue(CATALOGUE)
    definition = catalogue.by_id.get(row["report_id"])
    return {
        "code": row["code"],
        "id": str(row["id"]),
        "status": row["status"],
        "dateRun": format_time(row["date_run"]),
        "dateCompleted": format_time(row["date_completed"]),
        "userId": row["user_id"],
        "result": row["result"],
        "timeTaken": None if row["time_taken"] is None else f"{row['time_taken']:.3f}",
        "rowCount": None if row["row_count"] is None else str(row["row_count"]),
        "params": json.loads(row["params"]) if row["params"] is not None else None,
        "reportId": row["report_id"],
        "name": definition.name if definition else None,
    }


def _named_filters(store: SiteStore, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Filters naming an event show its name beside its id: ``1 (Sample flood 2026)``."""
    named = []
    for entry in filters:
        if entry["key"] == "eventId" and isinstance(entry["value"], int):
            event = store.events.get(entry["value"])
            if event is not None:
                entry = {**entry, "display": f"{entry['value']} ({event['name']})"}
        named.append(entry)
    return named


class ReportRunner:
    """Report runs of one site."""

    def __init__(
        self,
        store: SiteStore,
        *,
        user_id: str | None = None,
        visibility: Visibility = EVERYTHING,
        catalogue: Catalogue | None = None,
        time_zone: str | None = None,
    ) -> None:
        self.store = store
        # The site's zone (TOOLKIT_TIMEZONE, else UTC) unless given: read when a run
        # executes, kept in its header.
        self.time_zone = time_zone
        self.user_id = user_id
        self.visibility = visibility
        # The built-in reports and the analysts' (TOOLKIT_REPORTS) unless given.
        self.catalogue = catalogue or active_catalogue(CATALOGUE)

    # --- queueing -------------------------------------------------------------------------

    def queue(self, body: Mapping[str, Any]) -> int:
        """Record a QUEUED instance for the spec's ``run`` body; bad requests record nothing.

        ``reportId`` runs a report; ``reportInstanceId`` repeats an earlier run with its
        parameters, each overridden by ``params`` (a null override removes a parameter).
        """
        given = {k for k in ("reportId", "reportInstanceId") if body.get(k) is not None}
        if len(given) != 1:
            raise OptionError("a report run needs exactly one of reportId and reportInstanceId")
        overrides = body.get("params") or {}
        if not isinstance(overrides, Mapping):
            raise OptionError(f"params must be an object of parameter values, not {overrides!r}")
        if "reportId" in given:
            definition = self.catalogue.get(body["reportId"])
            raw = dict(overrides)
        else:
            # Only the caller's own instance; its parameters are checked anew below.
            previous = self._own_row(body["reportInstanceId"], "reportInstanceId")
            definition = self.catalogue.get(previous["report_id"])
            raw = {**json.loads(previous["params"] or "{}"), **overrides}
        raw = {k: v for k, v in raw.items() if v is not None}
        typed = definition.parse_params(raw)
        self._require_scope(definition, typed, f"report {definition.id} ({definition.name})")
        return self.store.reports.create(
            report_id=definition.id,
            params=definition.params_json(typed),
            user_id=self.user_id,
            result=f"report {definition.id} ({definition.name}) is scheduled",
        )

    def _row(self, instance_id: Any, name: str = "id") -> Any:
        number = parse_int(name, instance_id)
        row = self.store.reports.get(number)
        if row is None:
            raise NotFoundError(f"report instance {number} does not exist")
        return row

    def _own_row(self, instance_id: Any, name: str = "id") -> Any:
        """The instance, when it is the caller's; another user's is not found (404), so
        instance ids tell nothing of other users' runs."""
        row = self._row(instance_id, name)
        if not self.visibility.owns(row["user_id"]):
            raise NotFoundError(f"report instance {row['id']} does not exist")
        return row

    def _readable(self, instance_id: Any, name: str = "id") -> Any:
        """The caller's own instance, when the caller still sees every event it draws on:
        those its snapshot drew on once COMPLETED, else those its parameters name."""
        row = self._own_row(instance_id, name)
        if self.visibility.everything:
            return row
        what = f"report instance {row['id']}"
        if row["status"] == "COMPLETED":
            drawn = json.loads(row["header"]).get("visibility")
            if drawn is None:
                raise PermissionDeniedError(
                    f"{what} was made from the register data of every event; only the "
                    "site's operator sees it"
                )
            again = f"; run it again with reportInstanceId {row['id']}"
            self.visibility.require(drawn, what, again)
        else:
            definition = self.catalogue.get(row["report_id"])
            typed = definition.parse_params(json.loads(row["params"] or "{}"))
            self._require_scope(definition, typed, what)
        return row

    def _require_scope(
        self, definition: ReportDefinition, typed: Mapping[str, Any], what: str
    ) -> set[int | None]:
        """The events the parameters name; refused (403) unless the caller sees them all."""
        events = definition.scope(self.store, typed)
        self.visibility.require(events, what)
        return events

    # --- executing ------------------------------------------------------------------------

    def execute(self, instance_id: int) -> dict[str, Any]:
        """Run a QUEUED instance here and now; returns the instance as it ends.

        Failures do not raise: they are the instance's FAILED state and reason.
        An instance another worker has claimed is left to it.
        """
        row = self._row(instance_id)
        if not self.store.reports.start(row["id"]):
            return self._instance(row["id"])
        started = time.perf_counter()
        try:
            with self.store.reports.spool() as spool:
                definition = self.catalogue.get(row["report_id"])
                params = json.loads(row["params"] or "{}")
                header, rows = self._snapshot(row["id"], definition, params, spool)
                taken = time.perf_counter() - started
                spool.seek(0)
                # The snapshot goes into the site file with the COMPLETED status, at once.
                self.store.reports.complete(
                    row["id"],
                    row_count=rows,
                    time_taken=taken,
                    header=header,
                    result=f"completed: {rows:,} rows in {taken:.2f} s",
                    snapshot=spool,
                )
        except Exception as exc:  # every failure ends the instance, never the worker
            taken = time.perf_counter() - started
            if isinstance(exc, ToolkitError):
                reason = str(exc)
                code = 403 if isinstance(exc, PermissionDeniedError) else 400
                if isinstance(exc, DiskFullError):
                    code = 500
            else:
                log.exception("report instance %s failed", row["id"])
                # The exception's text can name files; it goes to the log only.
                reason = f"internal error ({type(exc).__name__}); the log has the details"
                code = 500
            self.store.reports.fail(row["id"], reason=reason, code=code, time_taken=taken)
        return self._instance(row["id"])

    def _snapshot(
        self,
        instance_id: int,
        definition: ReportDefinition,
        params: Mapping[str, Any],
        spool: IO[bytes],
    ) -> tuple[dict[str, Any], int]:
        """Write the rows to ``spool``; returns the contents' header and the row count."""
        typed = definition.parse_params(params)
        # Checked again here: duty can end between queueing and running.
        scope = self._require_scope(definition, typed, f"report instance {instance_id}")
        visible = self.visibility.events
        gathered = definition.gather(self.store, typed, visible)
        # The events the snapshot drew on: those the parameters name when they name
        # some (the rows are theirs alone), else every visible one (None: every event).
        narrowed = bool(scope) and None not in scope
        drawn = sorted(e for e in scope if e is not None) if narrowed else visible
        stored = gathered.spec + gathered.hidden
        with SnapshotWriter(spool, stored, geometry=gathered.geometry) as writer:
            for frame in gathered.chunks:
                writer.write(frame)
        generated = self.store.db.clock()
        zone = self.time_zone or site_zone()
        with Snapshot(spool, gathered.spec, close_source=False) as snapshot:
            meta = [
                MetaEntry.count("rowCount", "Rows", snapshot.row_count),
                MetaEntry(
                    "dateGenerated",
                    "Data as of",
                    generated // 1000,
                    f"{local_text(generated, zone)} ({zone})",
                ),
                MetaEntry("timeZone", "Times in", zone, zone),
                *gathered.meta(snapshot),
            ]
            if visible is not None and not narrowed:  # duty limited the rows: say so
                listed = ", ".join(str(e) for e in sorted(visible)) or "none"
                meta.append(
                    MetaEntry(
                        "dutyEvents",
                        "Only register data of the events on duty in",
                        sorted(visible),
                        listed,
                    )
                )
            rows = snapshot.row_count
        charts = (
            gathered.charts
            if gathered.charts is not None
            else tuple(c for c in (definition.chart, *definition.more_charts) if c is not None)
        )
        header = {
            "name": definition.name,
            "meta": [m.describe() for m in meta],
            "filter": _named_filters(self.store, definition.filters(typed)),
            "spec": [f.describe() for f in gathered.spec],
            # How the other formats draw and lay out the rows (not part of the JSON).
            "chart": charts[0].describe() if charts else None,
            "charts": [c.describe() for c in charts[1:]],
            "levels": list(gathered.levels),
            "tables": [{"key": k, "title": t} for k, t in gathered.tables],
            "timeZone": zone,
            "totals": gathered.totals,
            "headline": list(gathered.headline),
            # Not part of the contents: who may read them (see _readable).
            "visibility": None if drawn is None else [int(e) for e in drawn],
        }
        return header, rows

    # --- reading --------------------------------------------------------------------------

    def _instance(self, instance_id: int) -> dict[str, Any]:
        return instance_object(self._row(instance_id), self.catalogue)

    def status(self, instance_id: Any) -> dict[str, Any]:
        return instance_object(self._readable(instance_id), self.catalogue)

    def _completed(self, instance_id: Any) -> tuple[Any, dict[str, Any], Snapshot]:
        row = self._readable(instance_id)
        if row["status"] != "COMPLETED":
            raise OptionError(
                f"report instance {row['id']} is {row['status']}; only a COMPLETED run has "
                f"contents ({row['result']})"
            )
        header = json.loads(row["header"])
        spec = [Field(f["key"], f["label"], f["type"]) for f in header["spec"]]
        stored = self.store.reports.snapshot(row["id"])
        if stored is None:  # a run whose side-folder snapshot was lost before migration 5
            raise NotFoundError(
                f"report instance {row['id']}: its snapshot is gone; run it again "
                f"with reportInstanceId {row['id']}"
            )
        return row, header, Snapshot(stored, spec)

    def write(
        self,
        instance_id: Any,
        format: str,
        out: BinaryIO,
        *,
        schema_base_url: str | None = None,
        rows_per_sheet: int | None = None,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """Render the contents to ``out`` as the file itself (streamed); returns the instance.
        Progress counts the rows written (an HTML page shows only the first rows: none)."""
        if format not in FORMATS:
            raise OptionError(f"format {format!r} is not one of: {', '.join(FORMATS)}")
        row, header, snapshot = self._completed(instance_id)
        total = snapshot.row_count
        label = f"write {format}"
        if format != "html":
            progress(label, 0, total)
            snapshot.on_rows = lambda done: progress(label, done, total)
        with snapshot:
            if format == "json":
                write_json(snapshot, header, schema_url(schema_base_url), out)
            elif format in ("csv", "csv-excel"):
                write_csv(snapshot, header, out, excel=format == "csv-excel")
            elif format in SPATIAL_FORMATS:
                write_spatial(snapshot, header, out, format)
            elif format == "xlsx":
                if rows_per_sheet is None:
                    write_xlsx(snapshot, header, out)
                else:
                    write_xlsx(snapshot, header, out, rows_per_sheet=rows_per_sheet)
            else:
                zone = header_zone(header)
                generated = f"{local_text(row['date_run'], zone)} ({zone})"
                page = write_html(snapshot, header, generated=generated)
                out.write(page.encode("utf-8"))
        return instance_object(row, self.catalogue)

    def fetch(
        self, instance_id: Any, format: str = "json", *, schema_base_url: str | None = None
    ) -> dict[str, Any]:
        """The spec's fetch: the instance plus ``contents`` (an object for JSON, else the
        file in Base64 with ``format``). It is one JSON document, so it is held whole;
        use :meth:`write` to stream a large report to a file."""
        with tempfile.TemporaryFile() as spool:
            instance = self.write(instance_id, format, spool, schema_base_url=schema_base_url)
            spool.seek(0)
            if format == "json":
                return {**instance, "contents": json.load(io.TextIOWrapper(spool, "utf-8"))}
            encoded = base64.b64encode(spool.read()).decode("ascii")
        return {**instance, "format": format, "contents": encoded}

    def describe(self) -> list[dict[str, Any]]:
        return [d.describe() for d in self.catalogue]
