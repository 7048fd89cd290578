"""Register field types: the one place that says what each type accepts and stores.

Imports convert whole text columns with :func:`convert_column`; a REST write
converts its one JSON value with :func:`convert_value`, which runs the same
column code on a one-element column, so a value an import would reject is
rejected by REST too, with the same reason, and is stored the same way.

What is stored: ``text`` and ``lookup`` as text (a lookup as its declared
spelling), ``integer`` as a whole number within signed 64 bits, ``decimal`` as a
finite number, ``date`` as ``YYYY-MM-DD`` (from ISO 8601 or DD/MM/YYYY; the date
as written, whatever its offset), ``boolean`` as true or false (the toolkit's
yes/no words), ``list`` as ``;``-separated text, ``media`` as a list of file ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from toolkit.errors import OptionError
from toolkit.lazy import lazy
from toolkit.query.filters import FALSE_WORDS, TRUE_WORDS, parse_int, shown

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy("numpy")
    pd = lazy("pandas")

FieldType = Literal["text", "integer", "decimal", "date", "boolean", "lookup", "list", "media"]
FIELD_TYPES: tuple[str, ...] = get_args(FieldType)
# ``media`` holds file ids uploaded over the API; an import file cannot carry them.
IMPORT_FIELD_TYPES: tuple[str, ...] = tuple(t for t in FIELD_TYPES if t != "media")
DEFAULT_MAX_LENGTH = 10_000

_TRUE = tuple(word.upper() for word in TRUE_WORDS)
_FALSE = tuple(word.upper() for word in FALSE_WORDS)
# A whole number read as a double is exact only up to 2^53; past that it is refused
# rather than stored changed (a column of whole numbers alone is read exactly).
_EXACT_DOUBLE = float(2**53)


def check_field_type(name: str, kind: str, *, allowed: Sequence[str] = FIELD_TYPES) -> None:
    """An :class:`OptionError` unless ``kind`` is one of ``allowed``."""
    if kind not in allowed:
        raise OptionError(f"field {name!r}: type {kind!r} is not one of: {', '.join(allowed)}")


def convert_column(
    kind: str,
    text: pd.Series,
    *,
    choices: Sequence[str] = (),
    max_length: int = DEFAULT_MAX_LENGTH,
) -> tuple[pd.Series, np.ndarray, str]:
    """Convert a text column (missing cells are NA) to the stored values of type ``kind``.

    Returns the values, a mask of the present cells that are bad, and the reason
    for them (naming the accepted forms).
    """
    check_field_type("column", kind, allowed=IMPORT_FIELD_TYPES)
    text = text.astype("string")
    if kind in _BY_DISTINCT and len(text) > _DISTINCT_FROM:
        return _by_distinct(kind, text, choices, max_length)
    return _convert(kind, text, choices, max_length)


# Kinds converted once per distinct cell and spread to the rows: a cell's value and
# whether it is bad depend on the cell alone (and, for integer, on whether every cell of
# the column is a whole number, which its distinct cells tell the same). Such columns
# repeat a few values (levels, dates, yes/no, counts): a 250,000-row part's date column
# took 0.10 s parsed row by row, its lookup column 0.08 s (casefold is a Python call per
# cell).
_BY_DISTINCT = ("integer", "decimal", "date", "boolean", "lookup")
_DISTINCT_FROM = 1000


def _by_distinct(
    kind: str, text: pd.Series, choices: Sequence[str], max_length: int
) -> tuple[pd.Series, np.ndarray, str]:
    """:func:`convert_column` of ``text`` by its distinct cells."""
    codes, distinct = pd.factorize(text, use_na_sentinel=True)
    if not len(distinct):  # every cell empty
        return _convert(kind, text, choices, max_length)
    values, bad, reason = _convert(kind, pd.Series(distinct, dtype="string"), choices, max_length)
    found = codes >= 0
    spread = pd.Series(values.array.take(codes, allow_fill=True), index=text.index)
    return spread, found & bad[np.where(found, codes, 0)], reason


def _convert(
    kind: str, text: pd.Series, choices: Sequence[str], max_length: int
) -> tuple[pd.Series, np.ndarray, str]:
    present = text.notna().to_numpy()
    if kind == "text":
        too_long = present & (text.str.len().fillna(0).to_numpy() > max_length)
        return text, too_long, f"is longer than {max_length} characters"
    stripped = text.str.strip()  # the other kinds read a cell's value without its spaces
    if kind == "integer":
        numbers = pd.to_numeric(stripped, errors="coerce")
        if pd.api.types.is_integer_dtype(numbers.dtype):
            # Over 2^63-1 comes back unsigned; casting it would wrap round to negative.
            whole = (numbers.notna() & (numbers <= 2**63 - 1) & (numbers >= -(2**63))).fillna(False)
        else:
            values = numbers.astype("Float64")
            whole = (
                values.notna() & (values == np.floor(values)) & (values.abs() <= _EXACT_DOUBLE)
            ).fillna(False)
        bad = present & ~whole.to_numpy(dtype=bool)
        return (
            numbers.where(whole).astype("Int64"),
            bad,
            "is not a whole number",
        )
    if kind == "decimal":
        numbers = pd.to_numeric(stripped, errors="coerce").astype("Float64")
        finite = (numbers.notna() & np.isfinite(numbers.fillna(0))).fillna(False)
        bad = present & ~finite.to_numpy(dtype=bool)
        return numbers.where(finite), bad, "is not a number"
    if kind == "date":
        # utc=True: offsets may differ from cell to cell. A cell that starts YYYY-MM-DD keeps
        # that date as written (whatever its offset) and needs no strftime; only the other
        # cells (DD/MM/YYYY, ISO basic forms) are formatted.
        iso = pd.to_datetime(stripped, format="ISO8601", errors="coerce", utc=True)
        dashed = (stripped.str.slice(4, 5) == "-") & (stripped.str.slice(7, 8) == "-")
        as_written = (iso.notna() & dashed.fillna(False)).to_numpy(dtype=bool)
        dates = stripped.str.slice(0, 10).where(as_written).astype("string")
        rest = present & ~as_written
        if rest.any():
            others = stripped[rest]
            day_first = pd.to_datetime(others, format="%d/%m/%Y", errors="coerce", utc=True)
            dates[rest] = iso[rest].fillna(day_first).dt.strftime("%Y-%m-%d").astype("string")
        bad = present & dates.isna().to_numpy()
        return dates, bad, "is not a date (YYYY-MM-DD or DD/MM/YYYY)"
    if kind == "boolean":
        upper = stripped.str.upper()
        result = pd.Series(pd.NA, index=text.index, dtype="boolean")
        result[upper.isin(_TRUE).fillna(False).to_numpy()] = True
        result[upper.isin(_FALSE).fillna(False).to_numpy()] = False
        bad = present & result.isna().to_numpy()
        return result, bad, "is not a yes/no value (Yes, No, Y, N, 1, 0, True, False)"
    if kind == "lookup":
        canonical = {c.casefold(): c for c in choices}
        mapped = stripped.str.casefold().map(canonical).astype("string")
        bad = present & mapped.isna().to_numpy()
        return mapped, bad, f"is not one of: {', '.join(choices)}"
    # list: a ';' or ','-separated list of text values, kept as ';'-separated text.
    parts = stripped.str.replace(r"\s*[;,]\s*", ";", regex=True)
    return parts, np.zeros(len(text), dtype=bool), ""


def _as_cell(value: Any) -> str | None:
    """A JSON scalar as the text an import cell would hold; None for arrays and objects."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def convert_value(name: str, definition: Mapping[str, Any], value: Any) -> Any:
    """The stored value of register field ``name`` for one JSON value (None clears it).

    Raises an :class:`OptionError` naming the field, the value and the reason.
    """
    if value is None:
        return None
    kind = str(definition.get("type", "text"))
    check_field_type(name, kind)
    if kind == "media":
        if not isinstance(value, list):
            raise OptionError(f"{name} {shown(value)} must be a list of media file ids")
        return [parse_int(f"{name} media file id", i, minimum=1) for i in value]
    if kind == "list" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ";".join(value)
    cell = _as_cell(value)
    if cell is None or (kind in ("text", "date", "lookup", "list") and not isinstance(value, str)):
        raise OptionError(f"{name} {shown(value)} is not a value of type {kind}")
    converted, bad, reason = convert_column(
        kind,
        pd.Series([cell], dtype="string"),
        choices=tuple(definition.get("choices") or ()),
    )
    if bad[0]:
        raise OptionError(f"{name} {shown(value)} {reason}")
    stored = converted.iloc[0]
    if stored is pd.NA:
        return None
    return stored.item() if hasattr(stored, "item") else stored
