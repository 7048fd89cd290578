"""What an analyst's query may name on PostgreSQL, checked on PostgreSQL's own parse tree
(pglast: libpg_query, the server's parser) before it runs.

The query runs as the role ``toolkit_analyst`` in a read-only transaction, but that role
can still read what PostgreSQL shows everyone (``pg_catalog``, ``information_schema``:
roles, settings, other sessions), and ``SET ROLE`` is checked against the session's user,
so a ``set_config('role', ...)`` inside the statement would leave the role. So, like
SQLite's authorizer on the embedded store, an allow-list: one ``SELECT`` (no ``INTO``, no
``FOR UPDATE``); every relation it reads is one of the site's views (or a ``WITH`` query
in scope); no function that changes settings, reads the server's files, large objects or
catalogs, or runs SQL given as text. Names are compared as the parser resolved them, so
quoting and ``U&"..."`` escapes change nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

# Functions an analyst's query may not call (matched on the name without its schema):
# pg_* are the server's administration and catalog functions (files, sessions, sizes,
# sleeping, signalling), lo_* large objects; set_config/current_setting the settings;
# the *_to_xml family, ts_stat and ts_rewrite run SQL given as text; dblink reaches
# other servers; sequences' functions write or reveal other transactions' ids.
DENIED_FUNCTIONS = re.compile(
    r"^(pg_.*|lo_.*|dblink.*|set_config|current_setting|.*_to_xml.*|.*_to_xmlschema|"
    r"ts_stat|ts_rewrite|version|inet_(client|server)_.*|has_.*_privilege|"
    r"current_schemas?|nextval|setval|currval|lastval|txid_.*|xact_.*)$",
    re.IGNORECASE,
)


class RefusedQuery(ValueError):
    """The query names something an analyst may not read or call; the message says what."""


def check_analyst_query(sql: str, views: Collection[str]) -> None:
    """Raise :class:`RefusedQuery` unless ``sql`` (the statement as it will run, its
    parameters already in it) is one SELECT reading only ``views`` and calling no denied
    function."""
    from pglast import parser

    try:
        tree = json.loads(parser.parse_sql_json(sql))
    except parser.ParseError as exc:
        raise RefusedQuery(f"not a query PostgreSQL can read: {exc}") from exc
    statements = tree.get("stmts", [])
    if len(statements) != 1:
        raise RefusedQuery("an analyst's query is exactly one SELECT statement")
    statement = statements[0]["stmt"]
    if "SelectStmt" not in statement:
        kind = next(iter(statement), "statement").removesuffix("Stmt")
        raise RefusedQuery(f"an analyst's query is one SELECT, not {kind}")
    _walk(statement, frozenset(v.lower() for v in views), frozenset())


def _walk(node: Any, views: frozenset[str], ctes: frozenset[str]) -> None:
    if isinstance(node, list):
        for child in node:
            _walk(child, views, ctes)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key.endswith("Stmt") and key != "SelectStmt":
            raise RefusedQuery(f"an analyst's query may only read, not {key[:-4]}")
        if key == "SelectStmt":
            _select(value, views, ctes)
        elif key == "RangeVar":
            _relation(value, views, ctes)
        elif key == "FuncCall":
            _function(value)
            _walk(value, views, ctes)
        else:
            _walk(value, views, ctes)


def _select(select: dict[str, Any], views: frozenset[str], ctes: frozenset[str]) -> None:
    if select.get("intoClause"):
        raise RefusedQuery("an analyst's query may not write a table (SELECT INTO)")
    if select.get("lockingClause"):
        raise RefusedQuery("an analyst's query may not lock rows (FOR UPDATE/SHARE)")
    with_clause = select.get("withClause") or {}
    entries = [c["CommonTableExpr"] for c in with_clause.get("ctes", [])]
    names = [str(e["ctename"]).lower() for e in entries]
    recursive = bool(with_clause.get("recursive"))
    # A WITH query sees the ones before it (all of them when RECURSIVE), never itself
    # otherwise: `WITH pg_roles AS (SELECT * FROM pg_roles)` reads the catalog.
    for position, entry in enumerate(entries):
        seen = names if recursive else names[:position]
        _walk(entry.get("ctequery"), views, ctes | frozenset(seen))
    inner = ctes | frozenset(names)
    for key, value in select.items():
        if key != "withClause":
            _walk(value, views, inner)


def _relation(relation: dict[str, Any], views: frozenset[str], ctes: frozenset[str]) -> None:
    name = str(relation.get("relname", "")).lower()
    schema = str(relation.get("schemaname") or "").lower()
    if relation.get("catalogname"):
        raise RefusedQuery(f"an analyst's query may not name another database ({name})")
    if not schema and name in ctes:
        return
    if schema in ("", "pg_temp") and name in views:
        return
    shown = f"{schema}.{name}" if schema else name
    raise RefusedQuery(
        f"an analyst's query reads only the site's views ({', '.join(sorted(views))}), not {shown}"
    )


def _function(call: dict[str, Any]) -> None:
    parts = [str(p.get("String", {}).get("sval", "")) for p in call.get("funcname", [])]
    name = parts[-1] if parts else ""
    if DENIED_FUNCTIONS.match(name):
        raise RefusedQuery(
            f"an analyst's query may not call {name} (it reads or changes what is outside "
            "the site's views)"
        )
