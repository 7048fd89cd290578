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

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import pandas as pd

from toolkit.errors import NotFoundError, OptionError, StoreError, ToolkitError
from toolkit.importing.linking import link_rows
from toolkit.importing.overwrite import OverwritePlan, check_overwrite_rule, plan_overwrite
from toolkit.importing.reject_limit import refusal
from toolkit.importing.request import (
    DATA_ENCODINGS,
    DATA_TYPES,
    ImportRequest,
    materialise_data,
    request_from_spec,
)
from toolkit.importing.results import MAX_ERRORS_IN_RESULT, job_object, result_html, write_rejects
from toolkit.importing.rules import (
    ImportRule,
    Prepared,
    apply_rule,
    load_rule,
    numbers_for_text,
)
from toolkit.model.fieldjson import as_python, fields_json, id_list
from toolkit.names import IMPORT_TYPES
from toolkit.progress import Progress, no_progress
from toolkit.query.filters import Page
from toolkit.sources import SourceReport, read_source
from toolkit.store import Actor, SiteStore
from toolkit.store.assets import NewAssets, geometry_columns
from toolkit.store.items import ItemChanges, NewItems

if TYPE_CHECKING:
    from toolkit.matching import AssetIndex

# The request and the results are part of this module's API, defined beside it.
__all__ = [
    "DATA_ENCODINGS",
    "DATA_TYPES",
    "ImportRequest",
    "ImportRunner",
    "job_object",
    "materialise_data",
    "request_from_spec",
    "result_html",
    "write_rejects",
]

log = logging.getLogger(__name__)

ITEM_RECORD_FIELDS = ("status", "isTemplate", "assetId")
ASSET_RECORD_FIELDS = ("id", "name", "code", "type", "friendly", "regionId", "status")
USER_RECORD_FIELDS = (
    "username",
    "firstName",
    "lastName",
    "email",
    "phone",
    "organisation",
    "positions",
    "status",
)


# Gives the matching index of the site's assets; called only when a rule links assets.
IndexProvider = Callable[[], "AssetIndex"]


_PROBLEM_COLUMNS = ["row", "column", "value", "reason"]
_NO_ROWS = np.empty(0, dtype=np.int64)


class _Refused(Exception):
    """More rows were rejected than rollbackOnError or maxRejects allow: the write
    transaction is rolled back."""


def _no_problems() -> pd.DataFrame:
    return pd.DataFrame(columns=_PROBLEM_COLUMNS)


# --- stage results: small, frozen, one per stage --------------------------------------------


@dataclass(frozen=True)
class Source:
    """The read stage: the rows as read, and the reader's report (per-row problems)."""

    frame: pd.DataFrame
    report: SourceReport

    @property
    def records(self) -> int:
        """Rows of the file: those read, and those the reader left out (a wrong number of
        values, an over-long field), which are rejected; every count adds up to this."""
        return self.report.record_count(self.frame.index)


@dataclass(frozen=True)
class Ruled:
    """The rule stage: the rule's values, and the problems of reading and of the rule."""

    prepared: Prepared
    problems: tuple[pd.DataFrame, ...]


@dataclass(frozen=True)
class Linked:
    """The link stage: each row's asset id (None when the import links none), problems."""

    asset_ids: pd.Series | None
    problems: pd.DataFrame


@dataclass(frozen=True)
class Kept:
    """The rows left to write once every rejected row is set aside."""

    rejected: pd.DataFrame
    keep: np.ndarray
    values: pd.DataFrame
    cleared: pd.DataFrame


@dataclass(frozen=True)
class Planned:
    """The plan stage: what the overwrite rule does, and every rejection so far."""

    plan: OverwritePlan
    rejections: pd.DataFrame
    rejected_count: int


@dataclass(frozen=True)
class Written:
    """The write stage: whether it refused to write (rollbackOnError, maxRejects), and
    whether it rolled back."""

    refused: bool
    dry_run: bool


def _read(request: ImportRequest, progress: Progress) -> Source:
    frame, report = read_source(
        request.source, name=request.source_name, progress=progress, **request.read_options()
    )
    return Source(frame=frame, report=report)


def _apply(rule: ImportRule, request: ImportRequest, source: Source, progress: Progress) -> Ruled:
    source_problems = pd.DataFrame(source.report.row_problems(), columns=_PROBLEM_COLUMNS)
    prepared = apply_rule(
        rule,
        source.frame,
        path=request.name,
        geometry_columns=source.report.geometry_columns,
        progress=progress,
    )
    return Ruled(prepared=prepared, problems=(source_problems, prepared.rejections))


def _keep(source: Source, ruled: Ruled, linked: Linked) -> Kept:
    problems = [*ruled.problems, linked.problems]
    rejected = pd.concat([r for r in problems if not r.empty] or [problems[0]], ignore_index=True)
    keep = ~source.frame.index.isin(list(set(rejected["row"].tolist())))
    return Kept(
        rejected=rejected,
        keep=keep,
        values=ruled.prepared.values[keep],
        cleared=ruled.prepared.cleared[keep],
    )


def plan_rows(
    values: pd.DataFrame,
    existing: pd.DataFrame,
    overwrite: str,
    *,
    matching_id: str,
    column: str,
    rejected: pd.DataFrame,
) -> Planned:
    """Plan the overwrite rule for the kept rows against the existing keys (pure); the
    rows it refuses join ``rejected``, reported under the source ``column``."""
    keys = (
        values[matching_id]
        if matching_id in values
        else pd.Series(pd.NA, index=values.index, dtype="string")
    )
    plan = plan_overwrite(keys.astype("string"), existing, overwrite, key_name=matching_id)
    if len(plan.rejected.positions):
        refused = pd.DataFrame(
            {
                "row": values.index[plan.rejected.positions],
                "column": column,
                "value": keys.iloc[plan.rejected.positions].astype("string").to_numpy(),
                "reason": plan.rejected.reasons,
            }
        )
        rejected = pd.concat([rejected, refused], ignore_index=True)
    return Planned(
        plan=plan,
        rejections=rejected.sort_values(["row", "column"], kind="stable"),
        rejected_count=int(rejected["row"].nunique()),
    )


@dataclass
class _Payload:
    """What an import writes, built before the write lock: values with defaults, and the
    JSON of every row both as a new record and as a merge patch."""

    filled: pd.DataFrame
    cleared: pd.DataFrame
    values: pd.DataFrame
    json_columns: list[str]
    insert_json: pd.Series
    patch_json: pd.Series | None
    geometry_wkb: list[bytes | None] | None = None
    bounds: np.ndarray | None = None

    def patches(self, positions: np.ndarray) -> list[str]:
        """Merge patches of the rows at ``positions`` (built now if not built ahead)."""
        if self.patch_json is not None:
            return self.patch_json.iloc[positions].tolist()
        columns = self.json_columns
        return fields_json(
            self.values.iloc[positions][columns], self.cleared.iloc[positions][columns]
        ).tolist()


@dataclass
class _Outcome:
    counts: dict[str, int] = field(default_factory=dict)
    rejections: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["row", "column", "value", "reason"])
    )
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # What the read did to the data that its user must know (see SourceReport.warnings).
    warnings: list[str] = field(default_factory=list)
    linking: dict[str, int] = field(default_factory=dict)
    failed_stage: str | None = None


class _Written:
    """The write stage's progress: rows of the plan written (retirements, then inserts as
    they go, then updates), of every row the plan writes."""

    def __init__(self, progress: Progress, plan: OverwritePlan) -> None:
        self.progress = progress
        self.retirements = len(plan.retirements)
        self.inserts = len(plan.inserts)
        self.total = self.retirements + self.inserts + len(plan.updates)
        self.done = 0
        self.report(0)

    def report(self, done: int, detail: str = "") -> None:
        self.done = done
        self.progress("write", done, self.total, detail=detail)

    def retired(self) -> None:
        self.report(self.retirements, "inserting" if self.inserts else "updating")

    def inserted(self, rows: int) -> None:
        self.report(self.retirements + rows, "inserting")

    def finish(self) -> None:
        self.report(self.total)


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
    ) -> None:
        self.store = store
        self.rule_paths = tuple(rule_paths)
        # A server's requests name a rule of its catalogue, never a file (rules.load_rule).
        self.rule_names_only = rule_names_only
        self.asset_index = asset_index
        self.user_id = user_id
        self.progress = progress

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
        return rule

    def _keep_own_account(self, plan: OverwritePlan, outcome: _Outcome) -> OverwritePlan:
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
            summary=self._summary(request, rule, _Outcome(), status="NOT_STARTED"),
        )

    def run_job(self, job_id: int, request: ImportRequest, rule: ImportRule) -> dict[str, Any]:
        """Run a job already recorded as ``NOT_STARTED`` (the server schedules first)."""
        jobs = self.store.jobs
        jobs.start(job_id)
        outcome = _Outcome()
        try:
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
            self._fail(
                job_id,
                request,
                rule,
                outcome,
                f"internal error ({type(exc).__name__}); nothing was written",
                code=500,
            )
        return self.job_object(job_id)

    def _fail(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        outcome: _Outcome,
        reason: str,
        *,
        code: int,
    ) -> None:
        if "inserted" in outcome.counts and not any("nothing was" in n for n in outcome.notes):
            # The plan was made before the write failed: its counts did not happen.
            outcome.notes.append("nothing was written; the counts say what the job would do")
        summary = self._summary(request, rule, outcome, status="FAILED", reason=reason)
        self.store.jobs.finish(
            job_id, status="FAILED", code=code, summary=summary, result=result_html(summary)
        )

    def _timed(self, outcome: _Outcome, stage: str, started: float) -> None:
        outcome.timings[stage] = round(time.perf_counter() - started, 3)

    @contextmanager
    def _stage(self, outcome: _Outcome, name: str) -> Iterator[None]:
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
        self._timed(outcome, name, started)

    def _pipeline(
        self, job_id: int, request: ImportRequest, rule: ImportRule, outcome: _Outcome
    ) -> None:
        """read → rule → link → prepare → plan + write (one transaction) → summarise."""
        with self._stage(outcome, "read"):
            source = _read(request, self.progress)
        outcome.counts["read"] = source.records
        outcome.warnings.extend(source.report.warnings)
        with self._stage(outcome, "validate"):
            ruled = _apply(rule, request, source, self.progress)
        outcome.warnings.extend(
            numbers_for_text(
                rule,
                ruled.prepared.column_of,
                source.report.number_columns,
                path=request.name,
                sheet=source.report.layer,
            )
        )
        if ruled.prepared.ignored_columns:
            outcome.notes.append(
                "columns not used by the rule: " + ", ".join(ruled.prepared.ignored_columns)
            )
        linked = Linked(asset_ids=None, problems=_no_problems())
        if rule.import_type == "item":
            with self._stage(outcome, "link"):
                linked = self._link_assets(job_id, source.frame, ruled.prepared, rule, outcome)
        kept = _keep(source, ruled, linked)
        with self._stage(outcome, "prepare"):
            kept_rows = len(kept.values)
            self.progress("prepare", 0, kept_rows)
            payload = self._prepare(
                rule, request, kept.values, kept.cleared, source.frame[kept.keep]
            )
            self.progress("prepare", kept_rows, kept_rows)
        written = self._write(
            job_id, request, rule, ruled.prepared, kept, payload, linked, outcome,
            dry_run=request.dry_run,
        )  # fmt: skip
        self._report_rejects(request, source.frame, source.report.geometry_source, outcome)
        self._summarise(job_id, request, rule, outcome, written)

    def _write(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        prepared: Prepared,
        kept: Kept,
        payload: _Payload,
        linked: Linked,
        outcome: _Outcome,
        *,
        dry_run: bool,
    ) -> Written:
        """Plan and apply the overwrite rule in one transaction; a real run also records the
        job's outcome in it. A dry run writes for real and rolls back, so its counts are
        exactly a real run's; with more rejected rows than rollbackOnError or maxRejects
        allow, nothing is written."""
        actor = Actor(user_id=self.user_id, message=request.message, import_job_id=job_id)
        # The plan is made under the write lock, so an import that started at the same
        # time and committed first is seen, and no key is inserted twice.
        try:
            return self._write_in(
                job_id, request, rule, prepared, kept, payload, linked, outcome, actor,
                dry_run=dry_run,
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
        payload: _Payload,
        linked: Linked,
        outcome: _Outcome,
        actor: Actor,
        *,
        dry_run: bool,
    ) -> Written:
        with self.store.db.transaction(commit=not dry_run) as conn:
            with self._stage(outcome, "plan"):
                self.progress("plan", 0, len(kept.values))
                matching_id = matching_field(rule, request.matching_id)
                planned = plan_rows(
                    kept.values,
                    self._existing_keys(rule, request, matching_id),
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
            refused = _refusal(request, outcome.counts) is not None
            if refused:
                # Nothing will be kept, but the updates are written (then rolled back) so
                # that rows already as asked count as unchanged, exactly as a run of the
                # good rows would count them; inserts and retirements need no writing.
                plan = replace(plan, inserts=_NO_ROWS, retirements=_NO_ROWS)
            with self._stage(outcome, "store"):
                writer = {
                    "item": self._write_items,
                    "asset": self._write_assets,
                    "user": self._write_users,
                }[rule.import_type]
                written = _Written(self.progress, plan)
                changed = writer(
                    conn,
                    rule,
                    request,
                    plan,
                    payload,
                    linked.asset_ids,
                    actor,
                    self.store.db.clock(),
                    written,
                )
                written.finish()
                outcome.counts["unchanged"] = outcome.counts["updated"] - changed
                outcome.counts["updated"] = changed
            if refused:
                raise _Refused  # leaves the transaction, rolling the updates back
            if not dry_run:
                summary = self._summary(request, rule, outcome, status="COMPLETE")
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
        outcome: _Outcome,
        written: Written,
    ) -> None:
        """Record the job's outcome where the write stage did not (refused, dry run)."""
        reason = _refusal(request, outcome.counts) if written.refused else None
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
            summary = self._summary(request, rule, outcome, status="COMPLETE")
            self.store.jobs.finish(
                job_id, status="COMPLETE", code=200, summary=summary, result=result_html(summary)
            )

    @staticmethod
    def _report_rejects(
        request: ImportRequest,
        frame: pd.DataFrame,
        geometry_source: str | None,
        outcome: _Outcome,
    ) -> None:
        if request.rejects_path is not None:
            write_rejects(
                request.rejects_path,
                frame,
                outcome.rejections,
                with_geometry=geometry_source == "native",
            )

    # --- stages -----------------------------------------------------------------------------

    def _link_assets(
        self,
        job_id: int,
        frame: pd.DataFrame,
        prepared: Prepared,
        rule: ImportRule,
        outcome: _Outcome,
    ) -> Linked:
        empty = _no_problems()
        if rule.asset_link is None:
            return Linked(pd.Series(pd.NA, index=frame.index, dtype="Int64"), empty)
        if self.asset_index is None:
            raise OptionError(f"rule {rule.name!r} links assets, but no asset index is available")
        self.progress("link", 0, len(frame), detail="loading the asset index")
        linked = link_rows(
            self.asset_index(),
            frame,
            prepared,
            rule,
            reference_field=rule.matching_id,
            decisions=self.store.decisions.all(),
            progress=self.progress,
        )
        self.store.jobs.record_links(job_id, linked.links)
        outcome.linking = linked.counts()
        if not rule.asset_link.required:
            return Linked(linked.asset_ids, empty)
        missing = linked.asset_ids.isna().to_numpy()
        return Linked(
            linked.asset_ids,
            pd.DataFrame(
                {
                    "row": frame.index[missing],
                    "column": "asset",
                    "value": pd.NA,
                    "reason": linked.reasons[missing].fillna("no asset was found").to_numpy(),
                }
            ),
        )

    def _scope_has_records(self, rule: ImportRule, request: ImportRequest) -> bool:
        """Whether the import's scope holds any record: a count, not the keys themselves
        (those are read once, under the write lock, to plan)."""
        one = Page(limit=1)
        if rule.import_type == "item":
            assert rule.register is not None
            _, total = self.store.items.query(
                page=one, register_id=rule.register, event_id=request.event_id
            )
        elif rule.import_type == "asset":
            _, total = self.store.assets.query(page=one, active=True)
        else:
            return bool(self.store.users.all())
        return total > 0

    def _existing_keys(
        self, rule: ImportRule, request: ImportRequest, matching_id: str
    ) -> pd.DataFrame:
        if rule.import_type == "item":
            assert rule.register is not None
            return self.store.items.active_keys(rule.register, request.event_id, matching_id)
        if rule.import_type == "asset":
            return self.store.assets.active_keys(matching_id)
        return self.store.users.active_keys(matching_id)

    def _prepare(
        self,
        rule: ImportRule,
        request: ImportRequest,
        values: pd.DataFrame,
        cleared: pd.DataFrame,
        frame: pd.DataFrame,
    ) -> _Payload:
        """Everything the writes need, built before the write lock is taken."""
        overwrite = request.overwrite_rule or rule.overwrite_rule
        record_fields = {
            "item": ITEM_RECORD_FIELDS,
            "asset": ASSET_RECORD_FIELDS,
            "user": USER_RECORD_FIELDS,
        }[rule.import_type]
        json_columns = [c for c in values.columns if c not in record_fields]
        defaults = {k: v for k, v in rule.defaults().items() if k in values}
        filled = values.fillna(defaults) if defaults else values
        # Patches are only needed for rows matching existing records; a first import into
        # an empty scope has none, so it skips building them (built later if one appears).
        may_update = overwrite in ("updateOnly", "updateAndInsert") and self._scope_has_records(
            rule, request
        )
        payload = _Payload(
            filled=filled,
            cleared=cleared,
            values=values,
            json_columns=json_columns,
            insert_json=fields_json(filled[json_columns]),
            patch_json=fields_json(values[json_columns], cleared[json_columns])
            if may_update
            else None,
        )
        if rule.import_type == "asset" and "geometry" in frame.columns:
            payload.geometry_wkb, payload.bounds = geometry_columns(
                np.asarray(frame.geometry.values)
            )
        return payload

    def _write_items(
        self,
        conn: Any,
        rule: ImportRule,
        request: ImportRequest,
        plan: OverwritePlan,
        payload: _Payload,
        asset_ids: pd.Series | None,
        actor: Actor,
        now: int,
        written: _Written,
    ) -> int:
        assert rule.register is not None
        self.store.registers.upsert(
            conn, rule.register, rule.register_name or rule.register, register_fields(rule)
        )
        filled = payload.filled
        links = (
            asset_ids
            if asset_ids is not None
            else pd.Series(pd.NA, index=filled.index, dtype="Int64")
        ).reindex(filled.index)
        tags = json.dumps([request.import_tag] if request.import_tag else [])
        self.store.items.retire_many(conn, id_list(plan.retirements), actor, now)
        written.retired()
        if len(plan.inserts):
            inserts = filled.iloc[plan.inserts]
            self.store.items.insert_many(
                conn,
                NewItems(
                    register_id=rule.register,
                    event_id=request.event_id,
                    region_id=request.region_id,
                    asset_id=as_python(links.iloc[plan.inserts]),
                    status=_int_column(inserts, "status", 1),
                    is_template=_int_column(inserts, "isTemplate", 0),
                    tags=tags,
                    fields=payload.insert_json.iloc[plan.inserts].tolist(),
                ),
                actor,
                now,
                on_rows=written.inserted,
            )
        changed = 0
        if len(plan.updates):
            updates = filled.iloc[plan.updates]
            update_ids = id_list(plan.update_ids)
            changed = self.store.items.update_many(
                conn,
                ItemChanges(
                    ids=update_ids,
                    fields_patch=payload.patches(plan.updates),
                    asset_id=as_python(links.iloc[plan.updates]),
                    status=as_python(updates["status"])
                    if "status" in updates
                    else [None] * len(updates),
                ),
                actor,
                now,
            )
            if request.import_tag:
                self.store.items.table.add_tag(conn, update_ids, request.import_tag)
        return changed

    def _write_assets(
        self,
        conn: Any,
        rule: ImportRule,
        request: ImportRequest,
        plan: OverwritePlan,
        payload: _Payload,
        asset_ids: pd.Series | None,
        actor: Actor,
        now: int,
        written: _Written,
    ) -> int:
        assets = self.store.assets
        filled = payload.filled
        tags = json.dumps([request.import_tag] if request.import_tag else [])
        assets.retire_many(conn, id_list(plan.retirements), actor, now)
        written.retired()
        wkb = payload.geometry_wkb or [None] * len(filled)
        bounds = payload.bounds if payload.bounds is not None else np.full((len(filled), 4), np.nan)
        if len(plan.inserts):
            inserts = filled.iloc[plan.inserts]
            given_ids = None
            if "id" in inserts and inserts["id"].notna().all():
                given_ids = [int(v) for v in as_python(inserts["id"])]
                taken = assets.ids_taken(given_ids)
                if taken:
                    raise OptionError(
                        f"asset id(s) already used: {', '.join(map(str, sorted(taken)[:10]))}; "
                        "import with matchingId id to update them"
                    )
            assets.insert_many(
                conn,
                NewAssets(
                    type=_text_column(inserts, "type", rule.asset_type or "Asset"),
                    name=as_python(inserts["name"]),
                    code=_text_column(inserts, "code", None),
                    friendly=_text_column(inserts, "friendly", None),
                    region_id=(
                        as_python(inserts["regionId"])
                        if "regionId" in inserts
                        else request.region_id
                    ),
                    status=_int_column(inserts, "status", 1),
                    extra_info=payload.insert_json.iloc[plan.inserts].tolist(),
                    geometry=[wkb[i] for i in plan.inserts],
                    bounds=bounds[plan.inserts],
                    source=request.name,
                    tags=tags,
                ),
                actor,
                now,
                ids=given_ids,
                on_rows=written.inserted,
            )
        changed = 0
        if len(plan.updates):
            updates = payload.filled.iloc[plan.updates]
            columns: dict[str, Sequence[object]] = {
                name: as_python(updates[name])
                for name in ("name", "code", "type", "friendly", "status")
                if name in updates
            }
            if payload.geometry_wkb is not None:
                columns["geometry"] = [wkb[i] for i in plan.updates]
                for i, name in enumerate(("min_x", "min_y", "max_x", "max_y")):
                    columns[name] = as_python(pd.Series(bounds[plan.updates, i]))
            changed = assets.update_many(
                conn,
                id_list(plan.update_ids),
                payload.patches(plan.updates),
                columns,
                actor,
                now,
            )
        return changed

    def _write_users(
        self,
        conn: Any,
        rule: ImportRule,
        request: ImportRequest,
        plan: OverwritePlan,
        payload: _Payload,
        asset_ids: pd.Series | None,
        actor: Actor,
        now: int,
        written: _Written,
    ) -> int:
        return self.store.users.write_import(
            conn, plan, payload.filled, payload.cleared, actor, now, tag=request.import_tag
        )

    # --- reporting --------------------------------------------------------------------------

    def _summary(
        self,
        request: ImportRequest,
        rule: ImportRule,
        outcome: _Outcome,
        *,
        status: str,
        reason: str | None = None,
    ) -> dict[str, Any]:
        rejections = outcome.rejections
        first = rejections.head(MAX_ERRORS_IN_RESULT)
        return {
            "status": status,
            "reason": reason,
            "source": request.name,
            "importRule": rule.name,
            "importType": rule.import_type,
            "overwriteRule": request.overwrite_rule or rule.overwrite_rule,
            "matchingId": matching_field(rule, request.matching_id),
            "dryRun": request.dry_run,
            "counts": outcome.counts,
            "linking": outcome.linking or None,
            "errors": [
                {
                    "row": int(row),
                    "column": _text(column),
                    "value": _text(value),
                    "reason": str(why),
                }
                for row, column, value, why in zip(
                    *(first[c].tolist() for c in ("row", "column", "value", "reason")), strict=True
                )
            ],
            "errorCount": len(rejections),
            "notes": outcome.notes,
            "warnings": outcome.warnings,
            "timings": outcome.timings,
        }

    def job_object(self, job_id: int) -> dict[str, Any]:
        """The spec's job object (2.7), plus ``summary`` with the same facts as data."""
        row = self.store.jobs.get(job_id)
        if row is None:
            raise NotFoundError(f"import job {job_id} does not exist in this site")
        return job_object(row)


def matching_field(rule: ImportRule, matching_id: str | None) -> str:
    """The field a request matches records on: the rule's, or the one ``matching_id``
    names by its field name or by the file's heading for it (``Reference`` for
    ``reference``); any other is an :class:`OptionError` listing both."""
    if matching_id is None:
        return rule.matching_id
    field = rule.matching_field(matching_id)
    if field is None:
        fields = ", ".join(sorted({f.name for f in rule.fields} | {"id"}))
        headings = ", ".join(f.column for f in rule.fields)
        raise OptionError(
            f"matchingId {matching_id!r} is neither a field of rule {rule.name!r} ({fields}) "
            f"nor a heading of one ({headings})"
        )
    return field


def _refusal(request: ImportRequest, counts: dict[str, int]) -> str | None:
    """Why the job writes nothing for its rejected rows (rollbackOnError, or more of them
    than maxRejects allows), or None when it writes its good rows."""
    return refusal(
        request.reject_limit(),
        counts.get("rejected", 0),
        counts.get("read", 0),
        rollback_on_error=request.rollback_on_error,
    )


def register_fields(rule: ImportRule) -> list[dict[str, object]]:
    """The register's field definitions, as the rule declares them."""
    return [
        {
            "name": f.name,
            "type": f.type,
            "label": f.column,
            "choices": list(f.choices),
            **({"role": f.role} if f.role else {}),
        }
        for f in rule.fields
        if f.name not in ITEM_RECORD_FIELDS
    ]


def _int_column(frame: pd.DataFrame, name: str, default: int) -> list[int]:
    if name not in frame:
        return [default] * len(frame)
    column = frame[name]
    if column.dtype == "boolean":
        column = column.astype("Int64")
    return [int(v) for v in column.fillna(default).to_numpy()]


@overload
def _text_column(frame: pd.DataFrame, name: str, default: str) -> list[str]: ...


@overload
def _text_column(frame: pd.DataFrame, name: str, default: None) -> list[str | None]: ...


def _text_column(
    frame: pd.DataFrame, name: str, default: str | None
) -> list[str] | list[str | None]:
    """A text column's values, missing ones as ``default`` (so none are missing if given)."""
    if name not in frame:
        return [default] * len(frame)
    return as_python(frame[name].fillna(default) if default is not None else frame[name])


def _text(value: object) -> str | None:
    return (
        None
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))
        else str(value)
    )
