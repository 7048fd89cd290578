"""The demo site built from sample_data/, and small helpers to run and fetch reports on
it (shared by the report test modules; each builds its own site once per module)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from toolkit.sample.demo import DemoResult, run_demo
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def demo_site(folder: Path) -> tuple[LocalSite, DemoResult]:
    site = LocalSite(folder / "site.sqlite", "default")
    result = run_demo(site, SAMPLE, folder / "out")
    assert result.ok
    return site, result


def run(site: LocalSite, report_id: int, **params: Any) -> str:
    """A completed instance's id."""
    queued = site.report_run({"reportId": report_id, "params": params})
    instance = site.report_status(queued["id"])
    assert instance["status"] == "COMPLETED", instance["result"]
    return str(queued["id"])


def contents(site: LocalSite, report_id: int, **params: Any) -> dict[str, Any]:
    fetched: dict[str, Any] = site.report_fetch(run(site, report_id, **params))["contents"]
    return fetched


def failed(site: LocalSite, report_id: int, **params: Any) -> str:
    """The reason of a run that must end FAILED."""
    queued = site.report_run({"reportId": report_id, "params": params})
    instance = site.report_status(queued["id"])
    assert instance["status"] == "FAILED", instance
    return str(instance["result"])


def file(site: LocalSite, instance: str, fmt: str) -> bytes:
    out = io.BytesIO()
    site.report_write(instance, fmt, out)
    return out.getvalue()
