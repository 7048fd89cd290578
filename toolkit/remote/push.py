"""Pushing an import to a server: offline checks first, then chunks under the size limit.

1. Offline, everything that can be: the file is read, the rule applied and, when local
   assets are known, each item row linked to its asset, so the rows sent carry an
   ``assetId`` and the officer sees the rejected and unlinked rows before anything is
   sent (a dry run stops there).
2. The good rows are cut into chunks whose request stays under the API's 10 MB limit
   after JSON escaping, never splitting a row; each chunk is one import job.
3. A journal beside the input records each chunk's hash and job id, so an interrupted
   run resumes without sending a completed chunk again, and pushing the same file again
   does nothing unless forced.
4. Jobs are polled no more often than once a minute (the spec's limit), and their
   results combined.
5. With a limit on rejected rows (``--max-rejects``, ``--rollback-on-error``) nothing is
   sent when the offline rejects exceed it; otherwise every chunk is first dry-run on the
   server (the spec's ``dryRun``), and nothing is sent when the offline and server-side
   rejects together exceed it. Each chunk then carries the rest of the limit as
   ``maxRejects`` (the toolkit's extension field), which ``toolkit serve`` enforces per job.
6. A server dry run (``--server-dry-run``) is that dry run of every chunk alone: the server
   reads, checks, links and plans each chunk against the site as it is and writes
   nothing but the job record; the jobs' counts are what a real push would do. It keeps
   no journal, so the real push afterwards sends everything.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.errors import OptionError, RemoteError, ToolkitError
from toolkit.importing.linking import link_rows
from toolkit.importing.pipeline import ImportRequest, matching_field
from toolkit.importing.reject_limit import refusal
from toolkit.importing.results import MAX_ERRORS_IN_RESULT, job_reason
from toolkit.importing.rules import apply_rule, load_rule, numbers_for_text
from toolkit.matching import AssetIndex
from toolkit.names import JOB_COUNTS
from toolkit.progress import Progress, no_progress
from toolkit.sources import read_source

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 10 * 1024 * 1024
# Room for the request's other fields and the JSON around the data.
ENVELOPE_BYTES = 64 * 1024
MIN_POLL_INTERVAL_S = 60.0
JOURNAL_VERSION = 1
ASSET_ID_COLUMN = "assetId"
DONE = ("COMPLETE", "FAILED")


# --- chunking ------------------------------------------------------------------------------


def _csv_cells(column: pd.Series) -> pa.Array:
    """CSV text of each cell: quoted (quotes doubled) when it holds , " or a line break."""
    text = pa.array(column.astype("string"), type=pa.large_string())
    text = pc.fill_null(text, pa.scalar("", pa.large_string()))
    needs = pc.match_substring_regex(text, '[",\\r\\n]')
    quoted = pc.binary_join_element_wise(
        pa.scalar('"', pa.large_string()),
        pc.replace_substring(text, '"', '""'),
        pa.scalar('"', pa.large_string()),
        pa.scalar("", pa.large_string()),
    )
    return pc.if_else(needs, quoted, text)


def csv_lines(frame: pd.DataFrame) -> tuple[str, list[str]]:
    """The header line and one CSV line per row of ``frame`` (all columns as text)."""
    names = pd.Series([str(c) for c in frame.columns], dtype="string")
    header = ",".join(_csv_cells(names).to_pylist())
    cells = [_csv_cells(frame[c]) for c in frame.columns]
    lines = pc.binary_join_element_wise(*cells, pa.scalar(",", pa.large_string()))
    return header, lines.to_pylist()


def json_escaped_bytes(lines: list[str]) -> np.ndarray:
    """Bytes each line takes inside a JSON string (UTF-8, with its escapes), plus its newline."""
    array = pa.array(lines, type=pa.large_string())
    size = pc.binary_length(pc.cast(array, pa.large_binary())).to_numpy(zero_copy_only=False)
    extra = np.zeros(len(lines), dtype=np.int64)
    for pattern, cost in (('"', 1), ("\\", 1), ("\n", 1), ("\r", 1), ("\t", 1)):
        extra += pc.count_substring(array, pattern).to_numpy(zero_copy_only=False) * cost
    other_controls = pc.count_substring_regex(array, r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
    extra += other_controls.to_numpy(zero_copy_only=False) * 5  # \u00XX for one byte
    total: np.ndarray = size.astype(np.int64) + extra + 2  # the "\n" between lines, escaped
    return total


@dataclass(frozen=True)
class Chunk:
    """One job's worth of rows: their source row numbers and the data to send."""

    index: int
    rows: tuple[int, int]
    count: int
    data: str
    data_type: str = "csv"
    encoding: str = "plain"
    identity: str | None = None  # a hash of the rows, where the data's bytes carry dates

    @property
    def sha256(self) -> str:
        return self.identity or hashlib.sha256(self.data.encode("utf-8")).hexdigest()


def plan_chunks(
    header: str, lines: list[str], rows: np.ndarray, *, max_bytes: int = MAX_REQUEST_BYTES
) -> list[Chunk]:
    """Cut ``lines`` into chunks whose JSON-escaped data stays under ``max_bytes``."""
    budget = max_bytes - ENVELOPE_BYTES - int(json_escaped_bytes([header])[0])
    sizes = json_escaped_bytes(lines) if lines else np.zeros(0, dtype=np.int64)
    too_big = np.flatnonzero(sizes > budget)
    if too_big.size:
        raise OptionError(
            f"row {int(rows[too_big[0]])} alone is over the {max_bytes // 1024 // 1024} MB "
            "request limit; it cannot be sent in any chunk"
        )
    chunks: list[Chunk] = []
    start = 0
    totals = np.cumsum(sizes)
    while start < len(lines):
        offset = totals[start - 1] if start else 0
        end = int(np.searchsorted(totals, offset + budget, side="right"))
        end = max(end, start + 1)
        text = header + "\n" + "\n".join(lines[start:end]) + "\n"
        chunks.append(Chunk(len(chunks), (int(rows[start]), int(rows[end - 1])), end - start, text))
        start = end
    return chunks


SHAPEFILE_PARTS = (".shp", ".shx", ".dbf", ".prj", ".cpg")
DBF_NAME_LENGTH = 10


def _zipped_shapefile(frame: Any) -> bytes:
    """``frame`` (a GeoDataFrame) as a zipped Shapefile, in memory."""
    import io
    import tempfile
    import zipfile

    import pyogrio

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chunk.shp"
        pyogrio.write_dataframe(frame, path, driver="ESRI Shapefile", encoding="UTF-8")
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for suffix in SHAPEFILE_PARTS:
                part = path.with_suffix(suffix)
                if part.exists():
                    archive.write(part, f"chunk{suffix}")
        return buffer.getvalue()


def plan_zip_chunks(frame: Any, *, max_bytes: int = MAX_REQUEST_BYTES) -> list[Chunk]:
    """Cut a GeoDataFrame into zipped Shapefiles whose base64 stays under ``max_bytes``.

    Sizes are estimated per row (WKB plus attribute text) to cut, then each chunk is
    written and measured; one that comes out too big is halved until it fits.
    """
    import base64

    import shapely

    long_names = [
        str(c)
        for c in frame.columns
        if c != "geometry" and len(str(c).encode("utf-8")) > DBF_NAME_LENGTH
    ]
    if long_names:
        raise OptionError(
            f"column name(s) {', '.join(map(repr, long_names))} are longer than a Shapefile "
            "allows (10 bytes); push the data as CSV instead"
        )
    budget = (max_bytes - ENVELOPE_BYTES) * 3 // 4  # base64 grows the zip by a third
    attributes = frame.drop(columns="geometry").astype("string").fillna("")
    estimate = shapely.to_wkb(frame.geometry.values).astype(object)
    sizes = np.fromiter(
        (0 if w is None else len(w) for w in estimate), dtype=np.int64, count=len(frame)
    )
    for column in attributes.columns:
        sizes += attributes[column].str.len().fillna(0).to_numpy(dtype=np.int64) + 2
    rows = frame.index.to_numpy()
    spans: list[tuple[int, int]] = []
    start, totals = 0, np.cumsum(sizes)
    while start < len(frame):
        offset = totals[start - 1] if start else 0
        end = max(int(np.searchsorted(totals, offset + budget, side="right")), start + 1)
        spans.append((start, end))
        start = end
    chunks: list[Chunk] = []
    while spans:
        start, end = spans.pop(0)
        part = frame.iloc[start:end]
        data = base64.b64encode(_zipped_shapefile(part)).decode("ascii")
        if len(data) > max_bytes - ENVELOPE_BYTES:
            if end - start == 1:
                raise OptionError(f"row {int(rows[start])} alone is over the request limit")
            middle = (start + end) // 2
            spans[:0] = [(start, middle), (middle, end)]
            continue
        identity = hashlib.sha256(
            pd.util.hash_pandas_object(attributes.iloc[start:end], index=True).to_numpy().tobytes()
            + b"".join(w or b"" for w in estimate[start:end])
        ).hexdigest()
        chunks.append(
            Chunk(
                len(chunks),
                (int(rows[start]), int(rows[end - 1])),
                end - start,
                data,
                data_type="zip",
                encoding="base64",
                identity=identity,
            )
        )
    return chunks


# --- the journal ---------------------------------------------------------------------------


@dataclass
class Journal:
    """What a push has done, kept beside its input file as ``<file>.push.json``."""

    path: Path
    key: dict[str, Any]
    chunks: dict[str, dict[str, Any]] = field(default_factory=dict)
    # False for the jobs of a server-side dry run: they are awaited, never kept.
    kept: bool = True

    @classmethod
    def open(cls, source: Path, key: dict[str, Any]) -> Journal:
        path = source.with_name(source.name + ".push.json")
        if path.exists():
            try:
                document = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise OptionError(
                    f"{path}: the push journal is damaged ({exc}); "
                    "move it away to push from the start"
                ) from exc
            if document.get("version") == JOURNAL_VERSION and document.get("key") == key:
                return cls(path, key, document.get("chunks", {}))
        return cls(path, key)

    def save(self) -> None:
        if not self.kept:
            return
        document = {"version": JOURNAL_VERSION, "key": self.key, "chunks": self.chunks}
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(document, indent=2), encoding="utf-8")
        temporary.replace(self.path)  # atomic: a crash never leaves half a journal

    def entry(self, chunk: Chunk) -> dict[str, Any] | None:
        return self.chunks.get(chunk.sha256)


# --- the push ------------------------------------------------------------------------------


@dataclass
class PushResult:
    """Every chunk's job, the offline findings, and the combined counts."""

    source: str
    chunks: list[dict[str, Any]]
    offline: dict[str, Any]
    dry_run: bool = False
    already_done: bool = False
    # Why nothing was sent: more rows rejected (offline, or by the server's dry run of
    # every chunk) than --max-rejects or --rollback-on-error allow.
    refused: str | None = None
    # The server's dry run of each chunk, when a limit on rejected rows asked for one.
    check: list[dict[str, Any]] | None = None
    # Only the server's dry run was asked for: ``chunks`` are its jobs, nothing was written.
    server_dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.refused is None and all(c.get("status") == "COMPLETE" for c in self.chunks)

    def counts(self) -> dict[str, int]:
        """The whole file's counts: the chunks' jobs summed, with ``read`` the file's rows
        and the rows refused offline (never sent) among the ``rejected``, so they add up
        as one local import's would."""
        if not self.chunks:
            return {}
        total: dict[str, int] = dict.fromkeys(JOB_COUNTS, 0)
        for chunk in self.chunks:
            counts = ((chunk.get("job") or {}).get("summary") or {}).get("counts") or {}
            for name, value in counts.items():
                total[name] = total.get(name, 0) + int(value)
        total["read"] = int(self.offline["read"])
        total["rejected"] += int(self.offline["rejectedRows"])
        return total

    def warnings(self) -> list[str]:
        """What the offline checks warn of (the import went on)."""
        return list(self.offline.get("warnings", []))

    def failure(self) -> str | None:
        """Why the push failed (nothing sent, or chunks that did not complete), or None."""
        if self.refused is not None:
            what = "server dry run" if self.server_dry_run else "push"
            return f"{what} of {self.source} FAILED: {self.refused}"
        if self.ok or self.dry_run:
            return None
        failed = [c for c in self.chunks if c.get("status") != "COMPLETE"]
        return (
            f"{len(failed)} of {len(self.chunks)} chunk(s) of {self.source} did not complete: "
            + "; ".join(
                f"chunk {c['index'] + 1} (job {c.get('jobId')}) {c.get('status')}: "
                + job_reason(c.get("job") or {"status": c.get("status")})
                for c in failed
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": "COMPLETE" if self.ok else "FAILED",
            "reason": self.refused,
            "dryRun": self.dry_run,
            "serverDryRun": self.server_dry_run,
            "alreadyPushed": self.already_done,
            "offline": self.offline,
            "counts": self.counts(),
            "chunks": self.chunks,
            "serverCheck": self.check,
        }


class Pusher:
    """Pushes import files to a server (a :class:`toolkit.remote.RemoteSite`)."""

    def __init__(
        self,
        site: Any,
        *,
        rule_paths: tuple[Path, ...] = (),
        asset_index: Callable[[], AssetIndex | None] | None = None,
        poll_interval_s: float = MIN_POLL_INTERVAL_S,
        max_failed_polls: int = 5,
        max_bytes: int = MAX_REQUEST_BYTES,
        progress: Progress = no_progress,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.site = site
        self.rule_paths = rule_paths
        self.asset_index = asset_index
        self.poll_interval_s = poll_interval_s
        self.max_failed_polls = max_failed_polls
        self.max_bytes = max_bytes
        self.progress = progress
        self.sleep = sleep
        self.clock = clock

    def prepare(self, request: ImportRequest) -> tuple[pd.DataFrame, dict[str, Any]]:
        """Read, check and link offline; the rows to send and what was found."""
        rule = load_rule(request.import_rule, self.rule_paths)
        if rule.import_type != request.import_type:
            raise OptionError(
                f"importRule {rule.name!r} imports {rule.import_type}s, not "
                f"{request.import_type}s; pass importType {rule.import_type}"
            )
        # A heading given for the matching field is sent as the field's name.
        matching_id = (
            None if request.matching_id is None else matching_field(rule, request.matching_id)
        )
        frame, report = read_source(
            request.source, name=request.source_name, **request.read_options()
        )
        prepared = apply_rule(
            rule, frame, path=request.name, geometry_columns=report.geometry_columns
        )
        rejected = prepared.rejections
        problems = report.row_problems()  # rejected here, as the server would
        # Spatial sources travel as zipped Shapefiles (their geometry with them); tables as
        # CSV, whose geometry columns (WKT, coordinates) are ordinary columns.
        spatial = report.format in ("shapefile", "geojson", "gpkg")
        offline: dict[str, Any] = {
            # A server takes a rule's name, never a path: a rule file given here is sent
            # by the name it defines (the server must have that rule in its catalogue).
            "importRule": rule.name,
            "matchingId": matching_id,
            "read": report.record_count(frame.index),
            "rejected": [],
            "linking": None,
            "dataType": "zip" if spatial else "csv",
            "warnings": [
                *report.warnings,
                *numbers_for_text(
                    rule,
                    prepared.column_of,
                    report.number_columns,
                    path=request.name,
                    sheet=report.layer,
                ),
            ],
        }
        rows = (
            frame
            if spatial
            else frame.drop(columns=[c for c in ("geometry",) if c in frame.columns])
        )
        if rule.asset_link is not None and self.asset_index is not None:
            index = self.asset_index()
            if index is not None and len(index):
                linked = link_rows(index, frame, prepared, rule, reference_field=rule.matching_id)
                offline["linking"] = linked.counts()
                unlinked = linked.reasons.dropna().head(20)
                offline["unlinked"] = [
                    {"row": int(r), "reason": str(why)}
                    for r, why in zip(unlinked.index.tolist(), unlinked.tolist(), strict=True)
                ]
                # The links as text; a row without one stays <NA>.
                rows = rows.assign(**{ASSET_ID_COLUMN: linked.asset_ids.astype("string")})
        bad_rows = set(rejected["row"].tolist()) | {p["row"] for p in problems}
        # The first problems, as a job's summary shows them; the counts say how many in all.
        shown = rejected.head(max(0, MAX_ERRORS_IN_RESULT - len(problems)))
        offline["rejected"] = problems[:MAX_ERRORS_IN_RESULT] + [
            {
                "row": int(row),
                "column": column,
                "value": None if pd.isna(value) else str(value),
                "reason": reason,
            }
            for row, column, value, reason in zip(
                *(shown[c].tolist() for c in ("row", "column", "value", "reason")), strict=True
            )
        ]
        offline["problemCount"] = len(problems) + len(rejected)
        offline["rejectedRows"] = len(bad_rows)
        keep = ~rows.index.isin(list(bad_rows))
        return rows[keep], offline

    def push(
        self, request: ImportRequest, *, force: bool = False, server_dry_run: bool = False
    ) -> PushResult:
        """Check offline, cut into chunks, send each as a job and await them all; with
        ``server_dry_run`` the server only plans each chunk (see :meth:`_server_dry_run`).

        With a limit on rejected rows (``--max-rejects``, ``--rollback-on-error``) the
        whole file is refused, nothing sent, when the rows refused offline exceed it, or
        those and the rows the server's dry run of every chunk rejects; each chunk then
        carries what is left of the limit (the server's ``maxRejects``), so a chunk whose
        rejects grew since the dry run fails whole on the server.
        """
        rows, offline = self.prepare(request)
        request = replace(request, matching_id=offline["matchingId"])
        reason = self._refusal(request, offline, int(offline["rejectedRows"]))
        if reason is not None or request.dry_run:
            return PushResult(
                request.name,
                [],
                offline,
                dry_run=request.dry_run,
                refused=reason,
                server_dry_run=server_dry_run,
            )
        if offline["dataType"] == "zip":
            chunks = plan_zip_chunks(rows, max_bytes=self.max_bytes)
        else:
            header, lines = csv_lines(rows.astype("string"))
            chunks = plan_chunks(header, lines, rows.index.to_numpy(), max_bytes=self.max_bytes)
        key = {
            "sourceSha256": hashlib.sha256(request.source.read_bytes()).hexdigest(),
            "site": getattr(self.site, "name", None),
            "url": getattr(getattr(self.site, "profile", None), "base_url", None),
            "params": {k: v for k, v in request.spec_params().items() if k != "source"},
        }
        if server_dry_run:
            return self._server_dry_run(request, chunks, key, offline)
        journal = Journal.open(request.source, key)
        if force:
            journal.chunks = {}
        done = [journal.entry(c) for c in chunks]
        if chunks and all(e is not None and e.get("status") == "COMPLETE" for e in done):
            result = [dict(e, index=c.index) for c, e in zip(chunks, done, strict=True) if e]
            return PushResult(request.name, result, offline, already_done=True)

        self._adopt_jobs_of_interrupted_sends(chunks, journal)
        budgets: list[int | None] = [None] * len(chunks)
        check = None
        if request.reject_limit() is not None and not journal.chunks:
            # A first send (a resumed one passed this check before sending anything).
            check = self._server_check(request, chunks, journal, offline["importRule"])
            rejected = int(offline["rejectedRows"]) + sum(c["rejected"] for c in check)
            failed = [c for c in check if c["status"] != "COMPLETE"]
            reason = self._refusal(request, offline, rejected, by_server=True)
            if failed:
                reason = (
                    "; ".join(
                        f"the server's dry run of chunk {c['index'] + 1} (job {c['jobId']}) "
                        f"{c['status']}: {c['reason']}"
                        for c in failed
                    )
                    + "; nothing was sent"
                )
            if reason is not None:
                return PushResult(request.name, [], offline, refused=reason, check=check)
            if request.max_rejects is not None:
                spare = self._allowed(request, offline) - rejected
                budgets = [c["rejected"] + spare for c in check]
        for chunk in chunks:
            entry = journal.entry(chunk)
            if entry is not None and entry.get("jobId") is not None:
                continue  # sent before: only its result is awaited
            self.progress(
                "send",
                chunk.index,
                len(chunks),
                unit="chunks",
                detail=f"rows {chunk.rows[0]}-{chunk.rows[1]}",
            )
            body = self._schedule_body(request, chunk, len(chunks), offline["importRule"])
            if budgets[chunk.index] is not None:
                body["maxRejects"] = budgets[chunk.index]
            # Recorded before sending: an interrupted send is resent, which repeats nothing
            # with a matching id (matches update to the same values, or are skipped).
            journal.chunks[chunk.sha256] = {
                "index": chunk.index,
                "rows": list(chunk.rows),
                "count": chunk.count,
                "jobId": None,
                "status": "SENDING",
            }
            journal.save()
            answer = self.site.import_schedule(body)
            job_id = answer.get("id")
            if job_id is None:
                raise RemoteError(f"the server scheduled chunk {chunk.index + 1} without a job id")
            journal.chunks[chunk.sha256].update(jobId=job_id, status="NOT_STARTED")
            journal.save()
        self.progress("send", len(chunks), len(chunks), unit="chunks")
        self._await(chunks, journal)
        results = [dict(journal.chunks[c.sha256], index=c.index) for c in chunks]
        return PushResult(request.name, results, offline, check=check)

    def _server_dry_run(
        self,
        request: ImportRequest,
        chunks: list[Chunk],
        key: dict[str, Any],
        offline: dict[str, Any],
    ) -> PushResult:
        """Every chunk planned by the server (the spec's ``dryRun=1``), nothing written and
        nothing journalled: the counts a real push would give, and the reason its limit on
        rejected rows (``--max-rejects``, ``--rollback-on-error``) would refuse it."""
        check = self._server_check(
            request, chunks, Journal(request.source, key, kept=False), offline["importRule"]
        )
        rejected = int(offline["rejectedRows"]) + sum(c["rejected"] for c in check)
        reason = self._refusal(request, offline, rejected, by_server=True)
        if reason is not None:
            reason = reason.replace("nothing was sent", "a push would send nothing")
        results = [{k: v for k, v in c.items() if k not in ("rejected", "reason")} for c in check]
        return PushResult(request.name, results, offline, refused=reason, server_dry_run=True)

    @staticmethod
    def _allowed(request: ImportRequest, offline: dict[str, Any]) -> int:
        limit = request.reject_limit()
        assert limit is not None
        return limit.allowed(int(offline["read"]))

    @staticmethod
    def _refusal(
        request: ImportRequest, offline: dict[str, Any], rejected: int, *, by_server: bool = False
    ) -> str | None:
        """Why the file is not sent: more rows rejected than its limit allows (the limit
        is against the whole file's rows read, as a local import's is)."""
        reason = refusal(
            request.reject_limit(),
            rejected,
            int(offline["read"]),
            rollback_on_error=request.rollback_on_error,
            outcome="nothing was sent",
        )
        if reason is None:
            return None
        where = (
            f"{offline['rejectedRows']} offline and {rejected - int(offline['rejectedRows'])} "
            "by the server's dry run"
            if by_server
            else "offline"
        )
        return reason.replace(" rejected", f" rejected ({where})", 1)

    def _server_check(
        self, request: ImportRequest, chunks: list[Chunk], journal: Journal, rule_name: str
    ) -> list[dict[str, Any]]:
        """Dry-run every chunk on the server (the spec's dryRun: nothing is written) and
        await the jobs; each chunk's job, status and rows rejected."""
        scratch = Journal(journal.path, journal.key, kept=False)
        for chunk in chunks:
            self.progress("check", chunk.index, len(chunks), unit="chunks", detail="dry run")
            body = self._schedule_body(request, chunk, len(chunks), rule_name)
            body.update(dryRun=1, rollbackOnError=0)
            body["message"] = "dry run: " + body["message"]
            answer = self.site.import_schedule(body)
            if answer.get("id") is None:
                raise RemoteError(f"the server scheduled chunk {chunk.index + 1} without a job id")
            scratch.chunks[chunk.sha256] = {"jobId": answer["id"], "status": "NOT_STARTED"}
        self._await(chunks, scratch, label="check")
        checked = []
        for chunk in chunks:
            entry = scratch.chunks[chunk.sha256]
            job = entry.get("job") or {}
            summary = job.get("summary") or {}
            checked.append(
                {
                    "index": chunk.index,
                    "rows": list(chunk.rows),
                    "count": chunk.count,
                    "jobId": entry["jobId"],
                    "status": entry.get("status"),
                    "rejected": int((summary.get("counts") or {}).get("rejected") or 0),
                    "reason": summary.get("reason"),
                    "job": job,
                }
            )
        return checked

    @staticmethod
    def _schedule_body(
        request: ImportRequest, chunk: Chunk, total: int, rule_name: str
    ) -> dict[str, Any]:
        overwrite = request.overwrite_rule
        if overwrite == "deleteAndInsert" and chunk.index > 0:
            # Only the first chunk retires what was there; the others must not retire the
            # first chunk's rows again.
            overwrite = "updateAndInsert"
        body: dict[str, Any] = {
            "importType": request.import_type,
            "importRule": rule_name,
            "data": chunk.data,
            "dataType": chunk.data_type,
            "encoding": chunk.encoding,
            "dryRun": 0,
            "rollbackOnError": int(request.rollback_on_error),
            "message": (request.message or f"toolkit push of {request.name}")
            + f" (chunk {chunk.index + 1} of {total}, rows {chunk.rows[0]}-{chunk.rows[1]}, "
            + f"{_chunk_tag(chunk)})",
        }
        optional = {
            "matchingId": request.matching_id,
            "overwriteRule": overwrite,
            "eventId": request.event_id,
            "regionId": request.region_id,
            "importTag": request.import_tag,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        return body

    def _adopt_jobs_of_interrupted_sends(self, chunks: list[Chunk], journal: Journal) -> None:
        """A chunk whose send was cut off may have made its job: find it rather than resend.

        Each chunk's job message carries the chunk's tag; a server that reports the
        schedule fields of its jobs (``toolkit serve`` does) lets it be found. Otherwise
        the chunk is sent again, which a matching id makes harmless.
        """
        interrupted = [
            c for c in chunks if (e := journal.entry(c)) is not None and e.get("jobId") is None
        ]
        if not interrupted:
            return
        try:
            jobs = self.site.import_status()
        except ToolkitError as exc:
            log.warning("cannot list the server's jobs to resume: %s", exc)
            return
        by_tag: dict[str, Any] = {}
        for job in jobs if isinstance(jobs, list) else []:
            params = job.get("params") or {}
            if params.get("dryRun") not in (None, 0, "0", False):
                continue  # a dry run of the same chunk wrote nothing: not its job
            message = str(params.get("message") or "")
            for chunk in interrupted:
                if _chunk_tag(chunk) in message:
                    by_tag[chunk.sha256] = job.get("id")
        for chunk in interrupted:
            if chunk.sha256 in by_tag:
                journal.chunks[chunk.sha256].update(
                    jobId=by_tag[chunk.sha256], status="NOT_STARTED"
                )
                log.info(
                    "chunk %d was scheduled before the interruption as job %s",
                    chunk.index + 1,
                    by_tag[chunk.sha256],
                )
        journal.save()

    def _report_wait(
        self, chunks: list[Chunk], waiting: list[Chunk], journal: Journal, pause: float, label: str
    ) -> None:
        """Say which jobs the push waits for on the server and when it asks next."""
        at = (dt.datetime.now() + dt.timedelta(seconds=pause)).strftime("%H:%M:%S")
        self.progress(
            label,
            len(chunks) - len(waiting),
            len(chunks),
            unit="jobs",
            detail=f"server jobs: {_waiting_for(waiting, journal)}; next status check at {at}"
            + (f" (in {pause:.0f} s)" if pause >= 1 else ""),
        )

    def _await(self, chunks: list[Chunk], journal: Journal, label: str = "wait") -> None:
        """Poll every unfinished job, no more than once per poll interval.

        A round in which no status could be read counts as failed; after
        ``max_failed_polls`` of them in a row the push stops, its journal kept, so the
        same command resumes it.
        """
        waiting = [c for c in chunks if journal.chunks[c.sha256].get("status") not in DONE]
        last_poll = -float("inf")
        failed_rounds = 0
        while waiting:
            pause = self.poll_interval_s - (self.clock() - last_poll)
            self._report_wait(chunks, waiting, journal, max(pause, 0.0), label)
            if pause > 0:
                self.sleep(pause)
            last_poll = self.clock()
            answered = 0
            last_error: ToolkitError | None = None
            for chunk in list(waiting):
                entry = journal.chunks[chunk.sha256]
                try:
                    job = self.site.import_status(int(entry["jobId"]))
                except ToolkitError as exc:
                    last_error = exc
                    continue
                answered += 1
                entry["status"] = job.get("status")
                entry["job"] = job
                if entry["status"] in DONE:
                    waiting.remove(chunk)
            journal.save()
            failed_rounds = 0 if answered else failed_rounds + 1
            if last_error is not None:
                log.warning("status of a job: %s; will ask again", last_error)
            if failed_rounds >= self.max_failed_polls:
                raise RemoteError(
                    f"lost contact with the server while waiting for {len(waiting)} job(s) "
                    f"({last_error}); the jobs were scheduled and are kept in {journal.path}: "
                    "run the same command again to resume"
                )
        self.progress(label, len(chunks), len(chunks), unit="jobs", detail="every job finished")


def _waiting_for(chunks: list[Chunk], journal: Journal, limit: int = 3) -> str:
    """``job 4 RUNNING, job 5 NOT_STARTED and 2 more``: what a push waits for."""
    shown = [
        f"job {journal.chunks[c.sha256].get('jobId')} {journal.chunks[c.sha256].get('status')}"
        for c in chunks[:limit]
    ]
    more = len(chunks) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _chunk_tag(chunk: Chunk) -> str:
    return f"chunk {chunk.sha256[:16]}"
