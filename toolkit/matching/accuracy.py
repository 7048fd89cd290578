"""What ``accuracy`` means: one scale for every mode, decided here and nowhere else.

``accuracy`` is a confidence from 0 to 100 that the returned asset is the one the query
names (the spec carries it as a string holding a number, e.g. ``"100"`` or ``"93.5"``):

=====================================  ========
match                                  accuracy
=====================================  ========
``id``, ``code``, exact ``name``       100
``code`` equal only without leading    95
zeros (``005123`` = ``5123``)
``soundex`` rank 1 (exact words)       100
``soundex`` rank 2 (sound alike,       90
in order)
``soundex`` rank 3 (sound alike,       80
any order)
``geo`` (geometry covers the input)    100
``contains``                           share of the asset name the query covers
                                       (``100 * len(query) / len(name)``)
``fuzzy``                              the match probability x 100, one decimal
                                       (``probabilistic``: links from 80)
external geocoder                      the geocoder's own figure
=====================================  ========

A query with no asset has no accuracy (``NaN`` in frames, absent from the asset object).
"""

from __future__ import annotations

EXACT = 100.0
CODE_WITHOUT_LEADING_ZEROS = 95.0
SOUNDEX_BY_RANK: dict[int, float] = {1: 100.0, 2: 90.0, 3: 80.0}
GEO = 100.0


def as_text(value: float) -> str:
    """The spec's form: a number in a string, without a trailing ``.0``."""
    return f"{round(value, 1):g}"
