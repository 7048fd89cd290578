"""Who runs a scheduled import job: the caller chooses (inline, or a pool of threads).

``LocalSite.import_schedule`` records the job ``NOT_STARTED`` and hands an
:class:`ImportTask` to its executor. Each task opens its own connection, so it
can run in any thread; its temporary data folder is removed when it ends. A
job cut off by the process ending is turned ``FAILED`` by the site's orphan
recovery the next time the file is opened.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.geocoding import LazyGeocoder, site_sources
from toolkit.importing.pipeline import ImportRequest, ImportRunner
from toolkit.importing.rules import load_rule
from toolkit.model.location import StoreLocation
from toolkit.scratch import ScratchFolder
from toolkit.store import Database, SiteStore

if TYPE_CHECKING:
    from toolkit.geocoding import GazetteerCache
    from toolkit.matching import Geocoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportTask:
    """A job recorded ``NOT_STARTED``, with everything needed to run it elsewhere."""

    path: StoreLocation
    site: str
    job_id: int
    request: ImportRequest
    user_id: str | None = None
    rule_paths: tuple[str | Path, ...] = ()
    rule_names_only: bool = False  # scheduled by a server: the rule is a name, never a path
    folder: ScratchFolder | None = None  # temporary data of the job, removed when it ends
    done: Callable[[ImportTask], None] | None = field(default=None, compare=False)
    # External lookups for rules that ask for them: the scheduling site's geocoding
    # service, and its gazetteers in memory (``toolkit serve`` shares them); the job reads
    # its site's gazetteer through its own connection.
    geocoding_service: Geocoder | None = field(default=None, compare=False)
    gazetteers: GazetteerCache | None = field(default=None, compare=False)


ImportExecutor = Callable[[ImportTask], None]


def run_import_task(task: ImportTask) -> None:
    """Run the job on a connection of its own; the job records its own failure."""
    from toolkit.site.index_cache import site_asset_index

    try:
        with Database(task.path) as db:
            store = SiteStore(db, task.site, create=False)
            runner = ImportRunner(
                store,
                rule_paths=task.rule_paths,
                user_id=task.user_id,
                asset_index=lambda: site_asset_index(store),
                rule_names_only=task.rule_names_only,
                geocoder=LazyGeocoder(
                    lambda: site_sources(store, task.gazetteers, task.geocoding_service)
                ),
            )
            rule = load_rule(
                task.request.import_rule, task.rule_paths, names_only=task.rule_names_only
            )
            runner.run_job(task.job_id, task.request, rule)
    except Exception:  # the job stays RUNNING; orphan recovery or the log tells why
        log.exception("import job %s could not run", task.job_id)
    finally:
        if task.folder is not None:
            task.folder.remove()
        if task.done is not None:
            task.done(task)


def inline_executor(task: ImportTask) -> None:
    """Run the job before ``import_schedule`` returns."""
    run_import_task(task)


class ThreadPoolImportExecutor:
    """Run jobs in a pool of threads of this process (``toolkit serve``)."""

    def __init__(self, workers: int = 2) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="import")
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()

    def __call__(self, task: ImportTask) -> None:
        future = self.pool.submit(run_import_task, task)
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()] + [future]

    def shutdown(self, wait: bool = True) -> None:
        """Let running and queued jobs finish (``wait``), then stop the threads."""
        self.pool.shutdown(wait=wait, cancel_futures=not wait)
