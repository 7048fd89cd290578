"""The differences between the store's two SQL dialects, in one place.

The store's statements are written once, in SQLite's dialect. On PostgreSQL each is
rewritten here (once per distinct text, cached) and runs beside the functions that
:data:`POSTGRES_FUNCTIONS` installs, which give SQLite's JSON and soundex functions their
meaning over ``jsonb`` columns:

- ``?`` placeholders become ``%s`` (and a literal ``%`` doubles), outside string literals;
- ``INSERT OR IGNORE`` becomes ``INSERT ... ON CONFLICT DO NOTHING``;
- ``CROSS JOIN t ON`` (SQLite's hint to keep the join order) becomes a plain ``JOIN``;
- ``a IS b`` / ``a IS NOT b`` with a value become ``IS [NOT] DISTINCT FROM``;
- ``json_object``/``json_array`` become ``jsonb_build_object``/``jsonb_build_array``,
  ``json(x)`` the compat ``toolkit_json(x)``, ``instr`` ``strpos``, ``temp.`` ``pg_temp.``,
  ``main.`` ``public.``,
  and the table ``user`` (a reserved word there) is quoted;
- ``json_patch`` (an RFC 7396 merge of ``jsonb``), ``json_extract``, ``json_type``,
  ``json_set``, ``json_insert``, ``json_each`` and ``sounds_like`` (soundex of
  fuzzystrmatch) are SQL functions of the same name on PostgreSQL.

A new statement in the store needs nothing here unless it uses another SQLite-only form.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import chain, islice
from typing import Any

# Single-quoted literals ('' inside is a quote) and everything between them.
_LITERAL = re.compile(r"('(?:[^']|'')*')")
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bCROSS JOIN (\S+ \w+) ON\b"), r"JOIN \1 ON"),
    (re.compile(r"\bIS NOT (?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)"), "IS DISTINCT FROM "),
    (re.compile(r"\bIS (?!NULL\b|NOT\b|DISTINCT\b|TRUE\b|FALSE\b)"), "IS NOT DISTINCT FROM "),
    (re.compile(r"\bjson_object\("), "jsonb_build_object("),
    (re.compile(r"\bjson_array\("), "jsonb_build_array("),
    (re.compile(r"\bjson\("), "toolkit_json("),
    (re.compile(r"\binstr\("), "strpos("),
    (re.compile(r"\btemp\."), "pg_temp."),
    (re.compile(r"\bmain\."), "public."),
    # A reserved word on PostgreSQL, so the table is quoted there.
    (re.compile(r"(?<![.\"])\buser\b(?!\")"), '"user"'),
)
_INSERT_OR_IGNORE = re.compile(r"^\s*INSERT OR IGNORE INTO\b", re.IGNORECASE)


def is_postgres_connection(connection: object) -> bool:
    """Whether ``connection`` is the PostgreSQL store's (for the few statements whose
    shape, not only whose text, differs)."""
    return not isinstance(connection, sqlite3.Connection)


def next_ids(connection: Any, table: str, count: int) -> Sequence[int]:
    """``count`` new ids of ``table`` from its sequence (PostgreSQL): a range when they
    came consecutive, as they do unless another transaction drew at the same moment."""
    rows = connection.execute(
        f"SELECT nextval('{ids_sequence(table)}') FROM generate_series(1, ?)", (count,)
    ).fetchall()
    ids = [int(r[0]) for r in rows]
    if ids[-1] - ids[0] == count - 1:
        return range(ids[0], ids[-1] + 1)
    return ids


def copy_rows(
    connection: Any, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Rows into ``table`` with PostgreSQL's COPY (its bulk load), in the transaction open."""
    quoted = '"user"' if table == "user" else table
    with (
        connection.raw.cursor() as cursor,
        cursor.copy(f"COPY {quoted} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


# Rows one SQLite INSERT carries (``VALUES (...), (...), ...``). sqlite3's executemany pays
# a reset of the statement and a turn of its loop for each call: into a WITHOUT ROWID table
# (the import's links), 16 rows a call bind the same values in about 60% of the time
# (125,000 links: 0.27 -> 0.17 s). Not for a rowid table filled in id order (items, assets):
# one row a statement keeps SQLite's hint to append, and several were slower (0.15 -> 0.23
# s for 50,000 items). No more values a statement than the oldest SQLite's limit (999).
ROWS_PER_INSERT = 16
MAX_VALUES_PER_INSERT = 999


def insert_rows(
    connection: sqlite3.Connection,
    head: str,
    row: str,
    rows: Iterator[Sequence[Any]],
    *,
    count: int,
    width: int,
) -> None:
    """``connection.executemany(f"{head} VALUES {row}", rows)`` on SQLite, several rows a
    statement: ``rows`` gives ``count`` rows of ``width`` values, one for each ``?`` of
    ``row`` (one row's ``(...)``, which may hold literals too). No row is dropped: if
    ``rows`` ends short of the statements of several rows, that is an error."""
    per = max(1, min(ROWS_PER_INSERT, MAX_VALUES_PER_INSERT // max(width, 1)))
    full = count - count % per if width else 0
    if full:
        # The values of ``per`` rows in a row, taken by zip from one flat iterator: all in C.
        # (A short last group, rows missing, is dropped by zip and caught by the count.)
        flat = iter(chain.from_iterable(islice(rows, full)))
        groups = zip(*[flat] * (width * per), strict=False)
        done = connection.executemany(f"{head} VALUES {', '.join([row] * per)}", groups).rowcount
        if done != full:
            raise ValueError(f"{full} rows were to be inserted, {done} were given")
    connection.executemany(f"{head} VALUES {row}", rows)


@contextlib.contextmanager
def site_checked_once(connection: Any, tables: Sequence[str], site_id: int) -> Iterator[bool]:
    """Bulk rows of one site written into ``tables`` with its foreign key checked once,
    not once per row; yields whether it is (else the rows are checked as always).

    PostgreSQL checks a foreign key with a trigger per inserted row, a query of the
    site's row each time: 40% of an import's COPY of items and of its audit entries
    (EXPLAIN ANALYZE: ``Trigger for constraint audit_log_site_id_fkey: calls=100000``).
    See :func:`key_checked_once`.
    """
    with key_checked_once(connection, tables, column="site_id", parent="site", key=site_id) as once:
        yield once


@contextlib.contextmanager
def key_checked_once(
    connection: Any, tables: Sequence[str], *, column: str, parent: str, key: int
) -> Iterator[bool]:
    """Bulk rows written into ``tables`` that all carry ``column = key``, a foreign key to
    ``parent(id)``, checked once, not once per row; yields whether it is (else the rows
    are checked as always).

    Every row written here carries the one ``key``, so one check of that row, locked
    as each per-row check locks it (``FOR KEY SHARE``, to the transaction's end, so the
    parent cannot go while the rows are there), checks the same. The triggers are left out
    by ``session_replication_role = replica`` for the statements inside only, which:
    - a superuser (or a role granted SET on it, PostgreSQL 15) alone may set: others get
      the per-row checks;
    - also leaves out any other trigger: so it is used only when this key is the tables'
      only foreign key and they have no trigger of their own.
    ``column`` and ``parent`` are the schema's names, never input. On SQLite (which checks
    no foreign keys here) it does nothing.
    """
    if not is_postgres_connection(connection) or not connection.in_transaction:
        yield False
        return
    import psycopg

    raw = connection.raw
    names = list(tables)
    keys = raw.execute(
        "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c WHERE c.contype = 'f' "
        "AND c.conrelid = ANY(SELECT to_regclass(quote_ident(n)) FROM unnest(%s::text[]) n)",
        (names,),
    ).fetchall()
    triggers = raw.execute(
        "SELECT count(*) FROM pg_trigger t WHERE NOT t.tgisinternal "
        "AND t.tgrelid = ANY(SELECT to_regclass(quote_ident(n)) FROM unnest(%s::text[]) n)",
        (names,),
    ).fetchone()
    only = f"FOREIGN KEY ({column}) REFERENCES {parent}(id)"
    if any(k[0] != only for k in keys) or (triggers is not None and triggers[0]):
        yield False
        return
    raw.execute("SAVEPOINT toolkit_key_checked_once")
    try:
        raw.execute("SET LOCAL session_replication_role = replica")
    except psycopg.errors.InsufficientPrivilege:
        raw.execute("ROLLBACK TO SAVEPOINT toolkit_key_checked_once")
        raw.execute("RELEASE SAVEPOINT toolkit_key_checked_once")
        yield False
        return
    raw.execute("RELEASE SAVEPOINT toolkit_key_checked_once")
    try:
        # The check each row's trigger makes (ri_triggers.c: SELECT ... FOR KEY SHARE), once.
        found = raw.execute(f"SELECT 1 FROM {parent} WHERE id = %s FOR KEY SHARE", (key,))
        if found.fetchone() is None:
            raise psycopg.errors.ForeignKeyViolation(
                f"{parent} {key} is not in the store (its rows would reference no {parent})"
            )
        yield True
    finally:
        if raw.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
            raw.execute("SET LOCAL session_replication_role = origin")


def ids_sequence(table: str) -> str:
    return f"toolkit_ids_{table}"


def sync_ids_sql(tables: Iterable[str]) -> str:
    """Each table's id sequence made where missing and set past its largest id (ids
    written as given, e.g. by a site copy, are never drawn again)."""
    statements = []
    for table in tables:
        seq = ids_sequence(table)
        statements.append(
            f"CREATE SEQUENCE IF NOT EXISTS {seq};\n"
            f"SELECT setval('{seq}', greatest((SELECT coalesce(max(id), 0) FROM \"{table}\"), "
            f"(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {seq})) + 1, false);"
        )
    return "\n".join(statements)


@lru_cache(maxsize=2048)
def to_postgres(sql: str) -> str:
    """``sql`` (SQLite's dialect, ``?`` placeholders) as PostgreSQL runs it (``%s``)."""
    ignore = bool(_INSERT_OR_IGNORE.match(sql))
    if ignore:
        sql = _INSERT_OR_IGNORE.sub("INSERT INTO", sql, count=1)
    pieces = _LITERAL.split(sql)
    for index, piece in enumerate(pieces):
        if index % 2:  # a literal: only its '%' needs escaping from psycopg
            pieces[index] = piece.replace("%", "%%")
            continue
        piece = piece.replace("%", "%%").replace("?", "%s")
        for pattern, replacement in _REWRITES:
            piece = pattern.sub(replacement, piece)
        pieces[index] = piece
    out = "".join(pieces)
    if ignore:
        out += " ON CONFLICT DO NOTHING"
    return out


_MIXED_CASE = re.compile(
    r'(?<![":\w])([A-Za-z_]*[a-z][A-Za-z_]*[A-Z]\w*|[A-Z]\w*[a-z]\w*)\b(?!\s*\()'
)
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def view_to_postgres(sql: str) -> str:
    """A view of the store's (SQLite's dialect, no parameters) as PostgreSQL makes it,
    its mixed-case column names quoted as :func:`analyst_to_postgres` quotes them."""
    return analyst_to_postgres(to_postgres(sql).replace("%%", "%")).replace("%%", "%")


def analyst_to_postgres(sql: str) -> str:
    """An analyst's query as PostgreSQL runs it: mixed-case names (``eventId``) quoted so
    they keep their case (PostgreSQL folds unquoted names to lower case; the views'
    columns are quoted alike), ``:name`` parameters as psycopg's ``%(name)s``."""
    pieces = _LITERAL.split(sql)
    for index, piece in enumerate(pieces):
        if index % 2:
            pieces[index] = piece.replace("%", "%%")
            continue
        piece = _MIXED_CASE.sub(r'"\1"', piece.replace("%", "%%"))
        pieces[index] = _NAMED.sub(r"%(\1)s", piece)
    return "".join(pieces)


# SQLite's functions the store uses, over jsonb: not part of a migration but installed
# whenever their text changes (Database keeps its checksum), so a store always has the
# meaning this toolkit's statements expect. CREATE OR REPLACE keeps a function's
# signature: one whose arguments or result change is dropped first, here.
POSTGRES_FUNCTIONS = r"""
SET LOCAL check_function_bodies = off;

CREATE OR REPLACE FUNCTION toolkit_json_key(path text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN path LIKE '$."%"'
        THEN replace(substr(path, 4, length(path) - 4), '\"', '"')
        ELSE substr(path, 3) END
$$;

-- A SQLite JSON path ('$.a."b c"[0]') as the text array of PostgreSQL's #> and #>>.
CREATE OR REPLACE FUNCTION toolkit_json_path(path text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    parts text[] := '{}';
    rest text := substr(path, 2);
    m text[];
BEGIN
    WHILE rest <> '' LOOP
        IF left(rest, 2) = '."' THEN
            m := regexp_match(rest, '^(\."((?:[^"\\]|\\.)*)")');
            parts := parts || replace(m[2], '\"', '"');
        ELSIF left(rest, 1) = '.' THEN
            m := regexp_match(rest, '^(\.([^.\[]+))');
            parts := parts || m[2];
        ELSE
            m := regexp_match(rest, '^(\[([0-9]+)\])');
            IF m IS NULL THEN
                RAISE EXCEPTION 'not a JSON path the store writes: %', path;
            END IF;
            parts := parts || m[2];
        END IF;
        rest := substr(rest, length(m[1]) + 1);
    END LOOP;
    RETURN parts;
END
$$;

CREATE OR REPLACE FUNCTION toolkit_json(doc jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT doc $$;
-- JSON text (what json_extract gives of an object, or a parameter) as jsonb.
CREATE OR REPLACE FUNCTION toolkit_json(doc text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT doc::jsonb $$;

-- RFC 7396: members of the patch replace the target's, null members remove them,
-- objects merge recursively, anything else replaces the target whole.
CREATE OR REPLACE FUNCTION json_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN target IS NULL OR patch IS NULL THEN NULL
        WHEN jsonb_typeof(patch) <> 'object' THEN patch
        WHEN jsonb_typeof(target) <> 'object' THEN json_patch('{}'::jsonb, patch)
        ELSE coalesce((
            SELECT jsonb_object_agg(k, v) FROM (
                SELECT t.key AS k, t.value AS v FROM jsonb_each(target) t
                WHERE NOT patch ? t.key
                UNION ALL
                SELECT p.key, CASE
                    WHEN jsonb_typeof(p.value) = 'object' AND target ? p.key
                        THEN json_patch(target -> p.key, p.value)
                    WHEN jsonb_typeof(p.value) = 'object'
                        THEN json_patch('{}'::jsonb, p.value)
                    ELSE p.value END
                FROM jsonb_each(patch) p WHERE jsonb_typeof(p.value) <> 'null'
            ) merged), '{}'::jsonb)
    END
$$;

-- Scalars as SQL text (booleans as SQLite's 1 and 0), containers as JSON text.
CREATE OR REPLACE FUNCTION json_extract(doc jsonb, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc #> toolkit_json_path(path)) = 'boolean'
        THEN CASE WHEN (doc #> toolkit_json_path(path))::boolean THEN '1' ELSE '0' END
        ELSE doc #>> toolkit_json_path(path) END
$$;

-- SQLite's names of JSON types: true, false, integer, real, text, null, array, object.
CREATE OR REPLACE FUNCTION json_type(doc jsonb, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(v)
        WHEN 'boolean' THEN v::text
        WHEN 'number' THEN CASE WHEN v::text ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
        WHEN 'string' THEN 'text'
        ELSE jsonb_typeof(v) END
    FROM (SELECT doc #> toolkit_json_path(path) AS v) AS member
$$;

-- Values come as text (the store's json_set values are words and integers): one that
-- reads as an integer is set as a JSON number, as SQLite sets an integer.
CREATE OR REPLACE FUNCTION json_set(doc jsonb, VARIADIC pairs text[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    i integer := 1;
BEGIN
    doc := coalesce(doc, '{}'::jsonb);
    WHILE i < coalesce(array_length(pairs, 1), 0) LOOP
        doc := jsonb_set(doc, toolkit_json_path(pairs[i]),
            CASE WHEN pairs[i + 1] ~ '^-?[0-9]{1,18}$' THEN to_jsonb(pairs[i + 1]::bigint)
                ELSE to_jsonb(pairs[i + 1]) END);
        i := i + 2;
    END LOOP;
    RETURN doc;
END
$$;
CREATE OR REPLACE FUNCTION json_set(doc text, VARIADIC pairs text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT json_set(doc::jsonb, VARIADIC pairs) $$;

CREATE OR REPLACE FUNCTION json_insert(doc jsonb, path text, value text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN path = '$[#]' THEN coalesce(doc, '[]'::jsonb) || to_jsonb(value)
        WHEN doc ? toolkit_json_key(path) THEN doc
        ELSE jsonb_set(doc, ARRAY[toolkit_json_key(path)], to_jsonb(value)) END
$$;

-- SQLite lowers JSON text like any text (a full-text filter over a JSON column).
-- And numbers (a filter comparing a number column as text).
CREATE OR REPLACE FUNCTION lower(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT lower(doc::text) $$;
CREATE OR REPLACE FUNCTION lower(value bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT value::text $$;
CREATE OR REPLACE FUNCTION lower(value integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT value::text $$;
CREATE OR REPLACE FUNCTION lower(value double precision) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT value::text $$;

-- The elements of an array (or members of an object) as text, like SQLite's json_each.
CREATE OR REPLACE FUNCTION json_each(doc jsonb) RETURNS TABLE (key text, value text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT NULL::text, e FROM jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(doc) = 'array' THEN doc ELSE '[]'::jsonb END) e
    UNION ALL
    SELECT o.key, o.value FROM jsonb_each_text(
        CASE WHEN jsonb_typeof(doc) = 'object' THEN doc ELSE '{}'::jsonb END) o
$$;

-- An id left out of an INSERT comes from the table's sequence (sync_ids_sql), so two
-- transactions at once never draw the same one (SQLite's are serialised by its lock).
CREATE OR REPLACE FUNCTION toolkit_next_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id IS NULL THEN
        NEW.id := nextval(format('%I', 'toolkit_ids_' || TG_TABLE_NAME));
    END IF;
    RETURN NEW;
END
$$;

-- 1 when every word of the query sounds like some word of the value (toolkit.store.sql).
CREATE OR REPLACE FUNCTION sounds_like(value text, query text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH q AS (
        SELECT soundex(w) AS s FROM regexp_split_to_table(query, '\s+') w
        WHERE w ~ '^[[:alpha:]]+$'
    ), v AS (
        SELECT soundex(w) AS s FROM regexp_split_to_table(value, '\s+') w
        WHERE w ~ '^[[:alpha:]]+$'
    )
    SELECT CASE WHEN value IS NULL OR query IS NULL OR NOT EXISTS (SELECT 1 FROM q) THEN 0
        ELSE (NOT EXISTS (SELECT 1 FROM q WHERE q.s NOT IN (SELECT s FROM v)))::integer END
$$;

"""

# SQLite gives an INTEGER PRIMARY KEY left out of an INSERT the next number; so did the
# triggers schema 6 (schema_pg.py) put on the tables with ids, until schema 8 gave the
# columns their sequence as default (this function stays: migration 1 names it).
NEXT_ID_FUNCTION = r"""
CREATE FUNCTION toolkit_next_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id IS NULL THEN
        EXECUTE format('SELECT coalesce(max(id), 0) + 1 FROM %I', TG_TABLE_NAME) INTO NEW.id;
    END IF;
    RETURN NEW;
END
$$;
"""
