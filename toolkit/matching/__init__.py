"""Asset matching: an index built once, every lookup mode of the spec, bulk resolution.

Typical use::

    index = AssetIndex.from_frame(assets_gdf)          # or AssetIndex.load(folder)
    resolved = resolve(index, queries_frame, {"mode": "soundex", "maxRank": 3})
    response = to_spec_result(index, resolved, output="asset")
"""

from __future__ import annotations

from toolkit.matching.address import normalise, parse
from toolkit.matching.geocoder import Geocoder, NoGeocoder
from toolkit.matching.index import AssetIndex
from toolkit.matching.options import MODES, OUTPUTS, LookupOptions, Mode, Output
from toolkit.matching.resolve import (
    CANDIDATE_COLUMNS,
    RESULT_COLUMNS,
    asset_object,
    checked_options,
    explanations,
    lookup_one,
    queries_from_spec,
    resolve,
    resolve_with_candidates,
    to_spec_result,
)

__all__ = [
    "CANDIDATE_COLUMNS",
    "MODES",
    "OUTPUTS",
    "RESULT_COLUMNS",
    "AssetIndex",
    "Geocoder",
    "LookupOptions",
    "Mode",
    "NoGeocoder",
    "Output",
    "asset_object",
    "checked_options",
    "explanations",
    "lookup_one",
    "normalise",
    "parse",
    "queries_from_spec",
    "resolve",
    "resolve_with_candidates",
    "to_spec_result",
]
