"""The main job on the sample data: build a demo site from the packaged sample.

An event, the property parcels from the zipped Shapefile, the other council
assets, the users, and the damage assessments with their assets resolved, each
as an import job. Running it again changes nothing (every job finds its rows
unchanged), so it is safe to repeat.

The sample ships inside the package (``toolkit/sample/data/``; the repository's
``sample_data/`` is a link to it), so the demo works from any folder and after a
plain ``pip install``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from toolkit.errors import SourceError
from toolkit.importing.pipeline import ImportRequest
from toolkit.progress import Progress, no_progress
from toolkit.site import LocalSite

EVENT_NAME = "Sample flood 2026"
REGION_ID = 1
# (file, import type, rule): the order matters, items need the assets first.
SAMPLE_IMPORTS = (
    ("parcels.zip", "asset", "property-assets"),
    ("assets.csv", "asset", "assets-csv"),
    ("users.csv", "user", "users"),
    ("damage_assessments.csv", "item", "damage-assessments"),
)


def packaged_sample_dir() -> Path:
    """The sample data folder installed with the package."""
    root = files("toolkit.sample") / "data"
    if not isinstance(root, Path):  # a zipped install: the readers need real files
        raise SourceError(
            "the packaged sample data is inside an archive, not a folder; unpack it and "
            "pass --sample-dir"
        )
    return root


def check_sample_dir(sample_dir: Path) -> None:
    """A ``SourceError`` unless ``sample_dir`` holds every file the demo imports."""
    missing = [name for name, _, _ in SAMPLE_IMPORTS if not (sample_dir / name).is_file()]
    if missing:
        raise SourceError(
            f"{sample_dir}: not a sample data folder (missing {', '.join(missing)}); "
            "leave out --sample-dir to use the sample installed with the toolkit"
        )


@dataclass
class DemoResult:
    event: dict[str, Any]
    jobs: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(job["status"] == "COMPLETE" for job in self.jobs)


def run_demo(
    site: LocalSite, sample_dir: Path, out_dir: Path, *, progress: Progress = no_progress
) -> DemoResult:
    """Import the sample data into ``site``; rejected rows go to ``out_dir``."""
    check_sample_dir(sample_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"{out_dir}: cannot make the output folder: {exc}") from exc
    found = site.list_events({"fulltext": EVENT_NAME, "fulltext_operator": "equals"})
    event = (
        next(iter(found["models"].values()))
        if found["count"]
        else site.create_event(
            {
                "name": EVENT_NAME,
                "description": "Demo site from the sample data",
                "startDate": "2026-02-14",
                "tags": ["demo", "flood"],
            }
        )
    )
    result = DemoResult(event=event)
    for name, import_type, rule in SAMPLE_IMPORTS:
        rejects = out_dir / f"{Path(name).stem}_rejects.csv"
        request = ImportRequest(
            import_type=import_type,
            import_rule=rule,
            source=sample_dir / name,
            event_id=event["id"] if import_type == "item" else None,
            region_id=REGION_ID if import_type == "item" else None,
            rejects_path=rejects,
            message="toolkit demo",
        )
        job = site.run_import(request, progress=progress)
        result.jobs.append(job)
        if (job.get("summary") or {}).get("counts", {}).get("rejected"):
            result.outputs[f"{name} rejected rows"] = str(rejects)
    if not result.ok:  # the failed job is the answer; reports of a half-made site mislead
        result.outputs["site file"] = site.db.display
        return result
    items_job = result.jobs[-1]["id"]
    # What an analyst takes away: first how much damage and where (the headline), then the
    # damaged parcels on a map, the assessments themselves (register fields as columns),
    # and how well their addresses matched the parcels.
    for report_id, params, stem in (
        (6, {"eventId": event["id"]}, "damage_summary"),
        (2, {"eventId": event["id"]}, "impacted_assets"),
        (1, {"eventId": event["id"], "registerId": "damage-assessment"}, "damage_assessments"),
        (4, {"jobId": items_job}, "matching_quality"),
    ):
        instance = site.report_run({"reportId": report_id, "params": params})["id"]
        for fmt in ("html", "xlsx"):
            path = out_dir / f"{stem}.{fmt}"
            with path.open("wb") as handle:
                site.report_write(instance, fmt, handle)
            result.outputs[f"report {stem} ({fmt})"] = str(path)
    result.outputs["site file"] = site.db.display
    return result
