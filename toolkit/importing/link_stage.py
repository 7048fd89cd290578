"""The link stage of an item import: each part's rows linked to assets, the links
recorded with the job, and the places found outside made assets in the write
transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.errors import OptionError
from toolkit.geocoding import make_assets
from toolkit.importing.linking import LinkDraft, LinkResult, link_rows
from toolkit.importing.outcome import Linked, Outcome, merged_counts, no_problems
from toolkit.importing.rules import ImportRule, Prepared
from toolkit.matching.modes import (
    ModeFunction,
)
from toolkit.progress import Progress
from toolkit.store import Actor, SiteStore
from toolkit.store.link_recorder import LinkRecorder

if TYPE_CHECKING:
    from toolkit.matching import AssetIndex, Geocoder

# Gives the matching index of the site's assets; called only when a rule links assets.
IndexProvider = Callable[[], "AssetIndex"]


def link_assets(
    store: SiteStore,
    asset_index: IndexProvider | None,
    geocoder: Geocoder | None,
    job_id: int,
    frame: pd.DataFrame,
    prepared: Prepared,
    rule: ImportRule,
    outcome: Outcome,
    *,
    progress: Progress,
    append: bool = False,
    shared: dict[str, Any] | None = None,
    modes: Mapping[str, ModeFunction] | None = None,
    fuzzy: ModeFunction | None = None,
    draft: LinkDraft | None = None,
    recorder: LinkRecorder | None = None,
) -> Linked:
    """Link a part's rows; ``shared`` keeps the index and the reviewers' decisions
    between the parts of one import; ``modes`` stand in for mode functions, ``fuzzy`` for
    mode fuzzy, and ``draft`` is a first pass's (``link_rows``); ``recorder`` records
    the links (``linked_rows``)."""
    empty = no_problems()
    if rule.asset_link is None:
        return Linked(pd.Series(pd.NA, index=frame.index, dtype="Int64"), empty)
    if asset_index is None:
        raise OptionError(f"rule {rule.name!r} links assets, but no asset index is available")
    shared = {} if shared is None else shared
    if "index" not in shared:
        progress("link", 0, len(frame), detail="loading the asset index")
        shared["index"] = asset_index()
        shared["decisions"] = store.decisions.all()
    linked = link_rows(
        shared["index"],
        frame,
        prepared,
        rule,
        reference_field=rule.matching_id,
        decisions=shared["decisions"],
        progress=progress,
        geocoder=geocoder,
        modes=modes,
        fuzzy=fuzzy,
        draft=draft,
    )
    return linked_rows(
        store, job_id, frame.index, rule, linked, outcome, append=append, recorder=recorder
    )


def linked_rows(
    store: SiteStore,
    job_id: int,
    rows: pd.Index,
    rule: ImportRule,
    linked: LinkResult | None,
    outcome: Outcome,
    *,
    append: bool = False,
    recorder: LinkRecorder | None = None,
) -> Linked:
    """The link stage's result: the links recorded with the job (``append``: a later
    part's, beside the earlier parts'; by ``recorder`` if given, else at once), their
    counts, and a problem for each row a required link left without an asset."""
    empty = no_problems()
    if linked is None or rule.asset_link is None:
        return Linked(pd.Series(pd.NA, index=rows, dtype="Int64"), empty)
    if recorder is None:
        store.jobs.record_links(job_id, linked.links, append=append)
    else:
        recorder.record(job_id, linked.links, append=append)
    outcome.linking = merged_counts(outcome.linking, linked.counts())
    missing = required_missing(rule, linked)
    if missing is None:
        return Linked(linked.asset_ids, empty, linked)
    return Linked(
        linked.asset_ids,
        pd.DataFrame(
            {
                "row": rows[missing],
                "column": "asset",
                "value": pd.NA,
                "reason": linked.reasons[missing].fillna("no asset was found").to_numpy(),
            }
        ),
        linked,
    )


def required_missing(rule: ImportRule, linked: LinkResult | None) -> np.ndarray | None:
    """Mask of the rows a required link left without an asset (a row whose place is to
    become an asset will have one); None when the rule requires no link."""
    if linked is None or rule.asset_link is None or not rule.asset_link.required:
        return None
    missing: np.ndarray = linked.asset_ids.isna().to_numpy() & ~linked.waiting()
    return missing


def make_places(
    store: SiteStore,
    conn: Any,
    job_id: int,
    rule: ImportRule,
    linked: Linked,
    outcome: Outcome,
    actor: Actor,
) -> pd.Series | None:
    """The rows' asset ids once the places the link stage found outside are assets
    (made in the import's transaction, so a dry run or a refusal makes none); their
    links are recorded again with the new ids."""
    result = linked.result
    if result is None or result.places is None or rule.asset_link is None:
        return linked.asset_ids
    places = result.places
    asset_class = str(rule.asset_link.options["assetClass"])
    ids = make_assets(store, places, asset_class, actor, conn=conn)
    waiting = np.flatnonzero(places.row_place >= 0)
    asset_ids = result.asset_ids.copy()
    asset_ids.iloc[waiting] = ids[places.row_place[waiting]]
    links = result.links.copy()
    links["asset_id"] = asset_ids.to_numpy()
    links.loc[waiting, "err"] = None
    store.jobs.record_links(job_id, links, conn=conn)
    outcome.notes.append(
        f"{len(places)} places found outside became assets of {asset_class} "
        f"({len(waiting)} rows linked to them)"
    )
    return asset_ids
