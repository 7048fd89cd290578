"""Parsing and checking the GET parameters of REST collections (spec 4.6 to 4.9).

Parameters arrive as text (from a URL or a command line); here they become
typed filters, or an :class:`OptionError` naming the parameter, the value and
the allowed set. Our choices where the spec is silent (DESIGN.md): ``order``
and ``direction``; ``since``/``until`` compare ``dateModified`` with operators
``gt``, ``gte``, ``lt``, ``lte``, ``eq`` (defaults ``gte`` and ``lte``);
``limit`` defaults to 100 and may not exceed 1000. :func:`parse_int` is the one
integer parser of request input (ASCII digits, within SQLite's signed 64 bits).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from toolkit import names
from toolkit.errors import OptionError
from toolkit.names import (
    DIRECTIONS,
    OPERATORS,
    ORDER_COLUMNS,
    Direction,
    Operator,
    member,
)

# Times are whole milliseconds since the epoch, counted in integers: floats lose the last
# millisecond of times before 1970 (and of far ones), so a time would not print back as read.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLISECOND = timedelta(milliseconds=1)
Order = names.Order
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

# SQLite stores signed 64-bit integers; a larger id, offset or status cannot name anything.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# ASCII digits only: str.isdigit() and int() also take '²' or Arabic-Indic digits.
_Name = TypeVar("_Name", bound=str)
_Value = TypeVar("_Value", int, float, bool, str)
_WHOLE = re.compile(r"[+-]?[0-9]+")
# Epoch seconds the site can show as ISO 8601 times (years 1 to 9999).
_EPOCH_S_RANGE = (-62_135_596_800, 253_402_300_799)
# Parameters every collection takes besides its own filters.
COMMON_PARAMETERS = (
    "limit",
    "offset",
    "order",
    "direction",
    "since",
    "until",
    "since_operator",
    "until_operator",
)
# Yes and no, as the toolkit reads them everywhere (parameters, options, cells).
TRUE_WORDS = ("1", "true", "yes", "y", "t")
FALSE_WORDS = ("0", "false", "no", "n", "f")


@dataclass(frozen=True)
class TimeBound:
    """A comparison of ``dateModified`` with ``value_ms`` (epoch milliseconds)."""

    operator: Operator
    value_ms: int


@dataclass(frozen=True)
class Page:
    limit: int = DEFAULT_LIMIT
    offset: int = 0
    order: Order = "id"
    direction: Direction = "asc"


@dataclass(frozen=True)
class Query:
    """A parsed collection request: paging plus the filters given, by spec name."""

    page: Page = field(default_factory=Page)
    since: TimeBound | None = None
    until: TimeBound | None = None
    filters: dict[str, object] = field(default_factory=dict)

    def filter(self, name: str, kind: type[_Value]) -> _Value | None:
        """The filter ``name`` as parsed (its kind's type: int, float, bool, str), or None
        when it was not given."""
        value = self.filters.get(name)
        if value is None or isinstance(value, kind):
            return value
        raise TypeError(f"filter {name} is a {type(value).__name__}, not a {kind.__name__}")


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut short so a huge value never makes a huge message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def listing(names: list[str], *, limit: int = 12, none: str = "none yet") -> str:
    """Known names for an error message: the first ``limit``, then how many more."""
    if not names:
        return none
    head = ", ".join(names[:limit])
    return head if len(names) <= limit else f"{head} and {len(names) - limit} more"


def parse_int(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """A whole number from text (ASCII digits, optional sign) or a JSON integer.

    The one integer parser of request input (ids, offsets, limits, statuses):
    booleans, fractions, other scripts' digits and numbers outside SQLite's
    signed 64-bit range are an :class:`OptionError` naming ``name``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        text = value.strip()
        # Never int() thousands of digits: a long text is out of range whatever it says.
        number = int(text) if len(text) <= 20 else INT64_MAX + 1
    else:
        raise OptionError(f"{name} {shown(value)} is not a whole number")
    if not INT64_MIN <= number <= INT64_MAX:
        raise OptionError(
            f"{name} {shown(value)} is out of range (whole numbers from -2^63 to 2^63-1)"
        )
    if minimum is not None and number < minimum:
        raise OptionError(f"{name} {shown(value)} must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise OptionError(f"{name} {shown(value)} must be at most {maximum}")
    return number


def parse_id(name: str, value: object) -> int:
    """A record id: a whole number from 1 up (ids of every kind start at 1)."""
    return parse_int(name, value, minimum=1)


def parse_float(name: str, value: str) -> float:
    """A finite number; ``nan``, ``inf`` and numbers too large for a double are refused."""
    text = str(value).strip()
    try:
        number = float(text) if len(text) <= 100 else math.nan
    except ValueError:
        raise OptionError(f"{name} {shown(value)} is not a number") from None
    if not math.isfinite(number):
        raise OptionError(f"{name} {shown(value)} is not a finite number")
    return number


def parse_bool(name: str, value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise OptionError(f"{name} {shown(value)} is not one of: true, false")


def parse_time(name: str, value: str) -> int:
    """ISO 8601 date or date-time (naive means UTC), or epoch seconds, as epoch milliseconds."""
    text = str(value).strip()
    if _WHOLE.fullmatch(text):
        seconds = int(text) if len(text) <= 20 else _EPOCH_S_RANGE[1] + 1
        if not _EPOCH_S_RANGE[0] <= seconds <= _EPOCH_S_RANGE[1]:
            raise OptionError(
                f"{name} {shown(value)} is out of range (epoch seconds of years 1 to 9999)"
            )
        return seconds * 1000
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return (moment - EPOCH) // MILLISECOND
    except (ValueError, OverflowError):
        raise OptionError(
            f"{name} {shown(value)} is not a date or time (ISO 8601, e.g. 2026-01-31 or "
            "2026-01-31T09:00:00+10:00, or epoch seconds)"
        ) from None


def format_time(value_ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 in UTC with its offset, as the API prints times."""
    if value_ms is None:
        return None
    return (EPOCH + value_ms * MILLISECOND).isoformat(timespec="milliseconds")


def _choice(name: str, value: str, allowed: tuple[_Name, ...]) -> _Name:
    """``value`` as one of ``allowed``, or an error naming them."""
    chosen = member(value, allowed)
    if chosen is None:
        raise OptionError(f"{name} {shown(value)} is not one of: {', '.join(allowed)}")
    return chosen


def parse_page(params: Mapping[str, str]) -> Page:
    limit = parse_int("limit", params.get("limit", str(DEFAULT_LIMIT)), minimum=0)
    if limit > MAX_LIMIT:
        raise OptionError(f"limit {limit} is over the maximum of {MAX_LIMIT}; page with offset")
    return Page(
        limit=limit,
        offset=parse_int("offset", params.get("offset", "0"), minimum=0),
        order=_choice("order", params.get("order", "id"), ORDER_COLUMNS),
        direction=_choice("direction", params.get("direction", "asc").lower(), DIRECTIONS),
    )


def _bound(params: Mapping[str, str], name: str, default: Operator) -> TimeBound | None:
    if name not in params or params[name] in ("", None):
        if f"{name}_operator" in params:
            raise OptionError(f"{name}_operator is given without {name}")
        return None
    operator = _choice(f"{name}_operator", params.get(f"{name}_operator", default), OPERATORS)
    return TimeBound(operator, parse_time(name, params[name]))


def parse_query(
    params: Mapping[str, str],
    known: Mapping[str, str],
    *,
    aliases: Mapping[str, str] | None = None,
) -> Query:
    """Parse ``params``; ``known`` maps each filter name to its kind (text, int, bool, ...).

    Unknown parameters are an error listing the known ones, so a typo never
    silently returns the whole collection.
    """
    aliases = aliases or {}
    common = set(COMMON_PARAMETERS)
    filters: dict[str, object] = {}
    for raw_name, value in params.items():
        name = aliases.get(raw_name, raw_name)
        if name in common:
            continue
        kind = known.get(name)
        if kind is None:
            allowed = sorted({*known, *aliases, *common})
            raise OptionError(f"unknown parameter {raw_name!r}; known: {', '.join(allowed)}")
        if name in filters:
            raise OptionError(f"parameter {name!r} is given twice (as {raw_name!r} too)")
        if kind == "int":
            filters[name] = parse_int(raw_name, value)
        elif kind == "float":
            filters[name] = parse_float(raw_name, value)
        elif kind == "bool":
            filters[name] = parse_bool(raw_name, value)
        elif kind == "time":
            filters[name] = parse_time(raw_name, value)
        else:
            filters[name] = str(value)
    return Query(
        page=parse_page(params),
        since=_bound(params, "since", "gte"),
        until=_bound(params, "until", "lte"),
        filters=filters,
    )
