"""Hypothesis properties of what parses client text: the CQL parser and the parameter parsers.

Whatever text a client sends, these answer a value or :class:`OptionError` (a 400), never
another exception (a 500); and the values they answer are ones the store can hold.
Runs are derandomised so the suite is repeatable; ``HYPOTHESIS_PROFILE=long`` runs more.
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.errors import OptionError
from toolkit.query.cql import IS_VALUES, And, Node, Not, Or, Term, parse_cql
from toolkit.query.filters import (
    COMMON_PARAMETERS,
    MAX_LIMIT,
    Page,
    Query,
    format_time,
    parse_bool,
    parse_float,
    parse_int,
    parse_page,
    parse_query,
    parse_time,
)
from toolkit.site import local as site

settings.register_profile(
    "default",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("long", parent=settings.get_profile("default"), max_examples=5000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

INT64 = (-(2**63), 2**63 - 1)
# Any text, lone surrogates included (a JSON body can carry them), and text biased
# towards what the parsers look for, so the interesting branches are reached.
ANY_TEXT = st.text(st.characters(codec=None)) | st.text(st.characters(categories=["Cs"]))
NUMBERISH = st.text(alphabet="0123456789-+_. eE١٢³²\u00a0infaNxX", max_size=30)
TIMEISH = st.text(alphabet="0123456789-+:.TZ WW ", max_size=40)
CQLISH = st.text(alphabet='()"\\ -~*:aAnNdDoOrRtTisvx.\t', max_size=60)
TEXT_INPUT = ANY_TEXT | NUMBERISH | TIMEISH


def _value_or_option_error(function, *args, **kwargs):  # type: ignore[no-untyped-def]
    try:
        return function(*args, **kwargs)
    except OptionError:
        return None


# --- parameters -------------------------------------------------------------------------


@given(TEXT_INPUT | st.integers().map(str))
def test_parse_int_answers_an_int64_or_option_error(text: str) -> None:
    number = _value_or_option_error(parse_int, "limit", text)
    assert number is None or (isinstance(number, int) and INT64[0] <= number <= INT64[1])


@given(TEXT_INPUT, st.integers(min_value=-5, max_value=5))
def test_parse_int_respects_its_minimum(text: str, minimum: int) -> None:
    try:
        number = parse_int("offset", text, minimum=minimum)
    except OptionError:
        return
    assert number >= minimum


@given(TEXT_INPUT | st.floats().map(str))
def test_parse_float_answers_a_finite_number_or_option_error(text: str) -> None:
    number = _value_or_option_error(parse_float, "latitude", text)
    assert number is None or (isinstance(number, float) and math.isfinite(number))


@given(TEXT_INPUT | st.booleans())
def test_parse_bool_answers_a_bool_or_option_error(value: str | bool) -> None:
    answer = _value_or_option_error(parse_bool, "active", value)
    assert answer is None or isinstance(answer, bool)


@given(TEXT_INPUT | st.integers().map(str) | st.datetimes().map(datetime.isoformat))
def test_parse_time_answers_a_time_the_api_can_print(text: str) -> None:
    value_ms = _value_or_option_error(parse_time, "since", text)
    if value_ms is None:
        return
    assert isinstance(value_ms, int) and INT64[0] <= value_ms <= INT64[1]
    printed = format_time(value_ms)  # what a record with this time answers
    assert printed is not None and datetime.fromisoformat(printed).tzinfo is not None


@given(st.datetimes(timezones=st.just(UTC)))
def test_parse_time_reads_what_format_time_prints(moment: datetime) -> None:
    value_ms = int(moment.timestamp() * 1000)
    assert parse_time("since", format_time(value_ms)) == value_ms  # type: ignore[arg-type]


PARAM_NAMES = st.sampled_from(
    [*COMMON_PARAMETERS, *site.ITEM_FILTERS, *site.ASSET_FILTERS, *site.EVENT_FILTERS, "x"]
)


@given(st.dictionaries(PARAM_NAMES, TEXT_INPUT, max_size=6))
def test_parse_page_answers_a_page_or_option_error(params: dict[str, str]) -> None:
    page = _value_or_option_error(parse_page, params)
    if page is None:
        return
    assert isinstance(page, Page)
    assert 0 <= page.limit <= MAX_LIMIT and 0 <= page.offset <= INT64[1]


@pytest.mark.parametrize(
    ("known", "aliases"),
    [
        (site.ITEM_FILTERS, site.ITEM_ALIASES),
        (site.ASSET_FILTERS, site.ASSET_ALIASES),
        (site.EVENT_FILTERS, {}),
        (site.AUDIT_FILTERS, {}),
    ],
    ids=["item", "asset", "event", "audit-log"],
)
@given(params=st.dictionaries(PARAM_NAMES | ANY_TEXT, TEXT_INPUT, max_size=6))
def test_parse_query_answers_a_query_or_option_error(
    known: dict[str, str], aliases: dict[str, str], params: dict[str, str]
) -> None:
    query = _value_or_option_error(parse_query, params, known, aliases=aliases)
    assert query is None or isinstance(query, Query)


# --- CQL ----------------------------------------------------------------------------------


@given(ANY_TEXT | CQLISH)
def test_cql_answers_a_tree_or_option_error(text: str) -> None:
    tree = _value_or_option_error(parse_cql, text)
    assert tree is None or isinstance(tree, Term | Not | And | Or)


@given(st.integers(min_value=1, max_value=20_000), st.sampled_from(["(", "NOT ", "-", "( NOT "]))
def test_cql_nesting_of_any_depth_answers_a_tree_or_option_error(depth: int, opener: str) -> None:
    closer = ")" if "(" in opener else ""
    text = opener * depth + "a:1" + closer * depth
    tree = _value_or_option_error(parse_cql, text)
    assert tree is None or isinstance(tree, Term | Not | And | Or)


FIELDS = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_.]{0,8}\Z").filter(lambda f: f.lower() != "is")
VALUES = st.text(st.characters(codec="utf-8", exclude_characters="*"), max_size=12)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


TERMS = st.one_of(
    st.builds(Term, FIELDS, st.just("eq"), VALUES),
    st.builds(Term, FIELDS, st.just("sounds"), VALUES),
    st.builds(Term, st.none(), st.just("is"), st.sampled_from(IS_VALUES)),
    st.builds(Term, st.none(), st.just("text"), VALUES),
)
TREES = st.recursive(
    TERMS,
    lambda children: st.one_of(
        st.builds(Not, children),
        st.lists(children, min_size=2, max_size=3).map(lambda items: And(tuple(items))),
        st.lists(children, min_size=2, max_size=3).map(lambda items: Or(tuple(items))),
    ),
    max_leaves=12,
)


def _render(node: Node, sep: str = " ") -> str:
    """A query for ``node``: compound children in parentheses, values quoted."""
    if isinstance(node, Term):
        if node.op == "is":
            return f"is:{node.value}"
        if node.op == "text":
            return _quote(node.value)
        return f"{node.field}:{'~' if node.op == 'sounds' else ''}{_quote(node.value)}"
    if isinstance(node, Not):
        return f"NOT{sep}{_group(node.item, sep)}"
    joiner = f"{sep}AND{sep}" if isinstance(node, And) else f"{sep}OR{sep}"
    return joiner.join(_group(item, sep) for item in node.items)


def _group(node: Node, sep: str) -> str:
    return _render(node, sep) if isinstance(node, Term) else f"({_render(node, sep)})"


@given(TREES, st.sampled_from([" ", "  ", "\t", "\n "]))
def test_cql_reads_back_what_is_written(tree: Node, sep: str) -> None:
    assert parse_cql(_render(tree, sep)) == tree
