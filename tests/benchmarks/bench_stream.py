"""Benchmark: an item import's peak memory and time as the file grows (issue 17, streaming).

Generates parcels and the largest item file, imports the parcels and builds their index
once, then runs the item import (a dry run: every stage, the write rolled back, so the
site stays as it was for the next run) on files of each size, each in a fresh process
whose own peak memory (ru_maxrss) is the figure. Beside each: the same import read as one
part (the pipeline before streaming) where asked, and a raw ``pyarrow.csv.read_csv`` of
the file in the same process, so the cost of reading in parts shows as a ratio.

The rule is the sample's damage rule without its fuzzy fallback, as when this benchmark
began, so runs compare across versions. ``--rule fuzzy`` takes the sample's rule as it is:
a first pass over every part fits fuzzy's model on the job's texts and pairs them with
their candidates, holding those pairs until the last part. Its larger files are then new
draws of the generator against the same parcels (each copy corrupted afresh), so fuzzy
meets as many new texts as a statewide file would give it, not the first file's again.

    python tests/benchmarks/bench_stream.py                          # 1M parcels; 1M, 5M items
    python tests/benchmarks/bench_stream.py --assets 100000 --items 100000,500000
    python tests/benchmarks/bench_stream.py --assets 300 --items 300,600   # smoke
    python tests/benchmarks/bench_stream.py --rule fuzzy                   # with fuzzy
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkit.matching.pairing_process import OWN_PROCESS_ROWS as PAIRING_ROWS
from toolkit.store.link_recorder import OWN_PROCESS_ROWS as RECORDER_ROWS

PEAK_TARGET_MIB = 3072  # issue 17: a 5,000,000-row item import with peak < 3 GiB
RULES = Path(__file__).resolve().parents[2] / "pipelines"


def peak_rss_mib() -> float:
    """This process image's own peak (VmHWM). Not ru_maxrss: Linux keeps that across fork
    and exec, so each child reported the parent's peak, which had built the 1M-parcel
    index (4.0 GiB): the same 4,234 MiB at 1M and at 5M rows, whatever the import took."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# The rule each --rule names: the sample's damage rule without its fuzzy fallback (this
# benchmark's from its start), or as it is.
RULE_NAMES = {"soundex": "damage-soundex", "fuzzy": "damage-assessments"}


def rule_folder(folder: Path) -> Path:
    text = (RULES / "damage_assessments.py").read_text(encoding="utf-8")
    text = text.replace('name="damage-assessments"', 'name="damage-soundex"')
    without_fuzzy = text.replace('"fallbackMode": "fuzzy",', "")
    assert without_fuzzy != text, "the sample's damage rule no longer has a fuzzy fallback"
    (folder / "rules").mkdir(exist_ok=True)
    (folder / "rules" / "damage_soundex.py").write_text(without_fuzzy, encoding="utf-8")
    return folder / "rules"


def child(site_path: str, items: str, rules: str, event: int, rule: str) -> None:
    """One item import in this (fresh) process; prints its figures as JSON."""
    from recorder_peak import watch_pairing, watch_recorder

    from toolkit.importing.pipeline import ImportRequest
    from toolkit.site import LocalSite

    recorder, pairing = watch_recorder(), watch_pairing()
    with LocalSite(Path(site_path), "bench", rule_paths=[Path(rules)]) as site:
        request = ImportRequest(
            "item", RULE_NAMES[rule], Path(items), event_id=event, region_id=1, dry_run=True
        )
        started = time.perf_counter()
        job = site.run_import(request)
        seconds = time.perf_counter() - started
    import pyarrow.csv as pa_csv

    started = time.perf_counter()
    # Generated notes may span lines, as the reader allows.
    pa_csv.read_csv(items, parse_options=pa_csv.ParseOptions(newlines_in_values=True))
    raw = time.perf_counter() - started
    summary = job["summary"]
    print(
        json.dumps(
            {
                "status": job["status"],
                "seconds": seconds,
                "raw_read": raw,
                "timings": summary["timings"],
                "counts": summary["counts"],
                "peak": peak_rss_mib(),
                "recorder": max(recorder, default=0.0),
                "pairing": max(pairing, default=0.0),
            }
        )
    )


def head(source: Path, target: Path, rows: int) -> None:
    """The first ``rows`` records of a CSV (records, not lines)."""
    with (
        source.open(encoding="utf-8", newline="") as f,
        target.open("w", encoding="utf-8", newline="") as out,
    ):
        reader, writer = csv.reader(f), csv.writer(out)
        writer.writerow(next(reader))
        for i, record in enumerate(reader):
            if i >= rows:
                break
            writer.writerow(record)


# The generator makes at most this many items at once (beyond, one of its pyarrow arrays
# outgrows a single chunk); larger files repeat its file with other references.
BATCH = 1_000_000


def build(
    base: Path, target: Path, rows: int, batch: int, copies: list[Path] | None = None
) -> None:
    """``rows`` records: ``base``'s (``batch`` records) again and again, or ``base`` then
    each of ``copies`` (as many as needed, each of ``batch`` records); the k-th copy's
    references made unique (DA-000001 -> DAk-000001), the last copy cut short."""
    head_line, _, body = base.read_bytes().partition(b"\n")
    with target.open("wb") as out:
        out.write(head_line + b"\n")
        for k in range(-(-rows // batch)):
            source = base if k == 0 or copies is None else copies[k - 1]
            if source is not base:
                body = source.read_bytes().partition(b"\n")[2]
            left = min(batch, rows - k * batch)
            if left < batch:
                cut = target.with_suffix(".part.csv")
                head(source, cut, left)
                body = cut.read_bytes().partition(b"\n")[2].replace(b"\r\n", b"\n")
                cut.unlink()
            copy = body if k == 0 else (b"\n" + body).replace(b"\nDA-", b"\nDA%d-" % k)[1:]
            out.write(copy if copy.endswith(b"\n") else copy + b"\n")


def redrawn(data: Path, assets: int, batch: int, seed: int, count: int) -> list[Path]:
    """``count`` more item files of ``batch`` rows against the parcels ``generate`` made
    with ``seed`` (the same layout), each drawn and corrupted afresh."""
    import numpy as np

    from toolkit.sample.columns import write_csv
    from toolkit.sample.items import build_items
    from toolkit.sample.parcels import layout

    parcels = layout(assets, np.random.default_rng(seed))
    files = []
    for k in range(count):
        # A stream of its own per copy (the file generate wrote drew from seed's).
        items, _ = build_items(parcels, batch, np.random.default_rng([seed, k + 1]))
        files.append(data / f"redrawn-{k + 1}.csv")
        write_csv(items, files[-1])
    return files


def run(
    site: Path, items: Path, rules: Path, event: int, chunk_rows: str | None, rule: str
) -> dict[str, Any]:
    env = dict(os.environ)
    if chunk_rows is not None:
        env["TOOLKIT_CHUNK_ROWS"] = chunk_rows
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(site), str(items), str(rules), str(event), rule],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the import of {items} failed:\n{out.stdout}\n{out.stderr}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=1_000_000)
    parser.add_argument("--items", default="1000000,5000000", help="item rows of each run")
    parser.add_argument(
        "--one-part", action="store_true", help="also run the smallest file read as one part"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--rule",
        choices=sorted(RULE_NAMES),
        default="soundex",
        help="the sample's damage rule without its fuzzy fallback (soundex, comparable with "
        "earlier runs) or as it is (fuzzy; larger files drawn afresh)",
    )
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.items.split(","))

    from toolkit.importing.pipeline import ImportRequest
    from toolkit.sample.generate import generate
    from toolkit.site import LocalSite
    from toolkit.sources.chunks import chunk_rows_default

    with tempfile.TemporaryDirectory(dir=os.environ.get("TOOLKIT_WORK_DIR")) as tmp:
        folder = Path(tmp)
        data = folder / "data"
        started = time.perf_counter()
        batch = min(BATCH, sizes[-1])
        generate(data, assets=args.assets, items=batch, seed=args.seed)
        copies = None
        if args.rule == "fuzzy":
            more = -(-sizes[-1] // batch) - 1
            copies = redrawn(data, args.assets, batch, args.seed, more)
        files = {}
        for n in sizes:
            files[n] = data / f"items-{n}.csv"
            build(data / "items.csv", files[n], n, batch, copies)
        print(
            f"generated {args.assets:,} parcels and {batch:,} items (files of "
            f"{', '.join(f'{n:,}' for n in sizes)} rows from them) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        rules = rule_folder(folder)
        site_path = folder / "site.sqlite"
        with LocalSite(site_path, "bench", rule_paths=[rules]) as site:
            started = time.perf_counter()
            parcels = site.run_import(
                ImportRequest("asset", "property-assets", data / "parcels.zip")
            )
            assert parcels["status"] == "COMPLETE", parcels
            event = int(site.create_event({"name": "Benchmark"})["id"])
            site.asset_index()  # built once and cached in the site file
            print(f"parcels imported and indexed in {time.perf_counter() - started:.1f} s")
        print(
            f"\n{'rows':>10} {'parts of':>9} {'whole s':>8} {'s/M rows':>9} {'peak MiB':>9} "
            f"{'read s':>7} {'raw read s':>10} {'ratio':>6}   stages"
        )
        results: dict[int, dict[str, Any]] = {}
        runs: list[tuple[int, str | None]] = [(n, None) for n in sizes]
        if args.one_part:
            runs.insert(1, (sizes[0], str(2**62)))
        for n, chunk in runs:
            figures = run(site_path, files[n], rules, event, chunk, args.rule)
            assert figures["status"] == "COMPLETE", figures
            if chunk is None:
                results[n] = figures
            shown = "one" if chunk else f"{chunk_rows_default():,}"
            t = figures["timings"]
            stages = " ".join(f"{k} {v:.1f}" for k, v in t.items())
            print(
                f"{n:>10,} {shown:>9} {figures['seconds']:8.1f} "
                f"{figures['seconds'] / n * 1e6:9.1f} {figures['peak']:9,.0f} "
                f"{t['read']:7.2f} {figures['raw_read']:10.2f} "
                f"{t['read'] / figures['raw_read']:6.2f}   {stages}"
            )
        small, large = sizes[0], sizes[-1]
        for n in sizes:
            print(
                f"item import of {n:,} rows: {results[n]['seconds']:.1f} s; peak memory "
                f"{results[n]['peak']:,.0f} MiB (target < {PEAK_TARGET_MIB})"
            )
            print(
                f"  its links' recording process (an import of {RECORDER_ROWS:,} rows or more "
                f"has one) peak memory {results[n]['recorder']:,.0f} MiB"
            )
            print(
                f"  its fuzzy texts' pairing process (an import of {PAIRING_ROWS:,} rows or "
                f"more has one) peak memory {results[n]['pairing']:,.0f} MiB"
            )
        if large != small:
            growth = results[large]["seconds"] / results[small]["seconds"]
            print(
                f"time {large:,} rows / {small:,} rows: {growth:.2f} for {large / small:.1f}x "
                f"the rows (linear or better: <= {large / small:.1f})"
            )


if __name__ == "__main__":
    main()
