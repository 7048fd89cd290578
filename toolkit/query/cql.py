"""The documented subset of the query language (``cql``) of item collections.

Grammar (case-insensitive keywords; adjacent terms are joined by AND)::

    query    := or
    or       := and ("OR" and)*
    and      := not (["AND"] not)*
    not      := "NOT" not | "-" not | primary
    primary  := "(" or ")" | term
    term     := FIELD ":" VALUE      exact (case-insensitive) match
              | FIELD ":" *part*     contains; ``*`` is a wildcard anywhere in the value
              | FIELD ":" ~VALUE     every word sounds like a word of the field
              | "is:active" | "is:inactive" | "is:template"
              | VALUE                full text: the record contains the text anywhere

VALUE is a bare word or a "double-quoted string" (``\\"`` escapes a quote).
A query has at most :data:`MAX_TERMS` terms and nests parentheses and NOTs at
most :data:`MAX_DEPTH` deep, so a query's SQL stays small whatever a client sends.
Parsing is pure; ``toolkit.store`` compiles the tree to SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from toolkit.errors import OptionError
from toolkit.query.filters import shown

Op = Literal["eq", "like", "sounds", "is", "text"]
IS_VALUES = ("active", "inactive", "template")
MAX_TERMS = 200
MAX_DEPTH = 32
_KEYWORDS = ("AND", "OR", "NOT", "-")


@dataclass(frozen=True)
class Term:
    field: str | None
    op: Op
    value: str


@dataclass(frozen=True)
class Not:
    item: Node


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]


Node = Term | Not | And | Or

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<lparen>\()|(?P<rparen>\))|
        (?P<quoted>"(?:[^"\\]|\\.)*")|
        (?P<word>[^\s()"]+)
    )""",
    re.VERBOSE,
)
_FIELD = re.compile(r"^([A-Za-z_][\w.]*):(.*)$", re.DOTALL)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    position: int


def _tokenise(query: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(query):
        if query[position:].strip() == "":
            break
        match = _TOKEN.match(query, position)
        if match is None or match.end() == position:
            raise OptionError(
                f"cql: cannot read {shown(query[position:])} at position {position + 1}"
            )
        kind = match.lastgroup or ""
        start = match.start(kind)
        text = match.group(kind)
        # A field followed by a quoted value (name:"a b", name:~"a b") is one term.
        if (
            kind == "quoted"
            and tokens
            and tokens[-1].kind == "word"
            and tokens[-1].text.endswith((":", ":~"))
            and tokens[-1].position + len(tokens[-1].text) == start
        ):
            previous = tokens.pop()
            tokens.append(_Token("word", previous.text + text, previous.position))
        else:
            tokens.append(_Token(kind, text, start))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = _tokenise(query)
        self.index = 0
        self.depth = 0
        terms = sum(
            t.kind == "quoted" or (t.kind == "word" and t.text.upper() not in _KEYWORDS)
            for t in self.tokens
        )
        if terms > MAX_TERMS:
            raise OptionError(f"cql: the query has {terms} terms; at most {MAX_TERMS} are allowed")

    def _deeper(self) -> None:
        # Counted before each nested step, so the bound, not Python's recursion limit, applies.
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._error(f"parentheses and NOTs nest more than {MAX_DEPTH} deep")

    def _peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token is not None and token.kind == "word" and token.text.upper() == word:
            self.index += 1
            return True
        return False

    def _error(self, message: str) -> OptionError:
        token = self._peek()
        where = f"at position {token.position + 1}" if token else "at the end"
        return OptionError(f"cql {shown(self.query, 60)}: {message} {where}")

    def parse(self) -> Node:
        if not self.tokens:
            raise OptionError("cql: the query is empty")
        node = self._or()
        rest = self._peek()
        if rest is not None:
            raise self._error(f"unexpected {rest.text!r}")
        return node

    def _or(self) -> Node:
        items = [self._and()]
        while self._keyword("OR"):
            items.append(self._and())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def _and(self) -> Node:
        items = [self._not()]
        while True:
            token = self._peek()
            if (
                token is None
                or token.kind == "rparen"
                or (token.kind == "word" and token.text.upper() == "OR")
            ):
                break
            self._keyword("AND")
            items.append(self._not())
        return items[0] if len(items) == 1 else And(tuple(items))

    def _not(self) -> Node:
        token = self._peek()
        if token is not None and token.kind == "word" and token.text.upper() in ("NOT", "-"):
            self.index += 1
            self._deeper()
            node = Not(self._not())
            self.depth -= 1
            return node
        if token is not None and token.kind == "word" and token.text.startswith("-"):
            self.tokens[self.index] = _Token("word", token.text[1:], token.position + 1)
            return Not(self._primary())
        return self._primary()

    def _primary(self) -> Node:
        token = self._peek()
        if token is None:
            raise self._error("expected a term")
        if token.kind == "lparen":
            self.index += 1
            self._deeper()
            node = self._or()
            self.depth -= 1
            closing = self._peek()
            if closing is None or closing.kind != "rparen":
                raise self._error("expected ')'")
            self.index += 1
            return node
        if token.kind == "rparen":
            raise self._error("unexpected ')'")
        if token.kind == "word" and token.text.upper() in ("AND", "OR"):
            raise self._error(f"expected a term before {token.text!r}")
        self.index += 1
        return _term(token)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def _term(token: _Token) -> Term:
    if token.kind == "quoted":
        return Term(None, "text", _unquote(token.text))
    match = _FIELD.match(token.text)
    if match is None:
        return Term(None, "text", token.text)
    field, raw = match.group(1), match.group(2)
    if raw == "":
        raise OptionError(f"cql: {field}: has no value at position {token.position + 1}")
    if field.lower() == "is":
        value = _unquote(raw).lower()
        if value not in IS_VALUES:
            raise OptionError(f"cql: is:{value} is not one of: is:{', is:'.join(IS_VALUES)}")
        return Term(None, "is", value)
    if raw.startswith("~"):
        return Term(field, "sounds", _unquote(raw[1:]))
    value = _unquote(raw)
    if "*" in value:
        return Term(field, "like", value)
    return Term(field, "eq", value)


def parse_cql(query: str) -> Node:
    """Parse ``query`` into a tree of :class:`Term`, :class:`Not`, :class:`And`, :class:`Or`."""
    return _Parser(query).parse()


def fields_of(node: Node) -> set[str]:
    """Every field name a query's terms name (``a.b`` as written)."""
    if isinstance(node, Term):
        return set() if node.field is None else {node.field}
    if isinstance(node, Not):
        return fields_of(node.item)
    return set().union(*(fields_of(item) for item in node.items))
