"""Benchmark of `toolkit serve`: HTTP under concurrent load beside the same work in-process.

The site holds the sample parcels (or a generated council with ``--assets``) and
damage assessments. Two kinds of request: a batch asset-lookup of 1,000 queries,
and an item collection page of 100. For each, the same work is timed in-process
through ``LocalSite`` (sequentially), then over HTTP from a separate load
process on loopback: once with 1 connection (the HTTP overhead per request) and
once with ``--connections`` (default 32; throughput, p50, p99, errors).

    python tests/benchmarks/bench_server.py [--requests 200] [--connections 32] [--assets N]
    python tests/benchmarks/bench_server.py --requests 8 --connections 2 --rounds 3  # smoke
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from serving import running  # noqa: E402

from toolkit.importing.pipeline import ImportRequest  # noqa: E402
from toolkit.server import ServerSettings, create_app  # noqa: E402
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
        generate(out, assets=assets, items=assets, seed=1)  # type: ignore[call-arg]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--assets", type=int, default=None, help="generate a council this big")
    parser.add_argument(
        "--rounds", type=int, default=30, help="in-process repeats; least 1-connection requests"
    )
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

        with LocalSite(path, "bench") as local:
            local.index_cache = IndexCache()
            local.asset_lookup(queries, dict(LOOKUP_OPTIONS), "id")  # warm the index
            inprocess: dict[str, list[float]] = {"lookup 1000": [], "items page 100": []}
            for _ in range(args.rounds):
                started = time.perf_counter()
                json.dumps(local.asset_lookup(queries, dict(LOOKUP_OPTIONS), "id"))
                inprocess["lookup 1000"].append(time.perf_counter() - started)
                started = time.perf_counter()
                json.dumps(local.list_items(page_params))
                inprocess["items page 100"].append(time.perf_counter() - started)

        settings = ServerSettings(rate_limit="none", auth_rate_limit="none")
        with running(create_app(path, settings=settings)) as url:
            import httpx

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
            for name, (method, route, params, body) in work.items():
                spec = {
                    "url": url,
                    "headers": headers,
                    "method": method,
                    "path": route,
                    "params": params,
                    "body": body,
                }
                load({**spec, "requests": 10, "connections": 4})  # warm every worker thread
                single = load(
                    {**spec, "requests": max(args.rounds, args.requests // 4), "connections": 1}
                )
                loaded = load({**spec, "requests": args.requests, "connections": args.connections})
                local_p50 = statistics.median(inprocess[name]) * 1000
                single_p50, _ = percentiles(single["latencies"])
                p50, p99 = percentiles(loaded["latencies"])
                rps = len(loaded["latencies"]) / loaded["wall"]
                overhead = (single_p50 - local_p50) / local_p50 * 100
                errors = len(single["errors"]) + len(loaded["errors"])
                print(
                    f"{name:16} {local_p50:13.1f}ms {single_p50:14.1f}ms {overhead:8.1f}% "
                    f"{rps:9.1f} {p50:6.1f}ms {p99:6.1f}ms {errors:7d}"
                )
    peak = psutil.Process().memory_info().rss / 2**20
    print(f"peak RSS of the server process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
