"""The schema, as forward migrations keyed by ``PRAGMA user_version``.

A migration is a list of single statements (no executescript, which would commit implicitly);
each version's statements and the version bump run in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from adapters.sqlite.driver import sqlite3

_FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


def _fts(table: str, source: str, columns: list[str]) -> list[str]:
    cols = ", ".join(columns)
    new_vals = ", ".join(f"new.{c}" for c in columns)
    old_vals = ", ".join(f"old.{c}" for c in columns)
    return [
        f"CREATE VIRTUAL TABLE {table} USING fts5({cols}, content='{source}', content_rowid='id',"
        f" tokenize='{_FTS_TOKENIZER}')",
        f"CREATE TRIGGER {table}_insert AFTER INSERT ON {source} BEGIN"
        f" INSERT INTO {table}(rowid, {cols}) VALUES (new.id, {new_vals}); END",
        f"CREATE TRIGGER {table}_delete AFTER DELETE ON {source} BEGIN"
        f" INSERT INTO {table}({table}, rowid, {cols}) VALUES ('delete', old.id, {old_vals}); END",
        f"CREATE TRIGGER {table}_update AFTER UPDATE OF {cols} ON {source} BEGIN"
        f" INSERT INTO {table}({table}, rowid, {cols}) VALUES ('delete', old.id, {old_vals});"
        f" INSERT INTO {table}(rowid, {cols}) VALUES (new.id, {new_vals}); END",
    ]


def _forget_embedding(table: str, text_columns: list[str]) -> list[str]:
    """A record's stored embedding goes with the record, and with the text it was made from."""
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in text_columns)
    forget = f"DELETE FROM embeddings WHERE collection = '{table}' AND ref_id = old.id;"
    return [
        f"CREATE TRIGGER {table}_embedding_delete AFTER DELETE ON {table} BEGIN {forget} END",
        f"CREATE TRIGGER {table}_embedding_update AFTER UPDATE OF {', '.join(text_columns)} ON {table}"
        f" WHEN {changed} BEGIN {forget} END",
    ]


_RELATIONSHIP_COLUMNS = {
    "id": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "from_id": "INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE",
    "to_id": "INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE",
    "label": "TEXT NOT NULL",
    "metadata": "TEXT NOT NULL DEFAULT '{}'",
    "created_at": "TEXT NOT NULL",
}


def _rebuild_relationships_for_validity(conn: sqlite3.Connection) -> None:
    """Rebuild ``relationships`` without its table-level UNIQUE(from_id, to_id, label) and with
    ``valid_from``/``valid_to``, keeping every row, id, column and index it has by then — whatever
    migrations ran before this one added (an owner column, its index), so the order of the
    migrations around it does not matter. The id sequence is carried over: no deleted edge's id
    (which its history names) is handed out again."""
    columns = [(row[1], row[2], row[3], row[4]) for row in conn.execute("PRAGMA table_info(relationships)")]
    indexes = [sql for (sql,) in conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'relationships' AND sql IS NOT NULL")]
    definitions = [f"{name} {_RELATIONSHIP_COLUMNS[name]}" if name in _RELATIONSHIP_COLUMNS else
                   f"{name} {kind}{' NOT NULL' if not_null else ''}{f' DEFAULT {default}' if default is not None else ''}"
                   for name, kind, not_null, default in columns]
    names = ", ".join(name for name, *_ in columns)
    conn.execute(f"CREATE TABLE relationships_valid ({', '.join(definitions)}, valid_from TEXT, valid_to TEXT)")
    conn.execute(f"INSERT INTO relationships_valid({names}) SELECT {names} FROM relationships")
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'relationships_valid'")
    conn.execute("INSERT INTO sqlite_sequence(name, seq) SELECT 'relationships_valid', seq FROM sqlite_sequence"
                 " WHERE name = 'relationships'")
    conn.execute("DROP TABLE relationships")
    conn.execute("ALTER TABLE relationships_valid RENAME TO relationships")
    for sql in indexes:
        conn.execute(sql)


# A migration step is one SQL statement, or a function of the connection for what one static
# statement cannot say (it runs inside the same transaction).
MIGRATIONS: list[list[str | Callable[[sqlite3.Connection], None]]] = [
    # version 1: the seed's five tables, their keyword indexes and the embedding outbox
    [
        """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            external_id TEXT NOT NULL UNIQUE,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL)""",
        """CREATE TABLE episodes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            user_message TEXT NOT NULL,
            ai_response TEXT NOT NULL,
            token_count INTEGER,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL)""",
        "CREATE INDEX idx_episodes_session_created ON episodes(session_id, created_at, id)",
        """CREATE TABLE entities (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            type TEXT NOT NULL,
            notes TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE(name, type))""",
        "CREATE INDEX idx_entities_type ON entities(type, name)",
        """CREATE TABLE relationships (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            from_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            to_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            label TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            UNIQUE(from_id, to_id, label))""",
        "CREATE INDEX idx_relationships_to ON relationships(to_id)",
        """CREATE TABLE summaries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            content TEXT NOT NULL,
            first_episode_id INTEGER,
            last_episode_id INTEGER,
            episode_count INTEGER NOT NULL DEFAULT 0,
            token_count INTEGER,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL)""",
        "CREATE INDEX idx_summaries_session ON summaries(session_id, created_at, id)",
        *_fts("episodes_fts", "episodes", ["user_message", "ai_response"]),
        *_fts("summaries_fts", "summaries", ["content"]),
        *_fts("entities_fts", "entities", ["name", "type", "notes"]),
        """CREATE TABLE embedding_outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            collection TEXT NOT NULL,
            op TEXT NOT NULL,
            ref_id INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TEXT NOT NULL,
            last_error TEXT,
            created_at TEXT NOT NULL)""",
        "CREATE INDEX idx_outbox_due ON embedding_outbox(next_attempt_at, id)",
    ],
    # version 2 (hardening): dead-lettered outbox jobs and a scratch row the health check rewrites
    [
        "ALTER TABLE embedding_outbox ADD COLUMN dead_at TEXT",
        "CREATE INDEX idx_outbox_dead ON embedding_outbox(dead_at) WHERE dead_at IS NOT NULL",
        "CREATE TABLE health_probe (id INTEGER PRIMARY KEY CHECK (id = 1), checked_at TEXT NOT NULL)",
    ],
    # version 3: the index manifest and each record's stored embedding: the vector
    # collections become a cache that can be rebuilt from this file alone
    [
        """CREATE TABLE index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
        "INSERT INTO index_meta(key, value) VALUES ('store_id', lower(hex(randomblob(4))))",
        """CREATE TABLE index_models (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            embedder TEXT NOT NULL,
            model TEXT NOT NULL,
            dimension INTEGER NOT NULL,
            distance TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE(embedder, model, dimension, distance))""",
        """CREATE TABLE index_generations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            collection TEXT NOT NULL,
            physical TEXT NOT NULL UNIQUE,
            model_id INTEGER NOT NULL REFERENCES index_models(id),
            state TEXT NOT NULL CHECK (state IN ('building', 'active', 'retired')),
            reason TEXT,
            created_at TEXT NOT NULL,
            activated_at TEXT)""",
        "CREATE UNIQUE INDEX idx_generations_active ON index_generations(collection) WHERE state = 'active'",
        # A rowid table on purpose: WITHOUT ROWID keeps rows this size only partly in the b-tree
        # and spills the rest to overflow pages (measured: 4.7 KB per 384-d float32 row, not 1.6).
        """CREATE TABLE embeddings (
            collection TEXT NOT NULL,
            ref_id INTEGER NOT NULL,
            model_id INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (collection, ref_id))""",
        *_forget_embedding("episodes", ["user_message", "ai_response"]),
        *_forget_embedding("entities", ["name", "type", "notes"]),
        *_forget_embedding("summaries", ["content"]),
    ],
    # "owners+expiry": sessions take an optional userId/agentId, copied
    # onto their episodes and summaries (a session's owner never changes, so the copy cannot go
    # stale, and search/forgetting filter one table); entities and relationships take an optional
    # userId, and an entity is unique by (userId, name, type), NULL being "global" (the seed's
    # rule); episodes, entities and summaries take an optional expiresAt.
    # SQLite cannot drop the table constraint UNIQUE(name, type), so entities is rebuilt with the
    # same ids; the foreign keys are on, so dropping the old table cascades into relationships,
    # which are kept aside first and put back (same ids) after the rename.
    [
        "ALTER TABLE sessions ADD COLUMN user_id TEXT",
        "ALTER TABLE sessions ADD COLUMN agent_id TEXT",
        "CREATE INDEX idx_sessions_user ON sessions(user_id, id) WHERE user_id IS NOT NULL",
        "CREATE INDEX idx_sessions_agent ON sessions(agent_id, id) WHERE agent_id IS NOT NULL",
        "ALTER TABLE episodes ADD COLUMN user_id TEXT",
        "ALTER TABLE episodes ADD COLUMN agent_id TEXT",
        "ALTER TABLE episodes ADD COLUMN expires_at TEXT",
        "CREATE INDEX idx_episodes_user ON episodes(user_id) WHERE user_id IS NOT NULL",
        "CREATE INDEX idx_episodes_expiry ON episodes(expires_at) WHERE expires_at IS NOT NULL",
        "ALTER TABLE summaries ADD COLUMN user_id TEXT",
        "ALTER TABLE summaries ADD COLUMN agent_id TEXT",
        "ALTER TABLE summaries ADD COLUMN expires_at TEXT",
        "CREATE INDEX idx_summaries_user ON summaries(user_id) WHERE user_id IS NOT NULL",
        "CREATE INDEX idx_summaries_expiry ON summaries(expires_at) WHERE expires_at IS NOT NULL",
        "UPDATE episodes SET (user_id, agent_id) = (SELECT user_id, agent_id FROM sessions s WHERE s.id = episodes.session_id)",
        "UPDATE summaries SET (user_id, agent_id) = (SELECT user_id, agent_id FROM sessions s WHERE s.id = summaries.session_id)",
        "CREATE TABLE migration_kept_relationships AS SELECT * FROM relationships",
        """CREATE TABLE entities_owned (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            type TEXT NOT NULL,
            notes TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            user_id TEXT,
            expires_at TEXT)""",
        "INSERT INTO entities_owned(id, name, type, notes, metadata, created_at, updated_at)"
        " SELECT id, name, type, notes, metadata, created_at, updated_at FROM entities",
        "DELETE FROM sqlite_sequence WHERE name = 'entities_owned'",
        "INSERT INTO sqlite_sequence(name, seq) SELECT 'entities_owned', seq FROM sqlite_sequence WHERE name = 'entities'",
        "DELETE FROM relationships",  # what dropping entities would cascade to, explicitly
        "DROP TABLE entities",
        "ALTER TABLE entities_owned RENAME TO entities",
        # '' is never a user id (ids are non-empty), so it stands for "global" in the key.
        "CREATE UNIQUE INDEX idx_entities_owner_name_type ON entities(ifnull(user_id, ''), name, type)",
        "CREATE INDEX idx_entities_type ON entities(type, name)",
        "CREATE INDEX idx_entities_user ON entities(user_id) WHERE user_id IS NOT NULL",
        "CREATE INDEX idx_entities_expiry ON entities(expires_at) WHERE expires_at IS NOT NULL",
        *_fts("entities_fts", "entities", ["name", "type", "notes"])[1:],  # the FTS table itself stays
        *_forget_embedding("entities", ["name", "type", "notes"]),
        "ALTER TABLE relationships ADD COLUMN user_id TEXT",
        "INSERT INTO relationships(id, from_id, to_id, label, metadata, created_at)"
        " SELECT id, from_id, to_id, label, metadata, created_at FROM migration_kept_relationships",
        "DROP TABLE migration_kept_relationships",
        "CREATE INDEX idx_relationships_user ON relationships(user_id) WHERE user_id IS NOT NULL",
        # Points made before this version carry no owner and no metadata in their payload: the
        # index manager rebuilds each collection from the stored embeddings (no re-embedding).
        "INSERT OR REPLACE INTO index_meta(key, value) SELECT 'reindex', 'entities,episodes,summaries'"
        " WHERE EXISTS (SELECT 1 FROM embeddings)",
    ],
    # record history, the change feed, and relationships valid in time. A triple
    # (from_id, to_id, label) has at most one OPEN edge (valid_to NULL); closed ones are kept beside
    # it, so the table-level UNIQUE becomes a partial unique index (a table rebuild: SQLite cannot
    # drop a constraint; see _rebuild_relationships_for_validity).
    [
        """CREATE TABLE record_history (
            version INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            record_id INTEGER NOT NULL,
            op TEXT NOT NULL,
            at TEXT NOT NULL,
            actor TEXT,
            before TEXT,
            after TEXT,
            changed TEXT NOT NULL DEFAULT '[]',
            session_id INTEGER,
            user_id TEXT)""",
        "CREATE INDEX idx_history_record ON record_history(kind, record_id, version)",
        "CREATE INDEX idx_history_session ON record_history(session_id) WHERE session_id IS NOT NULL",
        "CREATE INDEX idx_history_user ON record_history(user_id) WHERE user_id IS NOT NULL",
        """CREATE TABLE change_events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            record_id INTEGER NOT NULL,
            op TEXT NOT NULL,
            at TEXT NOT NULL,
            session_id INTEGER,
            user_id TEXT)""",
        _rebuild_relationships_for_validity,
        "CREATE UNIQUE INDEX idx_relationships_open ON relationships(from_id, to_id, label) WHERE valid_to IS NULL",
        "CREATE INDEX idx_relationships_from ON relationships(from_id, label)",
    ],
    # "listing": the keyset lists read each kind in (created_at, id) order,
    # across sessions too; these indexes make a page a range scan, not a sort of the whole table
    [
        "CREATE INDEX idx_sessions_created ON sessions(created_at, id)",
        "CREATE INDEX idx_episodes_created ON episodes(created_at, id)",
        "CREATE INDEX idx_entities_created ON entities(created_at, id)",
        "CREATE INDEX idx_relationships_created ON relationships(created_at, id)",
        "CREATE INDEX idx_summaries_created ON summaries(created_at, id)",
    ],
    # "session page": a session's page counts its live episodes; with ``expires_at`` in
    # the session index that count reads the index alone instead of every row of the session
    # (measured: 112 -> 33 us for a session of 200 episodes). Same name, same leading columns: every
    # query that used the index still does.
    [
        "DROP INDEX idx_episodes_session_created",
        "CREATE INDEX idx_episodes_session_created ON episodes(session_id, created_at, id, expires_at)",
    ],
    # Idempotency keys: a keyed write's answer, stored in the write's own transaction,
    # so a retry after a lost answer is answered from here instead of writing again. Keyed by the
    # caller too: one caller's key never answers another's request.
    [
        """CREATE TABLE idempotency_keys (
            caller TEXT NOT NULL,
            key TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL,
            body BLOB NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            PRIMARY KEY (caller, key))""",
        "CREATE INDEX idx_idempotency_expiry ON idempotency_keys(expires_at)",
    ],
    # API keys as records, stored by the sha256 hash of the secret only
    # (``domain.access``); ``scopes`` is a comma-separated list; a revoked key stays listed.
    [
        """CREATE TABLE api_keys (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            key_hash TEXT NOT NULL UNIQUE,
            scopes TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            expires_at TEXT,
            rate_limit REAL,
            global_read INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            last_used_at TEXT,
            revoked_at TEXT)""",
    ],
    # A claim looks up the other jobs of each record it takes (one record in flight once).
    ["CREATE INDEX idx_outbox_record ON embedding_outbox(collection, ref_id) WHERE dead_at IS NULL"],
    # A relationship's owner is part of what it is, as an entity's is: each owner ('' for none) has
    # at most one open edge of a triple, so one user's fact between shared entities neither blocks
    # nor is replaced by another user's.
    [
        "DROP INDEX idx_relationships_open",
        "CREATE UNIQUE INDEX idx_relationships_open ON relationships(from_id, to_id, label, ifnull(user_id, ''))"
        " WHERE valid_to IS NULL",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database up to ``SCHEMA_VERSION`` inside the caller's transaction.

    Returns the version found. A database newer than this code is refused rather than guessed at.
    """
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"the database schema is version {found}, newer than this service's {SCHEMA_VERSION}"
        )
    for version in range(found, SCHEMA_VERSION):
        for statement in MIGRATIONS[version]:
            statement(conn) if callable(statement) else conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version + 1}")
    return found
