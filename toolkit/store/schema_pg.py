"""The PostgreSQL body of each migration of :data:`toolkit.store.schema.MIGRATIONS`.

Both stores share one version number per schema (SQLite keeps it in ``PRAGMA
user_version``, PostgreSQL in the table ``toolkit_schema``) and one ordered list of
migrations with a body per dialect: the store has no ORM, so a migration tool that
generates DDL from models (Alembic) would add a second schema description to keep in
step; a list of plain SQL is what both dialects run, reviewed side by side.

The PostgreSQL store began at schema 6: its first body makes that schema whole, the
next five are empty. The functions giving SQLite's JSON functions their meaning
(:data:`toolkit.store.dialect.POSTGRES_FUNCTIONS`) are no migration: the store replaces
them whenever their text changes. Each
later migration appends a body to both lists.

Differences from SQLite: JSON columns are ``jsonb``; byte strings ``bytea``; an asset's
geometry is a PostGIS ``geometry(Geometry, 4326)`` with a GiST index, so QGIS opens the
asset table as a layer; integer ids are ``bigint`` numbered from a sequence when left out
(SQLite's ``INTEGER PRIMARY KEY``): by a trigger up to schema 7, by the column's default
from schema 8.
"""

from __future__ import annotations

from toolkit.store.dialect import NEXT_ID_FUNCTION, ids_sequence, sync_ids_sql

# Geometry columns, soundex, trigrams: made (where the user may) before any migration.
POSTGRES_EXTENSIONS = ("postgis", "fuzzystrmatch", "pg_trgm")

TABLES_WITH_IDS = (
    "site",
    "event",
    "asset",
    "item",
    "user",
    "api_key",
    "audit_log",
    "media",
    "import_job",
    "report_instance",
    "gazetteer",
)

_SCHEMA_6 = """
CREATE TABLE site (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    date_created BIGINT NOT NULL
);

CREATE TABLE event (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    name TEXT NOT NULL,
    description TEXT,
    status INTEGER NOT NULL DEFAULT 1,
    start_date BIGINT,
    tags JSONB NOT NULL DEFAULT '[]',
    is_template INTEGER NOT NULL DEFAULT 0,
    is_global INTEGER NOT NULL DEFAULT 0,
    region_id BIGINT,
    date_created BIGINT NOT NULL,
    date_modified BIGINT NOT NULL
);
CREATE INDEX event_site ON event(site_id);

CREATE TABLE register (
    site_id BIGINT NOT NULL REFERENCES site(id),
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    fields JSONB NOT NULL DEFAULT '[]',
    PRIMARY KEY (site_id, id)
);

CREATE TABLE asset_type (
    site_id BIGINT NOT NULL REFERENCES site(id),
    name TEXT NOT NULL,
    friendly TEXT NOT NULL,
    PRIMARY KEY (site_id, name)
);

CREATE TABLE asset (
    id BIGINT NOT NULL,
    site_id BIGINT NOT NULL REFERENCES site(id),
    type TEXT NOT NULL,
    code TEXT,
    name TEXT NOT NULL,
    friendly TEXT,
    region_id BIGINT,
    source TEXT,
    status INTEGER NOT NULL DEFAULT 1,
    extra_info JSONB NOT NULL DEFAULT '{}',
    geometry geometry(Geometry, 4326),
    min_x DOUBLE PRECISION,
    min_y DOUBLE PRECISION,
    max_x DOUBLE PRECISION,
    max_y DOUBLE PRECISION,
    tags JSONB NOT NULL DEFAULT '[]',
    import_job_id BIGINT,
    date_created BIGINT NOT NULL,
    date_modified BIGINT NOT NULL,
    PRIMARY KEY (site_id, id)
);
CREATE INDEX asset_site_code ON asset(site_id, code);
CREATE INDEX asset_site_x ON asset(site_id, min_x);
CREATE INDEX asset_geometry ON asset USING gist (geometry);

CREATE TABLE item (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    register_id TEXT NOT NULL,
    event_id BIGINT,
    region_id BIGINT,
    asset_id BIGINT,
    status INTEGER NOT NULL DEFAULT 1,
    is_template INTEGER NOT NULL DEFAULT 0,
    tags JSONB NOT NULL DEFAULT '[]',
    fields JSONB NOT NULL DEFAULT '{}',
    import_job_id BIGINT,
    date_created BIGINT NOT NULL,
    date_modified BIGINT NOT NULL
);
CREATE INDEX item_scope ON item(site_id, register_id, event_id);
CREATE INDEX item_asset ON item(asset_id) WHERE asset_id IS NOT NULL;

CREATE TABLE "user" (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    username TEXT NOT NULL,
    first_name TEXT,
    last_name TEXT,
    email TEXT,
    phone TEXT,
    organisation TEXT,
    positions JSONB NOT NULL DEFAULT '[]',
    extra JSONB NOT NULL DEFAULT '{}',
    tags JSONB NOT NULL DEFAULT '[]',
    status INTEGER NOT NULL DEFAULT 1,
    password_hash TEXT,
    totp_secret TEXT,
    approved INTEGER NOT NULL DEFAULT 0,
    terms_accepted INTEGER NOT NULL DEFAULT 0,
    import_job_id BIGINT,
    date_created BIGINT NOT NULL,
    date_modified BIGINT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    totp_last_step BIGINT,
    UNIQUE (site_id, username)
);

CREATE TABLE duty (
    user_id BIGINT NOT NULL REFERENCES "user"(id),
    event_id BIGINT NOT NULL REFERENCES event(id),
    position TEXT NOT NULL,
    date_created BIGINT NOT NULL,
    PRIMARY KEY (user_id, event_id, position)
);

CREATE TABLE api_key (
    id BIGINT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES "user"(id),
    prefix TEXT NOT NULL UNIQUE,
    key_hash TEXT NOT NULL,
    label TEXT,
    revoked INTEGER NOT NULL DEFAULT 0,
    date_created BIGINT NOT NULL,
    date_revoked BIGINT
);

CREATE TABLE site_secret (
    site_id BIGINT NOT NULL REFERENCES site(id),
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    date_created BIGINT NOT NULL,
    PRIMARY KEY (site_id, name)
);

CREATE TABLE audit_log (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    date_created BIGINT NOT NULL,
    user_id TEXT,
    action TEXT NOT NULL,
    record_type TEXT NOT NULL,
    record_id BIGINT NOT NULL,
    item_id BIGINT,
    event_id BIGINT,
    changes JSONB,
    message TEXT,
    import_job_id BIGINT
);
CREATE INDEX audit_site ON audit_log(site_id, id);
CREATE INDEX audit_item ON audit_log(item_id) WHERE item_id IS NOT NULL;
CREATE INDEX audit_event ON audit_log(event_id) WHERE event_id IS NOT NULL;

CREATE TABLE media (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    content BYTEA NOT NULL,
    user_id TEXT,
    date_created BIGINT NOT NULL
);

CREATE TABLE import_job (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    status TEXT NOT NULL,
    code INTEGER NOT NULL DEFAULT 200,
    user_id TEXT,
    import_type TEXT NOT NULL,
    import_rule TEXT NOT NULL,
    params JSONB NOT NULL DEFAULT '{}',
    summary JSONB,
    result TEXT NOT NULL DEFAULT '',
    pid INTEGER,
    host TEXT,
    date_created BIGINT NOT NULL,
    date_completed BIGINT
);
CREATE INDEX import_job_site ON import_job(site_id, id);

CREATE TABLE import_link (
    job_id BIGINT NOT NULL REFERENCES import_job(id),
    row BIGINT NOT NULL,
    reference TEXT,
    query TEXT,
    asset_id BIGINT,
    mode TEXT,
    accuracy DOUBLE PRECISION,
    candidates INTEGER,
    err TEXT,
    probability DOUBLE PRECISION,
    evidence JSONB,
    PRIMARY KEY (job_id, row)
);

CREATE TABLE report_instance (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES site(id),
    report_id BIGINT NOT NULL,
    status TEXT NOT NULL,
    code INTEGER NOT NULL DEFAULT 200,
    user_id TEXT,
    params JSONB,
    result TEXT NOT NULL DEFAULT '',
    header JSONB,
    row_count BIGINT,
    time_taken DOUBLE PRECISION,
    pid INTEGER,
    host TEXT,
    date_created BIGINT NOT NULL,
    date_run BIGINT,
    date_completed BIGINT
);
CREATE INDEX report_instance_site ON report_instance(site_id, id);

CREATE TABLE match_decision (
    site_id BIGINT NOT NULL REFERENCES site(id),
    query TEXT NOT NULL,
    asset_id TEXT,
    date_created BIGINT NOT NULL,
    PRIMARY KEY (site_id, query)
);

CREATE TABLE report_snapshot (
    instance_id BIGINT NOT NULL REFERENCES report_instance(id),
    part INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (instance_id, part)
);

CREATE TABLE asset_index_cache (
    site_id BIGINT PRIMARY KEY REFERENCES site(id),
    stamp TEXT NOT NULL,
    date_created BIGINT NOT NULL
);
CREATE TABLE asset_index_part (
    site_id BIGINT NOT NULL REFERENCES asset_index_cache(site_id) ON DELETE CASCADE,
    part INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (site_id, part)
);

CREATE TABLE gazetteer (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL UNIQUE REFERENCES site(id),
    name TEXT NOT NULL,
    header JSONB NOT NULL,
    date_created BIGINT NOT NULL
);
CREATE TABLE gazetteer_part (
    gazetteer_id BIGINT NOT NULL REFERENCES gazetteer(id) ON DELETE CASCADE,
    part INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (gazetteer_id, part)
);
"""

_ID_TRIGGERS = "".join(
    f'CREATE TRIGGER {t}_next_id BEFORE INSERT ON "{t}" FOR EACH ROW '
    "EXECUTE FUNCTION toolkit_next_id();\n"
    for t in TABLES_WITH_IDS
)

# The role analysts' report queries run as (store/reports.py): roles belong to the whole
# server, so it is made when missing, and a user who may not make roles is told at the
# first analyst's query instead of failing the migration.
_ANALYST_ROLE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'toolkit_analyst') THEN
        CREATE ROLE toolkit_analyst NOLOGIN;
    END IF;
    EXECUTE format('GRANT toolkit_analyst TO %I', current_user);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'cannot make or grant the role toolkit_analyst';
END
$$;
"""

# 8: an id left out comes from the column's default, the table's sequence, instead of a
# PL/pgSQL trigger run for every row: an import's million audit entries (and the COPY of
# its records) paid that call per row. The sequences (made here where missing) move past
# the largest id, so existing rows keep theirs and no id is drawn twice.
_ID_DEFAULTS = sync_ids_sql(TABLES_WITH_IDS) + "".join(
    f'\nDROP TRIGGER IF EXISTS {t}_next_id ON "{t}";\n'
    f"ALTER TABLE \"{t}\" ALTER COLUMN id SET DEFAULT nextval('{ids_sequence(t)}');"
    for t in TABLES_WITH_IDS
)

POSTGRES_MIGRATIONS: tuple[str, ...] = (
    NEXT_ID_FUNCTION + _SCHEMA_6 + _ID_TRIGGERS + _ANALYST_ROLE,
    "",
    "",
    "",
    "",
    "",
    # 7: as on SQLite, the partial index that finds an audited record's later changes.
    "CREATE INDEX audit_change ON audit_log(record_type, record_id) WHERE action <> 'create';",
    _ID_DEFAULTS,
    # 9: as on SQLite, the number every write of a site's assets raises.
    "ALTER TABLE site ADD COLUMN asset_version BIGINT NOT NULL DEFAULT 0;",
)
