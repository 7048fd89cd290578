"""Reading JSON a client sent: one bounded loader for request bodies and JSON parameters.

Deeper nesting than :data:`MAX_JSON_DEPTH`, numbers longer than
:data:`MAX_NUMBER_CHARS`, numbers the site cannot hold (``NaN``, ``Infinity``,
``1e999``, integers outside signed 64 bits) and lone surrogates (``"\\ud800"``,
which is not Unicode text and cannot be stored or sent back as UTF-8) are an
:class:`OptionError` naming the JSON path, e.g. ``$.query[3].code``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from toolkit.errors import OptionError
from toolkit.query.filters import INT64_MAX, INT64_MIN

MAX_JSON_DEPTH = 64
MAX_NUMBER_CHARS = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Values that need no look: a str may hold a lone surrogate, a _Refused is refused.
_PLAIN = (int, float, bool, type(None))


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


def loads(raw: bytes | str, what: str) -> Any:
    """The JSON value of ``raw`` within the bounds above; ``what`` names it in errors."""
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
