"""The SQLite schema of the embedded site, as an ordered list of migrations.

The database's ``PRAGMA user_version`` is the number of migrations applied. A
migration is appended, never edited, once it has shipped.

Conventions: every record table carries ``site_id`` (the spec's ``X-Site``
tenancy); ids are integers unique across the whole file, so an id never names
records in two sites, except asset ids, which are unique within their site
(migration 2: each site owns the id space of its master asset register, so
every statement on assets names the site too); timestamps are integer epoch
milliseconds (UTC); statuses are integers, positive active and zero or negative
inactive; flexible parts (register fields, extraInfo, changes) are JSON text.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema.
    """
    CREATE TABLE site (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        date_created INTEGER NOT NULL
    );

    CREATE TABLE event (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        name TEXT NOT NULL,
        description TEXT,
        status INTEGER NOT NULL DEFAULT 1,
        start_date INTEGER,
        tags TEXT NOT NULL DEFAULT '[]',
        is_template INTEGER NOT NULL DEFAULT 0,
        is_global INTEGER NOT NULL DEFAULT 0,
        region_id INTEGER,
        date_created INTEGER NOT NULL,
        date_modified INTEGER NOT NULL
    );
    CREATE INDEX event_site ON event(site_id);

    CREATE TABLE register (
        site_id INTEGER NOT NULL REFERENCES site(id),
        id TEXT NOT NULL,
        name TEXT NOT NULL,
        fields TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (site_id, id)
    );

    CREATE TABLE asset_type (
        site_id INTEGER NOT NULL REFERENCES site(id),
        name TEXT NOT NULL,
        friendly TEXT NOT NULL,
        PRIMARY KEY (site_id, name)
    );

    CREATE TABLE asset (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        type TEXT NOT NULL,
        code TEXT,
        name TEXT NOT NULL,
        friendly TEXT,
        region_id INTEGER,
        source TEXT,
        status INTEGER NOT NULL DEFAULT 1,
        extra_info TEXT NOT NULL DEFAULT '{}',
        geometry BLOB,
        -- Bounds of the geometry (EPSG:4326) so "near a location" is an indexed range scan.
        min_x REAL,
        min_y REAL,
        max_x REAL,
        max_y REAL,
        tags TEXT NOT NULL DEFAULT '[]',
        import_job_id INTEGER,
        date_created INTEGER NOT NULL,
        date_modified INTEGER NOT NULL
    );
    CREATE INDEX asset_site_code ON asset(site_id, code);
    CREATE INDEX asset_site_x ON asset(site_id, min_x);

    CREATE TABLE item (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        register_id TEXT NOT NULL,
        event_id INTEGER,
        region_id INTEGER,
        asset_id INTEGER,
        status INTEGER NOT NULL DEFAULT 1,
        is_template INTEGER NOT NULL DEFAULT 0,
        tags TEXT NOT NULL DEFAULT '[]',
        fields TEXT NOT NULL DEFAULT '{}',
        import_job_id INTEGER,
        date_created INTEGER NOT NULL,
        date_modified INTEGER NOT NULL
    );
    -- Few indexes on purpose: each one roughly doubles the cost of a bulk import.
    CREATE INDEX item_scope ON item(site_id, register_id, event_id);
    CREATE INDEX item_asset ON item(asset_id) WHERE asset_id IS NOT NULL;

    CREATE TABLE user (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        username TEXT NOT NULL,
        first_name TEXT,
        last_name TEXT,
        email TEXT,
        phone TEXT,
        organisation TEXT,
        positions TEXT NOT NULL DEFAULT '[]',
        extra TEXT NOT NULL DEFAULT '{}',
        tags TEXT NOT NULL DEFAULT '[]',
        status INTEGER NOT NULL DEFAULT 1,
        password_hash TEXT,
        totp_secret TEXT,
        approved INTEGER NOT NULL DEFAULT 0,
        terms_accepted INTEGER NOT NULL DEFAULT 0,
        import_job_id INTEGER,
        date_created INTEGER NOT NULL,
        date_modified INTEGER NOT NULL,
        UNIQUE (site_id, username)
    );

    CREATE TABLE duty (
        user_id INTEGER NOT NULL REFERENCES user(id),
        event_id INTEGER NOT NULL REFERENCES event(id),
        position TEXT NOT NULL,
        date_created INTEGER NOT NULL,
        PRIMARY KEY (user_id, event_id, position)
    );

    CREATE TABLE api_key (
        id INTEGER PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES user(id),
        -- The public part of the key finds its row, and only a slow salted hash of the whole
        -- key is kept, so a stolen site file does not give working keys.
        prefix TEXT NOT NULL UNIQUE,
        key_hash TEXT NOT NULL,
        label TEXT,
        revoked INTEGER NOT NULL DEFAULT 0,
        date_created INTEGER NOT NULL,
        date_revoked INTEGER
    );

    -- Per-site secrets of `toolkit serve` (the token signing key), never printed or logged.
    CREATE TABLE site_secret (
        site_id INTEGER NOT NULL REFERENCES site(id),
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        date_created INTEGER NOT NULL,
        PRIMARY KEY (site_id, name)
    );

    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        date_created INTEGER NOT NULL,
        user_id TEXT,
        action TEXT NOT NULL,
        record_type TEXT NOT NULL,
        record_id INTEGER NOT NULL,
        item_id INTEGER,
        event_id INTEGER,
        changes TEXT,
        message TEXT,
        import_job_id INTEGER
    );
    CREATE INDEX audit_site ON audit_log(site_id, id);
    CREATE INDEX audit_item ON audit_log(item_id) WHERE item_id IS NOT NULL;
    CREATE INDEX audit_event ON audit_log(event_id) WHERE event_id IS NOT NULL;

    CREATE TABLE media (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        name TEXT NOT NULL,
        content_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        content BLOB NOT NULL,
        user_id TEXT,
        date_created INTEGER NOT NULL
    );

    CREATE TABLE import_job (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        status TEXT NOT NULL,
        code INTEGER NOT NULL DEFAULT 200,
        user_id TEXT,
        import_type TEXT NOT NULL,
        import_rule TEXT NOT NULL,
        params TEXT NOT NULL DEFAULT '{}',
        summary TEXT,
        result TEXT NOT NULL DEFAULT '',
        pid INTEGER,
        host TEXT,
        date_created INTEGER NOT NULL,
        date_completed INTEGER
    );
    CREATE INDEX import_job_site ON import_job(site_id, id);

    -- How each row of an item import was linked to an asset: part of the job's record,
    -- so it is kept for dry runs too (the officer reviews matching before the real run).
    CREATE TABLE import_link (
        job_id INTEGER NOT NULL REFERENCES import_job(id),
        row INTEGER NOT NULL,
        reference TEXT,
        query TEXT,
        asset_id INTEGER,
        mode TEXT,
        accuracy REAL,
        candidates INTEGER,
        err TEXT,
        PRIMARY KEY (job_id, row)
    ) WITHOUT ROWID;

    CREATE TABLE report_instance (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL REFERENCES site(id),
        report_id INTEGER NOT NULL,
        status TEXT NOT NULL,
        code INTEGER NOT NULL DEFAULT 200,
        user_id TEXT,
        params TEXT,
        result TEXT NOT NULL DEFAULT '',
        -- The contents' describing part (name, filter, meta, spec) as JSON, while the rows
        -- themselves are a Parquet snapshot in the folder beside the site file.
        header TEXT,
        row_count INTEGER,
        time_taken REAL,
        pid INTEGER,
        host TEXT,
        date_created INTEGER NOT NULL,
        date_run INTEGER,
        date_completed INTEGER
    );
    CREATE INDEX report_instance_site ON report_instance(site_id, id);
    """,
    # 2: the trust of `toolkit serve` (issue 10).
    """
    -- Account administration over the API needs this flag, set only by the local CLI.
    ALTER TABLE user ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
    -- The last TOTP time step a login used: a code logs in once, never replayed in its step.
    ALTER TABLE user ADD COLUMN totp_last_step INTEGER;

    -- Token signing keys now come from outside the site file (a key file or the server's
    -- secret), so a copied site file cannot mint tokens: the old keys go.
    DELETE FROM site_secret WHERE name = 'token-signing-key';

    -- Asset ids belong to their site: two sites may import the same master register.
    CREATE TABLE asset_v2 (
        id INTEGER NOT NULL,
        site_id INTEGER NOT NULL REFERENCES site(id),
        type TEXT NOT NULL,
        code TEXT,
        name TEXT NOT NULL,
        friendly TEXT,
        region_id INTEGER,
        source TEXT,
        status INTEGER NOT NULL DEFAULT 1,
        extra_info TEXT NOT NULL DEFAULT '{}',
        geometry BLOB,
        min_x REAL,
        min_y REAL,
        max_x REAL,
        max_y REAL,
        tags TEXT NOT NULL DEFAULT '[]',
        import_job_id INTEGER,
        date_created INTEGER NOT NULL,
        date_modified INTEGER NOT NULL,
        PRIMARY KEY (site_id, id)
    );
    INSERT INTO asset_v2 (id, site_id, type, code, name, friendly, region_id, source, status,
        extra_info, geometry, min_x, min_y, max_x, max_y, tags, import_job_id, date_created,
        date_modified)
    SELECT id, site_id, type, code, name, friendly, region_id, source, status, extra_info,
        geometry, min_x, min_y, max_x, max_y, tags, import_job_id, date_created, date_modified
    FROM asset;
    DROP TABLE asset;
    ALTER TABLE asset_v2 RENAME TO asset;
    CREATE INDEX asset_site_code ON asset(site_id, code);
    CREATE INDEX asset_site_x ON asset(site_id, min_x);
    """,
    # 3: reviewers' decisions on fuzzy matches, remembered per site by the query's
    # normalised text; asset_id NULL means "no asset matches this text".
    """
    CREATE TABLE match_decision (
        site_id INTEGER NOT NULL REFERENCES site(id),
        query TEXT NOT NULL,
        asset_id TEXT,
        date_created INTEGER NOT NULL,
        PRIMARY KEY (site_id, query)
    ) WITHOUT ROWID;
    """,
    # 4: how sure a fuzzy link was: the best candidate's match probability (0-1) and its
    # evidence in bits per address component (JSON object), for the matching-quality report.
    """
    ALTER TABLE import_link ADD COLUMN probability REAL;
    ALTER TABLE import_link ADD COLUMN evidence TEXT;
    """,
    # 5: a site is one file (issue 13): report snapshots and the matching-index cache move
    # from folders beside the file into it, as byte strings in parts (see store/blobs.py).
    """
    -- The Parquet snapshot of a COMPLETED run, written in the transaction that completes it.
    CREATE TABLE report_snapshot (
        instance_id INTEGER NOT NULL REFERENCES report_instance(id),
        part INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (instance_id, part)
    );

    -- The asset index of a site's active assets, valid while their stamp is unchanged.
    CREATE TABLE asset_index_cache (
        site_id INTEGER PRIMARY KEY REFERENCES site(id),
        stamp TEXT NOT NULL,
        date_created INTEGER NOT NULL
    );
    CREATE TABLE asset_index_part (
        site_id INTEGER NOT NULL REFERENCES asset_index_cache(site_id) ON DELETE CASCADE,
        part INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (site_id, part)
    );
    """,
    # 6: a site's address gazetteer (issue 18): the built index of its address points, kept
    # in the site file (so a site stays one file) as a byte string in parts (store/blobs.py).
    """
    CREATE TABLE gazetteer (
        id INTEGER PRIMARY KEY,
        site_id INTEGER NOT NULL UNIQUE REFERENCES site(id),
        name TEXT NOT NULL,
        header TEXT NOT NULL,
        date_created INTEGER NOT NULL
    );
    CREATE TABLE gazetteer_part (
        gazetteer_id INTEGER NOT NULL REFERENCES gazetteer(id) ON DELETE CASCADE,
        part INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (gazetteer_id, part)
    );
    """,
    # 7: an import's creation entries no longer copy the records' values (issue 17): they
    # are read back as the record with its later audited changes undone, found by this
    # index. Partial, so the million creation entries of an import add nothing to it.
    """
    CREATE INDEX audit_change ON audit_log(record_type, record_id) WHERE action <> 'create';
    """,
    # 8: nothing on SQLite (an INTEGER PRIMARY KEY numbers itself); PostgreSQL's ids come
    # from a column default instead of a trigger per row (schema_pg.py).
    "",
    # 9: a number every write of a site's assets raises, in the write's transaction: the
    # cached matching index is current while it is unchanged (before, each load of the
    # index counted the active assets, a scan of the whole table).
    """
    ALTER TABLE site ADD COLUMN asset_version INTEGER NOT NULL DEFAULT 0;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
