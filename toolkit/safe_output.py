"""Making tables safe to open in a spreadsheet: no cell can become a formula.

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return is run as a formula by spreadsheet programs (CSV injection). Such cells
get a leading apostrophe, which spreadsheets show as text. A plain number such
as ``-37.56`` is not a formula and is left as it is, so coordinates survive a
round trip.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from toolkit.lazy import lazy

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")


_FORMULA_START = r"^[=+\-@\t\r]"
_PLAIN_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


_FORMULA_RE = re.compile(_FORMULA_START)
_PLAIN_NUMBER_RE = re.compile(_PLAIN_NUMBER)


def safe_cell(text: str) -> str:
    """One text cell made safe as :func:`neutralise_formulas` makes a column (for rows
    written one page at a time)."""
    if _FORMULA_RE.match(text) and not _PLAIN_NUMBER_RE.fullmatch(text):
        return "'" + text
    return text


def neutralise_formulas(column: pd.Series) -> pd.Series:
    """``column`` with every formula-looking text cell prefixed by an apostrophe."""
    if not (pd.api.types.is_string_dtype(column) or column.dtype == object):
        return column
    text = column.astype("string")
    risky = text.str.contains(_FORMULA_START, regex=True) & ~text.str.fullmatch(_PLAIN_NUMBER)
    mask = risky.fillna(False).to_numpy(dtype=bool)
    if not mask.any():
        return column
    return text.where(~mask, "'" + text)


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text columns are safe to open in a spreadsheet."""
    return frame.apply(neutralise_formulas)
