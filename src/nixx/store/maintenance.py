"""Store maintenance behind `nixx db init|migrate|status|vacuum` and `nixx reindex`.

The CLI only parses and renders; everything here works on any backend.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from nixx.errors import NotFound
from nixx.store import open_store
from nixx.store.base import MemoryStore
from nixx.store.reports import DbInit, DbMigrate, DbStatus, DbVacuum, ReindexReport

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.embed.base import Embedder


def display_url(url: str) -> str:
    """`url` with any password removed, for messages and status output."""
    if url.startswith(("postgresql://", "postgres://")):
        from nixx.store.postgres import redact_url

        return redact_url(url)
    return url


def head_version(store: MemoryStore) -> int:
    """The newest schema version this nixx knows for the store's backend."""
    if store.backend == "sqlite":
        from nixx.store import sqlite_migrations

        return sqlite_migrations.head_version()
    from nixx.store import postgres_schema

    return postgres_schema.LATEST


def _sqlite_path(url: str) -> Path | None:
    if not url.startswith("sqlite://"):
        return None
    from nixx.store.sqlite import sqlite_path

    return sqlite_path(url)


def _require_existing(url: str) -> None:
    path = _sqlite_path(url)
    if path is not None and not path.exists():
        raise NotFound(f"there is no memory store at {path}; create it with `nixx db init`")


def db_init(url: str) -> DbInit:
    """Create the store if needed and bring its schema to the newest version."""
    path = _sqlite_path(url)
    created = path is not None and not path.exists()
    store = open_store(url, migrate=False)
    try:
        applied = store.migrate()
        return {
            "db_url": display_url(url),
            "created": created,
            "applied": applied,
            "schema_version": store.schema_version(),
        }
    finally:
        store.close()


def db_vacuum(url: str) -> DbVacuum:
    """Rewrite the store so the space of deleted rows holds none of their bytes
    (SQLite: VACUUM + WAL truncated; PostgreSQL: VACUUM FULL; see docs/storage.md)."""
    _require_existing(url)
    store = open_store(url)
    try:
        return {"db_url": display_url(url), **store.vacuum()}
    finally:
        store.close()


def db_migrate(url: str) -> DbMigrate:
    """Apply pending migrations to an existing store."""
    _require_existing(url)
    store = open_store(url, migrate=False)
    try:
        before = store.schema_version()
        applied = store.migrate()
        return {
            "db_url": display_url(url),
            "from_version": before,
            "applied": applied,
            "schema_version": store.schema_version(),
        }
    finally:
        store.close()


def db_status(url: str) -> DbStatus:
    """Where the store is, its schema version against this nixx's, its embedder and
    how much it holds. Changes nothing."""
    _require_existing(url)
    store = open_store(url, migrate=False)
    try:
        version = store.schema_version()
        head = head_version(store)
        status: DbStatus = {
            "db_url": display_url(url),
            "backend": store.backend,
            "schema_version": version,
            "latest_version": head,
            "pending": list(range(version + 1, head + 1)),
            "embedder": None,
            "counts": None,
        }
        if version == 0:
            return status
        info = store.embedding_info()
        status["embedder"] = None if info is None else {"model": info.model, "dim": info.dim}
        stats = store.buffer_stats()
        status["counts"] = {
            "buffer": stats["rows"],
            "summaries": store.count_summaries(),
            "sources": len(store.list_sources()),
            "memories": store.count_memories(),
        }
        path = _sqlite_path(url)
        if path is not None:
            status["size_bytes"] = sum(
                p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()
            )
        return status
    finally:
        store.close()


def reindex_store(
    url: str,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> ReindexReport:
    """Re-embed every summary, memory and buffer row of the store at `url` with `embedder`."""
    from nixx.memory.row_vectors import row_texts_for

    store = open_store(url)
    try:
        before = store.embedding_info()
        written = store.reindex(
            embedder.embed,
            embedder.model,
            embedder.dim,
            batch_size=batch_size,
            progress=progress,
            buffer_text=lambda rows: row_texts_for(store, rows),
        )
        from nixx.store.sqlite import SQLiteStore

        if isinstance(store, SQLiteStore):  # build the search index now, not on first search
            store.build_vector_indexes()
        return {
            "db_url": display_url(url),
            "vectors": written,
            "from": None if before is None else {"model": before.model, "dim": before.dim},
            "to": {"model": embedder.model, "dim": embedder.dim},
        }
    finally:
        store.close()


def reindex_with_settings(
    settings: Settings,
    *,
    url: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReindexReport:
    """`nixx reindex`: the embedder the settings configure, the store they name."""
    from nixx.embed import make_embedder

    embedder = make_embedder(settings)
    try:
        return reindex_store(
            url or settings.database_url,
            embedder,
            batch_size=settings.embed_batch_size,
            progress=progress,
        )
    finally:
        embedder.close()
