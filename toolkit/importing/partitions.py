"""An import's per-partition stages, as an engine runs them (``toolkit.engine``).

:func:`partition_stages` is rule, link and payload of one partition (pure, row by row);
:class:`StageEngine` is what runs it over a source's partitions; mode fuzzy's model is
fitted once per job from every partition's texts (``job_fuzzy_*``), gathered by a first
pass (:func:`partition_draft`) whose rule results and link drafts the second pass takes
up. The plan and the write stay with the runner (``pipeline``), one transaction.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pandas as pd

from toolkit.importing.link_stage import required_missing
from toolkit.importing.linking import LinkDraft, LinkResult, draft_links, link_rows
from toolkit.importing.outcome import Linked, kept_mask
from toolkit.importing.parts import PackedPart
from toolkit.importing.payload import Payload, prepare_payload
from toolkit.importing.plan import compact_keys
from toolkit.importing.rules import ImportRule, Prepared, apply_rule
from toolkit.matching.modes import (
    FuzzyPairing,
    ModeFunction,
    fuzzy_model,
    match_fuzzy,
)
from toolkit.matching.options import LookupOptions
from toolkit.matching.pairing_process import OWN_PROCESS_ROWS, ProcessPairing
from toolkit.matching.probabilistic import Model
from toolkit.progress import Progress
from toolkit.sources import SourceProblem
from toolkit.sources.chunks import ChunkedSource

if TYPE_CHECKING:
    from toolkit.matching import AssetIndex


@dataclass(frozen=True)
class PartitionWork:
    """What every partition's stages need besides its rows; small and picklable (an
    engine sends it to its workers once per job)."""

    rule: ImportRule
    path: str
    geometry_columns: tuple[str, ...]
    decisions: pd.DataFrame | None
    may_update: bool
    links: bool
    # Mode fuzzy's model, fitted once for the whole job (None: each partition fits its own).
    fuzzy_model: Model | None = None
    # An item import's matching column: a partition read by a worker comes back cut to its
    # kept rows and pickled (``partition_packed``); None (asset and user imports, joined
    # for their write): whole.
    matching_id: str | None = None
    # Where the job's first pass left each partition's rule result and link draft (a folder
    # every worker can read; ``StageEngine.first_pass``); None: no first pass.
    first_pass: str | None = None


@dataclass(frozen=True)
class PartStages:
    """One partition's rule, link and payload results, over all of its rows (the rows
    rejected anywhere are set aside once every partition is back)."""

    prepared: Prepared
    link: LinkResult | None
    # An item import's, read by a worker: its kept rows, pickled there.
    payload: Payload | PackedPart


class StageEngine(Protocol):
    """Runs :func:`partition_stages` over the partitions of a source (``toolkit.engine``),
    its workers reading them; the parts come back in row order, each with its row numbers
    and the reader's problems of its rows. The plan and the write stay here, one
    transaction."""

    @property
    def partition_rows(self) -> int: ...

    def run_parts(
        self,
        work: PartitionWork,
        source: ChunkedSource,
        index: AssetIndex | None,
        progress: Progress,
    ) -> Iterator[tuple[pd.Index, list[SourceProblem], PartStages]]: ...

    def first_pass(
        self, work: PartitionWork, source: ChunkedSource, index: AssetIndex, progress: Progress
    ) -> tuple[list[pd.Series], str]:
        """Mode fuzzy's first pass (:func:`partition_draft`) over every partition: the
        distinct texts fuzzy is given in each, in row order, and where the partitions'
        rule results and link drafts wait for the second pass (``PartitionWork.first_pass``:
        ``run_parts`` then links only the rows fuzzy was given)."""
        ...


def partition_stages(
    work: PartitionWork,
    frame: pd.DataFrame,
    index: AssetIndex | None,
    first: tuple[Prepared, LinkDraft] | None = None,
) -> PartStages:
    """Rule, link and payload of one partition: pure, row by row, so the parts of a
    frame give exactly what the whole frame gives (``frame``'s index: row numbers). With
    the ``first`` pass's rule result and link draft of an item import's partition
    (:func:`partition_draft`), its rule is not applied again and only the rows mode fuzzy
    was given are linked (``frame`` needs only its index then)."""
    rule = work.rule
    draft = None
    if first is None:
        prepared = apply_rule(
            rule, frame, path=work.path, geometry_columns=list(work.geometry_columns)
        )
    else:
        prepared, draft = first
    link = None
    if work.links:
        assert index is not None
        fuzzy: ModeFunction | None = None
        if work.fuzzy_model is not None:
            fuzzy = partial(match_fuzzy, model=work.fuzzy_model)
        link = link_rows(
            index,
            frame,
            prepared,
            rule,
            reference_field=rule.matching_id,
            decisions=work.decisions,
            fuzzy=fuzzy,
            draft=draft,
        )
    payload = prepare_payload(
        rule, prepared.values, prepared.cleared, frame, may_update=work.may_update
    )
    return PartStages(prepared=prepared, link=link, payload=payload)


def partition_packed(
    work: PartitionWork, rows: pd.Index, problems: Sequence[SourceProblem], stages: PartStages
) -> PackedPart:
    """What the client keeps of a partition of an item import, made where the partition
    was read: its payload cut to the rows nothing rejected (the reader, the rule, a
    required link: the rows the client sets aside, by the same rules), given their asset
    ids and pickled as the client stages it, with their row numbers and keys. The client
    would otherwise unpickle the whole payload, cut it and pickle it again, work that does
    not divide among workers."""
    assert work.matching_id is not None and isinstance(stages.payload, Payload)
    missing = required_missing(work.rule, stages.link)
    unlinked = pd.DataFrame({"row": rows[missing] if missing is not None else rows[:0]})
    payload = stages.payload.take(
        kept_mask(rows, problems, stages.prepared, Linked(None, unlinked))
    )
    payload.asset_ids = (
        pd.Series(pd.NA, index=payload.filled.index, dtype="Int64")
        if stages.link is None
        else stages.link.asset_ids.reindex(payload.filled.index)
    )
    return PackedPart(
        data=pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL),
        rows=payload.filled.index.to_numpy(),
        keys=compact_keys(payload.values, work.matching_id),
    )


def partition_draft(
    work: PartitionWork, frame: pd.DataFrame, index: AssetIndex
) -> tuple[Prepared, LinkDraft, pd.Series]:
    """The first pass over one partition of a job whose fuzzy model is fitted once for all
    of it, as the local engine's over a part (``first_pass``): the rule's result, the
    links drafted with fuzzy only noting its texts (``draft_links``), and those texts,
    distinct in first-occurrence order. The second pass takes up the first two
    (``partition_stages(first=...)``)."""
    prepared = apply_rule(
        work.rule, frame, path=work.path, geometry_columns=list(work.geometry_columns)
    )
    draft, texts = draft_links(index, frame, work.rule, decisions=work.decisions)
    return prepared, draft, texts


def job_fuzzy_model(
    index: AssetIndex, rule: ImportRule, texts: Sequence[pd.Series], folder: Path | None = None
) -> Model | None:
    """Mode fuzzy's model for a whole job from its partitions' texts (in row order): the
    model the job read as one part fits, so every partition links as that part would
    (``fuzzy_model``, its pairs waiting in ``folder`` if given)."""
    return fuzzy_model(index, texts, _job_options(rule), folder)


def job_fuzzy_pairing(
    index: AssetIndex, rule: ImportRule, folder: Path | None = None, *, rows: int = 0
) -> FuzzyPairing | ProcessPairing:
    """Mode fuzzy's pairing of a job's texts as its parts find them (``FuzzyPairing``),
    their pairs waiting in ``folder`` if given: its ``answers`` are those of
    ``job_fuzzy_model``'s model to every text added. A job of ``rows`` rows from
    ``OWN_PROCESS_ROWS`` pairs them in a process of its own (``ProcessPairing``)."""
    if folder is not None and rows >= OWN_PROCESS_ROWS:
        return ProcessPairing(index, _job_options(rule), folder)
    return FuzzyPairing(index, _job_options(rule), folder=folder)


def _job_options(rule: ImportRule) -> LookupOptions:
    """The lookup options of a job's address way, as its partitions use them."""
    assert rule.asset_link is not None
    return LookupOptions.from_dict({"useExternalLookups": False, **rule.asset_link.options})
