"""Reading JSON a client sent: one bounded loader for request bodies and JSON parameters.

Deeper nesting than :data:`MAX_JSON_DEPTH`, numbers longer than
:data:`MAX_NUMBER_CHARS`, numbers the site cannot hold (``NaN``, ``Infinity``,
``1e999``, integers outside signed 64 bits) and lone surrogates (``"\\ud800"``,
which is not Unicode text and cannot be stored or sent back as UTF-8) are an
:class:`OptionError` naming the JSON path, e.g. ``$.query[3].code``.

orjson reads first (a 1,000-query lookup body in a tenth of the time): it refuses
lone surrogates, bad UTF-8, ``NaN`` and ``1e999`` itself, and a body with no run of
16 digits holds no whole number past 64 bits nor a number of 100 characters. Any
other body, and any that orjson refuses, is read the standard way below, so every
answer (a value or the error's words) is the standard reader's.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

from toolkit.errors import OptionError
from toolkit.query.filters import INT64_MAX, INT64_MIN

MAX_JSON_DEPTH = 64
MAX_NUMBER_CHARS = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Values that need no look: a str may hold a lone surrogate, a _Refused is refused.
_PLAIN = (int, float, bool, type(None))
# A run of 16 digits: a number that may be out of range or too long, or one orjson reads
# as a float where the standard reader refuses it (found in strings too: then the body is
# only read the slower way).
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{16}")
_LONG_DIGITS_TEXT = re.compile(r"[0-9]{16}")


@dataclass(frozen=True)
class _Refused:
    """A number ``json.loads`` met that is refused; the walk reports it with its path."""

    text: str
    reason: str


def _json_int(text: str) -> int | _Refused:
    # Checked before int(): Python refuses over 4,300 digits with a ValueError of its own.
    number = int(text) if len(text) <= 20 else INT64_MAX + 1
    if not INT64_MIN <= number <= INT64_MAX:
        return _Refused(text, "is out of range (whole numbers from -2^63 to 2^63-1)")
    return number


def _json_float(text: str) -> float | _Refused:
    if len(text) > MAX_NUMBER_CHARS:
        return _Refused(text, f"is longer than {MAX_NUMBER_CHARS} characters")
    number = float(text)
    if not math.isfinite(number):
        return _Refused(text, "is not a finite number")
    return number


def _json_constant(text: str) -> _Refused:
    return _Refused(text, "is not a number (JSON has no NaN or Infinity)")


# Where a value sits, as a linked trail (parent trail, key or index), spelled out only
# for an error: building a path text for every value would cost more than the parse.
Trail = tuple[Any, str | int] | None


def _path(trail: Trail) -> str:
    steps: list[str | int] = []
    while trail is not None:
        trail, step = trail
        steps.append(step)
    path = "$"
    for step in reversed(steps):
        if isinstance(step, int):
            path += f"[{step}]"
        elif _NAME.fullmatch(step):
            path += f".{step[:40]}"
        else:
            # ensure_ascii: a path (and so a message) never carries a lone surrogate.
            path += f"[{json.dumps(step[:40])}]"
        if len(path) > 80:
            # A path 64 levels deep is long; its start says where the trouble begins.
            return path[:77] + "..."
    return path


def _is_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate(what: str, where: str) -> OptionError:
    return OptionError(
        f"{what}'s {where} holds a lone surrogate (\\ud800 to \\udfff without its pair), "
        "which is not Unicode text"
    )


def check(value: Any, what: str) -> Any:
    """``value`` (from :func:`loads`'s ``json.loads``) once every part is acceptable.

    One walk without recursion: nesting up to :data:`MAX_JSON_DEPTH`, no refused
    number, no lone surrogate in a string or a member name. Only containers are
    stacked; the scalars inside one are checked where they stand.
    """
    if not isinstance(value, dict | list):
        _leaf(value, what, None)
        return value
    stack: list[tuple[Any, int, Trail]] = [(value, 0, None)]
    while stack:
        node, depth, trail = stack.pop()
        if depth >= MAX_JSON_DEPTH:
            raise OptionError(f"{what} is nested more than {MAX_JSON_DEPTH} deep at {_path(trail)}")
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in pairs:
            if isinstance(key, str) and not _is_text(key):
                raise _surrogate(what, _path(trail) + " member name")
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, (trail, key)))
            elif type(item) not in _PLAIN:
                _leaf(item, what, (trail, key))
    return value


def _leaf(value: Any, what: str, trail: Trail) -> None:
    if isinstance(value, str) and not _is_text(value):
        raise _surrogate(what, _path(trail))
    if isinstance(value, _Refused):
        number = value.text[:40]
        raise OptionError(f"{what}'s {_path(trail)}: the number {number} {value.reason}")


def _within_depth(value: Any) -> bool:
    """Whether no container of ``value`` is nested :data:`MAX_JSON_DEPTH` deep or more."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        if depth >= MAX_JSON_DEPTH:
            return False
        inner = []
        for node in level:
            for item in node.values() if isinstance(node, dict) else node:
                if isinstance(item, dict | list):
                    inner.append(item)
        level, depth = inner, depth + 1
    return True


def _quick(raw: bytes | str) -> Any:
    """orjson's reading of ``raw`` when it is surely the standard one's, else ``_NOT_QUICK``."""
    if isinstance(raw, bytes):
        long = _LONG_DIGITS_BYTES.search(raw) is not None
    else:
        long = _LONG_DIGITS_TEXT.search(raw) is not None
    if long:
        return _NOT_QUICK
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _NOT_QUICK  # the standard reader finds the fault and words it
    return value if _within_depth(value) else _NOT_QUICK


_NOT_QUICK = object()


def loads(raw: bytes | str, what: str) -> Any:
    """The JSON value of ``raw`` within the bounds above; ``what`` names it in errors."""
    value = _quick(raw)
    if value is not _NOT_QUICK:
        return value
    return standard_loads(raw, what)


def standard_loads(raw: bytes | str, what: str) -> Any:
    """:func:`loads` by the standard library's reader alone (what the quick way must equal)."""
    try:
        value = json.loads(
            raw,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except UnicodeDecodeError:
        raise OptionError(f"{what} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        # The decoder's own guard, far beyond MAX_JSON_DEPTH, which the walk enforces.
        raise OptionError(f"{what} is nested more than {MAX_JSON_DEPTH} deep") from None
    return check(value, what)
