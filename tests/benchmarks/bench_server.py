"""Benchmark of `toolkit serve`: HTTP under concurrent load beside the same work in-process.

The site holds the sample parcels (or a generated council with ``--assets``) and
damage assessments. Two kinds of request: a batch asset-lookup of 1,000 queries,
and an item collection page of 100. The server is a real ``toolkit serve``
process (``--processes`` of them). For each kind, the same work is timed
in-process through ``LocalSite`` and over HTTP with 1 connection (the HTTP
overhead per request), alternately, call by call, so that both see the same load
on the machine; then from a separate load process on loopback with
``--connections`` (default 32; throughput, p50, p99, errors). CPU milliseconds per
request (the server's, from its process times) are printed beside the in-process
ones: unlike wall times they hardly move with other work on the machine.

    python tests/benchmarks/bench_server.py [--requests 200] [--connections 32] [--assets N]
    python tests/benchmarks/bench_server.py --processes 2   # toolkit serve --processes 2
    python tests/benchmarks/bench_server.py --requests 8 --connections 2 --rounds 3  # smoke
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from serving import free_port  # noqa: E402

from toolkit.importing.pipeline import ImportRequest  # noqa: E402
from toolkit.site import LocalSite  # noqa: E402
from toolkit.site.index_cache import IndexCache  # noqa: E402

PASSWORD = "benchmark password"
LOOKUP_OPTIONS = {"mode": "soundex", "maxRank": 3, "useExternalLookups": False}

LOAD_SCRIPT = r"""
import json, sys, time, threading, httpx
spec = json.loads(sys.stdin.read())
latencies, errors, lock = [], [], threading.Lock()
todo = list(range(spec["requests"]))
def worker():
    with httpx.Client(base_url=spec["url"], headers=spec["headers"], timeout=120) as client:
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            started = time.perf_counter()
            if spec["method"] == "GET":
                answer = client.get(spec["path"], params=spec["params"])
            else:
                answer = client.post(spec["path"], json=spec["body"])
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if answer.status_code != 200:
                    errors.append(answer.status_code)
threads = [threading.Thread(target=worker) for _ in range(spec["connections"])]
started = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"wall": time.perf_counter() - started, "latencies": latencies,
                  "errors": errors}))
"""


def build_site(folder: Path, assets: int | None) -> tuple[Path, int, list[str]]:
    path = folder / "bench.sqlite"
    parcels, items = ROOT / "sample_data/parcels.zip", ROOT / "sample_data/damage_assessments.csv"
    if assets:
        from toolkit.sample.generate import generate

        out = folder / "workload"
        generate(out, assets=assets, items=assets, seed=1)
        parcels, items = out / "parcels.zip", out / "items.csv"
    with LocalSite(path, "bench", user_id="admin") as site:
        job = site.run_import(ImportRequest("asset", "property-assets", parcels))
        assert job["status"] == "COMPLETE", job["result"]
        event = site.create_event({"name": "Bench"})["id"]
        job = site.run_import(
            ImportRequest("item", "damage-assessments", items, event_id=event, region_id=1)
        )
        site.add_user("bench", positions=["API User"], approved=True, terms_accepted=True)
        site.set_password("bench", PASSWORD)
        site.put_on_duty("bench", event, "API User")
        names = [
            a["name"]
            for a in site.list_assets({"limit": "1000", "type": "Property"})["models"].values()
        ]
    return path, event, names


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return (
        ordered[len(ordered) // 2] * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    )


def load(spec: dict[str, Any]) -> dict[str, Any]:
    answer = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(answer.stdout))


@contextlib.contextmanager
def serving(path: Path, processes: int) -> Iterator[tuple[str, psutil.Process]]:
    """``toolkit serve`` of the site file on a free loopback port: its URL and process."""
    port = free_port()
    command = [sys.executable, "-m", "toolkit", "--store", str(path), "serve", "--port", str(port)]
    command += ["--rate-limit", "none", "--auth-rate-limit", "none"]
    if processes > 1:  # the option is newer than the benchmark: older servers run without it
        command += ["--processes", str(processes)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/api/json/ping", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("toolkit serve did not start") from None
                time.sleep(0.1)
        yield url, psutil.Process(server.pid)
    finally:
        server.terminate()
        server.wait(30)


def server_processes(server: psutil.Process) -> list[psutil.Process]:
    return [server, *server.children(recursive=True)]


def server_cpu_s(server: psutil.Process) -> float:
    """CPU seconds (user + system) of the server and its worker processes so far."""
    return sum(sum(p.cpu_times()[:2]) for p in server_processes(server))


def peak_rss_mib(server: psutil.Process) -> float:
    """The peak resident memory of the server's processes, added up (VmHWM on Linux)."""
    total = 0
    for process in server_processes(server):
        status = Path(f"/proc/{process.pid}/status")
        peak = [line for line in status.read_text().splitlines() if line.startswith("VmHWM:")]
        total += int(peak[0].split()[1]) * 1024 if peak else process.memory_info().rss
    return total / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--assets", type=int, default=None, help="generate a council this big")
    parser.add_argument(
        "--rounds", type=int, default=30, help="in-process repeats; least 1-connection requests"
    )
    parser.add_argument("--processes", type=int, default=1, help="toolkit serve --processes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, event, names = build_site(Path(tmp), args.assets)
        # 1,000 queries from real asset names, some spoilt the way field data is.
        queries = [
            {
                "code": n,
                "str": (
                    names[n % len(names)].replace("STREET", "ST")
                    if n % 3
                    else names[n % len(names)]
                ),
            }
            for n in range(1000)
        ]
        page_params = {"registerId": "damage-assessment", "eventId": str(event), "limit": "100"}
        work = {
            "lookup 1000": (
                "POST",
                "/api/json/asset-lookup",
                {},
                {"options": LOOKUP_OPTIONS, "query": queries, "output": "id"},
            ),
            "items page 100": ("GET", "/api/json/item", page_params, None),
        }

        with LocalSite(path, "bench") as local, serving(path, args.processes) as (url, server):
            local.index_cache = IndexCache()
            local.asset_lookup(queries, dict(LOOKUP_OPTIONS), "id")  # warm (and store) the index
            in_process = {
                "lookup 1000": lambda: json.dumps(
                    local.asset_lookup(queries, dict(LOOKUP_OPTIONS), "id")
                ),
                "items page 100": lambda: json.dumps(local.list_items(page_params)),
            }
            token = httpx.post(
                f"{url}/api/json/auth",
                headers={"X-Site": "bench"},
                json={
                    "uuid": "bench",
                    "platform": "python",
                    "version": "1",
                    "name": "bench",
                    "username": "bench",
                    "password": PASSWORD,
                },
            ).json()["token"]
            headers = {"X-Site": "bench", "Authorization": f"Bearer {token}"}
            print(
                f"site: {len(names)}+ assets; {args.requests} requests per run; "
                f"load from a separate process on loopback"
            )
            print(
                f"{'work':16} {'in-process p50':>15} {'HTTP 1 conn p50':>16} {'overhead':>9} "
                f"{'rps@' + str(args.connections):>9} {'p50':>8} {'p99':>8} {'errors':>7}"
            )
            cpu_lines = []
            for name, (method, route, params, body) in work.items():
                spec = {
                    "url": url,
                    "headers": headers,
                    "method": method,
                    "path": route,
                    "params": params,
                    "body": body,
                }
                # Warm every worker thread of every server process.
                load({**spec, "requests": 10 * args.processes, "connections": 4})
                timed = alternate(
                    in_process[name], spec, max(args.rounds, args.requests // 4), server
                )
                loaded = load({**spec, "requests": args.requests, "connections": args.connections})
                local_p50 = statistics.median(timed.local_s) * 1000
                single_p50, _ = percentiles(timed.http_s)
                p50, p99 = percentiles(loaded["latencies"])
                rps = len(loaded["latencies"]) / loaded["wall"]
                overhead = (single_p50 - local_p50) / local_p50 * 100
                errors = timed.errors + len(loaded["errors"])
                print(
                    f"{name:16} {local_p50:13.1f}ms {single_p50:14.1f}ms {overhead:8.1f}% "
                    f"{rps:9.1f} {p50:6.1f}ms {p99:6.1f}ms {errors:7d}"
                )
                local_cpu = statistics.median(timed.local_cpu_s) * 1000
                server_cpu = timed.server_cpu_s * 1000
                cpu_lines.append(
                    f"  {name:16} in-process {local_cpu:7.2f} ms; server {server_cpu:7.2f} ms "
                    f"({server_cpu - local_cpu:+.2f})"
                )
            print("CPU per request (1 connection; the server's own, mean; in-process p50):")
            print("\n".join(cpu_lines))
            print(f"server processes: {args.processes}; load average {os.getloadavg()[0]:.2f}")
            peak = peak_rss_mib(server)
    print(f"peak RSS of the server process: {peak:.0f} MiB")


class Timed:
    """Alternate calls in-process and over HTTP: their wall and CPU seconds."""

    def __init__(self) -> None:
        self.local_s: list[float] = []
        self.local_cpu_s: list[float] = []
        self.http_s: list[float] = []
        self.server_cpu_s = 0.0
        self.errors = 0


def alternate(local: Any, spec: dict[str, Any], rounds: int, server: psutil.Process) -> Timed:
    """``rounds`` pairs: one call in-process, then the same request over one kept-alive
    connection (the server's CPU counted over the HTTP calls only)."""
    timed = Timed()
    with httpx.Client(base_url=spec["url"], headers=spec["headers"], timeout=120) as client:
        for _ in range(rounds):
            started, cpu = time.perf_counter(), time.process_time()
            local()
            timed.local_s.append(time.perf_counter() - started)
            timed.local_cpu_s.append(time.process_time() - cpu)
            server_before = server_cpu_s(server)
            started = time.perf_counter()
            if spec["method"] == "GET":
                answer = client.get(spec["path"], params=spec["params"])
            else:
                answer = client.post(spec["path"], json=spec["body"])
            timed.http_s.append(time.perf_counter() - started)
            timed.server_cpu_s += server_cpu_s(server) - server_before
            timed.errors += answer.status_code != 200
    timed.server_cpu_s /= rounds
    return timed


if __name__ == "__main__":
    main()
