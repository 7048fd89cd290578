"""Benchmark of the two site stores side by side: SQLite and PostgreSQL/PostGIS (issue 16).

1. An item import of ``--rows`` rows (no asset links, so the store stage is the work):
   the toolkit's store stage on each store beside the bare bulk load of the same rows on
   that store (SQLite: ``executemany`` in one transaction; PostgreSQL: ``COPY``).
2. ``--clients`` concurrent API clients each creating ``--writes`` items through
   ``toolkit serve`` (a process of its own on 127.0.0.1) on each store: writes per
   second, p50, p99. ``--rows 0`` runs only this part.

Starts its own throwaway PostgreSQL cluster (tests/pg_cluster.py).

    python tests/benchmarks/bench_store_pg.py [--rows 1000000] [--clients 8] [--writes 200]
    python tests/benchmarks/bench_store_pg.py --rows 2000 --clients 2 --writes 5  # smoke
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from pg_cluster import start_cluster  # noqa: E402
from serving import free_port  # noqa: E402

from toolkit.importing.pipeline import ImportRequest  # noqa: E402
from toolkit.server.auth import SERVER_SECRET_ENV  # noqa: E402
from toolkit.site import LocalSite  # noqa: E402

RULES = ROOT / "tests" / "fixtures_rules"
PASSWORD = "benchmark password"


def write_csv(path: Path, rows: int) -> list[tuple[object, ...]]:
    """The import's file and the rows a bare load writes (id, site, register, event,
    fields JSON, dates)."""
    lines = ["reference,level,count,notes"]
    bare: list[tuple[object, ...]] = []
    for i in range(rows):
        level = "High" if i % 3 else "Low"
        lines.append(f"R{i},{level},{i},note {i}")
        fields = json.dumps({"reference": f"R{i}", "level": level, "count": i, "notes": f"n{i}"})
        bare.append((i + 1, 1, "observation", 1, fields, 1000, 1000))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return bare


BARE_TABLE = (
    "CREATE TABLE bare_item (id BIGINT PRIMARY KEY, site_id BIGINT, register_id TEXT, "
    "event_id BIGINT, fields {json}, date_created BIGINT, date_modified BIGINT)"
)


def bare_sqlite(folder: Path, rows: list[tuple[object, ...]]) -> float:
    conn = sqlite3.connect(folder / "bare.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(BARE_TABLE.format(json="TEXT"))
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO bare_item VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def bare_postgres(url: str, rows: list[tuple[object, ...]]) -> float:
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(BARE_TABLE.format(json="JSONB"))
        conn.commit()
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            cursor.copy("COPY bare_item FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return time.perf_counter() - started


def import_store_stage(location: str | Path, source: Path) -> tuple[float, float]:
    """(store stage, whole job) seconds of the item import."""
    with LocalSite(location, "bench", rule_paths=[RULES]) as site:
        event = site.create_event({"name": "Bench"})["id"]
        started = time.perf_counter()
        job = site.run_import(
            ImportRequest("item", "test-observations", source, event_id=event, region_id=1)
        )
        whole = time.perf_counter() - started
        assert job["status"] == "COMPLETE", job["result"]
        return float(job["summary"]["timings"]["store"]), whole


@contextlib.contextmanager
def serving(location: str | Path) -> Iterator[str]:
    """``toolkit serve`` on ``location`` in a process of its own (no limits), its URL."""
    import httpx

    port = free_port()
    command = [
        sys.executable, "-m", "toolkit", "--store", str(location), "--quiet", "serve",
        "--host", "127.0.0.1", "--port", str(port), "--rate-limit", "none",
        "--auth-rate-limit", "none",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.options(f"{url}/api/json/auth", timeout=5)
                break
            except httpx.TransportError:
                if server.poll() is not None:
                    ended = server.communicate()[1]
                    raise RuntimeError(f"toolkit serve ended: {ended!r}") from None
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(60)


def api_writes(
    location: str | Path, source: Path, clients: int, writes: int
) -> tuple[float, float, float, int]:
    """(writes/s, p50 ms, p99 ms, errors) of ``clients`` threads creating items."""
    import httpx

    with LocalSite(location, "api", rule_paths=[RULES]) as site:
        event = site.create_event({"name": "API"})["id"]
        first = source.with_name("register.csv")
        first.write_text("reference\nR0\n", encoding="utf-8")
        site.run_import(
            ImportRequest("item", "test-observations", first, event_id=event, region_id=1)
        )
        site.add_user("bench", positions=["API User"], approved=True, terms_accepted=True)
        site.set_password("bench", PASSWORD)
        site.put_on_duty("bench", event, "API User")
    with serving(location) as url:
        token = httpx.post(
            f"{url}/api/json/auth",
            headers={"X-Site": "api"},
            json={"uuid": "b", "platform": "python", "version": "1", "name": "b",
                  "username": "bench", "password": PASSWORD},
        ).json()["token"]  # fmt: skip
        headers = {"X-Site": "api", "Authorization": f"Bearer {token}"}
        latencies: list[float] = []
        errors: list[int] = []
        lock = threading.Lock()

        def client(number: int) -> None:
            with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
                for n in range(writes):
                    body = {"registerId": "observation", "eventId": event,
                            "reference": f"C{number}-{n}", "notes": "benchmark"}  # fmt: skip
                    started = time.perf_counter()
                    answer = http.post("/api/json/item", json=body)
                    elapsed = time.perf_counter() - started
                    with lock:
                        latencies.append(elapsed)
                        if answer.status_code != 200:
                            errors.append(answer.status_code)
                            if len(errors) == 1:
                                print("    first error:", answer.text[:300])

        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return len(latencies) / wall, statistics.median(ordered) * 1000, p99 * 1000, len(errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--writes", type=int, default=200, help="items each client creates")
    args = parser.parse_args()
    import os

    os.environ.setdefault(SERVER_SECRET_ENV, "bench-" + "s" * 40)
    print("load average {:.2f} {:.2f} {:.2f} at start".format(*os.getloadavg()))
    cluster = start_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            source = folder / "items.csv"
            rows = write_csv(source, args.rows)
            stores: dict[str, str | Path] = {
                "sqlite": folder / "bench.sqlite",
                "postgresql": cluster.new_database(),
            }
            bare = {
                "sqlite": (bare_sqlite(folder, rows), "bare executemany"),
                "postgresql": (bare_postgres(cluster.new_database(), rows), "bare COPY"),
            }
            if args.rows:
                print(
                    f"item import of {args.rows:,} rows (no asset links), store stage vs bare load"
                )
            for name, location in stores.items() if args.rows else ():
                cpu = time.process_time()
                store, whole = import_store_stage(location, source)
                cpu = time.process_time() - cpu
                seconds, what = bare[name]
                print(
                    f"  {name:<10} store stage {store:8.2f} s (whole job {whole:.2f} s)   "
                    f"{what} {seconds:8.2f} s   ratio {store / seconds:.2f}"
                )
                # The toolkit's own CPU (PostgreSQL's server works in its own processes).
                print(f"    whole job cpu {cpu:.2f} s in the toolkit's process")
            print(f"{args.clients} concurrent API clients, {args.writes} item writes each")
            for name, location in stores.items():
                rate, p50, p99, errors = api_writes(location, source, args.clients, args.writes)
                print(
                    f"  {name:<10} {rate:8.1f} writes/s   p50 {p50:7.1f} ms   "
                    f"p99 {p99:7.1f} ms   errors {errors}"
                )
    finally:
        cluster.stop()
        print("load average {:.2f} {:.2f} {:.2f} at end".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
