"""Versioned schema migrations of the SQLite store.

Each migration is a named function ``mNNN_<what>(conn)`` registered with `@migration`;
`nixx.migrations` runs them (each in its own ``BEGIN IMMEDIATE`` transaction together
with the row that records it in ``nixx_migrations``, so a crash leaves the database at a
whole version and two processes migrating at once apply each step exactly once).

To change the schema, append a new function; never edit one that has shipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nixx.migrations import Migrations, apply_sqlite, sqlite_version

if TYPE_CHECKING:
    import apsw

MIGRATIONS = Migrations("the memory store")
migration = MIGRATIONS.register


def head_version() -> int:
    return MIGRATIONS.head


def current_version(conn: apsw.Connection) -> int:
    return sqlite_version(conn)


def apply_pending(
    conn: apsw.Connection, *, target: int | None = None, where: str = ""
) -> list[int]:
    """Apply migrations above the database's version (up to `target`, default head).
    Returns the versions applied by this call."""
    return apply_sqlite(conn, MIGRATIONS, where or conn.filename, target=target)


# ---- the migrations ---------------------------------------------------------------


@migration
def m001_initial(conn: apsw.Connection) -> None:
    """The four tables of the seed, full-text search on the buffer, state, embedder."""
    conn.execute(
        """
        CREATE TABLE buffer (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'marker')),
            content    TEXT NOT NULL,
            origin     TEXT NOT NULL CHECK (origin IN ('tui', 'vscode', 'api')),
            meta       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta)),
            created_at TEXT NOT NULL
        );
        CREATE INDEX buffer_role_id ON buffer (role, id);

        -- External-content FTS5 index over non-marker rows, kept in step by triggers
        -- in the writing transaction. Porter stemming on unicode61 (diacritics folded):
        -- see docs/performance.md "Search quality" for the measurement.
        CREATE VIRTUAL TABLE buffer_fts USING fts5 (
            content,
            content = 'buffer',
            content_rowid = 'id',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER buffer_fts_insert AFTER INSERT ON buffer WHEN new.role != 'marker'
        BEGIN
            INSERT INTO buffer_fts (rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER buffer_fts_delete AFTER DELETE ON buffer WHEN old.role != 'marker'
        BEGIN
            INSERT INTO buffer_fts (buffer_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER buffer_fts_update AFTER UPDATE OF content, role ON buffer
        BEGIN
            INSERT INTO buffer_fts (buffer_fts, rowid, content)
            SELECT 'delete', old.id, old.content WHERE old.role != 'marker';
            INSERT INTO buffer_fts (rowid, content)
            SELECT new.id, new.content WHERE new.role != 'marker';
        END;

        CREATE TABLE summaries (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            content         TEXT NOT NULL,
            embedding       BLOB NOT NULL,              -- float32 little-endian
            tags            TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),
            entities        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(entities)),
            start_buffer_id INTEGER NOT NULL REFERENCES buffer (id),
            end_buffer_id   INTEGER NOT NULL REFERENCES buffer (id),
            created_at      TEXT NOT NULL,
            CHECK (start_buffer_id <= end_buffer_id)
        );
        CREATE INDEX summaries_end_buffer_id ON summaries (end_buffer_id);

        CREATE TABLE sources (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            name       TEXT NOT NULL,
            type       TEXT NOT NULL CHECK (type IN ('buffer', 'document', 'repo', 'web')),
            summary    TEXT,
            start_id   INTEGER REFERENCES buffer (id),
            end_id     INTEGER REFERENCES buffer (id),
            meta       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta)),
            created_at TEXT NOT NULL
        );

        CREATE TABLE memories (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            source_id  INTEGER NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
            content    TEXT NOT NULL,
            embedding  BLOB NOT NULL,                   -- float32 little-endian
            metadata   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
            created_at TEXT NOT NULL
        );
        CREATE INDEX memories_source_id ON memories (source_id, id);

        CREATE TABLE state (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL CHECK (json_valid(value))
        );

        -- The embedder the stored vectors were made with (one row once bound).
        CREATE TABLE embedder (
            id       INTEGER PRIMARY KEY CHECK (id = 1),
            model    TEXT NOT NULL,
            dim      INTEGER NOT NULL CHECK (dim > 0),
            bound_at TEXT NOT NULL
        );

        -- Change counters read by the in-memory vector indexes of every process:
        -- `epoch` moves when all vectors change (reindex, import), `deletions` when a
        -- row is deleted. New rows need no counter: ids only grow (AUTOINCREMENT).
        CREATE TABLE vector_state (
            name      TEXT PRIMARY KEY CHECK (name IN ('summaries', 'memories')),
            epoch     INTEGER NOT NULL DEFAULT 0,
            deletions INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO vector_state (name, epoch) VALUES ('summaries', abs(random())), ('memories', abs(random()));
        CREATE TRIGGER summaries_deleted AFTER DELETE ON summaries
        BEGIN
            UPDATE vector_state SET deletions = deletions + 1 WHERE name = 'summaries';
        END;
        CREATE TRIGGER memories_deleted AFTER DELETE ON memories
        BEGIN
            UPDATE vector_state SET deletions = deletions + 1 WHERE name = 'memories';
        END;
        """
    )


@migration
def m002_buffer_vectors(conn: apsw.Connection) -> None:
    """A vector for every buffer row (embedded in the background after the row is
    written; see nixx.memory.row_vectors). `seq` orders the vectors as they arrive
    (rows are embedded out of id order: new rows first, old ones as the backfill
    reaches them), so the in-memory index can follow them with one watermark."""
    conn.execute(
        """
        CREATE TABLE buffer_vectors (
            seq       INTEGER PRIMARY KEY AUTOINCREMENT,
            buffer_id INTEGER NOT NULL UNIQUE REFERENCES buffer (id) ON DELETE CASCADE,
            embedding BLOB NOT NULL                    -- float32 little-endian
        );

        -- vector_state's CHECK names its tables: rebuild it to admit buffer_vectors.
        DROP TRIGGER summaries_deleted;
        DROP TRIGGER memories_deleted;
        CREATE TABLE vector_state_v2 (
            name      TEXT PRIMARY KEY
                      CHECK (name IN ('summaries', 'memories', 'buffer_vectors')),
            epoch     INTEGER NOT NULL DEFAULT 0,
            deletions INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO vector_state_v2 (name, epoch, deletions)
            SELECT name, epoch, deletions FROM vector_state;
        INSERT INTO vector_state_v2 (name, epoch) VALUES ('buffer_vectors', abs(random()));
        DROP TABLE vector_state;
        ALTER TABLE vector_state_v2 RENAME TO vector_state;
        CREATE TRIGGER summaries_deleted AFTER DELETE ON summaries
        BEGIN
            UPDATE vector_state SET deletions = deletions + 1 WHERE name = 'summaries';
        END;
        CREATE TRIGGER memories_deleted AFTER DELETE ON memories
        BEGIN
            UPDATE vector_state SET deletions = deletions + 1 WHERE name = 'memories';
        END;
        CREATE TRIGGER buffer_vectors_deleted AFTER DELETE ON buffer_vectors
        BEGIN
            UPDATE vector_state SET deletions = deletions + 1 WHERE name = 'buffer_vectors';
        END;
        """
    )


@migration
def m003_forgetting(conn: apsw.Connection) -> None:
    """The forget log (what was deleted: when, what kind, which ids, how many — never the
    text), and FTS5's secure-delete, so a deleted row's terms leave the full-text index
    itself instead of staying behind under a delete marker (docs/storage.md)."""
    conn.execute(
        """
        CREATE TABLE forget_log (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            forgotten_at TEXT NOT NULL,
            kind         TEXT NOT NULL,
            ids          TEXT NOT NULL CHECK (json_valid(ids)),
            counts       TEXT NOT NULL CHECK (json_valid(counts))
        );
        INSERT INTO buffer_fts (buffer_fts, rank) VALUES ('secure-delete', 1);
        """
    )


@migration
def m004_dialect_origins(conn: apsw.Connection) -> None:
    """Two more origins for buffer rows: ``responses`` (`POST /v1/responses`) and
    ``anthropic`` (`POST /v1/messages`). SQLite cannot alter a CHECK constraint; since
    this one only widens (every stored row stays valid), the table's recorded SQL is
    edited in place — SQLite's documented way to change a constraint without rebuilding
    the table (https://sqlite.org/lang_altertable.html#otheralter) — and the schema
    version is bumped, so every open connection re-reads the schema."""
    old = "CHECK (origin IN ('tui', 'vscode', 'api'))"
    new = "CHECK (origin IN ('tui', 'vscode', 'api', 'responses', 'anthropic'))"
    version = conn.execute("PRAGMA schema_version").fetchall()[0][0]
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute(
            "UPDATE sqlite_schema SET sql = replace(sql, ?, ?) "
            "WHERE type = 'table' AND name = 'buffer'",
            (old, new),
        )
        conn.execute(f"PRAGMA schema_version = {int(str(version)) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")
    sql = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'buffer'"
    ).fetchall()[0][0]
    if new not in str(sql):
        from nixx.errors import SchemaError

        raise SchemaError("the buffer table's origin constraint is not the one nixx created; "
                          "it was left as it is")


@migration
def m005_row_pieces(conn: apsw.Connection) -> None:
    """A buffer row's sentence pieces beside its vector (`nixx.memory.pieces`): the
    vectors of a row of two or more sentences, one per sentence, float16, stacked; NULL
    for a row of one sentence (and for vectors written before: `nixx reindex` adds them)."""
    conn.execute("ALTER TABLE buffer_vectors ADD COLUMN pieces BLOB")


@migration
def m006_vectors_next(conn: apsw.Connection) -> None:
    """The vectors of the embedder a store is moving to (`MemoryStore.begin_switch`),
    kept apart from the live ones until every row has one and they replace them in one
    transaction (`finish_switch`): a kind ('buffer', 'summaries', 'memories'), the id,
    the float32 vector, a buffer row's pieces, and a digest of the text embedded (a
    summary edited meanwhile is embedded again). A deleted row's staged vector goes with
    it (triggers), as its live one does."""
    conn.execute(
        """
        CREATE TABLE vectors_next (
            kind      TEXT NOT NULL CHECK (kind IN ('buffer', 'summaries', 'memories')),
            id        INTEGER NOT NULL,
            embedding BLOB NOT NULL,                   -- float32 little-endian
            pieces    BLOB,
            digest    TEXT NOT NULL,
            PRIMARY KEY (kind, id)
        ) WITHOUT ROWID;
        CREATE TRIGGER buffer_next_deleted AFTER DELETE ON buffer
        BEGIN
            DELETE FROM vectors_next WHERE kind = 'buffer' AND id = old.id;
        END;
        CREATE TRIGGER summaries_next_deleted AFTER DELETE ON summaries
        BEGIN
            DELETE FROM vectors_next WHERE kind = 'summaries' AND id = old.id;
        END;
        CREATE TRIGGER memories_next_deleted AFTER DELETE ON memories
        BEGIN
            DELETE FROM vectors_next WHERE kind = 'memories' AND id = old.id;
        END;
        """
    )
