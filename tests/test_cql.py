"""The query-language subset: terms, operators, precedence, and errors that say where."""

from __future__ import annotations

import pytest

from toolkit.errors import OptionError
from toolkit.query.cql import MAX_DEPTH, MAX_TERMS, And, Not, Or, Term, parse_cql


@pytest.mark.parametrize(
    ("query", "tree"),
    [
        ("damageLevel:Severe", Term("damageLevel", "eq", "Severe")),
        ("address:*smith*", Term("address", "like", "*smith*")),
        ("inspector:~jon", Term("inspector", "sounds", "jon")),
        ('inspector:~"jon smith"', Term("inspector", "sounds", "jon smith")),
        ("is:ACTIVE", Term(None, "is", "active")),
        ("flood", Term(None, "text", "flood")),
        ('"water damage"', Term(None, "text", "water damage")),
        ('notes:"roof, \\"partly\\" gone"', Term("notes", "eq", 'roof, "partly" gone')),
        (
            "a:1 b:2",
            And((Term("a", "eq", "1"), Term("b", "eq", "2"))),
        ),
        (
            "a:1 OR b:2 AND c:3",
            Or((Term("a", "eq", "1"), And((Term("b", "eq", "2"), Term("c", "eq", "3"))))),
        ),
        (
            "(a:1 OR b:2) and not c:3",
            And((Or((Term("a", "eq", "1"), Term("b", "eq", "2"))), Not(Term("c", "eq", "3")))),
        ),
        ("-is:template", Not(Term(None, "is", "template"))),
        ("status:-1", Term("status", "eq", "-1")),
    ],
)
def test_queries_parse_to_the_expected_tree(query: str, tree: object) -> None:
    assert parse_cql(query) == tree


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "cql: the query is empty"),
        ("   ", "cql: the query is empty"),
        ("(a:1", "cql '(a:1': expected ')' at the end"),
        ("a:1)", "cql 'a:1)': unexpected ')' at position 4"),
        ("a:1 OR", "cql 'a:1 OR': expected a term at the end"),
        ("AND a:1", "cql 'AND a:1': expected a term before 'AND' at position 1"),
        ("name:", "cql: name: has no value at position 1"),
        ("is:closed", "cql: is:closed is not one of: is:active, is:inactive, is:template"),
        ('a:"open', "cql: cannot read '\"open' at position 3"),
    ],
)
def test_bad_queries_say_what_and_where(query: str, message: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_cql(query)
    assert str(caught.value) == message


def test_queries_are_bounded_in_terms_and_depth_not_by_recursion() -> None:
    parse_cql(" OR ".join(f"f:v{i}" for i in range(MAX_TERMS)))
    parse_cql("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH)
    with pytest.raises(OptionError, match=f"^cql: the query has 2000 terms; at most {MAX_TERMS}"):
        parse_cql(" OR ".join(["a"] * 2000))
    for deep in ("(" * 3000 + "a" + ")" * 3000, "NOT " * 3000 + "a", "- " * 3000 + "a"):
        with pytest.raises(OptionError, match=f"nest more than {MAX_DEPTH} deep") as caught:
            parse_cql(deep)
        assert len(str(caught.value)) < 200
