"""Memory store: `open_store(url)` picks the backend from the URL scheme.

sqlite:///path/to/nixx.db      the embedded default (one file)
postgresql://user@host/db      PostgreSQL + pgvector
"""

from __future__ import annotations

from nixx.errors import ConfigError
from nixx.store.base import MemoryStore


def open_store(url: str, *, migrate: bool = True) -> MemoryStore:
    """Open (and by default migrate) the store at `url`."""
    if url.startswith("sqlite://"):
        from nixx.store.sqlite import SQLiteStore

        store: MemoryStore = SQLiteStore(url.removeprefix("sqlite://"))
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
