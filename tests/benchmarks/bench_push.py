"""Benchmark: push an item import to `toolkit serve` on loopback, beside the same import run
locally in the same run; prints both times, their ratio and the number of chunks.

    python tests/benchmarks/bench_push.py                 # 200,000 item rows
    python tests/benchmarks/bench_push.py --items 50000

The server's polling floor is lowered for the benchmark (the client never polls more
often than --poll seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/serving.py

from serving import running

from toolkit.importing.pipeline import ImportRequest
from toolkit.remote import RemoteSite
from toolkit.remote.client import Credentials, Profile
from toolkit.remote.push import Pusher
from toolkit.sample.generate import generate
from toolkit.server.app import create_app
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite


def set_up(path: Path, parcels: Path) -> tuple[int, str]:
    with LocalSite(path, "bench", user_id="officer") as site:
        site.run_import(ImportRequest("asset", "property-assets", parcels))
        event = site.create_event({"name": "Benchmark"})["id"]
        site.add_user("officer", positions=["API User"], approved=True, terms_accepted=True)
        site.put_on_duty("officer", event, "Recovery Officer")
        site.asset_index()  # built and cached before timing, on both sides
        return event, site.issue_api_key("officer")["key"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--assets", type=int, default=200_000)
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between status checks")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        generate(folder / "data", assets=args.assets, items=args.items, seed=1)
        items = folder / "data" / "items.csv"
        event, _ = set_up(folder / "local.sqlite", folder / "data" / "parcels.zip")
        remote_event, key = set_up(folder / "remote.sqlite", folder / "data" / "parcels.zip")

        started = time.perf_counter()
        with LocalSite(folder / "local.sqlite", "bench") as site:
            job = site.run_import(
                ImportRequest("item", "damage-assessments", items, event_id=event, region_id=1)
            )
        local = time.perf_counter() - started
        print(f"local import: {job['status']} {job['summary']['counts']} in {local:.1f} s")

        settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
        with running(create_app(folder / "remote.sqlite", settings=settings)) as url:
            profile = Profile(url, "bench", Credentials(api_key=key))
            with (
                RemoteSite(profile) as remote,
                LocalSite(folder / "remote.sqlite", "bench") as offline,
            ):
                index = offline.asset_index()
                pusher = Pusher(remote, asset_index=lambda: index, poll_interval_s=args.poll)
                started = time.perf_counter()
                result = pusher.push(
                    ImportRequest(
                        "item", "damage-assessments", items, event_id=remote_event, region_id=1
                    )
                )
                pushed = time.perf_counter() - started
        print(
            f"push: {'COMPLETE' if result.ok else 'FAILED'} {result.counts()} in "
            f"{pushed:.1f} s, {len(result.chunks)} chunks"
        )
        print(f"push / local: {pushed / local:.2f}")


if __name__ == "__main__":
    main()
