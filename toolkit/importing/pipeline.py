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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.errors import NotFoundError, OptionError, StoreError, ToolkitError
from toolkit.geocoding import make_assets
from toolkit.importing.linking import LinkResult, link_rows
from toolkit.importing.overwrite import (
    OverwritePlan,
    check_overwrite_rule,
    normalised_keys,
    plan_overwrite,
)
from toolkit.importing.parts import (
    RowNumbers,
    StagedFrames,
    StagedParts,
    map_large_arrays,
    release_unused,
)
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
from toolkit.importing.streamed import EarlyTransaction, read_ahead
from toolkit.matching.modes import (
    FuzzyAnswers,
    FuzzyTexts,
    ModeFunction,
    ModeRecord,
    ModeResult,
    fuzzy_model,
    match_fuzzy,
    replayed,
)
from toolkit.matching.options import LookupOptions
from toolkit.matching.probabilistic import Model
from toolkit.model.fieldjson import as_python, fields_json, id_list
from toolkit.names import IMPORT_TYPES
from toolkit.progress import Progress, no_progress
from toolkit.query.filters import Page
from toolkit.scratch import scratch_folder
from toolkit.sources import SourceProblem, SourceReport
from toolkit.sources.chunks import ChunkedSource, read_chunks
from toolkit.store import Actor, SiteStore
from toolkit.store.assets import NewAssets, geometry_columns
from toolkit.store.items import ItemChanges, NewItems

if TYPE_CHECKING:
    from toolkit.matching import AssetIndex, Geocoder

# The request and the results are part of this module's API, defined beside it.
__all__ = [
    "DATA_ENCODINGS",
    "DATA_TYPES",
    "ImportRequest",
    "ImportRunner",
    "PartStages",
    "PartitionWork",
    "StageEngine",
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
# What a job's first pass keeps of a part (on disk): its rule's result, and the results of
# the modes tried before fuzzy, in call order (``ModeRecord``).
_FirstPass = tuple[Prepared, list[ModeResult]]


@dataclass(frozen=True)
class PartitionWork:
    """What every partition's stages need besides its rows; small and picklable (an
    engine sends it to its workers once per job)."""

    rule: ImportRule
    path: str
    geometry_columns: tuple[str, ...]
    decisions: pd.DataFrame | None
    may_update: bool
    links: bool
    # Mode fuzzy's model, fitted once for the whole job (None: each partition fits its own).
    fuzzy_model: Model | None = None


@dataclass(frozen=True)
class PartStages:
    """One partition's rule, link and payload results, over all of its rows (the rows
    rejected anywhere are set aside once every partition is back)."""

    prepared: Prepared
    link: LinkResult | None
    payload: _Payload


class StageEngine(Protocol):
    """Runs :func:`partition_stages` over the partitions of a source (``toolkit.engine``),
    its workers reading them; the parts come back in row order, each with its row numbers
    and the reader's problems of its rows. The plan and the write stay here, one
    transaction."""

    @property
    def partition_rows(self) -> int: ...

    def run_parts(
        self,
        work: PartitionWork,
        source: ChunkedSource,
        index: AssetIndex | None,
        progress: Progress,
    ) -> Iterator[tuple[pd.Index, list[SourceProblem], PartStages]]: ...

    def fuzzy_texts(
        self, work: PartitionWork, source: ChunkedSource, index: AssetIndex, progress: Progress
    ) -> list[pd.Series]: ...


def partition_stages(
    work: PartitionWork, frame: pd.DataFrame, index: AssetIndex | None
) -> PartStages:
    """Rule, link and payload of one partition: pure, row by row, so the parts of a
    frame give exactly what the whole frame gives (``frame``'s index: row numbers)."""
    rule = work.rule
    prepared = apply_rule(rule, frame, path=work.path, geometry_columns=list(work.geometry_columns))
    link = None
    if work.links:
        assert index is not None
        fuzzy: ModeFunction | None = None
        if work.fuzzy_model is not None:
            fuzzy = partial(match_fuzzy, model=work.fuzzy_model)
        link = link_rows(
            index,
            frame,
            prepared,
            rule,
            reference_field=rule.matching_id,
            decisions=work.decisions,
            fuzzy=fuzzy,
        )
    payload = prepare_payload(
        rule, prepared.values, prepared.cleared, frame, may_update=work.may_update
    )
    return PartStages(prepared=prepared, link=link, payload=payload)


def partition_fuzzy_texts(work: PartitionWork, frame: pd.DataFrame, index: AssetIndex) -> pd.Series:
    """The distinct texts (first-occurrence order) that mode fuzzy is given in one
    partition: the first pass of a job whose fuzzy model is fitted once for all of it."""
    prepared = apply_rule(
        work.rule, frame, path=work.path, geometry_columns=list(work.geometry_columns)
    )
    texts = FuzzyTexts()
    link_rows(
        index, frame, prepared, work.rule, reference_field=work.rule.matching_id,
        decisions=work.decisions, fuzzy=texts,
    )  # fmt: skip
    return texts.distinct()


def job_fuzzy_model(
    index: AssetIndex, rule: ImportRule, texts: Sequence[pd.Series]
) -> Model | None:
    """Mode fuzzy's model for a whole job from its partitions' texts (in row order): the
    model the job read as one part fits, so every partition links as that part would."""
    return fuzzy_model(index, *_job_texts(rule, texts))


def job_fuzzy_answers(
    index: AssetIndex, rule: ImportRule, texts: Sequence[pd.Series]
) -> FuzzyAnswers:
    """``job_fuzzy_model`` and mode fuzzy's answer with it to each text of the job."""
    return FuzzyAnswers.of(index, *_job_texts(rule, texts))


def _job_texts(rule: ImportRule, texts: Sequence[pd.Series]) -> tuple[pd.Series, LookupOptions]:
    """The distinct texts of a job's partitions (in row order), and its lookup options."""
    assert rule.asset_link is not None
    options = LookupOptions.from_dict({"useExternalLookups": False, **rule.asset_link.options})
    every = pd.concat([pd.Series([], dtype=object), *texts], ignore_index=True)
    return pd.Series(pd.unique(every)), options


_PROBLEM_COLUMNS = ["row", "column", "value", "reason"]
_NO_ROWS = np.empty(0, dtype=np.int64)


class _Unstreamable(Exception):
    """An asset import inserted as it is read cannot go on as one part would: the
    parts inserted so far are rolled back and the import is run again as one part."""


@dataclass
class _EarlyAssets:
    """An asset import's parts inserted as they are read, in the import's one write
    transaction (begun at the first part): each part's inserts are planned against the
    keys of the rows before it, which decide them as the whole file's plan does (a key
    repeating an earlier row is refused, the earlier row kept). Its updates wait for the
    end, so records are written in the order one part writes them."""

    transaction: EarlyTransaction[Any]
    existing: pd.DataFrame | None = None
    now: int = 0
    kept: int = 0  # kept rows of the parts so far
    inserted: list[np.ndarray] = field(default_factory=list)  # positions of all kept rows
    retired: np.ndarray = field(default_factory=lambda: _NO_ROWS)
    # The parts whose rows update records: their first position and payload.
    updating: list[tuple[int, _Payload]] = field(default_factory=list)
    given_ids: bool | None = None  # decided by the first part that inserts
    keys: list[Any] = field(default_factory=list)  # each part's keys (pa.Array, trimmed)


class _Refused(Exception):
    """More rows were rejected than rollbackOnError or maxRejects allow: the write
    transaction is rolled back."""


def _no_problems() -> pd.DataFrame:
    return pd.DataFrame(columns=_PROBLEM_COLUMNS)


# --- stage results: small, frozen, one per stage --------------------------------------------


@dataclass(frozen=True)
class Linked:
    """The link stage: each row's asset id (None when the import links none), problems,
    and what the write stage still has to link: places to make assets of, then record."""

    asset_ids: pd.Series | None
    problems: pd.DataFrame
    result: LinkResult | None = None


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


def _problem_rows(problems: Sequence[SourceProblem]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"row": p.row, "column": p.column, "value": p.value, "reason": p.message}
         for p in problems if p.row is not None],
        columns=_PROBLEM_COLUMNS,
    )  # fmt: skip


def _merged_counts(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Link counts of two parts together: the ways by rows linked (most first), then
    ``external`` and ``unlinked``, as one part's counts are."""
    total = dict(counts)
    for key, value in more.items():
        total[key] = total.get(key, 0) + value
    last = ("external", "unlinked")
    ways = sorted((k for k in total if k not in last), key=lambda k: -total[k])
    return {k: total[k] for k in [*ways, *last] if k in total}


def _part_progress(progress: Progress, start: int, rows: int, every: int, name: str) -> Progress:
    """``progress`` of one part (``name``) of ``rows`` rows from row ``start``, told as rows
    of all ``every`` rows (each stage counts in its own unit within a part)."""

    def report(
        label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
    ) -> None:
        share = done / total if total else 1.0
        words = f"{name}: {detail}" if detail else name
        progress(label, start + round(share * rows), every, detail=words)

    return report


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
    plan = plan_overwrite(keys, existing, overwrite, key_name=matching_id)
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
    # An item part's asset ids (of its kept rows), staged with it rather than kept for
    # every row of the file until the write; None: the write is given them whole.
    asset_ids: pd.Series | None = None

    @classmethod
    def concat(cls, parts: Sequence[_Payload]) -> _Payload:
        """The payloads of consecutive partitions as one (same rule, same columns)."""
        first = parts[0]
        wkb = (
            None if first.geometry_wkb is None else [w for p in parts for w in p.geometry_wkb or []]
        )
        return cls(
            filled=pd.concat([p.filled for p in parts]),
            cleared=pd.concat([p.cleared for p in parts]),
            values=pd.concat([p.values for p in parts]),
            json_columns=first.json_columns,
            insert_json=pd.concat([p.insert_json for p in parts]),
            patch_json=None
            if first.patch_json is None
            else pd.concat([p.patch_json for p in parts if p.patch_json is not None]),
            geometry_wkb=wkb,
            bounds=None if first.bounds is None else np.concatenate([p.bounds for p in parts]),
        )

    def take(self, keep: np.ndarray) -> _Payload:
        """The payload of the rows ``keep`` marks (a boolean mask in row order)."""
        return _Payload(
            filled=self.filled[keep],
            cleared=self.cleared[keep],
            values=self.values[keep],
            json_columns=self.json_columns,
            insert_json=self.insert_json[keep],
            patch_json=None if self.patch_json is None else self.patch_json[keep],
            geometry_wkb=None
            if self.geometry_wkb is None
            else [w for w, k in zip(self.geometry_wkb, keep, strict=True) if k],
            bounds=None if self.bounds is None else self.bounds[keep],
        )

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
        self._early: _EarlyAssets | None = None

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
        # A stage run once per part adds up.
        spent = outcome.timings.get(stage, 0.0) + time.perf_counter() - started
        outcome.timings[stage] = round(spent, 3)

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
        finally:
            _release_arrow_memory()
        self._timed(outcome, name, started)

    def _pipeline(
        self, job_id: int, request: ImportRequest, rule: ImportRule, outcome: _Outcome
    ) -> None:
        """read → rule → link → prepare, part by part → plan + write (one transaction) →
        summarise. The parts and their prepared rows wait in a job folder, removed after."""
        with scratch_folder("toolkit-import-") as folder:
            # On an engine every import is read in partitions (its workers read them);
            # locally, an import that cannot be read in parts is read as one, and an
            # asset import in parts inserted as they come (_EarlyAssets).
            rows = self.engine.partition_rows if self.engine is not None else None
            early = self.engine is None and rule.import_type == "asset"
            if rows is None and not streamable(rule) and not early:
                rows = _ONE_PART
            try:
                self._read_and_write(job_id, request, rule, folder, rows, outcome)
            except _Unstreamable:
                # Some rows give asset ids and others do not: every row gets a new id, as
                # one part decides; the parts inserted with theirs are rolled back.
                outcome.__dict__.update(_Outcome().__dict__)
                self._read_and_write(job_id, request, rule, folder, _ONE_PART, outcome)

    def _read_and_write(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        folder: Path,
        rows: int | None,
        outcome: _Outcome,
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
            self._early = _EarlyAssets(
                EarlyTransaction(lambda: self.store.db.transaction(commit=not request.dry_run))
            )
        try:
            self._pipeline_parts(job_id, request, rule, chunked, folder, outcome)
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
        outcome: _Outcome,
    ) -> None:
        """Rule, link and payload of each part in turn (the same functions as on the whole
        file: they are pure, row by row), here or on the engine's workers; what the plan
        and the write need is kept, the prepared rows on disk. With one part, this is the
        whole file at once."""
        overwrite = request.overwrite_rule or rule.overwrite_rule
        # Patches are only needed for rows matching existing records; a first import into
        # an empty scope has none, so it skips building them (built later if one appears).
        may_update = overwrite in ("updateOnly", "updateAndInsert") and self._scope_has_records(
            rule, request
        )
        matching_id = matching_field(rule, request.matching_id)
        staged: StagedParts[_Payload] = StagedParts(folder / "prepared")
        if chunked.count > 1:
            map_large_arrays()
        # Asset and user imports write their rows at once: their parts are joined.
        joined: list[_Payload] = []
        # What the plan needs of every part stays compact (issue 17: 5,000,000 rows beside a
        # 1,000,000-parcel index): each part's keys without an index, its row numbers as
        # runs, its rows set aside on disk; an item part's asset ids go with its payload.
        keys: list[Any] = []
        rows: list[RowNumbers] = []
        kept_rows: list[RowNumbers] = []
        rule_rejections = StagedFrames(folder / "rejected", "rule")
        link_problems = StagedFrames(folder / "rejected", "link")
        first: Prepared | None = None
        linked = Linked(asset_ids=None, problems=_no_problems())
        parts = self._parts(job_id, request, rule, chunked, folder, may_update, outcome)
        early = self._early
        if early is not None:
            # The next part is read while this one is inserted.
            parts = read_ahead(parts)
        for part, prepared, linked, payload in parts:
            # The plan and the notes need the rule's headings only: not the first part's
            # rows, which would stay in memory until the write.
            # (Empty frames of their own: a slice of a frame keeps its arrays alive.)
            first = first or replace(
                prepared,
                values=pd.DataFrame(columns=prepared.values.columns),
                cleared=pd.DataFrame(columns=prepared.cleared.columns),
                rejections=pd.DataFrame(columns=prepared.rejections.columns),
            )
            if rule.import_type == "item":
                if linked.asset_ids is not None and chunked.count > 1:
                    payload.asset_ids = linked.asset_ids.reindex(payload.filled.index)
                # Every part but the last goes to disk at once: it need not stay in memory
                # beside the next part while that one is read, ruled, linked and prepared.
                staged.add(payload, len(payload.filled), keep=len(rows) + 1 == chunked.count)
            elif early is None:
                joined.append(payload)
            keys.append(_compact_keys(payload.values, matching_id))
            kept_rows.append(RowNumbers(payload.filled.index.to_numpy()))
            if early is not None:
                with self._stage(outcome, "store"):
                    self._insert_early(early, job_id, request, rule, payload, keys, kept_rows)
            rule_rejections.add(prepared.rejections)
            link_problems.add(linked.problems)
            rows.append(RowNumbers(part))
            del payload, prepared
            if chunked.count > 1 and rule.import_type == "item":
                # The asset ids are the payload's now, the link problems are staged and
                # the links recorded: nothing of this part's link result is kept while
                # the next part is linked.
                linked = Linked(asset_ids=None, problems=_no_problems())
            release_unused()
        assert first is not None
        if joined:
            staged.add(_Payload.concat(joined), sum(len(p.filled) for p in joined))
            del joined
        report = chunked.finish()
        # After every part: a layer's parts count the curves they made straight.
        outcome.warnings.extend(report.warnings)
        outcome.counts["read"] = report.record_count(
            pd.Index(np.concatenate([r.array() for r in rows]))
        )
        self._note_rule(request, rule, report, first, outcome)
        every = [_problem_rows(report.problems), *rule_rejections.frames(), *link_problems.frames()]
        rejected = pd.concat([r for r in every if not r.empty] or [every[0]], ignore_index=True)
        kept = Kept(
            rejected=rejected,
            keep=np.empty(0, dtype=bool),
            values=_keys_frame(keys, kept_rows, matching_id),
            cleared=pd.DataFrame(),
        )
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
        outcome: _Outcome,
    ) -> Iterator[tuple[np.ndarray, Prepared, Linked, _Payload]]:
        """Each part in row order: its row numbers, the rule's result, the link stage's
        (links recorded with the job), and the payload of its kept rows (what a first
        pass kept of them is in ``folder``)."""
        if self.engine is not None:
            yield from self._parts_on(
                self.engine, job_id, request, rule, chunked, may_update, outcome
            )
            return
        # One index and one set of decisions for every part: a provider may load the index
        # afresh on each call, and its caches (built as rows are matched) go with it.
        shared: dict[str, Any] = {}
        first_pass: StagedParts[_FirstPass] | None = None
        if chunked.count > 1 and "fuzzy" in _link_ways(rule):
            first_pass = self._first_pass(request, rule, chunked, folder, outcome, shared)
        for i in range(chunked.count):
            shown = self._part_shown(chunked, i)
            with self._stage(outcome, "read"):
                part = chunked.read(i)
            frame = part.frame
            modes = None
            with self._stage(outcome, "validate"):
                if first_pass is None:
                    prepared = apply_rule(
                        rule,
                        frame,
                        path=request.name,
                        geometry_columns=part.geometry_columns,
                        progress=shown,
                    )
                else:
                    prepared, results = first_pass.load(i)
                    modes = replayed(results, shared["answers"])
                    del results
            linked = Linked(asset_ids=None, problems=_no_problems())
            if rule.import_type == "item":
                with self._stage(outcome, "link"):
                    linked = self._link_assets(
                        job_id, frame, prepared, rule, outcome, progress=shown, append=i > 0,
                        shared=shared, modes=modes,
                    )  # fmt: skip
                if linked.result is not None and linked.result.places is not None:
                    assert chunked.count == 1, "places to make need the whole file at once"
            keep = _kept(frame.index, part.problems, prepared, linked)
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
            del part, frame, prepared, linked, payload, modes

    def _part_shown(self, chunked: ChunkedSource, i: int) -> Progress:
        """The progress of part ``i`` (the job's own when it is read as one part)."""
        if chunked.count == 1:
            return self.progress
        start = sum(chunked.sizes[:i])
        return _part_progress(
            self.progress, start, chunked.sizes[i], chunked.rows, f"part {i + 1} of {chunked.count}"
        )

    def _first_pass(
        self,
        request: ImportRequest,
        rule: ImportRule,
        chunked: ChunkedSource,
        folder: Path,
        outcome: _Outcome,
        shared: dict[str, Any],
    ) -> StagedParts[_FirstPass]:
        """Mode fuzzy fits its model (EM) on the texts it is given in the whole import: a
        first pass reads each part, applies its rule and tries its links with fuzzy only
        noting its texts (``ModeRecord``); the model is fitted once and fuzzy's answer to
        each text found (``FuzzyAnswers``, in ``shared``). What the rule and the modes
        before fuzzy gave is kept on disk, part by part, so the second pass links each
        part with those answers and replays the rest: memory follows the part, the links
        are the one part's (and the Dask engine's), and nothing is done twice."""
        if self.asset_index is None:
            raise OptionError(f"rule {rule.name!r} links assets, but no asset index is available")
        with self._stage(outcome, "link"):
            self.progress(
                "fuzzy texts", 0, chunked.count, unit="parts", detail="loading the asset index"
            )
            shared["index"] = self.asset_index()
            shared["decisions"] = self.store.decisions.all()
        staged: StagedParts[_FirstPass] = StagedParts(folder / "first-pass")
        texts: list[pd.Series] = []
        for i in range(chunked.count):
            with self._stage(outcome, "read"):
                part = chunked.read(i)
            with self._stage(outcome, "validate"):
                prepared = apply_rule(
                    rule,
                    part.frame,
                    path=request.name,
                    geometry_columns=part.geometry_columns,
                    progress=self._part_shown(chunked, i),
                )
            with self._stage(outcome, "link"):
                record = ModeRecord()
                link_rows(
                    shared["index"], part.frame, prepared, rule,
                    reference_field=rule.matching_id, decisions=shared["decisions"],
                    modes=record.functions(),
                )  # fmt: skip
                texts.append(record.fuzzy.distinct())
                # Each part to disk at once, the last too: the second pass starts with the first.
                staged.add((prepared, record.results), len(part.frame), keep=False)
            del part, prepared, record
            release_unused()
            self.progress("fuzzy texts", i + 1, chunked.count, unit="parts")
        with self._stage(outcome, "link"):
            shared["answers"] = job_fuzzy_answers(shared["index"], rule, texts)
        return staged

    def _parts_on(
        self,
        engine: StageEngine,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        chunked: ChunkedSource,
        may_update: bool,
        outcome: _Outcome,
    ) -> Iterator[tuple[np.ndarray, Prepared, Linked, _Payload]]:
        """:meth:`_parts` with rule, link and payload run per partition by ``engine``'s
        workers, which read their partitions themselves."""
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
        )
        with self._stage(outcome, "partitions"):
            index = self.asset_index() if links and self.asset_index is not None else None
            if "fuzzy" in _link_ways(rule) and index is not None:
                # Mode fuzzy fits its model (EM) on the texts it is given: a first pass
                # gathers the whole job's, the client fits once, every partition uses it.
                texts = engine.fuzzy_texts(work, chunked, index, self.progress)
                work = replace(work, fuzzy_model=job_fuzzy_model(index, rule, texts))
            done = iter(engine.run_parts(work, chunked, index, self.progress))
        for i in range(chunked.count):
            started = time.perf_counter()
            part_rows, problems, stages = next(done)
            linked = Linked(asset_ids=None, problems=_no_problems())
            if rule.import_type == "item":
                linked = self._linked(job_id, part_rows, rule, stages.link, outcome, append=i > 0)
            keep = _kept(part_rows, problems, stages.prepared, linked)
            payload = stages.payload.take(keep)
            # Waiting for the workers counts as their stage, the rest as the client's.
            self._timed(outcome, "partitions", started)
            yield part_rows.to_numpy(), stages.prepared, linked, payload

    @staticmethod
    def _note_rule(
        request: ImportRequest,
        rule: ImportRule,
        report: SourceReport,
        prepared: Prepared,
        outcome: _Outcome,
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
        payload: StagedParts[_Payload],
        linked: Linked,
        outcome: _Outcome,
        *,
        rejects_of: Callable[[set[int]], pd.DataFrame],
        geometry_source: str | None,
    ) -> None:
        written = self._write(
            job_id, request, rule, prepared, kept, payload, linked, outcome,
            dry_run=request.dry_run,
        )  # fmt: skip
        if request.rejects_path is not None:
            wanted = set(outcome.rejections["row"].tolist())
            write_rejects(
                request.rejects_path,
                rejects_of(wanted),
                outcome.rejections,
                with_geometry=geometry_source == "native",
            )
        self._summarise(job_id, request, rule, outcome, written)

    def _write(
        self,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        prepared: Prepared,
        kept: Kept,
        payload: StagedParts[_Payload],
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
        payload: StagedParts[_Payload],
        linked: Linked,
        outcome: _Outcome,
        actor: Actor,
        *,
        dry_run: bool,
    ) -> Written:
        early = self._early
        with (
            self.store.db.transaction(commit=not dry_run)
            if early is None
            else early.transaction.finish()
        ) as conn:
            # Two imports of the same keys at once (PostgreSQL): the second waits here,
            # then plans against the first one's records.
            self.store.db.lock_scope(conn, self._scope(rule, request))
            with self._stage(outcome, "plan"):
                self.progress("plan", 0, len(kept.values))
                matching_id = matching_field(rule, request.matching_id)
                planned = plan_rows(
                    kept.values,
                    self._existing_keys(rule, request, matching_id)
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
            refused = _refusal(request, outcome.counts) is not None
            if refused:
                # Nothing will be kept, but the updates are written (then rolled back) so
                # that rows already as asked count as unchanged, exactly as a run of the
                # good rows would count them; inserts and retirements need no writing.
                plan = replace(plan, inserts=_NO_ROWS, retirements=_NO_ROWS)
            with self._stage(outcome, "store"):
                asset_ids = self._make_places(conn, job_id, rule, linked, outcome, actor)
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
                    asset_ids,
                    actor,
                    self.store.db.clock() if early is None else early.now,
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

    # --- stages -----------------------------------------------------------------------------

    def _link_assets(
        self,
        job_id: int,
        frame: pd.DataFrame,
        prepared: Prepared,
        rule: ImportRule,
        outcome: _Outcome,
        *,
        progress: Progress,
        append: bool = False,
        shared: dict[str, Any] | None = None,
        modes: Mapping[str, ModeFunction] | None = None,
    ) -> Linked:
        """Link a part's rows; ``shared`` keeps the index and the reviewers' decisions
        between the parts of one import; ``modes`` stand in for mode functions
        (``link_rows``)."""
        empty = _no_problems()
        if rule.asset_link is None:
            return Linked(pd.Series(pd.NA, index=frame.index, dtype="Int64"), empty)
        if self.asset_index is None:
            raise OptionError(f"rule {rule.name!r} links assets, but no asset index is available")
        shared = {} if shared is None else shared
        if "index" not in shared:
            progress("link", 0, len(frame), detail="loading the asset index")
            shared["index"] = self.asset_index()
            shared["decisions"] = self.store.decisions.all()
        linked = link_rows(
            shared["index"],
            frame,
            prepared,
            rule,
            reference_field=rule.matching_id,
            decisions=shared["decisions"],
            progress=progress,
            geocoder=self.geocoder,
            modes=modes,
        )
        return self._linked(job_id, frame.index, rule, linked, outcome, append=append)

    def _linked(
        self,
        job_id: int,
        rows: pd.Index,
        rule: ImportRule,
        linked: LinkResult | None,
        outcome: _Outcome,
        *,
        append: bool = False,
    ) -> Linked:
        """The link stage's result: the links recorded with the job (``append``: a later
        part's, beside the earlier parts'), their counts, and a problem for each row a
        required link left without an asset."""
        empty = _no_problems()
        if linked is None or rule.asset_link is None:
            return Linked(pd.Series(pd.NA, index=rows, dtype="Int64"), empty)
        self.store.jobs.record_links(job_id, linked.links, append=append)
        outcome.linking = _merged_counts(outcome.linking, linked.counts())
        if not rule.asset_link.required:
            return Linked(linked.asset_ids, empty, linked)
        # A row whose place is to become an asset will have one.
        missing = linked.asset_ids.isna().to_numpy() & ~linked.waiting()
        return Linked(
            linked.asset_ids,
            pd.DataFrame(
                {
                    "row": rows[missing],
                    "column": "asset",
                    "value": pd.NA,
                    "reason": linked.reasons[missing].fillna("no asset was found").to_numpy(),
                }
            ),
            linked,
        )

    def _make_places(
        self,
        conn: Any,
        job_id: int,
        rule: ImportRule,
        linked: Linked,
        outcome: _Outcome,
        actor: Actor,
    ) -> pd.Series | None:
        """The rows' asset ids once the places the link stage found outside are assets
        (made in the import's transaction, so a dry run or a refusal makes none); their
        links are recorded again with the new ids."""
        result = linked.result
        if result is None or result.places is None or rule.asset_link is None:
            return linked.asset_ids
        places = result.places
        asset_class = str(rule.asset_link.options["assetClass"])
        ids = make_assets(self.store, places, asset_class, actor, conn=conn)
        waiting = np.flatnonzero(places.row_place >= 0)
        asset_ids = result.asset_ids.copy()
        asset_ids.iloc[waiting] = ids[places.row_place[waiting]]
        links = result.links.copy()
        links["asset_id"] = asset_ids.to_numpy()
        links.loc[waiting, "err"] = None
        self.store.jobs.record_links(job_id, links, conn=conn)
        outcome.notes.append(
            f"{len(places)} places found outside became assets of {asset_class} "
            f"({len(waiting)} rows linked to them)"
        )
        return asset_ids

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

    def _write_items(
        self,
        conn: Any,
        rule: ImportRule,
        request: ImportRequest,
        plan: OverwritePlan,
        parts: StagedParts[_Payload],
        asset_ids: pd.Series | None,
        actor: Actor,
        now: int,
        written: _Written,
    ) -> int:
        """Retirements, then the inserts part by part, then the updates part by part: the
        order one payload of every row would write them in (positions are ascending)."""
        assert rule.register is not None
        self.store.registers.upsert(
            conn, rule.register, rule.register_name or rule.register, register_fields(rule)
        )
        tags = json.dumps([request.import_tag] if request.import_tag else [])
        self.store.items.retire_many(conn, id_list(plan.retirements), actor, now)
        written.retired()

        def links_of(payload: _Payload) -> pd.Series:
            filled = payload.filled
            if asset_ids is not None:
                return asset_ids.reindex(filled.index)
            if payload.asset_ids is not None:
                return payload.asset_ids
            return pd.Series(pd.NA, index=filled.index, dtype="Int64")

        done = 0
        for payload, inserts, _ in parts.select(plan.inserts):
            filled = payload.filled
            rows = filled.iloc[inserts]

            def on_rows(n: int, before: int = done) -> None:
                written.inserted(before + n)  # the rows of earlier parts count too

            self.store.items.insert_many(
                conn,
                NewItems(
                    register_id=rule.register,
                    event_id=request.event_id,
                    region_id=request.region_id,
                    asset_id=as_python(links_of(payload).iloc[inserts]),
                    status=_int_column(rows, "status", 1),
                    is_template=_int_column(rows, "isTemplate", 0),
                    tags=tags,
                    fields=payload.insert_json.iloc[inserts].tolist(),
                ),
                actor,
                now,
                on_rows=on_rows,
            )
            done += len(inserts)
        changed = 0
        for payload, updates, (ids,) in parts.select(plan.updates, plan.update_ids):
            rows = payload.filled.iloc[updates]
            update_ids = id_list(ids)
            changed += self.store.items.update_many(
                conn,
                ItemChanges(
                    ids=update_ids,
                    fields_patch=payload.patches(updates),
                    asset_id=as_python(links_of(payload).iloc[updates]),
                    status=as_python(rows["status"]) if "status" in rows else [None] * len(rows),
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
        parts: StagedParts[_Payload],
        asset_ids: pd.Series | None,
        actor: Actor,
        now: int,
        written: _Written,
    ) -> int:
        """Retirements, inserts, then updates; the parts of an import inserted as they were
        read (``_EarlyAssets``) have had their retirements and inserts written already."""
        early = self._early
        if early is None:
            payload = parts.only()  # read as one part
            self.store.assets.retire_many(conn, id_list(plan.retirements), actor, now)
            written.retired()
            if len(plan.inserts):
                self._insert_assets(
                    conn, rule, request, payload, plan.inserts, actor, now,
                    ids_given=_gives_ids(payload.filled, plan.inserts),
                    on_rows=written.inserted,
                )  # fmt: skip
            return self._update_assets(conn, [(payload, plan.updates, plan.update_ids)], actor, now)
        done = np.concatenate(early.inserted) if early.inserted else _NO_ROWS
        # The whole file's plan (empty when refused: all is rolled back) is what was done.
        if (len(plan.inserts) and not np.array_equal(done, plan.inserts)) or (
            len(plan.retirements) and not np.array_equal(early.retired, plan.retirements)
        ):
            raise RuntimeError("the parts inserted as read differ from the import's plan")
        written.retired()
        written.inserted(len(plan.inserts))
        pieces = []
        for start, payload in early.updating:
            lo, hi = np.searchsorted(plan.updates, [start, start + len(payload.filled)])
            pieces.append((payload, plan.updates[lo:hi] - start, plan.update_ids[lo:hi]))
        return self._update_assets(conn, pieces, actor, now)

    def _insert_assets(
        self,
        conn: Any,
        rule: ImportRule,
        request: ImportRequest,
        payload: _Payload,
        positions: np.ndarray,
        actor: Actor,
        now: int,
        *,
        ids_given: bool,
        on_rows: Callable[[int], None],
    ) -> None:
        """Insert the rows of ``payload`` at ``positions``; with ``ids_given``, under the
        ids of their ``id`` column (refused if a record has one already)."""
        assets = self.store.assets
        filled = payload.filled
        tags = json.dumps([request.import_tag] if request.import_tag else [])
        wkb = payload.geometry_wkb or [None] * len(filled)
        bounds = payload.bounds if payload.bounds is not None else np.full((len(filled), 4), np.nan)
        inserts = filled.iloc[positions]
        given_ids = None
        if ids_given:
            given_ids = [int(v) for v in as_python(inserts["id"])]
            taken = assets.ids_taken(given_ids)
            if taken and self._early is not None:
                raise _Unstreamable  # the error names the whole file's first ten, as one part
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
                    as_python(inserts["regionId"]) if "regionId" in inserts else request.region_id
                ),
                status=_int_column(inserts, "status", 1),
                extra_info=payload.insert_json.iloc[positions].tolist(),
                geometry=_taken(wkb, positions),
                bounds=bounds[positions],
                source=request.name,
                tags=tags,
            ),
            actor,
            now,
            ids=given_ids,
            on_rows=on_rows,
        )

    def _update_assets(
        self,
        conn: Any,
        pieces: Sequence[tuple[_Payload, np.ndarray, np.ndarray]],
        actor: Actor,
        now: int,
    ) -> int:
        """Update the records ``ids`` from the rows of each payload at its positions, in
        one statement set (the order one part writes them); how many changed."""
        ids: list[int] = []
        patches: list[str] = []
        columns: dict[str, list[object]] = {}
        for payload, positions, update_ids in pieces:
            if not len(positions):
                continue
            updates = payload.filled.iloc[positions]
            for name in ("name", "code", "type", "friendly", "status"):
                if name in updates:
                    columns.setdefault(name, []).extend(as_python(updates[name]))
            if payload.geometry_wkb is not None:
                wkb = payload.geometry_wkb
                columns.setdefault("geometry", []).extend(wkb[i] for i in positions.tolist())
                assert payload.bounds is not None
                for i, name in enumerate(("min_x", "min_y", "max_x", "max_y")):
                    column = as_python(pd.Series(payload.bounds[positions, i]))
                    columns.setdefault(name, []).extend(column)
            patches.extend(payload.patches(positions))
            ids.extend(id_list(update_ids))
        if not ids:
            return 0
        return self.store.assets.update_many(conn, ids, patches, dict(columns), actor, now)

    def _insert_early(
        self,
        early: _EarlyAssets,
        job_id: int,
        request: ImportRequest,
        rule: ImportRule,
        payload: _Payload,
        keys: Sequence[Any],
        kept_rows: Sequence[RowNumbers],
    ) -> None:
        """Insert the rows of the part just read (``payload``, the last of ``keys`` and
        ``kept_rows``) that the whole file's plan inserts, as it is read."""
        conn = early.transaction.conn
        actor = Actor(user_id=self.user_id, message=request.message, import_job_id=job_id)
        overwrite = request.overwrite_rule or rule.overwrite_rule
        matching_id = matching_field(rule, request.matching_id)
        if early.existing is None:  # the first part: the transaction has just begun
            self.store.db.lock_scope(conn, self._scope(rule, request))
            early.existing = self._existing_keys(rule, request, matching_id)
            early.now = self.store.db.clock()
            if overwrite == "deleteAndInsert":
                early.retired = early.existing["id"].to_numpy(dtype=np.int64)
                self.store.assets.retire_many(conn, id_list(early.retired), actor, early.now)
        start, early.kept = early.kept, early.kept + len(payload.filled)
        plan = self._part_plan(early, keys, kept_rows, overwrite, matching_id, start)
        inserts = plan.inserts[plan.inserts >= start]
        if len(plan.updates) and plan.updates[-1] >= start:
            early.updating.append((start, payload))
        if not len(inserts):
            return
        ids_given = _gives_ids(payload.filled, inserts - start)
        if early.given_ids is None:
            early.given_ids = ids_given
        elif early.given_ids and not ids_given:
            raise _Unstreamable
        before = sum(len(done) for done in early.inserted)
        self._insert_assets(
            conn, rule, request, payload, inserts - start, actor, early.now,
            ids_given=bool(early.given_ids),
            on_rows=lambda n: self.progress("write", before + n, None, detail="inserting"),
        )  # fmt: skip
        early.inserted.append(inserts)

    @staticmethod
    def _part_plan(
        early: _EarlyAssets,
        keys: Sequence[Any],
        kept_rows: Sequence[RowNumbers],
        overwrite: str,
        matching_id: str,
        start: int,
    ) -> OverwritePlan:
        """The whole file's plan as far as the last part (its rows from ``start``, in
        positions of every kept row): a key repeating an earlier row is refused, the
        earlier row kept, so the rows so far decide it. The part is planned alone when no
        key of it is in an earlier part (the usual case: time follows the part); else
        with every row so far."""
        assert early.existing is not None
        text = None if keys[-1] is None else normalised_keys(pd.Series(keys[-1]))
        repeats = False
        if text is not None and early.keys:
            earlier = pa.concat_arrays(early.keys).drop_null()
            repeats = pc.any(pc.is_in(text, value_set=earlier, skip_nulls=True)).as_py()
        if text is not None:
            early.keys.append(text)
        if repeats:
            return plan_rows(
                _keys_frame(keys, kept_rows, matching_id), early.existing, overwrite,
                matching_id=matching_id, column=matching_id, rejected=_no_problems(),
            ).plan  # fmt: skip
        plan = plan_rows(
            _keys_frame(keys[-1:], kept_rows[-1:], matching_id), early.existing, overwrite,
            matching_id=matching_id, column=matching_id, rejected=_no_problems(),
        ).plan  # fmt: skip
        return replace(plan, inserts=plan.inserts + start, updates=plan.updates + start)

    def _scope(self, rule: ImportRule, request: ImportRequest) -> str:
        """What an import's transaction holds (``Database.lock_scope``)."""
        return f"import/{self.store.site_id}/{rule.import_type}/{rule.register}/{request.event_id}"

    def _write_users(
        self,
        conn: Any,
        rule: ImportRule,
        request: ImportRequest,
        plan: OverwritePlan,
        parts: StagedParts[_Payload],
        asset_ids: pd.Series | None,
        actor: Actor,
        now: int,
        written: _Written,
    ) -> int:
        payload = parts.only()  # a user import is not read in parts
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


def prepare_payload(
    rule: ImportRule,
    values: pd.DataFrame,
    cleared: pd.DataFrame,
    frame: pd.DataFrame | None,
    *,
    may_update: bool,
) -> _Payload:
    """The payload of some rows: values with defaults, each row's JSON as a new record
    and (``may_update``) as a merge patch, an asset's geometry as WKB with its bounds
    (from ``frame``, the rows as read; None for a payload with no geometry)."""
    record_fields = {
        "item": ITEM_RECORD_FIELDS,
        "asset": ASSET_RECORD_FIELDS,
        "user": USER_RECORD_FIELDS,
    }[rule.import_type]
    json_columns = [c for c in values.columns if c not in record_fields]
    defaults = {k: v for k, v in rule.defaults().items() if k in values}
    filled = values.fillna(defaults) if defaults else values
    payload = _Payload(
        filled=filled,
        cleared=cleared,
        values=values,
        json_columns=json_columns,
        insert_json=fields_json(filled[json_columns]),
        patch_json=fields_json(values[json_columns], cleared[json_columns]) if may_update else None,
    )
    if rule.import_type == "asset" and frame is not None and "geometry" in frame.columns:
        payload.geometry_wkb, payload.bounds = geometry_columns(np.asarray(frame.geometry.values))
    return payload


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


# A part size no file reaches: the import is read as one part.
_ONE_PART = 2**62


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


def _gives_ids(filled: pd.DataFrame, positions: np.ndarray) -> bool:
    """Whether the rows at ``positions`` all give their asset's id (kept as given)."""
    return "id" in filled and bool(filled["id"].iloc[positions].notna().all())


def _taken(values: list[bytes | None], positions: np.ndarray) -> list[bytes | None]:
    """``values`` at ``positions``; the list itself when those are all of it in order (a
    first import inserts every row)."""
    if len(positions) == len(values) and bool(
        (positions == np.arange(len(values), dtype=positions.dtype)).all()
    ):
        return values
    return [values[i] for i in positions.tolist()]


def _release_arrow_memory() -> None:
    """Give the blocks Arrow's allocator keeps for reuse back to the system. A stage's
    temporary arrays are freed when it ends, but mimalloc holds on to their pages, so they
    stayed in the process's memory through the next stage and the next part (a 250,000-row
    part's prepare stage: 707 MiB resident, 522 MiB after this)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _compact_keys(values: pd.DataFrame, matching_id: str) -> Any:
    """The matching column of a part's values, kept until the plan: its array alone (not a
    slice keeping the part's other columns alive, nor an index of row numbers), text as
    Arrow text (a python-storage string column would hold a Python object per row); None
    when the rule has no such column."""
    if matching_id not in values:
        return None
    column = values[matching_id]
    if isinstance(column.dtype, pd.StringDtype) and column.dtype.storage != "pyarrow":
        column = column.astype(pd.StringDtype("pyarrow", na_value=column.dtype.na_value))
    return column.array.copy()


def _keys_frame(keys: Sequence[Any], rows: Sequence[RowNumbers], matching_id: str) -> pd.DataFrame:
    """The kept rows' keys of every part as one frame indexed by row number (the plan's
    input), from what :func:`_compact_keys` kept of each part."""
    index = pd.Index(
        np.concatenate([r.array() for r in rows]) if rows else np.empty(0, np.int64), name="row"
    )
    if any(k is None for k in keys):
        return pd.DataFrame(index=index)
    column = pd.concat([pd.Series(k) for k in keys], ignore_index=True)
    return pd.DataFrame({matching_id: column.set_axis(index)})


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


def _kept(
    rows: pd.Index, problems: Sequence[SourceProblem], prepared: Prepared, linked: Linked
) -> np.ndarray:
    """Mask of a part's rows that nothing rejected: not the reader (a geometry value), the
    rule, nor a required link."""
    rejected = [p.row for p in problems if p.row is not None]
    rejected.extend(prepared.rejections["row"].tolist())
    rejected.extend(linked.problems["row"].tolist())
    keep: np.ndarray = ~rows.isin(list(set(rejected)))
    return keep
