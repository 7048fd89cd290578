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
from toolkit.filters import INT64_MAX, INT64_MIN

MAX_JSON_DEPTH = 64
MAX_NUMBER_CHARS = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def _member(path: str, key: str) -> str:
    # ensure_ascii: a path (and so a message) never carries a lone surrogate.
    if _NAME.fullmatch(key):
        return f"{path}.{key[:40]}"
    return f"{path}[{json.dumps(key[:40])}]"


def _cut(path: str) -> str:
    # A path 64 levels deep is long; its start says where the trouble begins.
    return path if len(path) <= 80 else path[:77] + "..."


def _check_text(text: str, path: str, what: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise OptionError(
                f"{what}'s {_cut(path)} holds a lone surrogate (\\ud800 to \\udfff "
                "without its pair), which is not Unicode text"
            ) from None


def check(value: Any, what: str) -> Any:
    """``value`` (from :func:`loads`'s ``json.loads``) once every part is acceptable.

    One walk without recursion: nesting up to :data:`MAX_JSON_DEPTH`, no refused
    number, no lone surrogate in a string or a member name.
    """
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, path, what)
        elif isinstance(node, _Refused):
            number = node.text[:40]
            raise OptionError(f"{what}'s {_cut(path)}: the number {number} {node.reason}")
        elif isinstance(node, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise OptionError(
                    f"{what} is nested more than {MAX_JSON_DEPTH} deep at {_cut(path)}"
                )
            if isinstance(node, dict):
                for key, item in node.items():
                    _check_text(key, f"{path} member name", what)
                    stack.append((item, _member(path, key), depth + 1))
            else:
                stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(node))
    return value


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
