"""``tied``: the lookup answer's structured word for "several assets tied, none chosen".

The spec's lookup entry says so only in its ``err`` text; both faces add this extension
field, so a client counts ambiguous queries without reading the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolkit.lazy import lazy

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")


TIED = "tied"


def mark_ties(
    document: dict[str, dict[str, Any]], resolved: pd.DataFrame
) -> dict[str, dict[str, Any]]:
    """Add ``tied`` (how many assets tied) to each entry of ``document`` whose query found
    several candidates and so no asset; ``resolved`` is the frame the document was made of,
    row for entry."""
    found = resolved["asset_position"].to_numpy() >= 0
    counts = resolved["candidates"].fillna(0).to_numpy()
    for entry, hit, count in zip(document.values(), found, counts, strict=True):
        if not hit and count > 1:
            entry[TIED] = int(count)
    return document


def is_ambiguous(entry: Mapping[str, Any]) -> bool:
    """Whether a lookup entry found no asset because several tied."""
    return not entry.get("asset") and bool(entry.get(TIED))
