"""What an import job reports: the spec's job object, its HTML result, the rejects CSV."""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.errors import OptionError
from toolkit.lazy import lazy
from toolkit.names import JOB_COUNTS
from toolkit.query.filters import format_time
from toolkit.safe_output import safe_frame

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")

# How many problems a job's summary (and a push's offline report) lists; counts say the rest.
MAX_ERRORS_IN_RESULT = 20


def job_reason(job: Mapping[str, Any]) -> str:
    """Why an import job failed, from its summary (or its status, when it has none)."""
    summary = job.get("summary") or {}
    return str(summary.get("reason") or f"the job ended {job.get('status')}")


@dataclass(frozen=True)
class JobOutcome:
    """An import run in place by the embedded site: its one finished job."""

    job: dict[str, Any]

    @property
    def ok(self) -> bool:
        return bool(self.job["status"] == "COMPLETE")

    def to_dict(self) -> dict[str, Any]:
        return self.job

    def warnings(self) -> list[str]:
        """What the job warns of (the import went on)."""
        return list((self.job.get("summary") or {}).get("warnings", []))

    def failure(self) -> str | None:
        """Why the import failed, or None when it did not."""
        if self.ok:
            return None
        return f"import job {self.job['id']} {self.job['status']}: {job_reason(self.job)}"


def job_object(row: Any) -> dict[str, Any]:
    return {
        "code": row["code"],
        "id": row["id"],
        "status": row["status"],
        "dateCreated": format_time(row["date_created"]),
        "dateCompleted": format_time(row["date_completed"]),
        "userId": row["user_id"],
        "result": row["result"],
        "importType": row["import_type"],
        "importRule": row["import_rule"],
        "summary": json.loads(row["summary"]) if row["summary"] else None,
        # What the job was asked to do: the schedule fields, without the data.
        "params": json.loads(row["params"]) if row["params"] else None,
    }


def result_html(summary: Mapping[str, Any]) -> str:
    """The job's ``result``: an HTML summary in which every value is escaped."""
    e = html.escape
    counts = summary.get("counts", {})
    lines = [
        f"<p><b>{e(str(summary['status']))}</b>: {e(str(summary['importRule']))} import of "
        f"{e(str(summary['source']))}{' (dry run)' if summary.get('dryRun') else ''}</p>"
    ]
    if summary.get("reason"):
        lines.append(f"<p>{e(str(summary['reason']))}</p>")
    if counts:
        lines.append(
            "<ul>"
            + "".join(
                f"<li>{e(name)}: {counts[name]}</li>" for name in JOB_COUNTS if name in counts
            )
            + "</ul>"
        )
    for note in summary.get("notes", []):
        lines.append(f"<p>{e(str(note))}</p>")
    errors = summary.get("errors", [])
    if errors:
        shown = len(errors)
        total = summary.get("errorCount", shown)
        lines.append(f"<p>First {shown} of {total} problem(s):</p>")
        lines.append(
            "<table><tr><th>row</th><th>column</th><th>value</th><th>reason</th></tr>"
            + "".join(
                f"<tr><td>{error['row']}</td><td>{e(str(error['column'] or ''))}</td>"
                f"<td>{e(str(error['value'] or ''))}</td><td>{e(str(error['reason']))}</td></tr>"
                for error in errors
            )
            + "</table>"
        )
    return "".join(lines)


def write_rejects(
    path: Path, frame: pd.DataFrame, rejections: pd.DataFrame, *, with_geometry: bool
) -> None:
    """The rejected rows as they were read, with ``row`` first and ``reason`` last.

    Rows the reader could not split into columns (ragged) appear with their
    number and reason only. ``with_geometry`` adds the geometry as WKT, for
    sources whose geometry is not in a column already (a Shapefile).
    """
    described = rejections["reason"].astype(str)
    has_column = rejections["column"].notna().to_numpy()
    described = described.where(~has_column, rejections["column"].astype(str) + ": " + described)
    reasons = described.groupby(rejections["row"].to_numpy()).agg("; ".join)
    columns = [c for c in frame.columns if c != "geometry"]
    out = frame[columns].reindex(reasons.index)
    if with_geometry and "geometry" in frame.columns and frame.geometry.notna().any():
        out["geometry_wkt"] = frame.geometry.to_wkt().reindex(reasons.index)
    out.insert(0, "row", reasons.index)
    out["reason"] = reasons.to_numpy()
    # Written beside the target and moved over it whole: a failure half-way (a full disk)
    # leaves no half file, and an older rejects file stays as it was.
    partial = path.with_name(f".{path.name}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        safe_frame(out).to_csv(partial, index=False, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        why = exc.strerror or type(exc).__name__
        raise OptionError(f"rejects file {path} could not be written ({why})") from exc
