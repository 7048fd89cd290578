"""What an import job found and did: its outcome, the stage results, and its summary.

The stages' small frozen results (:class:`Linked`, :class:`Kept`, :class:`Planned`,
:class:`Written`), the :class:`Outcome` they add to, the write stage's progress, and the
summary the job records (spec 2.7) with why a job refuses to write (rollbackOnError,
maxRejects).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from toolkit.importing.linking import LinkResult
from toolkit.importing.overwrite import OverwritePlan
from toolkit.importing.parts import StagedParts
from toolkit.importing.payload import Payload
from toolkit.importing.reject_limit import refusal
from toolkit.importing.request import ImportRequest
from toolkit.importing.results import MAX_ERRORS_IN_RESULT
from toolkit.importing.rules import ImportRule, Prepared
from toolkit.importing.scope import matching_field
from toolkit.progress import Progress
from toolkit.sources import SourceProblem
from toolkit.store import Actor

PROBLEM_COLUMNS = ["row", "column", "value", "reason"]
NO_ROWS = np.empty(0, dtype=np.int64)


def no_problems() -> pd.DataFrame:
    """An empty frame of rejected rows."""
    return pd.DataFrame(columns=PROBLEM_COLUMNS)


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


def kept_mask(
    rows: pd.Index, problems: Sequence[SourceProblem], prepared: Prepared, linked: Linked
) -> np.ndarray:
    """Mask of a part's rows that nothing rejected: not the reader (a geometry value), the
    rule, nor a required link."""
    rejected = [p.row for p in problems if p.row is not None]
    rejected.extend(prepared.rejections["row"].tolist())
    rejected.extend(linked.problems["row"].tolist())
    keep: np.ndarray = ~rows.isin(list(set(rejected)))
    return keep


def problem_rows(problems: Sequence[SourceProblem]) -> pd.DataFrame:
    """The reader's problems of rows as rejected rows."""
    return pd.DataFrame(
        [{"row": p.row, "column": p.column, "value": p.value, "reason": p.message}
         for p in problems if p.row is not None],
        columns=PROBLEM_COLUMNS,
    )  # fmt: skip


def merged_counts(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Link counts of two parts together: the ways by rows linked (most first), then
    ``external`` and ``unlinked``, as one part's counts are."""
    total = dict(counts)
    for key, value in more.items():
        total[key] = total.get(key, 0) + value
    last = ("external", "unlinked")
    ways = sorted((k for k in total if k not in last), key=lambda k: -total[k])
    return {k: total[k] for k in [*ways, *last] if k in total}


@dataclass
class Outcome:
    """What a job found and did so far: counts, rejections, timings, notes, warnings, the
    link counts, and the stage an unexpected failure happened in."""

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


class WriteProgress:
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


@dataclass(frozen=True)
class WriteJob:
    """What the write stage's writer of an import type is given: the transaction's
    connection, the plan, the staged payloads, the rows' asset ids (None: each part's own),
    who writes and when, and the progress to report."""

    conn: Any
    rule: ImportRule
    request: ImportRequest
    plan: OverwritePlan
    parts: StagedParts[Payload]
    asset_ids: pd.Series | None
    actor: Actor
    now: int
    written: WriteProgress


def job_summary(
    request: ImportRequest,
    rule: ImportRule,
    outcome: Outcome,
    *,
    status: str,
    reason: str | None = None,
) -> dict[str, Any]:
    """The job's summary as recorded (``status``, with ``reason`` when it failed)."""
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


def refusal_reason(request: ImportRequest, counts: dict[str, int]) -> str | None:
    """Why the job writes nothing for its rejected rows (rollbackOnError, or more of them
    than maxRejects allows), or None when it writes its good rows."""
    return refusal(
        request.reject_limit(),
        counts.get("rejected", 0),
        counts.get("read", 0),
        rollback_on_error=request.rollback_on_error,
    )


def _text(value: object) -> str | None:
    return (
        None
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))
        else str(value)
    )
