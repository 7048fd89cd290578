"""The Dask cluster a command runs on, and the per-partition stages it runs there.

Without a scheduler address a ``distributed.LocalCluster`` of worker processes sized to
the machine is started for the command and closed after it; with one, the command's
client connects to that cluster. Rows travel in partitions that keep their global row
numbers (the frame's index), so every problem still names the file's row.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import shutil
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.engine.index_ref import IndexRef, loaded_index
from toolkit.errors import OptionError
from toolkit.importing.partitions import (
    PartitionWork,
    PartStages,
    partition_draft,
    partition_packed,
    partition_stages,
)
from toolkit.matching import AssetIndex, checked_options
from toolkit.matching.lookup import LookupResult, run_lookup
from toolkit.matching.modes import FuzzyTexts, fuzzy_model, match_fuzzy
from toolkit.matching.probabilistic import Model
from toolkit.progress import Progress
from toolkit.scratch import ScratchFolder, scratch_folder
from toolkit.sources import SourceProblem
from toolkit.sources.chunks import ChunkedSource, CsvPart, Part, PartRead, read_part

# Rows per partition unless TOOLKIT_PARTITION_ROWS says otherwise: large enough that a
# task's overhead (milliseconds) is small beside its work, small enough to spread.
PARTITION_ROWS = 100_000


def _import_part(work: PartitionWork, frame: pd.DataFrame, ref: IndexRef | None) -> PartStages:
    """One partition's rule, link and payload, on a worker."""
    return _sent(partition_stages(work, frame, None if ref is None else loaded_index(ref)))


def _sent(stages: PartStages) -> PartStages:
    """``stages`` as the client needs them: the rule's typed values and cleared cells
    stay on the worker (the payload carries what is written, and the client reads only
    the rule's rejections, columns and notes), which halves what travels back."""
    prepared = replace(
        stages.prepared,
        values=stages.prepared.values.iloc[:0],
        cleared=stages.prepared.cleared.iloc[:0],
    )
    return replace(stages, prepared=prepared)


def _import_read_part(
    work: PartitionWork, part: Part, ref: IndexRef | None
) -> tuple[pd.Index, PartRead, PartStages]:
    """One partition read (a staged CSV's, a layer's feature range), then its rule, link
    and payload, on a worker: the rows never pass through the client. Back come its row
    numbers, what reading it found (without the frame) and its stages."""
    read = read_part(part)
    work = replace(work, geometry_columns=tuple(read.geometry_columns))
    stages = partition_stages(work, read.frame, None if ref is None else loaded_index(ref))
    rows = read.frame.index
    if work.matching_id is not None:
        # An item import's kept rows, cut and pickled here, as the client stages them.
        stages = replace(stages, payload=partition_packed(work, rows, read.problems, stages))
    return rows, replace(read, frame=read.frame.iloc[:0]), _sent(stages)


def _first_pass_path(work: PartitionWork, i: int) -> Path:
    """The file where the job's first pass leaves partition ``i``."""
    assert work.first_pass is not None
    return Path(work.first_pass) / f"partition-{i:05d}.pickle"


def _fuzzy_texts_part(
    work: PartitionWork, i: int, part: Part | pd.DataFrame, ref: IndexRef
) -> pd.Series:
    """The first pass over partition ``i`` (read here unless it is a frame already) of a job
    whose fuzzy model is fitted once, on a worker: its rule and its links drafted with
    fuzzy only noting its texts (``partition_draft``) are left in the job's first-pass
    folder with its row numbers and what reading it found (the second pass reads nothing
    again); back to the client go only the distinct texts fuzzy was given."""
    read = None
    if isinstance(part, pd.DataFrame):
        frame = part
    else:
        read = read_part(part)
        work = replace(work, geometry_columns=tuple(read.geometry_columns))
        frame = read.frame
        read = replace(read, frame=frame.iloc[:0])
    prepared, draft, texts = partition_draft(work, frame, loaded_index(ref))
    path = _first_pass_path(work, i)
    # Written whole, then named: a task run again (a worker lost) never leaves half a file.
    partial_path = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
    with partial_path.open("wb") as handle:
        pickle.dump((frame.index, read, prepared, draft), handle, pickle.HIGHEST_PROTOCOL)
    partial_path.replace(path)
    return texts


def _import_staged_part(
    work: PartitionWork, i: int, ref: IndexRef
) -> tuple[pd.Index, PartRead | None, PartStages]:
    """The second pass over partition ``i``, on a worker: the first pass's rule result and
    link draft taken up (``partition_stages(first=...)``: only the rows mode fuzzy was
    given are linked, with the job's model), then its payload, cut to its kept rows and
    pickled where the partition was read by a worker. Back come its row numbers, what
    reading it found (None: the client sent it the rows) and its stages."""
    with _first_pass_path(work, i).open("rb") as handle:
        # Written by this job's first pass, in its own folder.
        rows, read, prepared, draft = pickle.load(handle)
    # An item import (the only one that links): its links and payload need only the row
    # numbers of the rows as read.
    frame = pd.DataFrame(index=rows)
    index = loaded_index(ref)
    stages = partition_stages(work, frame, index, first=(prepared, draft))
    if read is not None and work.matching_id is not None:
        stages = replace(stages, payload=partition_packed(work, rows, read.problems, stages))
    return rows, read, _sent(stages)


def _read_only_part(part: Part, head: int) -> PartRead:
    """One partition read on a worker: what reading it found, with only its first
    ``head`` rows (inspect shows those)."""
    read = read_part(part)
    return replace(read, frame=read.frame.iloc[:head])


def _lookup_part(
    ref: IndexRef,
    queries: pd.DataFrame,
    options: dict[str, Any],
    candidates: int,
    decisions: pd.DataFrame | None,
    model: Model | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One partition's lookup, on a worker: resolved rows and candidates; ``model``: mode
    fuzzy's, fitted once for the whole job."""
    fuzzy = None if model is None else partial(match_fuzzy, model=model)
    result = run_lookup(loaded_index(ref), queries, options, candidates, decisions, fuzzy=fuzzy)
    return result.resolved, result.candidates


def _lookup_texts_part(ref: IndexRef, queries: pd.DataFrame, options: dict[str, Any]) -> pd.Series:
    """The distinct texts mode fuzzy is given in one partition of a lookup, on a worker."""
    texts = FuzzyTexts()
    run_lookup(loaded_index(ref), queries, options, fuzzy=texts)
    return texts.distinct()


def _counted(queries: pd.DataFrame) -> pd.DataFrame:
    """``queries`` with every missing reference replaced by the query's 1-based count in
    the whole batch, which the matcher would give it (a partition counts from 1)."""
    count = pd.Series(range(1, len(queries) + 1), index=queries.index, dtype=object)
    if "reference" not in queries.columns:
        return queries.assign(reference=count)
    given = queries["reference"]
    return queries.assign(reference=given.astype(object).where(given.notna(), count))


class DaskEngine:
    """A client of a Dask cluster that runs the import and lookup stages per partition."""

    def __init__(self, client: Any, work_dir: Path, partition_rows: int | None = None) -> None:
        self.client = client
        self.work_dir = work_dir
        self.partition_rows = partition_rows or int(
            os.environ.get("TOOLKIT_PARTITION_ROWS") or PARTITION_ROWS
        )
        # The last index published: the object (cheap to recognise) and its reference.
        self._published: tuple[AssetIndex, IndexRef] | None = None
        # First passes' folders (by path) until their second pass ends: scratch folders,
        # so a client killed in between leaves none behind for good (toolkit.scratch).
        self._first_passes: dict[str, ScratchFolder] = {}

    @property
    def dashboard_link(self) -> str | None:
        """The cluster's dashboard, where it serves one."""
        link = getattr(self.client, "dashboard_link", None)
        return str(link) if link else None

    def bounds(self, rows: int) -> list[tuple[int, int]]:
        """Start and end positions of each partition: at least one per worker thread
        (when there are rows for them), none larger than ``partition_rows``."""
        threads = sum(self.client.nthreads().values()) or 1
        count = max(1, min(rows, max(threads, math.ceil(rows / self.partition_rows))))
        step = math.ceil(rows / count) if rows else 0
        return [(start, min(start + step, rows)) for start in range(0, rows, step)] or [(0, 0)]

    def index_ref(self, index: AssetIndex) -> IndexRef:
        """The reference workers load ``index`` by, saved once per content per command."""
        if self._published is not None and self._published[0] is index:
            return self._published[1]
        ref = IndexRef.publish(index, self.work_dir)
        self._published = (index, ref)
        return ref

    def _gather(self, futures: Sequence[Any], stage: str, progress: Progress) -> list[Any]:
        """The futures' results in order, reporting partitions done of the total."""
        from distributed import as_completed

        total = len(futures)
        progress(stage, 0, total, unit="partitions")
        for done, _ in enumerate(as_completed(futures), start=1):
            progress(stage, done, total, unit="partitions")
        return list(self.client.gather(list(futures)))

    def _parts(self, source: ChunkedSource) -> list[Any]:
        """The parts of ``source`` as tasks take them: a staged CSV's part still in memory
        (the last, with its rows) is sent to a worker once, not written into the task
        graph (tens of MiB the scheduler would hold and warn about)."""
        assert source.parts is not None
        return [
            self.client.scatter(part, hash=False)
            if isinstance(part, CsvPart) and part.table is not None
            else part
            for part in source.parts
        ]

    # --- import (toolkit.importing.partitions.StageEngine) ------------------------------------

    def run_partitions(
        self,
        work: PartitionWork,
        frame: pd.DataFrame,
        index: AssetIndex | None,
        progress: Progress,
    ) -> list[PartStages]:
        """Rule, link and payload of every partition of ``frame``, in row order."""
        ref = None if index is None else self.index_ref(index)
        parts = [frame.iloc[start:end] for start, end in self.bounds(len(frame))]
        [work_future] = self.client.scatter([work], hash=False)
        futures = [
            self.client.submit(_import_part, work_future, part, ref, pure=False) for part in parts
        ]
        results: list[PartStages] = self._gather(futures, "partitions", progress)
        return results

    def run_parts(
        self,
        work: PartitionWork,
        source: ChunkedSource,
        index: AssetIndex | None,
        progress: Progress,
    ) -> Iterator[tuple[pd.Index, list[SourceProblem], PartStages]]:
        """Rule, link and payload of every partition of ``source``, in row order: a staged
        CSV's partitions and a layer's feature ranges are read by the workers; another
        source's (read whole, as GDAL and openpyxl read) are sent to them. After a first
        pass (``work.first_pass``) the workers take up what it left of each partition
        instead, and its folder is removed once every partition is back. Progress:
        partitions done of the total."""
        ref = None if index is None else self.index_ref(index)
        [work_future] = self.client.scatter([work], hash=False)
        staged = work.first_pass is not None
        read_there = source.parts is not None
        parts = self._parts(source) if read_there and not staged else None

        def submit(i: int) -> Any:
            if staged:
                return self.client.submit(_import_staged_part, work_future, i, ref, pure=False)
            if parts is not None:
                return self.client.submit(_import_read_part, work_future, parts[i], ref, pure=False)
            frame = source.read(i).frame
            return self.client.submit(_import_part, work_future, frame, ref, pure=False)

        total = source.count
        progress("partitions", 0, total, unit="partitions")
        try:
            for i, result in enumerate(self._in_order(submit, total)):
                if read_there:
                    rows, read, stages = result
                    source.learn(i, read)
                    problems = source.named(read.problems)
                else:
                    stages = result[2] if staged else result
                    part = source.read(i)
                    rows, problems = part.frame.index, part.problems
                if staged:
                    _first_pass_path(work, i).unlink(missing_ok=True)  # taken up: disk freed
                progress("partitions", i + 1, total, unit="partitions")
                yield rows, problems, stages
        finally:
            if work.first_pass is not None:
                self._first_pass_done(work.first_pass)

    def _in_order(self, submit: Callable[[int], Any], count: int) -> Iterator[Any]:
        """The results of ``submit(i)`` for each ``i`` below ``count``, in order, with at
        most two tasks per worker thread submitted and not yet taken: a worker keeps a
        result until the client takes it, so workers faster than the client (which
        writes down every part) would otherwise hold every partition's at once (7 GiB
        in one worker at a million rows)."""
        ahead = 2 * max(1, sum(self.client.nthreads().values()))
        futures = deque(submit(i) for i in range(min(ahead, count)))
        for i in range(count):
            future = futures.popleft()
            if i + ahead < count:
                futures.append(submit(i + ahead))  # before waiting: the workers stay busy
            result = future.result()
            future.release()  # its rows are the client's now; the workers may forget them
            yield result

    def first_pass(
        self, work: PartitionWork, source: ChunkedSource, index: AssetIndex, progress: Progress
    ) -> tuple[list[pd.Series], str]:
        """Mode fuzzy's first pass over every partition of ``source`` on the workers
        (``_fuzzy_texts_part``): per partition, in row order, the distinct texts fuzzy is
        given there, for the client to fit its model once; and the folder (in the work
        folder, which every worker reads) where each partition's rule result and link
        draft wait for ``run_parts``. Only the texts come back: the rows stay with the
        workers."""
        ref = self.index_ref(index)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        scratch = ScratchFolder("toolkit-first-pass-", self.work_dir)
        folder = str(scratch.path)
        self._first_passes[folder] = scratch
        work = replace(work, first_pass=folder)
        [work_future] = self.client.scatter([work], hash=False)
        parts: list[Any] = (
            self._parts(source)
            if source.parts is not None
            else [source.read(i).frame for i in range(source.count)]
        )
        futures = [
            self.client.submit(_fuzzy_texts_part, work_future, i, part, ref, pure=False)
            for i, part in enumerate(parts)
        ]
        try:
            texts: list[pd.Series] = self._gather(futures, "fuzzy texts", progress)
        except BaseException:
            self._first_pass_done(folder)
            raise
        return texts, folder

    def _first_pass_done(self, folder: str) -> None:
        """Remove a first pass's folder (and let go of its lock)."""
        scratch = self._first_passes.pop(folder, None)
        if scratch is not None:
            scratch.remove()
        else:
            shutil.rmtree(folder, ignore_errors=True)

    def read_parts(self, source: ChunkedSource, progress: Progress, head: int = 0) -> Any:
        """Read every partition of ``source`` on the workers, so that its report is whole;
        the first ``head`` rows come back (a GeoDataFrame)."""
        import geopandas as gpd

        if source.parts is None:  # read whole already
            assert source.frame is not None
            return source.frame.iloc[:head]
        futures = [
            self.client.submit(_read_only_part, part, head, pure=False)
            for part in self._parts(source)
        ]
        total = len(futures)
        progress("partitions", 0, total, unit="partitions")
        frames = []
        wanted = head
        for i, future in enumerate(futures):
            read: PartRead = future.result()
            future.release()
            source.learn(i, read)
            if wanted > 0:
                frames.append(read.frame.iloc[:wanted])
                wanted -= len(frames[-1])
            progress("partitions", i + 1, total, unit="partitions")
        return gpd.GeoDataFrame(pd.concat(frames)) if len(frames) > 1 else frames[0]

    # --- lookup ---------------------------------------------------------------------------

    def lookup(
        self,
        index: AssetIndex,
        queries: pd.DataFrame,
        options: dict[str, Any],
        candidates: int = 0,
        decisions: pd.DataFrame | None = None,
        progress: Progress | None = None,
    ) -> LookupResult:
        """``run_lookup`` over partitions of ``queries`` on the workers; the same result."""
        from toolkit.progress import no_progress

        ref = self.index_ref(index)
        queries = _counted(queries)
        bounds = self.bounds(len(queries))
        model = None
        if "fuzzy" in (options.get("mode"), options.get("fallbackMode")):
            # Mode fuzzy fits its model on the texts it is given: gathered from every
            # partition first, fitted once here, so each partition matches as one batch.
            texts = self._gather(
                [
                    self.client.submit(
                        _lookup_texts_part, ref, queries.iloc[start:end], options, pure=False
                    )
                    for start, end in bounds
                ],
                "fuzzy texts",
                progress or no_progress,
            )
            # Paired a partition at a time, the pairs waiting on disk (as an import's).
            with scratch_folder("toolkit-lookup-") as folder:
                model = fuzzy_model(index, texts, checked_options(index, options), folder)
        futures = [
            self.client.submit(
                _lookup_part, ref, queries.iloc[start:end], options, candidates, decisions,
                model, pure=False,
            )
            for start, end in bounds
        ]  # fmt: skip
        parts = self._gather(futures, "lookup", progress or no_progress)
        resolved = pd.concat([r for r, _ in parts], ignore_index=True)
        tops = []
        for (start, _end), (_, top) in zip(bounds, parts, strict=True):
            top = top.copy()
            top["row"] = top["row"] + start  # a partition counts its queries from 0
            tops.append(top)
        return LookupResult(
            resolved=resolved, candidates=pd.concat(tops, ignore_index=True), index=index
        )


@contextmanager
def dask_engine(
    scheduler: str | None = None,
    *,
    workers: int | None = None,
    on_start: Callable[[DaskEngine], None] | None = None,
) -> Iterator[DaskEngine]:
    """A :class:`DaskEngine` on the cluster at ``scheduler``, or on a ``LocalCluster`` of
    ``workers`` processes (default: one per core) started now and closed on leaving.
    ``on_start`` is told of a cluster started here (to print its dashboard)."""
    from distributed import Client, LocalCluster

    # The scheduler's and workers' INFO lines are not the command's output.
    logging.getLogger("distributed").setLevel(logging.WARNING)

    # Saved indexes go where every worker can read them: TOOLKIT_WORK_DIR for a cluster
    # of several machines (a shared folder), else this machine's temporary folder.
    with scratch_folder("toolkit-dask-") as work:
        if scheduler:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise OptionError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from exc
            with client:
                yield DaskEngine(client, work)
            return
        cluster = LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            # The workers of a cluster we start log their transient troubles (a heartbeat
            # that timed out on a busy machine, with a traceback) at ERROR; a task's real
            # failure reaches us as its exception. Shown with -v (debug logging).
            silence_logs=(
                logging.WARNING
                if logging.getLogger("toolkit").isEnabledFor(logging.DEBUG)
                else logging.CRITICAL
            ),
        )
        with cluster, Client(cluster) as client:
            engine = DaskEngine(client, work)
            if on_start is not None:
                on_start(engine)
            yield engine
