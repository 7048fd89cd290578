"""Import jobs: the spec's schedule fields, the pipeline, and the job object (spec 2.7, 4.4).

The flow (DESIGN.md), one stage per step, each giving a small frozen result: read
the source, apply the rule (per-row problems collected), link assets in bulk,
prepare the payload, plan the overwrite rule (``plan_rows``, pure: kept rows and
existing keys in, plan out), write the plan in ONE transaction that also records
the job's outcome, summarise. The plan is made inside the write transaction, so
two imports never insert a key twice. A crash before that commit leaves the
site as it was and the job ``RUNNING``, which the next opening of the site turns
into ``FAILED``. A dry run is the write stage with ``dry_run=True``: it writes,
counts and rolls back, so its counts are exactly a real run's; rollback-on-error
writes nothing when any row is rejected, maxRejects when more rows are rejected than
it allows. An unexpected failure is logged with the
name of the stage it happened in; the job's message is the same as ever.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.allocator import heap_kept_for_reuse
from toolkit.errors import NotFoundError, OptionError, StoreError, ToolkitError
from toolkit.importing.asset_writes import EarlyAssets, Unstreamable, insert_early, write_assets
from toolkit.importing.first_pass import FirstPass, fuzzy_first_pass, part_shown
from toolkit.importing.item_writes import register_fields, write_items
from toolkit.importing.link_stage import IndexProvider, link_assets, linked_rows, make_places
from toolkit.importing.outcome import (
    NO_ROWS,
    Kept,
    Linked,
    Outcome,
    WriteJob,
    WriteProgress,
    Written,
    job_summary,
    kept_mask,
    no_problems,
    problem_rows,
    refusal_reason,
)
from toolkit.importing.overwrite import OverwritePlan, check_overwrite_rule
from toolkit.importing.partitions import (
    PartitionWork,
    PartStages,
    StageEngine,
    job_fuzzy_model,
    partition_draft,
    partition_stages,
)
from toolkit.importing.parts import (
    PackedPart,
    RowNumbers,
    StagedFrames,
    StagedParts,
    release_unused,
)
from toolkit.importing.payload import Payload, prepare_payload
from toolkit.importing.plan import compact_keys, keys_frame, plan_rows
from toolkit.importing.request import (
    DATA_ENCODINGS,
    DATA_TYPES,
    ImportRequest,
    materialise_data,
    request_from_spec,
)
from toolkit.importing.results import job_object, result_html, write_rejects
from toolkit.importing.rules import ImportRule, Prepared, apply_rule, load_rule, numbers_for_text
from toolkit.importing.scope import existing_keys, import_scope, matching_field, scope_has_records
from toolkit.importing.streamed import EarlyTransaction, read_ahead, read_in_turn
from toolkit.names import IMPORT_TYPES
from toolkit.progress import Progress, no_progress
from toolkit.scratch import scratch_folder
from toolkit.sources import SourceReport
from toolkit.sources.chunks import ChunkedSource, PartRead, chunk_rows_default, read_chunks
from toolkit.store import Actor, SiteStore
from toolkit.store.link_recorder import OWN_PROCESS_ROWS, LinkRecorder

if TYPE_CHECKING:
    from toolkit.matching import Geocoder

# The runner orchestrates the stages, each in a module of its own (see their docstrings);
# the request, the results, the per-partition stages and the plan stay importable from here,
# where the engines, the server, the CLI and the tests import them.
__all__ = [
    "DATA_ENCODINGS",
    "DATA_TYPES",
    "ImportRequest",
    "ImportRunner",
    "PartStages",
    "PartitionWork",
    "StageEngine",
    "job_fuzzy_model",
    "job_object",
    "matching_field",
    "materialise_data",
    "partition_draft",
    "partition_stages",
    "plan_rows",
    "prepare_payload",
    "register_fields",
    "request_from_spec",
    "result_html",
    "streamable",
    "write_rejects",
]

log = logging.getLogger(__name__)


class _Refused(Exception):
    """More rows were rejected than rollbackOnError or maxRejects allow: the write
    transaction is rolled back."""


class ImportRunner:
    """Runs import jobs against one site."""

    def __init__(
        self,
        store: SiteStore,
        *,
        rule_paths: Iterable[str | Path] = (),
        asset_index: IndexProvider | None = None,
        user_id: str | None = None,
        progress: Progress = no_progress,
        rule_names_only: bool = False,
        geocoder: Geocoder | None = None,
        engine: StageEngine | None = None,
    ) -> None:
        self.store = store
        self.rule_paths = tuple(rule_paths)
        # A server's requests name a rule of its catalogue, never a file (rules.load_rule).
        self.rule_names_only = rule_names_only
        self.asset_index = asset_index
        # The address way's external last resort, for rules whose options ask for it.
        self.geocoder = geocoder
        self.user_id = user_id
        self.progress = progress
        # Runs the per-partition stages elsewhere (toolkit.engine); None: in this process.
        self.engine = engine
        # The running asset import's parts inserted as they are read, if it is.
        self._early: EarlyAssets | None = None

    # --- checking the request -------------------------------------------------------------

    def check(self, request: ImportRequest) -> ImportRule:
        """Refuse a request that cannot run, before any job is recorded."""
        if request.import_type not in IMPORT_TYPES:
            raise OptionError(
                f"importType {request.import_type!r} is not one of: {', '.join(IMPORT_TYPES)}"
            )
        rule = load_rule(request.import_rule, self.rule_paths, names_only=self.rule_names_only)
        if rule.import_type != request.import_type:
            raise OptionError(
                f"importRule {rule.name!r} imports {rule.import_type}s, not "
                f"{request.import_type}s; pass importType {rule.import_type}"
            )
        if request.overwrite_rule is not None:
            check_overwrite_rule(request.overwrite_rule)
        if rule.import_type == "item":
            if request.event_id is None or request.region_id is None:
                missing = [
                    n
                    for n, v in (("eventId", request.event_id), ("regionId", request.region_id))
                    if v is None
                ]
                raise OptionError(
                    f"{' and '.join(missing)} required: items are stored within events "
                    "(pass --event-id and --region-id)"
                )
            if self.store.events.get(request.event_id) is None:
                raise NotFoundError(f"eventId {request.event_id} is not an event of this site")
        matching_field(rule, request.matching_id)
        if request.rejects_path is not None:
            _check_rejects_path(request.rejects_path)
        return rule

    def _keep_own_account(self, plan: OverwritePlan, outcome: Outcome) -> OverwritePlan:
        """A user import never retires the account running it (``deleteAndInsert``)."""
        own = self.store.users.by_username(self.user_id) if self.user_id else None
        if own is None or not len(plan.retirements):
            return plan
        kept = plan.retirements != int(own["id"])
        if kept.all():
            return plan
        outcome.notes.append(f"the account running the import ({self.user_id}) was not retired")
        return replace(plan, retirements=plan.retirements[kept])

    # --- running --------------------------------------------------------------------------

    def run(self, request: ImportRequest) -> dict[str, Any]:
        """Check, record and run the import; returns the job object (spec 2.7)."""
        rule = self.check(request)
        return self.run_job(self.record(request, rule), request, rule)

    def record(self, request: ImportRequest, rule: ImportRule) -> int:
        """Record the job ``NOT_STARTED``, with its type, rule, parameters and a summary
        that say what it is even if its process dies before it ends; the job id."""
        return self.store.jobs.create(
            import_type=request.import_type,
            import_rule=rule.name,
            user_id=self.user_id,
            params=request.spec_params(),
            summary=job_summary(request, rule, Outcome(), status="NOT_STARTED"),
        )

    def run_job(self, job_id: int, request: ImportRequest, rule: ImportRule) -> dict[str, Any]:
        """Run a job already recorded as ``NOT_STARTED`` (the server schedules first)."""
        jobs = self.store.jobs
        jobs.start(job_id)
        outcome = Outcome()
        try:
            with heap_kept_for_reuse():
                self._pipeline(job_id, request, rule, outcome)
        except ToolkitError as exc:
            # The store failing (a full disk) is the server's trouble, not the request's.
            code = 500 if isinstance(exc, StoreError) else 400
            self._fail(job_id, request, rule, outcome, str(exc), code=code)
        except Exception as exc:  # the job must not stay RUNNING; the traceback goes to the log
            log.error(
                "import job %s failed in stage %s: %s: %s",
                job_id,
                outcome.failed_stage,
                type(exc).__name__,
                exc,
            )
            log.debug("traceback of import job %s", job_id, exc_info=True)
            self._fail(job_id, request, rule, outcome, _failure_reason(exc), code=500)
        return self.job_object(job_id)

    def _fail(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        outcome: Outcome,
        reason: str,
        *,
        code: int,
    ) -> None:
        if "inserted" in outcome.counts and not any("nothing was" in n for n in outcome.notes):
            # The plan was made before the write failed: its counts did not happen.
            outcome.notes.append("nothing was written; the counts say what the job would do")
        summary = job_summary(request, rule, outcome, status="FAILED", reason=reason)
        self.store.jobs.finish(
            job_id, status="FAILED", code=code, summary=summary, result=result_html(summary)
        )

    def _timed(self, outcome: Outcome, stage: str, started: float) -> None:
        # A stage run once per part adds up.
        spent = outcome.timings.get(stage, 0.0) + time.perf_counter() - started
        outcome.timings[stage] = round(spent, 3)

    @contextmanager
    def _stage(self, outcome: Outcome, name: str) -> Iterator[None]:
        """Time one stage; a failure in it is recorded under the stage's name (the innermost
        stage wins) and passes on unchanged, so the store still turns a full disk into a
        ``DiskFullError`` and the job's message stays the one the error gives. Each stage
        reports its own progress, in rows (or bytes, or values) of a known total."""
        started = time.perf_counter()
        try:
            yield
        except BaseException:
            if outcome.failed_stage is None:
                outcome.failed_stage = name
            raise
        finally:
            _release_arrow_memory()
        self._timed(outcome, name, started)

    def _pipeline(
        self, job_id: int, request: ImportRequest, rule: ImportRule, outcome: Outcome
    ) -> None:
        """read → rule → link → prepare, part by part → plan + write (one transaction) →
        summarise. The parts and their prepared rows wait in a job folder, removed after."""
        with scratch_folder("toolkit-import-") as folder:
            # On an engine every import is read in partitions (its workers read them);
            # locally, an import that cannot be read in parts is read as one, and an
            # asset import in parts inserted as they come (EarlyAssets).
            rows = self.engine.partition_rows if self.engine is not None else None
            early = self.engine is None and rule.import_type == "asset"
            if rows is None and not streamable(rule) and not early:
                rows = _ONE_PART
            elif rows is None and "fuzzy" in _link_ways(rule):
                rows = min(chunk_rows_default(), FUZZY_PART_ROWS)
            try:
                self._read_and_write(job_id, request, rule, folder, rows, outcome)
            except Unstreamable:
                # Some rows give asset ids and others do not: every row gets a new id, as
                # one part decides; the parts inserted with theirs are rolled back.
                outcome.__dict__.update(Outcome().__dict__)
                self._read_and_write(job_id, request, rule, folder, _ONE_PART, outcome)

    def _read_and_write(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        folder: Path,
        rows: int | None,
        outcome: Outcome,
    ) -> None:
        with self._stage(outcome, "read"):
            chunked = read_chunks(
                request.source,
                folder / "source",
                chunk_rows=rows,
                name=request.source_name,
                progress=self.progress,
                **request.read_options(),
            )
        if rule.import_type == "asset" and self.engine is None and chunked.count > 1:
            self._early = EarlyAssets(
                EarlyTransaction(
                    lambda: self.store.db.transaction(commit=not request.dry_run, bulk=True)
                ),
                rows=sum(chunked.sizes),
            )
        try:
            with ExitStack() as stack:
                self._pipeline_parts(job_id, request, rule, chunked, folder, outcome, stack)
        except BaseException as exc:
            if self._early is not None:
                self._early.transaction.abort(exc)  # nothing of the import is kept
            raise
        finally:
            self._early = None

    def _pipeline_parts(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        chunked: ChunkedSource,
        folder: Path,
        outcome: Outcome,
        stack: ExitStack,
    ) -> None:
        """Rule, link and payload of each part in turn (the same functions as on the whole
        file: they are pure, row by row), here or on the engine's workers; what the plan
        and the write need is kept, the prepared rows on disk. With one part, this is the
        whole file at once."""
        overwrite = request.overwrite_rule or rule.overwrite_rule
        # Patches are only needed for rows matching existing records; a first import into
        # an empty scope has none, so it skips building them (built later if one appears).
        may_update = overwrite in ("updateOnly", "updateAndInsert") and scope_has_records(
            self.store, rule, request
        )
        matching_id = matching_field(rule, request.matching_id)
        staged: StagedParts[Payload] = StagedParts(folder / "prepared")
        # Asset and user imports write their rows at once: their parts are joined.
        joined: list[Payload] = []
        # What the plan needs of every part stays compact (issue 17: 5,000,000 rows beside a
        # 1,000,000-parcel index): each part's keys without an index, its row numbers as
        # runs, its rows set aside on disk; an item part's asset ids go with its payload.
        keys: list[Any] = []
        rows: list[RowNumbers] = []
        kept_rows: list[RowNumbers] = []
        rule_rejections = StagedFrames(folder / "rejected", "rule")
        link_problems = StagedFrames(folder / "rejected", "link")
        first: Prepared | None = None
        linked = Linked(asset_ids=None, problems=no_problems())
        recorder = self._link_recorder(rule, chunked)
        if recorder is not None:
            # Closed after the parts (LIFO): on any way out, once nothing is linked any more.
            stack.callback(recorder.close)
        parts = self._parts(job_id, request, rule, chunked, folder, may_update, outcome, recorder)
        early = self._early
        if early is not None:
            # The next part is read while this one is inserted.
            parts = read_ahead(parts)
        # Left as soon as the parts' loop fails, however it fails (_read_and_write): a
        # failed or refused import stops its reading (and the reader thread) before its
        # transaction is rolled back, and its counts say how far it got.
        so_far = _SoFar(chunked.count)
        stack.enter_context(closing(parts))
        stack.enter_context(self._stopped(outcome, so_far, early))
        for part, prepared, linked, payload in parts:
            packed = payload if isinstance(payload, PackedPart) else None
            so_far.part(
                len(part), len(payload.rows if isinstance(payload, PackedPart) else payload.filled)
            )
            # The plan and the notes need the rule's headings only: not the first part's
            # rows, which would stay in memory until the write.
            # (Empty frames of their own: a slice of a frame keeps its arrays alive.)
            first = first or replace(
                prepared,
                values=pd.DataFrame(columns=prepared.values.columns),
                cleared=pd.DataFrame(columns=prepared.cleared.columns),
                rejections=pd.DataFrame(columns=prepared.rejections.columns),
            )
            if packed is not None:
                # An item part cut to its kept rows, given their asset ids and pickled by
                # a worker: staged as it came.
                staged.add_pickled(packed.data, len(packed.rows))
                keys.append(packed.keys)
                kept_rows.append(RowNumbers(packed.rows))
            else:
                assert isinstance(payload, Payload)
                if rule.import_type == "item":
                    if linked.asset_ids is not None and chunked.count > 1:
                        payload.asset_ids = linked.asset_ids.reindex(payload.filled.index)
                    # Every part but the last goes to disk at once: it need not stay in memory
                    # beside the next part while that one is read, ruled, linked and prepared.
                    staged.add(payload, len(payload.filled), keep=len(rows) + 1 == chunked.count)
                elif early is None:
                    joined.append(payload)
                keys.append(compact_keys(payload.values, matching_id))
                kept_rows.append(RowNumbers(payload.filled.index.to_numpy()))
                if early is not None:
                    with self._stage(outcome, "store"):
                        insert_early(
                            self.store, early, request, rule, payload, keys, kept_rows,
                            actor=self._actor(request, job_id), progress=self.progress,
                        )  # fmt: skip
            rule_rejections.add(prepared.rejections)
            link_problems.add(linked.problems)
            rows.append(RowNumbers(part))
            del payload, prepared, packed
            if chunked.count > 1 and rule.import_type == "item":
                # The asset ids are the payload's now, the link problems are staged and
                # the links recorded: nothing of this part's link result is kept while
                # the next part is linked.
                linked = Linked(asset_ids=None, problems=no_problems())
            release_unused()
            so_far.done += 1
        assert first is not None
        if joined:
            staged.add(Payload.concat(joined), sum(len(p.filled) for p in joined))
            del joined
        report = chunked.finish()
        # After every part: a layer's parts count the curves they made straight.
        outcome.warnings.extend(report.warnings)
        outcome.counts["read"] = report.record_count(
            pd.Index(np.concatenate([r.array() for r in rows]))
        )
        self._note_rule(request, rule, report, first, outcome)
        every = [problem_rows(report.problems), *rule_rejections.frames(), *link_problems.frames()]
        rejected = pd.concat([r for r in every if not r.empty] or [every[0]], ignore_index=True)
        kept = Kept(
            rejected=rejected,
            keep=np.empty(0, dtype=bool),
            values=keys_frame(keys, kept_rows, matching_id),
            cleared=pd.DataFrame(),
        )
        if recorder is not None:
            # The last part's links were recorded while the parts' report, rejections and
            # keys were gathered; all are recorded before the write's transaction begins
            # (the recorder's own transactions would wait behind it).
            with self._stage(outcome, "link"):
                recorder.finish()
        self._plan_and_write(
            job_id, request, rule, first, kept, staged, linked, outcome,
            rejects_of=lambda wanted: _rows_of(chunked, rows, wanted),
            geometry_source=report.geometry_source,
        )  # fmt: skip

    def _parts(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        chunked: ChunkedSource,
        folder: Path,
        may_update: bool,
        outcome: Outcome,
        recorder: LinkRecorder | None,
    ) -> Generator[tuple[np.ndarray, Prepared, Linked, Payload | PackedPart], None, None]:
        """Each part in row order: its row numbers, the rule's result, the link stage's
        (links recorded with the job by ``recorder``, if given: the caller finishes it),
        and the payload of its kept rows (what a first pass kept of them is in
        ``folder``)."""
        if self.engine is not None:
            yield from self._parts_on(
                self.engine, job_id, request, rule, chunked, folder, may_update, outcome
            )
            return
        # One index and one set of decisions for every part: a provider may load the index
        # afresh on each call, and its caches (built as rows are matched) go with it.
        shared: dict[str, Any] = {}
        first_pass: StagedParts[FirstPass] | None = None
        with ExitStack() as ends:
            if chunked.count > 1 and "fuzzy" in _link_ways(rule):
                first_pass = fuzzy_first_pass(
                    self.store, self.asset_index, self.progress,
                    partial(self._stage, outcome), request, rule, chunked, folder, shared,
                    before_fuzzy=None if recorder is None else recorder.start,
                )  # fmt: skip
                # What fitting and answering fuzzy freed goes back before the second pass.
                release_unused()
            # An asset import read ahead of its write reads its next part while this one is
            # ruled and prepared (the read is most of the reader's work, and lets go of the
            # GIL).
            if recorder is not None:
                recorder.start()
            reads = read_in_turn(chunked.count, chunked.read, ahead=self._early is not None)
            ends.enter_context(closing(reads))
            yield from self._local_parts(
                job_id, request, rule, chunked, reads, may_update, outcome, shared, first_pass,
                recorder,
            )  # fmt: skip

    def _link_recorder(self, rule: ImportRule, chunked: ChunkedSource) -> LinkRecorder | None:
        """The recorder of a local import's links, read in parts: each part's links are
        recorded while the next is linked. A large import's recorder has a process of its
        own, begun where a core has time for it: while fuzzy pairs the texts of a first
        pass (its threads leave part of one free), else at the second pass."""
        links = rule.import_type == "item" and rule.asset_link is not None
        if self.engine is not None or not links or chunked.count < 2:
            return None
        return LinkRecorder(self.store, own_process=sum(chunked.sizes) >= OWN_PROCESS_ROWS)

    def _local_parts(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        chunked: ChunkedSource,
        reads: Iterator[PartRead],
        may_update: bool,
        outcome: Outcome,
        shared: dict[str, Any],
        first_pass: StagedParts[FirstPass] | None,
        recorder: LinkRecorder | None,
    ) -> Generator[tuple[np.ndarray, Prepared, Linked, Payload | PackedPart], None, None]:
        """:meth:`_parts` on this process, of the parts ``reads`` gives (taken only where
        no first pass kept what is needed of them)."""
        for i in range(chunked.count):
            shown = part_shown(self.progress, chunked, i)
            draft = None
            if first_pass is None:
                with self._stage(outcome, "read"):
                    part = next(reads)
                with self._stage(outcome, "validate"):
                    prepared = apply_rule(
                        rule,
                        part.frame,
                        path=request.name,
                        geometry_columns=part.geometry_columns,
                        progress=shown,
                    )
            else:
                with self._stage(outcome, "validate"):
                    prepared, draft, part = first_pass.load(i)
            frame = part.frame
            linked = Linked(asset_ids=None, problems=no_problems())
            if rule.import_type == "item":
                with self._stage(outcome, "link"):
                    linked = link_assets(
                        self.store, self.asset_index, self.geocoder, job_id, frame, prepared, rule,
                        outcome, progress=shown, append=i > 0, shared=shared, draft=draft,
                        fuzzy=None if draft is None else shared["answers"], recorder=recorder,
                    )  # fmt: skip
                if linked.result is not None and linked.result.places is not None:
                    assert chunked.count == 1, "places to make need the whole file at once"
                if chunked.count > 1:
                    # The links are recorded and no places wait: of the link stage only the
                    # asset ids and problems go on, not its links nor the first pass's draft
                    # (a 250,000-row part's texts: ~100 MiB), while the part is prepared.
                    linked = Linked(linked.asset_ids, linked.problems)
                    draft = None
            keep = kept_mask(frame.index, part.problems, prepared, linked)
            with self._stage(outcome, "prepare"):
                kept_rows = int(keep.sum())
                shown("prepare", 0, kept_rows)
                payload = prepare_payload(
                    rule,
                    _rows_kept(prepared.values, keep),
                    _rows_kept(prepared.cleared, keep),
                    # Only an asset's geometry is taken from the rows as read.
                    _rows_kept(frame, keep) if rule.import_type == "asset" else None,
                    may_update=may_update,
                )
                shown("prepare", kept_rows, kept_rows)
            yield frame.index.to_numpy(), prepared, linked, payload
            # Not kept while the next part is read, ruled and linked: the caller has staged
            # the payload on disk and let go of the rest (a 250,000-row part: ~0.3 GiB), and
            # of the first pass's results for it.
            del part, frame, prepared, linked, payload, draft

    def _parts_on(
        self,
        engine: StageEngine,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        chunked: ChunkedSource,
        folder: Path,
        may_update: bool,
        outcome: Outcome,
    ) -> Generator[tuple[np.ndarray, Prepared, Linked, Payload | PackedPart], None, None]:
        """:meth:`_parts` with rule, link and payload run per partition by ``engine``'s
        workers, which read their partitions themselves (fuzzy's pairs, if it fits a
        model, wait in ``folder``)."""
        links = rule.import_type == "item" and rule.asset_link is not None
        if links and self.asset_index is None:
            raise OptionError(f"rule {rule.name!r} links assets, but no asset index is available")
        work = PartitionWork(
            rule=rule,
            path=request.name,
            geometry_columns=tuple(chunked.report.geometry_columns),
            decisions=self.store.decisions.all() if links else None,
            may_update=may_update,
            links=links,
            matching_id=(
                matching_field(rule, request.matching_id) if rule.import_type == "item" else None
            ),
        )
        with self._stage(outcome, "partitions"):
            index = self.asset_index() if links and self.asset_index is not None else None
            if "fuzzy" in _link_ways(rule) and index is not None:
                # Mode fuzzy fits its model (EM) on the texts it is given: a first pass
                # gathers the whole job's, the client fits once, and the second pass
                # links with it only the rows fuzzy was given (the first pass's drafts).
                texts, drafts = engine.first_pass(work, chunked, index, self.progress)
                work = replace(
                    work,
                    fuzzy_model=job_fuzzy_model(index, rule, texts, folder / "fuzzy-pairs"),
                    first_pass=drafts,
                )
            done = iter(engine.run_parts(work, chunked, index, self.progress))
        for i in range(chunked.count):
            started = time.perf_counter()
            part_rows, problems, stages = next(done)
            linked = Linked(asset_ids=None, problems=no_problems())
            if rule.import_type == "item":
                linked = linked_rows(
                    self.store, job_id, part_rows, rule, stages.link, outcome, append=i > 0
                )
            payload = stages.payload
            if not isinstance(payload, PackedPart):
                payload = payload.take(kept_mask(part_rows, problems, stages.prepared, linked))
            # Waiting for the workers counts as their stage, the rest as the client's.
            self._timed(outcome, "partitions", started)
            yield part_rows.to_numpy(), stages.prepared, linked, payload

    @staticmethod
    def _note_rule(
        request: ImportRequest,
        rule: ImportRule,
        report: SourceReport,
        prepared: Prepared,
        outcome: Outcome,
    ) -> None:
        """The rule stage's warnings (text fields read as numbers) and unused columns."""
        outcome.warnings.extend(
            numbers_for_text(
                rule,
                prepared.column_of,
                report.number_columns,
                path=request.name,
                sheet=report.layer,
            )
        )
        if prepared.ignored_columns:
            outcome.notes.append(
                "columns not used by the rule: " + ", ".join(prepared.ignored_columns)
            )

    def _plan_and_write(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        prepared: Prepared,
        kept: Kept,
        payload: StagedParts[Payload],
        linked: Linked,
        outcome: Outcome,
        *,
        rejects_of: Callable[[set[int]], pd.DataFrame],
        geometry_source: str | None,
    ) -> None:

        def rejects_file() -> None:
            if request.rejects_path is not None:
                wanted = set(outcome.rejections["row"].tolist())
                write_rejects(
                    request.rejects_path,
                    rejects_of(wanted),
                    outcome.rejections,
                    with_geometry=geometry_source == "native",
                )

        written = self._write(
            job_id, request, rule, prepared, kept, payload, linked, outcome,
            dry_run=request.dry_run, before_commit=rejects_file,
        )  # fmt: skip
        self._summarise(job_id, request, rule, outcome, written)

    def _write(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        prepared: Prepared,
        kept: Kept,
        payload: StagedParts[Payload],
        linked: Linked,
        outcome: Outcome,
        *,
        dry_run: bool,
        before_commit: Callable[[], None],
    ) -> Written:
        """Plan and apply the overwrite rule in one transaction; a real run also records the
        job's outcome in it. A dry run writes for real and rolls back, so its counts are
        exactly a real run's; with more rejected rows than rollbackOnError or maxRejects
        allow, nothing is written. ``before_commit`` runs once the rows are written, inside
        the transaction (the rejects file: if it cannot be written, nothing is kept)."""
        actor = self._actor(request, job_id)
        # The plan is made under the write lock, so an import that started at the same
        # time and committed first is seen, and no key is inserted twice.
        try:
            return self._write_in(
                job_id, request, rule, prepared, kept, payload, linked, outcome, actor,
                dry_run=dry_run, before_commit=before_commit,
            )  # fmt: skip
        except _Refused:
            return Written(refused=True, dry_run=dry_run)

    def _write_in(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        prepared: Prepared,
        kept: Kept,
        payload: StagedParts[Payload],
        linked: Linked,
        outcome: Outcome,
        actor: Actor,
        *,
        dry_run: bool,
        before_commit: Callable[[], None],
    ) -> Written:
        early = self._early
        with (
            self.store.db.transaction(commit=not dry_run, bulk=True)
            if early is None
            else early.transaction.finish()
        ) as conn:
            # Two imports of the same keys at once (PostgreSQL): the second waits here,
            # then plans against the first one's records.
            self.store.db.lock_scope(conn, import_scope(self.store, rule, request))
            with self._stage(outcome, "plan"):
                self.progress("plan", 0, len(kept.values))
                matching_id = matching_field(rule, request.matching_id)
                planned = plan_rows(
                    kept.values,
                    existing_keys(self.store, rule, request, matching_id)
                    if early is None or early.existing is None
                    else early.existing,
                    request.overwrite_rule or rule.overwrite_rule,
                    matching_id=matching_id,
                    column=prepared.column_of.get(matching_id, matching_id),
                    rejected=kept.rejected,
                )
                plan = planned.plan
                if rule.import_type == "user":
                    plan = self._keep_own_account(plan, outcome)
                outcome.counts.update(plan.counts())
                outcome.counts["rejected"] = planned.rejected_count
                outcome.rejections = planned.rejections
                self.progress("plan", len(kept.values), len(kept.values))
            refused = refusal_reason(request, outcome.counts) is not None
            if refused:
                # Nothing will be kept, but the updates are written (then rolled back) so
                # that rows already as asked count as unchanged, exactly as a run of the
                # good rows would count them; inserts and retirements need no writing.
                plan = replace(plan, inserts=NO_ROWS, retirements=NO_ROWS)
            with self._stage(outcome, "store"):
                asset_ids = make_places(self.store, conn, job_id, rule, linked, outcome, actor)
                writer = {
                    "item": partial(write_items, self.store),
                    "asset": partial(write_assets, self.store, early),
                    "user": partial(_write_users, self.store),
                }[rule.import_type]
                written = WriteProgress(self.progress, plan)
                changed = writer(
                    WriteJob(
                        conn, rule, request, plan, payload, asset_ids, actor,
                        now=self.store.db.clock() if early is None else early.now,
                        written=written,
                    )
                )  # fmt: skip
                written.finish()
                outcome.counts["unchanged"] = outcome.counts["updated"] - changed
                outcome.counts["updated"] = changed
            before_commit()
            if refused:
                raise _Refused  # leaves the transaction, rolling the updates back
            if not dry_run:
                summary = job_summary(request, rule, outcome, status="COMPLETE")
                self.store.jobs.finish(
                    job_id,
                    status="COMPLETE",
                    code=200,
                    summary=summary,
                    result=result_html(summary),
                    conn=conn,
                )
        return Written(refused=False, dry_run=dry_run)

    def _summarise(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        outcome: Outcome,
        written: Written,
    ) -> None:
        """Record the job's outcome where the write stage did not (refused, dry run)."""
        reason = refusal_reason(request, outcome.counts) if written.refused else None
        if reason is not None:
            outcome.notes.append(
                "rollbackOnError: a row was rejected, so nothing was written"
                if request.rollback_on_error
                else "maxRejects: more rows were rejected than allowed, so nothing was written"
            )
            if written.dry_run:
                outcome.notes.append("dry run: nothing was written")
            self._fail(job_id, request, rule, outcome, reason, code=400)
            return
        if written.dry_run:
            outcome.notes.append("dry run: nothing was written")
            summary = job_summary(request, rule, outcome, status="COMPLETE")
            self.store.jobs.finish(
                job_id, status="COMPLETE", code=200, summary=summary, result=result_html(summary)
            )

    @contextmanager
    def _stopped(
        self, outcome: Outcome, so_far: _SoFar, early: EarlyAssets | None
    ) -> Iterator[None]:
        """The parts' loop: when it fails, the job's counts say how far it got (the plan's
        counts come after every part), and a note that nothing of it was kept."""
        try:
            yield
        except Unstreamable:
            raise  # run again as one part, with an outcome of its own
        except BaseException:
            if not outcome.counts and so_far.done < so_far.count:
                outcome.counts.update(read=so_far.read, rejected=so_far.read - so_far.kept)
                inserted = sum(len(done) for done in early.inserted) if early else 0
                undone = f" (the {inserted} rows inserted as read were rolled back)"
                outcome.notes.append(
                    f"the import stopped in part {so_far.done + 1} of {so_far.count} "
                    f"({so_far.read} rows read so far); nothing was written"
                    + (undone if inserted else "")
                )
            raise

    def _actor(self, request: ImportRequest, job_id: int) -> Actor:
        """Who the job's writes are by, and why (the audit's entry)."""
        return Actor(user_id=self.user_id, message=request.message, import_job_id=job_id)

    # --- reporting --------------------------------------------------------------------------

    def job_object(self, job_id: int) -> dict[str, Any]:
        """The spec's job object (2.7), plus ``summary`` with the same facts as data."""
        row = self.store.jobs.get(job_id)
        if row is None:
            raise NotFoundError(f"import job {job_id} does not exist in this site")
        return job_object(row)


def _check_rejects_path(path: Path) -> None:
    """Refuse a rejects file that cannot be written, before the job runs: it is written
    after the import's transaction has committed, too late to undo the import (a job
    whose rows were stored would be recorded FAILED)."""
    if path.is_dir():
        raise OptionError(f"rejects file {path} is a folder; name a file to write them to")
    # The nearest folder that exists: the write makes the ones below it.
    there = next((p for p in path.parents if p.exists()), None)
    if there is not None and (not there.is_dir() or not os.access(there, os.W_OK | os.X_OK)):
        raise OptionError(
            f"rejects file {path} cannot be written: {there} is not a folder you may write in"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise OptionError(f"rejects file {path} cannot be written: it is read-only")


def _failure_reason(exc: Exception) -> str:
    """The job's message for a failure that is not the request's. A file the import could
    not read or write (its working files on a full disk, above all) says so, without the
    file's path (a server's folders are its own; the log names it); anything else is an
    internal error."""
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return (
                "the disk is full: the import's working files could not be written, so "
                "nothing was written and the site is as it was; free some space (or set "
                "TOOLKIT_WORK_DIR to a folder on a disk with room) and try again"
            )
        why = exc.strerror or type(exc).__name__
        return f"a file of the import could not be read or written ({why}); nothing was written"
    return f"internal error ({type(exc).__name__}); nothing was written"


class _SoFar:
    """How far the parts' loop got: the parts done (of ``count``), the rows read, and the
    rows kept of them."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = 0
        self.read = 0
        self.kept = 0

    def part(self, rows: int, kept: int) -> None:
        """A part has come, of ``rows`` rows, ``kept`` of them kept."""
        self.read += rows
        self.kept += kept


def _write_users(
    store: SiteStore,
    job: WriteJob,
) -> int:
    """The write stage of a user import (the store writes the accounts and their roles)."""
    payload = job.parts.only()  # a user import is not read in parts
    return store.users.write_import(
        job.conn, job.plan, payload.filled, payload.cleared, job.actor, job.now,
        tag=job.request.import_tag,
    )  # fmt: skip


# A part size no file reaches: the import is read as one part.
_ONE_PART = 2**62
# Rows per part, at most, of an item import linked with mode fuzzy by the local engine:
# its first pass holds two parts at once (one linked, the next read and checked), and
# every part is held beside the asset index and fuzzy's answers. At 1,000,000 rows
# against 1,000,000 parcels parts of 125,000 rows peaked ~150 MiB below parts of 250,000
# (the first pass's and the second's highest points) for the same CPU and links.
FUZZY_PART_ROWS = 125_000


def streamable(rule: ImportRule) -> bool:
    """Whether an import of ``rule`` may be read, linked and prepared in parts with the
    same result as at once: an item import whose linking looks at each row alone, or
    uses mode fuzzy (its model is fitted once for the whole import in a first pass).
    Places found outside become assets of the whole import, so those, and asset and
    user imports, are read as one part."""
    if rule.import_type != "item":
        return False
    link = rule.asset_link
    return link is None or not link.options.get("useExternalLookups")


def _link_ways(rule: ImportRule) -> set[str]:
    """The modes a rule's asset link tries (``mode`` and ``fallbackMode``)."""
    options = rule.asset_link.options if rule.asset_link is not None else {}
    return {str(options.get(k)) for k in ("mode", "fallbackMode")}


def _release_arrow_memory() -> None:
    """Give the blocks Arrow's allocator keeps for reuse back to the system. A stage's
    temporary arrays are freed when it ends, but mimalloc holds on to their pages, so they
    stayed in the process's memory through the next stage and the next part (a 250,000-row
    part's prepare stage: 707 MiB resident, 522 MiB after this)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _rows_of(chunked: ChunkedSource, rows: Sequence[RowNumbers], wanted: set[int]) -> pd.DataFrame:
    """The rows ``wanted`` as read (the rejected rows file): from the parts holding them;
    with the columns of the first part when none does. A source read whole is kept
    whole (its frame is in memory already)."""
    if chunked.frame is not None:
        return chunked.frame
    found = [i for i, part in enumerate(rows) if np.isin(part.array(), list(wanted)).any()]
    frames = []
    for i in found or [0]:
        frame = chunked.read(i).frame
        frames.append(frame[frame.index.isin(list(wanted))])
    return frames[0] if len(frames) == 1 else pd.concat(frames)


def _rows_kept(frame: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """The rows of ``frame`` that ``keep`` marks: ``frame`` itself when it marks every row
    (nothing rejected: no copy of the part)."""
    return frame if bool(keep.all()) else frame[keep]
