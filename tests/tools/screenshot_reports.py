"""Render every report of the demo site as HTML and take a screenshot of each page with
headless Chromium (and a PDF of how it prints), to look at what an analyst sees.

    .venv/bin/python tests/tools/screenshot_reports.py --out /tmp/report-shots

Needs a Chromium (Debian: ``apt-get install chromium``; or ``--chromium PATH``). Builds
the demo site from sample_data/ in a temporary folder unless ``--store`` names one (its
first event is used). Writes ``<n>-<report>.html``, ``.png`` (screen, 1400 px wide) and
``.pdf`` (print: A4 landscape) per report, and prints one line per file.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from toolkit.sample.demo import run_demo  # noqa: E402
from toolkit.site import LocalSite  # noqa: E402

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--hide-scrollbars",
]


def reports(site: LocalSite) -> list[tuple[str, int, dict[str, Any]]]:
    """Each report with parameters that make it worth looking at on the demo site."""
    event = next(iter(site.list_events({})["models"].values()))["id"]
    jobs = site.import_status()
    item_job = max(j["id"] for j in jobs if j.get("importType") == "item")
    return [
        ("damage-summary", 6, {"eventId": event}),
        ("impacted-assets", 2, {"eventId": event}),
        ("register-items", 1, {"eventId": event}),
        ("import-jobs", 3, {}),
        ("matching-quality", 4, {"jobId": item_job}),
        ("audit-log", 5, {"recordType": "item", "action": "create"}),
    ]


def chromium(binary: str, *args: str) -> None:
    subprocess.run([binary, *FLAGS, *args], check=True, capture_output=True, timeout=180)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("report-screenshots"))
    parser.add_argument("--store", type=Path, help="a site file (default: a new demo site)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--height", type=int, default=2400, help="screenshot height in px")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="toolkit-shots-") as folder:
        store = args.store or Path(folder) / "demo.sqlite"
        site = LocalSite(store, "default")
        try:
            if args.store is None:
                run_demo(site, ROOT / "sample_data", Path(folder) / "out")
            for number, (stem, report_id, params) in enumerate(reports(site), start=1):
                instance = site.report_run({"reportId": report_id, "params": params})["id"]
                page = args.out / f"{number}-{stem}.html"
                with page.open("wb") as handle:
                    site.report_write(instance, "html", handle)
                png, pdf = page.with_suffix(".png"), page.with_suffix(".pdf")
                chromium(
                    args.chromium,
                    f"--screenshot={png}",
                    f"--window-size=1400,{args.height}",
                    page.resolve().as_uri(),
                )
                chromium(
                    args.chromium,
                    f"--print-to-pdf={pdf}",
                    "--no-pdf-header-footer",
                    page.resolve().as_uri(),
                )
                print(f"{page}  {png.name} ({png.stat().st_size:,} B)  {pdf.name}")
        finally:
            site.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
