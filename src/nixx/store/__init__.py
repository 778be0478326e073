"""Memory store: `open_store(url)` picks the backend from the URL scheme.

sqlite:///path/to/nixx.db      the embedded default (one file)
postgresql://user@host/db      PostgreSQL + pgvector

One `MemoryStore` holds the rules over an engine that holds the SQL (docs/storage.md):

base.py               MemoryStore: validation, errors, forget, reindex, export/import
database.py           the protocol a database engine gives: Database, Tx, NewSummary, VectorQuery
sql_queries.py        the statements both engines run alike (Dialect, Rows, SqlTx)
sqlite.py             SQLiteStore / SQLiteDatabase: connections, FTS5 search, scrub, vacuum
sqlite_queries.py     SQLite's own queries; sqlite_vectors.py its in-memory vector indexes
postgres.py           PostgresStore / PostgresDatabase: pool, errors, full-text and HNSW SQL
postgres_queries.py   PostgreSQL's own queries; postgres_load.py the COPY import
forgetting.py         what a forget takes with it; records.py, reports.py, portable.py
                      the records, the named answers and the export records
export_file.py        export files written and read (handed a store, never importing it);
                      export_check.py the import's record checks (RecordReader)
"""

from __future__ import annotations

from typing import Any

from nixx.errors import ConfigError
from nixx.store.base import MemoryStore


def open_store(url: str, *, migrate: bool = True) -> MemoryStore:
    """Open (and by default migrate) the store at `url`."""
    if url.startswith("sqlite://"):
        from nixx.store.sqlite import SQLITE_OPTIONS, SQLiteStore

        path, _, query = url.removeprefix("sqlite://").partition("?")
        options: dict[str, Any] = dict(
            part.partition("=")[::2] for part in query.split("&") if part
        )
        unknown = set(options) - set(SQLITE_OPTIONS)
        if unknown:
            raise ConfigError(
                f"NIXX_DB_URL {url!r}: unknown option {sorted(unknown)[0]!r} "
                f"(SQLite URLs take {', '.join(SQLITE_OPTIONS)})"
            )
        store: MemoryStore = SQLiteStore(path, **options)
    elif url.startswith(("postgresql://", "postgres://")):
        from nixx.store.postgres import PostgresStore

        store = PostgresStore(url)
    else:
        raise ConfigError(
            f"the store URL {url!r} (NIXX_DB_URL or --db-url) is not understood: use "
            "sqlite:///PATH or postgresql://USER@HOST/DB"
        )
    if migrate:
        store.migrate()
    return store


__all__ = ["MemoryStore", "open_store"]
