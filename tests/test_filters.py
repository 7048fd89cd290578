"""Collection parameters: paging limits, time bounds with operators, unknown names refused."""

from __future__ import annotations

import pytest

from toolkit.errors import OptionError
from toolkit.query.filters import (
    Page,
    TimeBound,
    format_time,
    parse_float,
    parse_int,
    parse_query,
    parse_time,
)

KNOWN = {"registerId": "text", "eventId": "int", "isTemplate": "bool", "cql": "text"}
ALIASES = {"type": "registerId", "query": "cql"}


def test_defaults() -> None:
    query = parse_query({"registerId": "damage"}, KNOWN, aliases=ALIASES)
    assert query.page == Page(limit=100, offset=0, order="id", direction="asc")
    assert query.since is None and query.until is None
    assert query.filters == {"registerId": "damage"}


def test_values_are_typed_and_aliases_resolved() -> None:
    query = parse_query(
        {
            "type": "damage",
            "eventId": "7",
            "isTemplate": "false",
            "query": "a:b",
            "limit": "1000",
            "offset": "20",
            "order": "dateModified",
            "direction": "DESC",
        },
        KNOWN,
        aliases=ALIASES,
    )
    assert query.filters == {
        "registerId": "damage",
        "eventId": 7,
        "isTemplate": False,
        "cql": "a:b",
    }
    assert query.page == Page(limit=1000, offset=20, order="dateModified", direction="desc")


def test_time_bounds_take_operators_with_documented_defaults() -> None:
    query = parse_query(
        {"since": "2026-01-01", "until": "2026-01-02T00:00:00+10:00", "until_operator": "lt"},
        KNOWN,
    )
    assert query.since == TimeBound("gte", 1767225600000)
    assert query.until == TimeBound("lt", 1767276000000)
    assert parse_time("since", "1767225600") == 1767225600000
    assert format_time(1767225600000) == "2026-01-01T00:00:00.000+00:00"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "1001"}, "limit 1001 is over the maximum of 1000; page with offset"),
        ({"limit": "-1"}, "limit '-1' must be at least 0"),
        ({"offset": "x"}, "offset 'x' is not a whole number"),
        ({"order": "name"}, "order 'name' is not one of: id, dateCreated, dateModified"),
        ({"direction": "up"}, "direction 'up' is not one of: asc, desc"),
        (
            {"since": "2026-01-01", "since_operator": "ge"},
            "since_operator 'ge' is not one of: gt, gte, lt, lte, eq",
        ),
        ({"until_operator": "lt"}, "until_operator is given without until"),
        ({"since": "yesterday"}, "since 'yesterday' is not a date or time"),
        ({"isTemplate": "maybe"}, "isTemplate 'maybe' is not one of: true, false"),
        ({"eventid": "1"}, "unknown parameter 'eventid'; known: cql, direction, eventId"),
        ({"type": "a", "registerId": "b"}, "parameter 'registerId' is given twice"),
    ],
)
def test_bad_parameters_name_the_value_and_the_allowed_set(
    params: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError) as caught:
        parse_query(params, KNOWN, aliases=ALIASES)
    assert str(caught.value).startswith(message)


# --- the one integer parser ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "number"),
    [("12", 12), (" 7 ", 7), ("-3", -3), ("+4", 4), (5, 5), (str(2**63 - 1), 2**63 - 1)],
)
def test_parse_int_takes_ascii_digits_and_json_integers(value: object, number: int) -> None:
    assert parse_int("id", value) == number


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("²", "not a whole number"),  # str.isdigit() says yes
        ("٣", "not a whole number"),  # int() says 3
        ("1.0", "not a whole number"),
        (1.0, "not a whole number"),
        (True, "not a whole number"),
        (None, "not a whole number"),
        ("", "not a whole number"),
        (str(2**63), "out of range"),
        (-(2**63) - 1, "out of range"),
        ("9" * 5000, "out of range"),  # never handed to int()
    ],
)
def test_parse_int_refuses_what_sqlite_cannot_hold(value: object, reason: str) -> None:
    with pytest.raises(OptionError, match=reason) as caught:
        parse_int("offset", value)
    assert str(caught.value).startswith("offset ") and len(str(caught.value)) < 120


def test_parse_int_bounds() -> None:
    with pytest.raises(OptionError, match="at least 0"):
        parse_int("offset", "-1", minimum=0)
    with pytest.raises(OptionError, match="at most 9"):
        parse_int("limit", "10", maximum=9)


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e999", "1" * 500])
def test_parse_float_refuses_non_finite_numbers(value: str) -> None:
    with pytest.raises(OptionError, match=r"^range "):
        parse_float("range", value)


@pytest.mark.parametrize("value", ["9" * 30, "²", "99999-01-01"])
def test_parse_time_refuses_out_of_range_and_foreign_digits(value: str) -> None:
    with pytest.raises(OptionError, match=r"^since "):
        parse_time("since", value)
