"""Lookup options: the spec's option names (camelCase on the wire), validated in one place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from toolkit import names
from toolkit.errors import OptionError
from toolkit.query import safejson
from toolkit.query.filters import FALSE_WORDS, TRUE_WORDS, parse_int, shown

MAX_RANKS = (1, 2, 3)

_TRUE = frozenset(TRUE_WORDS)
_FALSE = frozenset(FALSE_WORDS)


# The allowed values live in toolkit.names; this package's spelling of them.
Mode = names.LookupMode
MODES = names.LOOKUP_MODES
Output = names.LookupOutput
OUTPUTS = names.LOOKUP_OUTPUTS


@dataclass(frozen=True)
class LookupOptions:
    """Options of an asset lookup (spec 4.3); ``fuzzy`` is the toolkit's extra mode."""

    mode: Mode = "soundex"
    asset_class: str | None = None
    use_external_lookups: bool = True
    max_rank: int = 2
    fallback_mode: Mode | None = None
    code_field: str | None = None
    upgrade_external_lookup_to_internal_asset: bool = False
    geocoder_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_choice("mode", self.mode, MODES)
        if self.fallback_mode is not None:
            _check_choice("fallbackMode", self.fallback_mode, MODES)
        _check_choice("maxRank", self.max_rank, MAX_RANKS)
        if self.upgrade_external_lookup_to_internal_asset and not self.asset_class:
            raise OptionError(
                "option upgradeExternalLookupToInternalAsset requires assetClass: name the "
                "asset class the external result should be upgraded to"
            )

    @classmethod
    def from_dict(cls, options: Mapping[str, Any] | None) -> LookupOptions:
        """Options from the wire form (camelCase keys; GET strings such as ``"3"`` or
        ``"false"`` are accepted). Unknown keys and bad values raise ``OptionError``."""
        options = dict(options or {})
        known = {_wire_name(f.name): f.name for f in fields(cls)}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise OptionError(
                f"unknown lookup option {', '.join(map(repr, unknown))}; known options: "
                f"{', '.join(sorted(known))}"
            )
        values: dict[str, Any] = {}
        for wire, value in options.items():
            if value is None:
                continue
            attribute = known[wire]
            if attribute in ("use_external_lookups", "upgrade_external_lookup_to_internal_asset"):
                values[attribute] = _boolean(wire, value)
            elif attribute == "max_rank":
                values[attribute] = _integer(wire, value)
            elif attribute == "geocoder_options":
                values[attribute] = _object(wire, value)
            else:
                values[attribute] = _text(wire, value)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The wire form, camelCase keys, unset options left out."""
        return {
            _wire_name(f.name): getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) not in (None, {})
        }


def _wire_name(attribute: str) -> str:
    head, *rest = attribute.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _check_choice(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise OptionError(
            f"option {name} is {value!r}; allowed: {', '.join(str(a) for a in allowed)}"
        )


def _boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise OptionError(f"option {name} is {value!r}; allowed: true, false")


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise OptionError(f"option {name} is {value!r}; allowed: 1, 2, 3")
    try:
        return parse_int(f"option {name}", value)
    except OptionError:
        raise OptionError(f"option {name} is {shown(value)}; allowed: 1, 2, 3") from None


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"option {name} is {value!r}; it must be a non-empty string")
    return value.strip()


def _object(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        value = safejson.loads(value, f"option {name}")
    if not isinstance(value, dict):
        raise OptionError(f"option {name} is {value!r}; it must be an object")
    return value
