"""Benchmark: the toolkit's XLSX of a report snapshot beside constant-memory xlsxwriter.

    python tests/benchmarks/bench_xlsx.py [--rows 1000000] [--repeat 1] [--typed]

Builds the same 12-column typed snapshot as ``bench_reports.py`` (ids, text with
formula-looking cells, numbers, booleans, timestamps, nulls), then writes it, each in
a fresh forked process so peak RSS is its own:

- toolkit: ``write_xlsx`` as a fetch runs it (rustpy-xlsxwriter behind its guards,
  streamed from the snapshot's row groups; typed cells, styled frozen filtered header,
  widths, print setup, About sheet);
- xlsxwriter: constant-memory mode writing the same typed cells the plain way;
- with ``--typed`` also the toolkit's typed xlsxwriter fallback.

Target: toolkit <= 0.3x xlsxwriter, peak memory bounded (not growing with the rows).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_reports import SPEC, build_snapshot, header, measure, raw_xlsx


def toolkit_xlsx(snapshot: Path, out: Path, engine: str) -> Callable[[], Callable[[], Any]]:
    def setup() -> Callable[[], Any]:
        from toolkit.reports.catalogue import Field
        from toolkit.reports.snapshot import Snapshot
        from toolkit.reports.xlsx_file import write_xlsx

        def run() -> None:
            spec = [Field(k, label, kind) for k, label, kind in SPEC]  # type: ignore[arg-type]
            with Snapshot(snapshot, spec) as snap, out.open("wb") as handle:
                write_xlsx(snap, header(), handle, engine=engine)  # type: ignore[arg-type]

        return run

    return setup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--typed", action="store_true", help="also time the typed fallback")
    args = parser.parse_args()
    from toolkit.reports import xlsx_fast

    engine = "rust" if xlsx_fast.available() else "xlsxwriter"
    with tempfile.TemporaryDirectory(prefix="bench-xlsx-") as folder:
        snapshot = Path(folder) / "snapshot.parquet"
        build_snapshot(snapshot, args.rows)
        print(f"snapshot: {args.rows:,} rows x {len(SPEC)} columns; toolkit engine: {engine}")
        sides = [
            ("toolkit", toolkit_xlsx(snapshot, Path(folder) / "toolkit.xlsx", engine)),
            ("xlsxwriter", raw_xlsx(snapshot, Path(folder) / "raw.xlsx")),
        ]
        if args.typed:
            typed = toolkit_xlsx(snapshot, Path(folder) / "typed.xlsx", "xlsxwriter")
            sides.append(("toolkit typed", typed))
        results: dict[str, tuple[float, float]] = {}
        for name, work in sides:
            runs = [measure(work) for _ in range(args.repeat)]
            results[name] = (min(t for t, _ in runs), max(m for _, m in runs))
            seconds, peak = results[name]
            print(f"  {name:<14} {seconds:8.2f} s   peak {peak:7.0f} MiB", flush=True)
        toolkit, raw = results["toolkit"][0], results["xlsxwriter"][0]
        print(f"xlsx: toolkit {toolkit:.2f} s, xlsxwriter {raw:.2f} s, ratio {toolkit / raw:.2f}x")
        if "toolkit typed" in results:
            typed_s = results["toolkit typed"][0]
            print(f"xlsx typed fallback: {typed_s:.2f} s, ratio {typed_s / raw:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
