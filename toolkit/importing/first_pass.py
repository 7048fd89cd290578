"""The local engine's first pass for mode fuzzy, and the progress of one part.

Mode fuzzy fits its model (EM) on every text of the import: a job read in parts reads
each part once to gather them (:func:`first_pass`), keeping what the rule and the modes
before fuzzy gave on disk for the second pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import geopandas as gpd

from toolkit.errors import OptionError
from toolkit.importing.link_stage import IndexProvider
from toolkit.importing.linking import LinkDraft, draft_links, warm_link_index
from toolkit.importing.partitions import job_fuzzy_pairing
from toolkit.importing.parts import StagedParts, release_unused
from toolkit.importing.request import ImportRequest
from toolkit.importing.rules import ImportRule, Prepared, apply_rule
from toolkit.importing.streamed import read_ahead
from toolkit.progress import Progress
from toolkit.sources.chunks import ChunkedSource, PartRead
from toolkit.sources.tabular import names_geometry
from toolkit.store import SiteStore

# What a job's first pass keeps of a part (on disk): its rule's result, its links with the
# rows mode fuzzy was given still to decide (``LinkDraft``), and the read's facts with a
# frame of its rows but no columns (the second pass needs no value the rule has not
# taken, so it does not read the part again).
FirstPass = tuple[Prepared, LinkDraft, PartRead]


def part_progress(progress: Progress, start: int, rows: int, every: int, name: str) -> Progress:
    """``progress`` of one part (``name``) of ``rows`` rows from row ``start``, told as rows
    of all ``every`` rows (each stage counts in its own unit within a part)."""

    def report(
        label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
    ) -> None:
        share = done / total if total else 1.0
        words = f"{name}: {detail}" if detail else name
        progress(label, start + round(share * rows), every, detail=words)

    return report


def part_shown(progress: Progress, chunked: ChunkedSource, i: int) -> Progress:
    """The progress of part ``i`` (the job's own when it is read as one part)."""
    if chunked.count == 1:
        return progress
    start = sum(chunked.sizes[:i])
    return part_progress(
        progress, start, chunked.sizes[i], chunked.rows, f"part {i + 1} of {chunked.count}"
    )


def fuzzy_first_pass(
    store: SiteStore,
    asset_index: IndexProvider | None,
    progress: Progress,
    stage: Callable[[str], AbstractContextManager[None]],
    request: ImportRequest,
    rule: ImportRule,
    chunked: ChunkedSource,
    folder: Path,
    shared: dict[str, Any],
    *,
    before_fuzzy: Callable[[], None] | None = None,
) -> StagedParts[FirstPass]:
    """Mode fuzzy fits its model (EM) on the texts it is given in the whole import: a
    first pass reads each part, applies its rule and tries its links with fuzzy only
    noting its texts (``draft_links``), which are paired with their candidates while the
    next part is linked (``FuzzyPairing``); the model is fitted once and fuzzy's answer to
    each text found (``FuzzyAnswers``, in ``shared``). What the rule gave and the links
    are kept on disk, part by part, so the second pass links only the rows fuzzy was
    given, with those answers and the modes before fuzzy replayed: memory follows the
    part, the links are the one part's (and the Dask engine's), and nothing is done
    twice. ``stage`` times a stage of the job (``ImportRunner._stage``); ``before_fuzzy``
    runs as fuzzy begins to pair the texts (what the second pass needs begun while
    fuzzy's threads leave part of a core free)."""
    if asset_index is None:
        raise OptionError(f"rule {rule.name!r} links assets, but no asset index is available")

    def ruled(i: int) -> tuple[int, PartRead, Prepared]:
        """Part ``i`` read and its rule applied (in the read-ahead thread)."""
        with stage("read"):
            part = chunked.read(i)
        with stage("validate"):
            prepared = apply_rule(
                rule,
                part.frame,
                path=request.name,
                geometry_columns=part.geometry_columns,
                progress=part_shown(progress, chunked, i),
            )
        return i, part, prepared

    # The next part is read and checked while this one is linked: the CSV reader and much
    # of the rule's column work release the GIL, so the two share the two cores. The first
    # is read while the index loads, where a core would wait.
    with closing(read_ahead(ruled(i) for i in range(chunked.count))) as parts:
        return _first_pass_parts(
            store, asset_index, progress, stage, rule, chunked, folder, shared, parts,
            before_fuzzy,
        )  # fmt: skip


def _first_pass_parts(
    store: SiteStore,
    asset_index: IndexProvider,
    progress: Progress,
    stage: Callable[[str], AbstractContextManager[None]],
    rule: ImportRule,
    chunked: ChunkedSource,
    folder: Path,
    shared: dict[str, Any],
    parts: Iterator[tuple[int, PartRead, Prepared]],
    before_fuzzy: Callable[[], None] | None,
) -> StagedParts[FirstPass]:
    """``fuzzy_first_pass`` of the parts read and ruled by ``parts``."""
    with stage("link"):
        progress("fuzzy texts", 0, chunked.count, unit="parts", detail="loading the asset index")
        shared["index"] = asset_index()
        # What loading freed goes back: the first part's link would run on top of it
        # (about 100 MiB at 1,000,000 parcels).
        release_unused()
        shared["decisions"] = store.decisions.all()
    staged: StagedParts[FirstPass] = StagedParts(folder / "first-pass")

    index = shared["index"]
    # Left, on an error too, once the pairing under way has ended.
    with job_fuzzy_pairing(index, rule, folder / "fuzzy-pairs", rows=sum(chunked.sizes)) as pairing:
        with stage("link"):
            # What the index builds on first use (2-3 s at a million assets) is built
            # while the first part is read and checked, where this thread would wait.
            held_before = index.lookup_structures()
            report = chunked.report
            # A text table's geometry is known once a part is read: by its headings
            # (the grid of a million boxes, 0.5 s, was built in the first part's link).
            warm_link_index(
                index,
                rule,
                columns=report.columns,
                geometry=bool(report.geometry_source or report.geometry_columns)
                or names_geometry(report.columns),
            )
        for i, part, prepared in parts:
            with stage("link"):
                draft, fuzzy_texts = draft_links(
                    index, part.frame, rule, decisions=shared["decisions"]
                )
                # Paired in the pairing's thread while the next part is linked.
                pairing.add(fuzzy_texts)
                # Each part to disk at once, the last too: the second pass starts with it.
                rows_only = replace(part, frame=gpd.GeoDataFrame(index=part.frame.index))
                staged.add((prepared, draft, rows_only), len(part.frame), keep=False)
            del part, prepared, draft, rows_only
            release_unused()
            progress("fuzzy texts", i + 1, chunked.count, unit="parts")
        with stage("link"):
            # The second pass replays the answers of the modes before fuzzy, so the tables
            # they built here are let go before fuzzy joins the job's pairs and fits its
            # model (a million parcels: ~280 MiB). What the index held before (a server's
            # lookups built it) is kept; anything used again is built again.
            index.let_go(index.lookup_structures() - held_before)
            release_unused()
            if before_fuzzy is not None:
                before_fuzzy()
            shared["answers"] = pairing.answers()
    return staged
