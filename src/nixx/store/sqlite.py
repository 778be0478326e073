"""The SQLite memory store: one file, WAL mode, FTS5 on the buffer, vectors as BLOBs.

Concurrency: every thread gets its own connection (WAL lets readers run beside the
one writer); every write is one ``BEGIN IMMEDIATE`` transaction, so a writer takes the
write lock up front and waits (busy timeout) instead of failing half-way; the server's
worker threads and any number of CLI processes can write at once without losing a
row or surfacing "database is locked".

Vector search runs on an in-memory index per table (`nixx.store.vector_index`) built
lazily from the stored BLOBs and kept current before each search by a cheap query
(new ids above the watermark; change counters for deletions and re-embedding).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from nixx.errors import (
    ConfigError,
    Conflict,
    EmbedderMismatch,
    NotFound,
    StoreError,
    ValidationError,
)
from nixx.sqlite_tx import Immediate, immediate
from nixx.store import forgetting, sqlite_migrations, validation
from nixx.store.base import RETRY_TAIL, EmbedFn, MemoryStore, retried_user_row
from nixx.store.forgetting import ForgetLogEntry, ForgetResult
from nixx.store.fts_query import fts5_match_terms
from nixx.store.portable import (
    as_vector,
    buffer_record,
    forget_record,
    header_record,
    memory_record,
    source_record,
    summary_record,
    utc_now,
)
from nixx.store.records import (
    BufferHit,
    BufferRow,
    EmbeddingInfo,
    Memory,
    MemoryHit,
    NewChunk,
    Source,
    Summary,
    SummaryHit,
)
from nixx.store.term_stats import TermStats
from nixx.store.vector_index import (
    DEFAULT_ANN_THRESHOLD,
    SyncPoint,
    VectorIndex,
    decode_vectors,
    dot_rows,
    normalise_rows,
)

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 60_000
CHECKPOINT_WAIT_MS = 5_000  # how long a forget's checkpoint waits for old readers
# The first GiB of the file is read through a memory map (beyond it, read() as before);
# mapped pages are the OS page cache's, shared, not the process's own memory.
MMAP_BYTES = 1 << 30
#: fsync on every commit (FULL) or only at WAL checkpoints (NORMAL, the default: a
#: commit survives a crash of the process, not of the machine): docs/storage.md.
SYNCHRONOUS = "NORMAL"
#: Options a sqlite:/// URL may carry (``sqlite:///PATH?synchronous=full``).
SQLITE_OPTIONS = ("synchronous",)
_LOAD_CHUNK = 20_000
#: Tables whose vectors are made from their own `content` (reindex re-embeds them).
_CONTENT_VECTOR_TABLES = ("summaries", "memories")
#: Tables with an in-memory vector index.
_VECTOR_TABLES = (*_CONTENT_VECTOR_TABLES, "buffer_vectors")


@dataclass(frozen=True)
class _IndexSpec:
    """How a vector table maps onto its `VectorIndex`: `seq` grows as vectors arrive
    (the watermark), `key` is the id the index returns, `extra` the filter column."""

    seq: str
    key: str
    extra: str


_INDEX_SPECS = {
    "summaries": _IndexSpec("id", "id", "end_buffer_id"),
    "memories": _IndexSpec("id", "id", "0"),
    "buffer_vectors": _IndexSpec("seq", "buffer_id", "buffer_id"),
}

_BUFFER_COLS = "id, role, content, origin, created_at, meta"
# a row's columns without its vector (what a vector search's hits read), then with it
_SUMMARY_HIT_COLS = "id, content, tags, entities, start_buffer_id, end_buffer_id, created_at"
_SUMMARY_COLS = _SUMMARY_HIT_COLS + ", embedding"
_SOURCE_COLS = (
    "s.id, s.name, s.type, s.summary, s.start_id, s.end_id, s.created_at, s.meta, "
    "(SELECT count(*) FROM memories m WHERE m.source_id = s.id)"
)
_MEMORY_HIT_COLS = "id, source_id, content, metadata, created_at"
_MEMORY_COLS = _MEMORY_HIT_COLS + ", embedding"


class SQLiteStore(MemoryStore):
    """The embedded memory store in one SQLite file (see module docstring)."""

    backend = "sqlite"
    #: Widest HNSW candidate set tried before a filtered search falls back to an exact scan.
    ann_max_candidates = 4_096
    #: HNSW candidates fetched per result wanted (re-scored exactly, best `limit` kept).
    ann_overfetch = 2.0

    def __init__(
        self,
        path: str | Path,
        *,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        synchronous: str = SYNCHRONOUS,
    ) -> None:
        if str(path) in ("", ":memory:"):
            raise ValidationError("the SQLite store needs a file path (sqlite:///PATH)")
        self.path = sqlite_path(str(path))
        self.ann_threshold = ann_threshold
        self.busy_timeout_ms = busy_timeout_ms
        self.checkpoint_wait_ms = CHECKPOINT_WAIT_MS
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise ConfigError(
                f"synchronous must be full or normal, not {synchronous!r} "
                "(NIXX_DB_URL=sqlite:///PATH?synchronous=full)"
            )
        self.synchronous = synchronous.upper()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for {self.path}: {exc}; set NIXX_HOME or NIXX_DB_URL "
                "to a writable place"
            ) from None
        self._local = threading.local()
        self._conns: list[apsw.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self._indexes: dict[str, VectorIndex] = {}
        self._index_locks = {name: threading.Lock() for name in _VECTOR_TABLES}
        self._building: set[str] = set()  # tables whose index a background thread prepares
        self._warming: threading.Thread | None = None
        self._term_stats = TermStats()

    # ---- connections & transactions ------------------------------------------------
    def _connect(self) -> apsw.Connection:
        try:
            conn = apsw.Connection(str(self.path))
        except apsw.Error as exc:
            raise self._open_error(exc) from None
        try:
            conn.setbusytimeout(self.busy_timeout_ms)
            deadline = time.monotonic() + self.busy_timeout_ms / 1000
            while True:  # switching to WAL needs a moment of exclusive access on a new file
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    break
                except apsw.BusyError:
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"the SQLite store {self.path} stayed busy; is another program "
                            "holding it open in exclusive mode?"
                        ) from None
                    time.sleep(0.01)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            # Deleted rows are overwritten with zeros, not just unlinked: on every
            # connection from the start, or b-tree pages keep stale copies of moved cells
            # (docs/storage.md "What a deletion leaves on disk").
            conn.execute("PRAGMA secure_delete = ON")
            # Reads map the file instead of copying pages in with a read() each: a search
            # touches hundreds of pages (full text, the candidates' vectors), and every
            # connection (one per thread) shares the one mapping, where each would fill a
            # page cache of its own (docs/storage.md, "Binding, file, concurrency").
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        except apsw.Error as exc:
            conn.close()
            raise self._open_error(exc) from None
        return conn

    def _open_error(self, exc: apsw.Error) -> StoreError:
        """A one-line error naming the file and what to do, for a store that cannot be
        opened: not a database, or not writable."""
        if isinstance(exc, (apsw.NotADBError, apsw.CorruptError)):
            return StoreError(
                f"{self.path} is not a usable SQLite database ({exc}): move it aside and run "
                "`nixx db init` (or `nixx import` an export), or point NIXX_DB_URL elsewhere"
            )
        if isinstance(exc, (apsw.CantOpenError, apsw.ReadOnlyError, apsw.PermissionsError)):
            return StoreError(
                f"cannot open the SQLite store {self.path} for writing ({exc}): make "
                f"{self.path.parent} and the file writable, or set NIXX_HOME or NIXX_DB_URL "
                "to a writable place"
            )
        return StoreError(f"cannot open the SQLite store {self.path}: {exc}")

    def _conn(self) -> apsw.Connection:
        if self._closed:
            raise StoreError("the memory store is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def _write(self) -> Immediate:
        """One write transaction (``BEGIN IMMEDIATE``, `nixx.sqlite_tx`); nested uses
        become savepoints."""
        return immediate(self._conn(), error=self._write_error)

    def _write_error(self, exc: apsw.Error, phase: str) -> BaseException | None:
        if isinstance(exc, apsw.BusyError) and phase == "begin":
            return StoreError(
                f"the SQLite store {self.path} was busy for {self.busy_timeout_ms / 1000:g} s; "
                "another process holds a long write; try again"
            )
        if isinstance(exc, apsw.ConstraintError):
            return ValidationError(f"rejected by the store: {exc}")
        return None

    @contextmanager
    def _read(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot for several statements (a deferred transaction)."""
        conn = self._conn()
        if not conn.getautocommit():
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            if not conn.getautocommit():
                conn.execute("COMMIT")

    def close(self) -> None:
        if self._closed:
            return
        for name, index in self._indexes.items():
            # a cache: rebuilt next time if it cannot be written
            with self._index_locks[name], contextlib.suppress(OSError):
                index.save_sidecar(min_unsaved=1_000)
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()

    # ---- schema ----------------------------------------------------------------------
    def schema_version(self) -> int:
        return sqlite_migrations.current_version(self._conn())

    def migrate(self) -> list[int]:
        try:
            return sqlite_migrations.apply_pending(self._conn(), where=str(self.path))
        except apsw.BusyError:
            raise StoreError(f"the SQLite store {self.path} stayed busy while migrating") from None
        except (apsw.NotADBError, apsw.CorruptError, apsw.ReadOnlyError, apsw.CantOpenError) as exc:
            raise self._open_error(exc) from None

    # ---- embedder identity ---------------------------------------------------------
    def embedding_info(self) -> EmbeddingInfo | None:
        row = self._conn().execute("SELECT model, dim FROM embedder WHERE id = 1").fetchone()
        return EmbeddingInfo(model=row[0], dim=int(row[1])) if row else None

    def _bound_dim(self, conn: apsw.Connection) -> int | None:
        row = conn.execute("SELECT dim FROM embedder WHERE id = 1").fetchone()
        return int(row[0]) if row else None

    def _ensure_dim(self, conn: apsw.Connection, dim: int) -> None:
        """Record an unnamed embedder of `dim` when vectors arrive before any binding."""
        conn.execute(
            "INSERT OR IGNORE INTO embedder (id, model, dim, bound_at) VALUES (1, '', ?, ?)",
            (dim, utc_now()),
        )

    def _has_vectors(self, conn: apsw.Connection) -> bool:
        return bool(
            _one(
                conn, "SELECT EXISTS (SELECT 1 FROM summaries) OR EXISTS (SELECT 1 FROM memories)"
            )[0]
        )

    def bind_embedder(self, model: str, dim: int) -> None:
        dim = validation.embedder(model, dim, "bind_embedder")
        info = self.embedding_info()
        if info is not None and (info.model, info.dim) == (model, dim):
            return  # the common case, without taking the write lock
        with self._write() as conn:
            row = conn.execute("SELECT model, dim FROM embedder WHERE id = 1").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?)",
                    (model, dim, utc_now()),
                )
                return
            stored_model, stored_dim = row[0], int(row[1])
            if (stored_model, stored_dim) == (model, dim):
                return
            if stored_dim == dim and stored_model == "":
                conn.execute("UPDATE embedder SET model = ? WHERE id = 1", (model,))
                return
            if self._has_vectors(conn):
                raise EmbedderMismatch(
                    f"this memory store's vectors were made with {stored_model or 'an unnamed model'} "
                    f"({stored_dim} dimensions) but the configured embedder is {model} "
                    f"({dim} dimensions). Run `nixx reindex` to re-embed every summary and "
                    "memory with the configured embedder, or configure the original one "
                    "(NIXX_EMBED_PROVIDER / NIXX_EMBED_MODEL).",
                    stored_model=stored_model,
                    stored_dim=stored_dim,
                    model=model,
                    dim=dim,
                )
            # Only buffer vectors (derived from the buffer) are stored, if any: drop
            # them; the background queue embeds the rows again with the new model.
            conn.execute("DELETE FROM buffer_vectors")
            conn.execute(
                "UPDATE embedder SET model = ?, dim = ?, bound_at = ? WHERE id = 1",
                (model, dim, utc_now()),
            )

    def reindex(
        self,
        embed: EmbedFn,
        model: str,
        dim: int,
        *,
        batch_size: int = 64,
        progress: Callable[[int, int], None] | None = None,
        buffer_text: Callable[[Sequence[BufferRow]], list[str]] | None = None,
    ) -> int:
        dim = validation.embedder(model, dim, "reindex")
        with self._read() as conn:
            texts = {
                table: dict(conn.execute(f"SELECT id, content FROM {table} ORDER BY id"))
                for table in _CONTENT_VECTOR_TABLES
            }
            buffer_rows = (
                [
                    _buffer_row(r)
                    for r in conn.execute(
                        f"SELECT {_BUFFER_COLS} FROM buffer WHERE role != 'marker' ORDER BY id"
                    )
                ]
                if buffer_text is not None
                else []
            )
        total = sum(len(t) for t in texts.values()) + len(buffer_rows)
        done = 0
        if progress:
            progress(0, total)
        vectors: dict[str, dict[int, bytes]] = {table: {} for table in _VECTOR_TABLES}

        def embed_into(table: str, items: list[tuple[int, str]]) -> None:
            nonlocal done
            for start in range(0, len(items), max(1, batch_size)):
                batch = items[start : start + batch_size]
                out = np.asarray(embed([text for _, text in batch]), dtype=np.float32)
                if out.shape != (len(batch), dim):
                    raise EmbedderMismatch(
                        f"the embedder returned vectors of shape {out.shape}, expected "
                        f"({len(batch)}, {dim}); check the model's dimension"
                    )
                if not np.isfinite(out).all():
                    raise ValidationError("the embedder returned NaN or infinite values")
                for (row_id, _), vec in zip(batch, out, strict=True):
                    vectors[table][row_id] = vec.astype("<f4").tobytes()
                done += len(batch)
                if progress:
                    progress(done, total)

        for table in _CONTENT_VECTOR_TABLES:
            embed_into(table, list(texts[table].items()))
        for start in range(0, len(buffer_rows), max(1, batch_size)):
            rows = buffer_rows[start : start + batch_size]
            assert buffer_text is not None
            embed_into(
                "buffer_vectors", list(zip([r.id for r in rows], buffer_text(rows), strict=True))
            )
        written = 0
        with self._write() as conn:
            # Buffer vectors are derived data: re-embedded here when `buffer_text` is
            # given, else dropped for the background queue to make again.
            conn.execute("DELETE FROM buffer_vectors")
            if buffer_text is not None:
                conn.executemany(
                    "INSERT INTO buffer_vectors (buffer_id, embedding) SELECT ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM buffer WHERE id = ?)",
                    ((i, blob, i) for i, blob in vectors["buffer_vectors"].items()),
                )
                written += len(vectors["buffer_vectors"])
            for table in _CONTENT_VECTOR_TABLES:
                current = dict(conn.execute(f"SELECT id, content FROM {table}"))
                missing = [
                    (i, text)
                    for i, text in current.items()
                    if i not in vectors[table] or texts[table].get(i) != text
                ]
                if missing:  # rows written while we embedded
                    total += len(missing)
                    embed_into(table, missing)
                conn.executemany(
                    f"UPDATE {table} SET embedding = ? WHERE id = ?",
                    ((vectors[table][i], i) for i in current),
                )
                written += len(current)
            conn.execute(
                "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET model = excluded.model, dim = excluded.dim, "
                "bound_at = excluded.bound_at",
                (model, dim, utc_now()),
            )
            conn.execute("UPDATE vector_state SET epoch = abs(random())")
        return written

    # ---- episodic: buffer ----------------------------------------------------------
    def append_buffer(
        self, role: str, content: str, origin: str = "api", meta: dict[str, Any] | None = None
    ) -> BufferRow:
        meta = validation.buffer_row(role, content, origin, meta)
        created = utc_now()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO buffer (role, content, origin, meta, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (role, content, origin, _dumps(meta), created),
            )
            row_id = conn.last_insert_rowid()
        return BufferRow(row_id, role, content, origin, created, meta)

    def append_user_once(
        self, content: str, origin: str = "api", meta: dict[str, Any] | None = None
    ) -> BufferRow:
        meta = validation.buffer_row("user", content, origin, meta)
        with self._write() as conn:  # BEGIN IMMEDIATE: the check and the insert are one
            marker = _one(conn, "SELECT coalesce(max(id), 0) FROM buffer WHERE role = 'marker'")
            tail = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id > ? AND role != 'marker' "
                "ORDER BY id DESC LIMIT ?",
                (marker[0], RETRY_TAIL),
            )
            reuse = retried_user_row([_buffer_row(r) for r in tail], content, origin)
            if reuse is not None:
                return reuse
            created = utc_now()
            conn.execute(
                "INSERT INTO buffer (role, content, origin, meta, created_at) "
                "VALUES ('user', ?, ?, ?, ?)",
                (content, origin, _dumps(meta), created),
            )
            row_id = conn.last_insert_rowid()
        return BufferRow(row_id, "user", content, origin, created, meta)

    def update_buffer_meta(self, row_id: int, meta: dict[str, Any]) -> None:
        meta = validation.json_object(meta, "meta")
        with self._write() as conn:
            row = conn.execute("SELECT meta FROM buffer WHERE id = ?", (row_id,)).fetchone()
            if row is None:
                raise NotFound(f"buffer row {row_id} does not exist")
            merged = {**json.loads(row[0]), **meta}
            conn.execute("UPDATE buffer SET meta = ? WHERE id = ?", (_dumps(merged), row_id))

    def get_buffer(self, start_id: int, end_id: int | None = None) -> list[BufferRow]:
        if end_id is None:
            cur = self._conn().execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id >= ? ORDER BY id", (start_id,)
            )
        else:
            cur = self._conn().execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id BETWEEN ? AND ? ORDER BY id",
                (start_id, end_id),
            )
        return [_buffer_row(r) for r in cur]

    def get_buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        wanted = sorted({int(i) for i in ids})
        rows: list[BufferRow] = []
        conn = self._conn()
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            cur = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id IN ({','.join('?' * len(part))}) "
                "ORDER BY id",
                part,
            )
            rows += [_buffer_row(r) for r in cur]
        return rows

    def last_buffer_rows(self, n: int, *, after_id: int = 0) -> list[BufferRow]:
        if n <= 0:
            return []
        rows = self._conn().execute(
            f"SELECT {_BUFFER_COLS} FROM buffer WHERE role != 'marker' AND id > ? "
            "ORDER BY id DESC LIMIT ?",
            (after_id, n),
        )
        return [_buffer_row(r) for r in reversed(list(rows))]

    def last_marker_id(self) -> int:
        row = _one(self._conn(), "SELECT max(id) FROM buffer WHERE role = 'marker'")
        return int(row[0] or 0)

    def search_buffer(self, query: str, limit: int = 10) -> list[BufferHit]:
        if limit <= 0:
            return []
        conn = self._conn()
        # words in half the rows or more cannot change bm25's order, only its cost; the
        # question's whole term weight makes a score the share of it a row carries
        terms, weight = self._term_stats.weigh(conn, query)
        match = fts5_match_terms(terms)
        if match is None or weight <= 0:
            return []
        # The best `limit` are found in the full-text index alone, then joined: joining
        # first read the buffer row of every match before the sort (1.5x the time warm,
        # 1.7x after another connection's write emptied this one's page cache).
        cur = conn.execute(
            "SELECT b.id, b.role, b.content, b.origin, b.created_at, b.meta, f.rank "
            "FROM (SELECT rowid, bm25(buffer_fts) AS rank FROM buffer_fts "
            "      WHERE buffer_fts MATCH ? ORDER BY rank, rowid DESC LIMIT ?) f "
            "JOIN buffer b ON b.id = f.rowid ORDER BY f.rank, b.id DESC",
            (match, limit),
        )
        return [BufferHit(row=_buffer_row(r[:6]), score=-float(r[6]) / weight) for r in cur]

    def buffer_stats(self) -> dict[str, int]:
        row = _one(self._conn(), "SELECT count(*), max(id) FROM buffer")
        return {"rows": int(row[0]), "max_id": int(row[1] or 0)}

    # ---- episodic: buffer row vectors ----------------------------------------------
    def buffer_rows_without_vector(self, limit: int, *, after_id: int = 0) -> list[BufferRow]:
        if limit <= 0:
            return []
        cur = self._conn().execute(
            f"SELECT {_BUFFER_COLS} FROM buffer b WHERE id > ? AND role != 'marker' "
            "AND NOT EXISTS (SELECT 1 FROM buffer_vectors v WHERE v.buffer_id = b.id) "
            "ORDER BY id LIMIT ?",
            (after_id, limit),
        )
        return [_buffer_row(r) for r in cur]

    def add_buffer_vectors(self, items: Sequence[tuple[int, np.ndarray]]) -> int:
        if not items:
            return 0
        with self._write() as conn:
            dim = self._bound_dim(conn)
            rows = []
            for row_id, embedding in items:
                vec = as_vector(embedding, dim, what=f"buffer row {row_id} embedding")
                dim = vec.shape[0]
                rows.append((int(row_id), vec.astype("<f4").tobytes()))
            assert dim is not None
            self._ensure_dim(conn, dim)
            written = 0
            for row_id, blob in rows:
                # a new vector replaces the old one under a new seq (the index follows)
                conn.execute("DELETE FROM buffer_vectors WHERE buffer_id = ?", (row_id,))
                conn.execute(
                    "INSERT INTO buffer_vectors (buffer_id, embedding) SELECT ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM buffer WHERE id = ? AND role != 'marker')",
                    (row_id, blob, row_id),
                )
                written += conn.changes()
        self._refresh_index("buffer_vectors")
        return written

    def _refresh_index(self, table: str) -> None:
        """Bring a loaded in-memory index up to the table now, in the thread that wrote
        (the background queue), so the next search does not add the new vectors on its
        own time. Skipped while a search holds the index (it syncs itself) or before the
        index is loaded; a failure here is left for that search to meet."""
        index = self._indexes.get(table)
        if index is None or index.synced is None or table in self._building:
            return
        lock = self._index_locks[table]
        if not lock.acquire(blocking=False):
            return
        try:
            with self._read() as conn:
                dim = self._bound_dim(conn)
                if dim is not None:
                    self._sync_index(conn, table, dim)
        except (apsw.Error, StoreError, OSError) as exc:
            log.debug("refreshing the %s index after a write failed: %s", table, exc)
        finally:
            lock.release()

    def search_buffer_vectors(
        self, embedding: np.ndarray, *, limit: int, before_id: int | None = None
    ) -> list[BufferHit]:
        found = self._vector_search(
            "buffer_vectors", embedding, limit, None, before_buffer_id=before_id
        )
        return [BufferHit(row=_buffer_row(row), score=s) for row, s in found]

    def has_episodic_vectors(self) -> bool:
        return bool(
            _one(
                self._conn(),
                "SELECT EXISTS (SELECT 1 FROM buffer_vectors) OR EXISTS (SELECT 1 FROM summaries)",
            )[0]
        )

    def buffer_vector_stats(self) -> dict[str, int]:
        with self._read() as conn:
            embedded = int(_one(conn, "SELECT count(*) FROM buffer_vectors")[0])
            rows = int(_one(conn, "SELECT count(*) FROM buffer WHERE role != 'marker'")[0])
        return {"embedded": embedded, "pending": max(0, rows - embedded)}

    # ---- episodic: summaries -------------------------------------------------------
    def last_summarised_id(self) -> int:
        row = _one(self._conn(), "SELECT max(end_buffer_id) FROM summaries")
        return int(row[0] or 0)

    def unsummarised(self) -> list[BufferRow]:
        with self._read() as conn:
            after = self.last_summarised_id()
            cur = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE role != 'marker' AND id > ? ORDER BY id",
                (after,),
            )
            return [_buffer_row(r) for r in cur]

    def add_summary(
        self,
        content: str,
        embedding: np.ndarray,
        *,
        tags: Sequence[str],
        entities: dict[str, list[str]],
        start_buffer_id: int,
        end_buffer_id: int,
    ) -> Summary:
        tags, entities = validation.summary(content, tags, entities, start_buffer_id, end_buffer_id)
        created = utc_now()
        with self._write() as conn:
            vec = as_vector(embedding, self._bound_dim(conn), what="summary embedding")
            found = _one(
                conn,
                "SELECT count(*) FROM buffer WHERE id IN (?, ?)",
                (start_buffer_id, end_buffer_id),
            )[0]
            if found != len({start_buffer_id, end_buffer_id}):
                raise ValidationError(
                    f"summary range {start_buffer_id}..{end_buffer_id} does not name "
                    "existing buffer rows",
                    param="start_buffer_id",
                )
            self._ensure_dim(conn, vec.shape[0])
            conn.execute(
                "INSERT INTO summaries (content, embedding, tags, entities, start_buffer_id, "
                "end_buffer_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    content,
                    vec.astype("<f4").tobytes(),
                    _dumps(tags),
                    _dumps(entities),
                    start_buffer_id,
                    end_buffer_id,
                    created,
                ),
            )
            row_id = conn.last_insert_rowid()
        return Summary(
            row_id, content, tags, entities, start_buffer_id, end_buffer_id, created, vec.copy()
        )

    def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        cur = self._conn().execute(
            f"SELECT {_SUMMARY_COLS} FROM summaries ORDER BY id DESC LIMIT ? OFFSET ?",
            (max(0, limit), max(0, offset)),
        )
        return [_summary(r, with_embedding=False) for r in cur]

    def count_summaries(self) -> int:
        return int(_one(self._conn(), "SELECT count(*) FROM summaries")[0])

    def search_summaries(
        self,
        embedding: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        before_buffer_id: int | None = None,
    ) -> list[SummaryHit]:
        found = self._vector_search(
            "summaries", embedding, limit, threshold, before_buffer_id=before_buffer_id
        )
        return [
            SummaryHit(summary=_summary(row, with_embedding=False), score=s) for row, s in found
        ]

    # ---- semantic: sources & memories ----------------------------------------------
    def add_source(
        self,
        name: str,
        type: str,
        chunks: Sequence[NewChunk],
        *,
        summary: str | None = None,
        start_id: int | None = None,
        end_id: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Source:
        meta = validation.source(name, type, start_id, end_id, meta)
        created = utc_now()
        with self._write() as conn:
            for row_id in {start_id, end_id} - {None}:
                if conn.execute("SELECT 1 FROM buffer WHERE id = ?", (row_id,)).fetchone() is None:
                    raise ValidationError(
                        f"source range names buffer row {row_id}, which does not exist"
                    )
            rows = self._chunk_rows(conn, chunks)
            conn.execute(
                "INSERT INTO sources (name, type, summary, start_id, end_id, meta, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (name, type, summary, start_id, end_id, _dumps(meta), created),
            )
            source_id = conn.last_insert_rowid()
            self._insert_chunks(conn, source_id, rows, created)
        return Source(source_id, name, type, summary, start_id, end_id, created, meta, len(rows))

    def _chunk_rows(
        self, conn: apsw.Connection, chunks: Sequence[NewChunk]
    ) -> list[tuple[str, bytes, str]]:
        """Validate every chunk before anything is written."""
        dim = self._bound_dim(conn)
        rows = []
        for i, chunk in enumerate(chunks):
            validation.chunk_content(i, chunk.content)
            vec = as_vector(chunk.embedding, dim, what=f"chunk {i} embedding")
            dim = vec.shape[0]
            rows.append(
                (
                    chunk.content,
                    vec.astype("<f4").tobytes(),
                    _dumps(validation.json_object(chunk.metadata, "metadata")),
                )
            )
        if rows and dim is not None:
            self._ensure_dim(conn, dim)
        return rows

    @staticmethod
    def _insert_chunks(
        conn: apsw.Connection, source_id: int, rows: list[tuple[str, bytes, str]], created: str
    ) -> None:
        conn.executemany(
            "INSERT INTO memories (source_id, content, embedding, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ((source_id, content, blob, metadata, created) for content, blob, metadata in rows),
        )

    def replace_source(
        self,
        source_id: int,
        chunks: Sequence[NewChunk],
        *,
        summary: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Source:
        new_meta = None if meta is None else validation.json_object(meta, "meta")
        with self._write() as conn:
            self._require_source(conn, source_id)
            rows = self._chunk_rows(conn, chunks)
            conn.execute("DELETE FROM memories WHERE source_id = ?", (source_id,))
            self._insert_chunks(conn, source_id, rows, utc_now())
            if summary is not None:
                conn.execute("UPDATE sources SET summary = ? WHERE id = ?", (summary, source_id))
            if new_meta is not None:
                conn.execute(
                    "UPDATE sources SET meta = ? WHERE id = ?", (_dumps(new_meta), source_id)
                )
            return self._get_source(conn, source_id)

    def set_source_summary(self, source_id: int, summary: str) -> None:
        with self._write() as conn:
            self._require_source(conn, source_id)
            conn.execute("UPDATE sources SET summary = ? WHERE id = ?", (summary, source_id))

    def get_source(self, source_id: int) -> Source:
        return self._get_source(self._conn(), source_id)

    def _get_source(self, conn: apsw.Connection, source_id: int) -> Source:
        row = conn.execute(
            f"SELECT {_SOURCE_COLS} FROM sources s WHERE s.id = ?", (source_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"source {source_id} does not exist")
        return _source(row)

    @staticmethod
    def _require_source(conn: apsw.Connection, source_id: int) -> None:
        if conn.execute("SELECT 1 FROM sources WHERE id = ?", (source_id,)).fetchone() is None:
            raise NotFound(f"source {source_id} does not exist")

    def find_sources(self, **meta_equals: Any) -> list[Source]:
        # Sources number in the thousands at most: compare decoded JSON in Python, so
        # every JSON value (strings, numbers, booleans, null, lists) compares exactly.
        found = []
        for source in self.list_sources():
            if all(
                key in source.meta and source.meta[key] == value
                for key, value in meta_equals.items()
            ):
                found.append(source)
        return found

    def list_sources(self) -> list[Source]:
        cur = self._conn().execute(f"SELECT {_SOURCE_COLS} FROM sources s ORDER BY s.id DESC")
        return [_source(r) for r in cur]

    def delete_source(self, source_id: int) -> None:
        with self._write() as conn:
            self._require_source(conn, source_id)
            conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))

    def source_chunks(self, source_id: int) -> list[Memory]:
        with self._read() as conn:
            self._require_source(conn, source_id)
            cur = conn.execute(
                f"SELECT {_MEMORY_COLS} FROM memories WHERE source_id = ? ORDER BY id",
                (source_id,),
            )
            return [_memory(r, with_embedding=True) for r in cur]

    def search_memories(
        self, embedding: np.ndarray, *, limit: int, threshold: float | None = None
    ) -> list[MemoryHit]:
        found = self._vector_search("memories", embedding, limit, threshold)
        if not found:
            return []
        source_ids = sorted({row[1] for row, _ in found})
        names = dict(
            self._conn().execute(
                f"SELECT id, name FROM sources WHERE id IN ({','.join('?' * len(source_ids))})",
                source_ids,
            )
        )
        return [
            MemoryHit(
                memory=_memory(row, with_embedding=False),
                source_name=names.get(row[1], ""),
                score=s,
            )
            for row, s in found
        ]

    def count_memories(self) -> int:
        return int(_one(self._conn(), "SELECT count(*) FROM memories")[0])

    # ---- forgetting and editing ----------------------------------------------------
    def forget(
        self,
        kind: str,
        *,
        buffer_ids: Sequence[int] = (),
        summary_ids: Sequence[int] = (),
        source_ids: Sequence[int] = (),
        memory_ids: Sequence[int] = (),
    ) -> ForgetResult:
        with self._write() as conn:
            result = forgetting.execute(
                _ForgetOps(conn), kind, buffer_ids, summary_ids, source_ids, memory_ids
            )
        self._term_stats.forget()  # fewer rows: frequencies read before may be too high
        return result

    def get_summary(self, summary_id: int) -> Summary:
        row = (
            self._conn()
            .execute(f"SELECT {_SUMMARY_COLS} FROM summaries WHERE id = ?", (summary_id,))
            .fetchone()
        )
        if row is None:
            raise NotFound(f"summary {summary_id} does not exist")
        return _summary(row, with_embedding=False)

    def update_summary(
        self,
        summary_id: int,
        *,
        content: str | None = None,
        embedding: np.ndarray | None = None,
        tags: Sequence[str] | None = None,
        entities: dict[str, list[str]] | None = None,
    ) -> Summary:
        with self._write() as conn:
            old = conn.execute(
                f"SELECT {_SUMMARY_COLS} FROM summaries WHERE id = ?", (summary_id,)
            ).fetchone()
            if old is None:
                raise NotFound(f"summary {summary_id} does not exist")
            cur = _summary(old, with_embedding=False)
            new_tags, new_entities = validation.summary(
                content if content is not None else cur.content,
                cur.tags if tags is None else tags,
                cur.entities if entities is None else entities,
                cur.start_buffer_id,
                cur.end_buffer_id,
            )
            if (content is None) != (embedding is None):
                raise ValidationError("new summary content needs its new embedding (and only then)")
            if content is not None:
                vec = as_vector(embedding, self._bound_dim(conn), what="summary embedding")
                conn.execute(
                    "UPDATE summaries SET content = ?, embedding = ? WHERE id = ?",
                    (content, vec.astype("<f4").tobytes(), summary_id),
                )
                # the in-memory indexes hold vectors by id: make every process reload them
                conn.execute(
                    "UPDATE vector_state SET epoch = abs(random()) WHERE name = 'summaries'"
                )
            conn.execute(
                "UPDATE summaries SET tags = ?, entities = ? WHERE id = ?",
                (_dumps(new_tags), _dumps(new_entities), summary_id),
            )
            _ForgetOps(conn).log("summary_edit", *forgetting.edit_log(summary_id))
            row = _one(conn, f"SELECT {_SUMMARY_COLS} FROM summaries WHERE id = ?", (summary_id,))
        return _summary(row, with_embedding=False)

    def find_text(
        self, terms: Sequence[str], limit: int
    ) -> tuple[list[BufferRow], list[Summary], list[Memory]]:
        terms = [t.lower() for t in terms if t]
        if not terms or limit <= 0:
            return [], [], []
        where = " AND ".join("instr(lower(content), ?) > 0" for _ in terms)
        # a buffer row's meta too: an assistant row keeps its tool calls' arguments and
        # the agent's name there (`meta.tools`, `meta.agent`)
        in_row = " AND ".join("instr(lower(content || ' ' || meta), ?) > 0" for _ in terms)
        with self._read() as conn:
            buffer = [
                _buffer_row(r)
                for r in conn.execute(
                    f"SELECT {_BUFFER_COLS} FROM buffer WHERE role != 'marker' AND {in_row} "
                    "ORDER BY id LIMIT ?",
                    (*terms, limit),
                )
            ]
            summaries = [
                _summary(r, with_embedding=False)
                for r in conn.execute(
                    f"SELECT {_SUMMARY_COLS} FROM summaries WHERE {where} ORDER BY id LIMIT ?",
                    (*terms, limit),
                )
            ]
            memories = [
                _memory(r, with_embedding=False)
                for r in conn.execute(
                    f"SELECT {_MEMORY_COLS} FROM memories WHERE {where} ORDER BY id LIMIT ?",
                    (*terms, limit),
                )
            ]
        return buffer, summaries, memories

    def forget_log(self, limit: int = 100) -> list[ForgetLogEntry]:
        cur = self._conn().execute(
            "SELECT id, forgotten_at, kind, ids, counts FROM forget_log ORDER BY id DESC LIMIT ?",
            (max(0, limit),),
        )
        return [
            ForgetLogEntry(int(r[0]), r[1], r[2], json.loads(r[3]), json.loads(r[4])) for r in cur
        ]

    def scrub(self) -> dict[str, Any]:
        """Merge the full-text index (its segments then hold no deleted term), checkpoint
        the WAL into the file and truncate it, and drop the HNSW sidecar files (a cache of
        vectors, rebuilt when needed). Deleted cells were zeroed (`secure_delete`)."""
        conn = self._conn()
        with self._write() as w:
            w.execute("INSERT INTO buffer_fts (buffer_fts) VALUES ('optimize')")
        # a graph held in memory may still hold the bytes of deleted vectors (a removed
        # key is only marked): it is never saved again (`close` would write it back)
        for name, index in list(self._indexes.items()):
            with self._index_locks[name]:
                index.forbid_save()
        removed = []
        for table in _VECTOR_TABLES:
            sidecar = self.path.with_name(f"{self.path.name}.{table}.hnsw")
            for path in (sidecar, sidecar.with_name(sidecar.name + ".json")):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path.name)
        return {"checkpoint": self._checkpoint(conn), "sidecars_removed": removed}

    def _checkpoint(self, conn: apsw.Connection) -> dict[str, int]:
        """`wal_checkpoint(TRUNCATE)`: it waits (busy handler) for readers of older
        snapshots, here at most `checkpoint_wait_ms`, so a long reader elsewhere cannot
        hold a deletion up; ``busy`` = 1 then says the WAL was not truncated yet (the next
        checkpoint finishes it)."""
        conn.setbusytimeout(self.checkpoint_wait_ms)
        try:
            busy, log, done = _one(conn, "PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.setbusytimeout(self.busy_timeout_ms)
        return {"busy": int(busy), "wal_frames": int(log), "checkpointed": int(done)}

    def vacuum(self) -> dict[str, Any]:
        conn = self._conn()
        before = self.path.stat().st_size
        conn.execute("INSERT INTO buffer_fts (buffer_fts) VALUES ('optimize')")
        conn.execute("VACUUM")
        checkpoint = self._checkpoint(conn)
        return {
            "backend": "sqlite",
            "bytes_before": before,
            "bytes_after": self.path.stat().st_size,
            "checkpoint": checkpoint,
        }

    # ---- vector search -------------------------------------------------------------
    def _vector_search(
        self,
        table: str,
        embedding: np.ndarray,
        limit: int,
        threshold: float | None,
        *,
        before_buffer_id: int | None = None,
    ) -> list[tuple[tuple[Any, ...], float]]:
        """(row, cosine) pairs, best first. Rows are SELECTed with the table's columns
        but the vector (for `buffer_vectors`: the buffer row's)."""
        if limit <= 0:
            return []
        with self._index_locks[table], self._read() as conn:
            dim = self._bound_dim(conn)
            if dim is None:  # nothing stored yet
                return []
            query = as_vector(embedding, dim, what="query embedding")
            held = self._indexes.get(table)
            if table in self._building and (held is None or held.synced is None):
                # the background thread has not loaded anything yet: never wait for it
                q = normalise_rows(query)
                return self._exact_scan(conn, table, q, limit, threshold, before_buffer_id)
            index = self._sync_index(conn, table, dim)
            if not index.approximate:
                ids, scores = index.exact_search(
                    query, limit, threshold=threshold, extra_below=before_buffer_id
                )
                rows = _rows_by_id(conn, table, ids)
                return [
                    (rows[i], float(s))
                    for i, s in zip(ids.tolist(), scores, strict=True)
                    if i in rows
                ]
            return self._ann_search(conn, index, table, query, limit, threshold, before_buffer_id)

    def _ann_search(
        self,
        conn: apsw.Connection,
        index: VectorIndex,
        table: str,
        query: np.ndarray,
        limit: int,
        threshold: float | None,
        before_buffer_id: int | None,
    ) -> list[tuple[tuple[Any, ...], float]]:
        """HNSW candidates re-scored exactly from the stored vectors, filtered; widen
        the candidate set while filters leave too few, then fall back to an exact scan."""
        q = normalise_rows(query)
        fetch = max(int(self.ann_overfetch * limit), 64)
        spec = _INDEX_SPECS[table]
        while True:
            ids = index.ann_candidates(q, fetch)
            # re-score from the vectors alone (no row text), fetch rows for the results only
            keys, scores, extra = _candidate_scores(conn, table, spec, ids, q, index.dim)
            exhausted = len(ids) < fetch
            lowest = float(scores.min()) if len(scores) else -2.0
            keep = np.ones(len(keys), dtype=bool)
            if threshold is not None:
                keep &= scores >= np.float32(threshold)
            if before_buffer_id is not None:
                keep &= extra < before_buffer_id
            if (
                int(keep.sum()) >= limit
                or exhausted
                or (threshold is not None and lowest < threshold)
            ):
                keys, scores = keys[keep], scores[keep]
                order = np.lexsort((keys, -scores))[:limit]
                rows = _rows_by_id(conn, table, keys[order])
                return [
                    (rows[int(k)], float(sc))
                    for k, sc in zip(keys[order], scores[order], strict=True)
                    if int(k) in rows
                ]
            if fetch >= self.ann_max_candidates:
                return self._exact_scan(conn, table, q, limit, threshold, before_buffer_id)
            fetch *= 4

    def _exact_scan(
        self,
        conn: apsw.Connection,
        table: str,
        q: np.ndarray,
        limit: int,
        threshold: float | None,
        before_buffer_id: int | None,
    ) -> list[tuple[tuple[Any, ...], float]]:
        """Exact search straight from the stored vectors with the filter in SQL."""
        spec = _INDEX_SPECS[table]
        where, params = "", []
        if before_buffer_id is not None:
            where, params = f"WHERE {spec.extra} < ?", [before_buffer_id]
        best_ids = np.empty(0, np.int64)
        best_scores = np.empty(0, np.float32)
        dim = q.shape[0]
        after = 0
        while True:
            chunk = list(
                conn.execute(
                    f"SELECT {spec.key}, embedding FROM {table} {where} "
                    f"{'AND' if where else 'WHERE'} {spec.key} > ? ORDER BY {spec.key} LIMIT ?",
                    (*params, after, _LOAD_CHUNK),
                )
            )
            if not chunk:
                break
            after = chunk[-1][0]
            ids = np.fromiter((r[0] for r in chunk), np.int64, len(chunk))
            scores = dot_rows(normalise_rows(decode_vectors([r[1] for r in chunk], dim)), q)
            best_ids = np.concatenate([best_ids, ids])
            best_scores = np.concatenate([best_scores, scores])
            if len(best_scores) > limit:
                part = np.argpartition(-best_scores, limit - 1)[:limit]
                best_ids, best_scores = best_ids[part], best_scores[part]
        rows = _rows_by_id(conn, table, best_ids)
        out = [
            (rows[i], float(s))
            for i, s in zip(best_ids.tolist(), best_scores, strict=True)
            if i in rows and (threshold is None or s >= threshold)
        ]
        out.sort(key=lambda p: (-p[1], p[0][0]))
        return out[:limit]

    def _sync_index(
        self, conn: apsw.Connection, table: str, dim: int, into: VectorIndex | None = None
    ) -> VectorIndex:
        """Bring the table's in-memory index (or `into`) up to the database's state."""
        try:
            return self._sync_index_unguarded(conn, table, dim, into)
        except BaseException:
            index = into or self._indexes.get(table)
            if index is not None:  # half-loaded: start again next time, never trust it
                index.reset()
            raise

    def _sync_index_unguarded(
        self, conn: apsw.Connection, table: str, dim: int, into: VectorIndex | None = None
    ) -> VectorIndex:
        spec = _INDEX_SPECS[table]
        epoch, deletions = _one(
            conn, "SELECT epoch, deletions FROM vector_state WHERE name = ?", (table,)
        )
        max_seq = int(_one(conn, f"SELECT max({spec.seq}) FROM {table}")[0] or 0)
        index = into if into is not None else self._indexes.get(table)
        if index is None or index.dim != dim:
            index = VectorIndex(
                dim,
                ann_threshold=self.ann_threshold,
                sidecar=self.path.with_name(f"{self.path.name}.{table}.hnsw"),
            )
            self._indexes[table] = index
        point = index.synced
        if point is None or point.epoch != epoch:
            index.reset()
            point = None
            if self._count_rows(conn, table) > self.ann_threshold:
                point = index.load_sidecar(epoch)
            if point is None or point.watermark > max_seq:
                index.reset()
                point = SyncPoint(epoch, deletions, 0)
        if point.deletions != deletions:
            # keys whose vector is still the one indexed (a replaced vector has a new seq)
            alive = np.fromiter(
                (
                    r[0]
                    for r in conn.execute(
                        f"SELECT {spec.key} FROM {table} WHERE {spec.seq} <= ?",
                        (point.watermark,),
                    )
                ),
                np.int64,
            )
            index.keep_only(alive)
            point = SyncPoint(epoch, deletions, point.watermark)
        if max_seq > point.watermark:
            after = point.watermark
            while after < max_seq:
                chunk = list(
                    conn.execute(
                        f"SELECT {spec.seq}, {spec.key}, embedding, {spec.extra} FROM {table} "
                        f"WHERE {spec.seq} > ? AND {spec.seq} <= ? ORDER BY {spec.seq} LIMIT ?",
                        (after, max_seq, _LOAD_CHUNK),
                    )
                )
                if not chunk:
                    break
                after = chunk[-1][0]
                index.add(
                    np.fromiter((r[1] for r in chunk), np.int64, len(chunk)),
                    decode_vectors([r[2] for r in chunk], dim),
                    np.fromiter((r[3] for r in chunk), np.int64, len(chunk)),
                )
            loaded_from_scratch = point.watermark == 0
            point = SyncPoint(epoch, deletions, max_seq)
            index.synced = point
            if loaded_from_scratch and index.approximate:
                with contextlib.suppress(OSError):  # a cache only
                    index.save_sidecar()
        index.synced = point
        return index

    @staticmethod
    def _count_rows(conn: apsw.Connection, table: str) -> int:
        return int(_one(conn, f"SELECT count(*) FROM {table}")[0])

    def warm_vector_indexes(self) -> threading.Thread | None:
        """Load or build every vector index in a background thread (the server calls
        this at start), instead of in the first search after a restart. A large table
        gets an exact in-memory index first (seconds), used until its HNSW graph is
        loaded from the sidecar or built (minutes at a million vectors); a search before
        even that scans the stored vectors. Returns the thread (tests join it)."""
        if self._warming is not None or self._closed:
            return self._warming
        self._building.update(_VECTOR_TABLES)
        self._warming = threading.Thread(target=self._warm, name="nixx-vector-index", daemon=True)
        self._warming.start()
        return self._warming

    def vector_indexes_warming(self) -> bool:
        return bool(self._building)

    def _warm(self) -> None:
        for table in _VECTOR_TABLES:
            try:
                started = time.monotonic()
                count = self._warm_one(table)
                if count:
                    log.info(
                        "vector index %s ready: %d vectors in %.1f s",
                        table,
                        count,
                        time.monotonic() - started,
                    )
            except Exception as exc:  # a cache: the first search builds it instead
                if not self._closed:
                    log.warning("preparing the %s vector index failed: %s", table, exc)
            finally:
                self._building.discard(table)

    def _warm_one(self, table: str) -> int:
        with self._read() as conn:
            dim = self._bound_dim(conn)
            if dim is None:
                return 0
            big = self._count_rows(conn, table) > self.ann_threshold
        if not big:
            with self._index_locks[table], self._read() as conn:
                return len(self._sync_index(conn, table, dim))
        exact = VectorIndex(dim, ann_threshold=2**62)  # never promoted to HNSW
        with self._read() as conn:
            self._sync_index(conn, table, dim, into=exact)
        with self._index_locks[table]:
            held = self._indexes.get(table)
            if held is None or held.synced is None:
                self._indexes[table] = exact
        ann = VectorIndex(
            dim,
            ann_threshold=self.ann_threshold,
            sidecar=self.path.with_name(f"{self.path.name}.{table}.hnsw"),
        )
        with self._read() as conn:  # loads the sidecar, or builds the graph and saves it
            self._sync_index(conn, table, dim, into=ann)
        with self._index_locks[table]:
            held = self._indexes.get(table)
            if held is None or held is exact or held.synced is None:
                self._indexes[table] = ann
        return len(ann)

    def build_vector_indexes(self) -> dict[str, int]:
        """Bring every table's vector index up to date now rather than on the first
        search, writing the HNSW sidecars (so a server started later, or already
        running, loads them instead of building). Returns vectors indexed per table."""
        built: dict[str, int] = {}
        for table in _VECTOR_TABLES:
            with self._index_locks[table], self._read() as conn:
                dim = self._bound_dim(conn)
                if dim is None:
                    continue
                built[table] = len(self._sync_index(conn, table, dim))
        self.save_vector_indexes()
        return built

    def save_vector_indexes(self) -> list[str]:
        """Write the HNSW sidecar files of the indexes that have one (the bench and
        `nixx reindex` call this; `close()` does it when enough changed)."""
        written = []
        for name, index in self._indexes.items():
            with self._index_locks[name]:
                if index.save_sidecar():
                    written.append(name)
        return written

    # ---- state ---------------------------------------------------------------------
    def get_state(self, key: str, default: Any = None) -> Any:
        row = self._conn().execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_state(self, key: str, value: Any) -> None:
        validation.state_key(key)
        try:
            text = _dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"state {key!r} must be JSON-serialisable: {exc}") from None
        with self._write() as conn:
            conn.execute(
                "INSERT INTO state (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, text),
            )

    def delete_state(self, key: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM state WHERE key = ?", (key,))

    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        validation.state_key(key)
        with self._write() as conn:
            return self._update_state(conn, key, fn)

    @staticmethod
    def _update_state(conn: apsw.Connection, key: str, fn: Callable[[Any], Any]) -> Any:
        row = conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        value = fn(None if row is None else json.loads(row[0]))
        if value is None:
            conn.execute("DELETE FROM state WHERE key = ?", (key,))
        else:
            conn.execute(
                "INSERT INTO state (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, _dumps(value)),
            )
        return value

    # ---- export / import -----------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        # A connection of its own: the snapshot stays consistent while the caller
        # consumes the records, whatever else this thread does meanwhile.
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            yield header_record()
            row = conn.execute("SELECT model, dim FROM embedder WHERE id = 1").fetchone()
            if row:
                yield {"type": "embedder", "model": row[0], "dim": int(row[1])}
            for key, value in conn.execute("SELECT key, value FROM state ORDER BY key"):
                yield {"type": "state", "key": key, "value": json.loads(value)}
            for r in conn.execute(
                "SELECT b.id, b.role, b.content, b.origin, b.created_at, b.meta, v.embedding "
                "FROM buffer b LEFT JOIN buffer_vectors v ON v.buffer_id = b.id ORDER BY b.id"
            ):
                vec = None if r[6] is None else np.frombuffer(r[6], dtype="<f4")
                yield buffer_record(_buffer_row(r[:6]), vec)
            for r in conn.execute(f"SELECT {_SUMMARY_COLS} FROM summaries ORDER BY id"):
                yield summary_record(_summary(r, with_embedding=True))
            for r in conn.execute(f"SELECT {_SOURCE_COLS} FROM sources s ORDER BY s.id"):
                yield source_record(_source(r))
            for r in conn.execute(f"SELECT {_MEMORY_COLS} FROM memories ORDER BY id"):
                yield memory_record(_memory(r, with_embedding=True))
            for r in conn.execute(
                "SELECT id, forgotten_at, kind, ids, counts FROM forget_log ORDER BY id"
            ):
                yield forget_record(
                    ForgetLogEntry(int(r[0]), r[1], r[2], json.loads(r[3]), json.loads(r[4]))
                )
        finally:
            conn.close()

    def import_records(self, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        from nixx.store.export_file import RecordReader

        reader = RecordReader(records)  # validates order, fields and values as it goes
        with self._write() as conn:
            for table in (
                "buffer",
                "summaries",
                "sources",
                "memories",
                "state",
                "embedder",
                "forget_log",
            ):
                if _one(conn, f"SELECT EXISTS (SELECT 1 FROM {table})")[0]:
                    raise Conflict(
                        f"cannot import into {self.path}: the store is not empty "
                        f"(it has {table} rows); import into a new, empty database"
                    )
            conn.execute("PRAGMA defer_foreign_keys = ON")
            dim: int | None = None
            for kind, batch in reader.batches():
                for rec in batch:
                    dim = self._import_one(conn, kind, rec, dim)
            conn.execute("UPDATE vector_state SET epoch = abs(random())")
        return dict(reader.counts)

    def _import_one(
        self, conn: apsw.Connection, kind: Any, rec: dict[str, Any], dim: int | None
    ) -> int | None:
        if kind == "embedder":
            conn.execute(
                "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?)",
                (str(rec["model"]), int(rec["dim"]), utc_now()),
            )
            return int(rec["dim"])
        if kind == "state":
            conn.execute(
                "INSERT INTO state (key, value) VALUES (?, ?)", (rec["key"], _dumps(rec["value"]))
            )
        elif kind == "buffer":
            conn.execute(
                f"INSERT INTO buffer ({_BUFFER_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    int(rec["id"]),
                    rec["role"],
                    rec["content"],
                    rec["origin"],
                    rec["created_at"],
                    _dumps(rec.get("meta") or {}),
                ),
            )
            if rec.get("embedding") is not None and rec["role"] != "marker":
                vec = as_vector(rec["embedding"], dim, what=f"buffer {rec['id']} embedding")
                if dim is None:
                    dim = vec.shape[0]
                    self._ensure_dim(conn, dim)
                conn.execute(
                    "INSERT INTO buffer_vectors (buffer_id, embedding) VALUES (?, ?)",
                    (int(rec["id"]), vec.astype("<f4").tobytes()),
                )
        elif kind == "summary":
            vec = as_vector(rec["embedding"], dim, what=f"summary {rec['id']} embedding")
            if dim is None:
                dim = vec.shape[0]
                self._ensure_dim(conn, dim)
            conn.execute(
                f"INSERT INTO summaries ({_SUMMARY_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    int(rec["id"]),
                    rec["content"],
                    _dumps(rec.get("tags") or []),
                    _dumps(rec.get("entities") or {}),
                    int(rec["start_buffer_id"]),
                    int(rec["end_buffer_id"]),
                    rec["created_at"],
                    vec.astype("<f4").tobytes(),
                ),
            )
        elif kind == "source":
            conn.execute(
                "INSERT INTO sources (id, name, type, summary, start_id, end_id, meta, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    int(rec["id"]),
                    rec["name"],
                    rec["source_type"],
                    rec.get("summary"),
                    rec.get("start_id"),
                    rec.get("end_id"),
                    _dumps(rec.get("meta") or {}),
                    rec["created_at"],
                ),
            )
        elif kind == "memory":
            vec = as_vector(rec["embedding"], dim, what=f"memory {rec['id']} embedding")
            if dim is None:
                dim = vec.shape[0]
                self._ensure_dim(conn, dim)
            conn.execute(
                f"INSERT INTO memories ({_MEMORY_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    int(rec["id"]),
                    int(rec["source_id"]),
                    rec["content"],
                    _dumps(rec.get("metadata") or {}),
                    rec["created_at"],
                    vec.astype("<f4").tobytes(),
                ),
            )
        elif kind == "forget":
            conn.execute(
                "INSERT INTO forget_log (id, forgotten_at, kind, ids, counts) VALUES (?, ?, ?, ?, ?)",
                (
                    int(rec["id"]),
                    rec["at"],
                    rec["kind"],
                    _dumps(rec.get("ids") or {}),
                    _dumps(rec.get("counts") or {}),
                ),
            )
        else:
            raise ValidationError(f"unknown export record type {kind!r}")
        return dim


def sqlite_path(url_or_path: str) -> Path:
    """The file of ``sqlite:///PATH`` (or a plain path); ``sqlite:////abs`` and
    ``sqlite:///abs`` both name ``/abs``; ``sqlite:///~/x`` is in the home folder."""
    text = url_or_path.removeprefix("sqlite://").partition("?")[0]  # options: open_store
    while text.startswith("//"):
        text = text[1:]
    if text.startswith("/~"):  # sqlite:///~/nixx.db
        text = text[1:]
    return Path(text).expanduser()


# ---- row conversion & validation ----------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _buffer_row(r: Sequence[Any]) -> BufferRow:
    return BufferRow(
        id=int(r[0]),
        role=r[1],
        content=r[2],
        origin=r[3],
        created_at=r[4],
        # most rows (every user row) carry none: a search builds ~100 rows
        meta={} if r[5] == "{}" else json.loads(r[5]),
    )


def _summary(r: Sequence[Any], *, with_embedding: bool) -> Summary:
    return Summary(
        id=int(r[0]),
        content=r[1],
        tags=json.loads(r[2]),
        entities=json.loads(r[3]),
        start_buffer_id=int(r[4]),
        end_buffer_id=int(r[5]),
        created_at=r[6],
        embedding=np.frombuffer(r[7], dtype="<f4").astype(np.float32) if with_embedding else None,
    )


def _source(r: Sequence[Any]) -> Source:
    return Source(
        id=int(r[0]),
        name=r[1],
        type=r[2],
        summary=r[3],
        start_id=r[4],
        end_id=r[5],
        created_at=r[6],
        meta=json.loads(r[7]),
        chunk_count=int(r[8]),
    )


def _memory(r: Sequence[Any], *, with_embedding: bool) -> Memory:
    return Memory(
        id=int(r[0]),
        source_id=int(r[1]),
        content=r[2],
        metadata=json.loads(r[3]),
        created_at=r[4],
        embedding=np.frombuffer(r[5], dtype="<f4").astype(np.float32) if with_embedding else None,
    )


def _one(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
    """The single row of an aggregate query."""
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return tuple(row)


class _ForgetOps:
    """`nixx.store.forgetting.Ops` on an open SQLite write transaction."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def existing(self, table: str, ids: Sequence[int]) -> set[int]:
        cur = self.conn.execute(
            f"SELECT id FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
            (_dumps(list(ids)),),
        )
        return {int(r[0]) for r in cur}

    def rows_in(self, start: int, end: int) -> list[tuple[int, str]]:
        cur = self.conn.execute(
            "SELECT id, role FROM buffer WHERE id BETWEEN ? AND ? ORDER BY id", (start, end)
        )
        return [(int(r[0]), r[1]) for r in cur]

    def summary_windows(self) -> Iterable[tuple[int, int, int]]:
        return list(self.conn.execute("SELECT id, start_buffer_id, end_buffer_id FROM summaries"))

    def buffer_sources(self) -> Iterable[tuple[int, int | None, int | None]]:
        return list(
            self.conn.execute("SELECT id, start_id, end_id FROM sources WHERE type = 'buffer'")
        )

    def delete(self, table: str, column: str, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        self.conn.execute(
            f"DELETE FROM {table} WHERE {column} IN (SELECT value FROM json_each(?))",
            (_dumps(list(ids)),),
        )
        return int(self.conn.changes())

    def narrow_source(self, source_id: int, start: int, end: int) -> None:
        self.conn.execute(
            "UPDATE sources SET start_id = ?, end_id = ?, summary = NULL WHERE id = ?",
            (start, end, source_id),
        )

    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        return SQLiteStore._update_state(self.conn, key, fn)

    def log(self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]) -> tuple[int, str]:
        at = utc_now()
        self.conn.execute(
            "INSERT INTO forget_log (forgotten_at, kind, ids, counts) VALUES (?, ?, ?, ?)",
            (at, kind, _dumps(ids), _dumps(counts)),
        )
        return self.conn.last_insert_rowid(), at


#: What a vector search returns per table: (columns, FROM clause, id column). Not the
#: vectors: the caller has the scores, a vector is 1.5 KB to copy per row, and a buffer
#: row's would need a join.
_HIT_SOURCE = {
    "summaries": (_SUMMARY_HIT_COLS, "summaries", "id"),
    "memories": (_MEMORY_HIT_COLS, "memories", "id"),
    "buffer_vectors": (_BUFFER_COLS, "buffer", "id"),
}


def _rows_by_id(conn: apsw.Connection, table: str, ids: np.ndarray) -> dict[int, tuple[Any, ...]]:
    if len(ids) == 0:
        return {}
    cols, source, id_col = _HIT_SOURCE[table]
    id_list = [int(i) for i in ids]
    rows: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(id_list), 500):
        part = id_list[start : start + 500]
        cur = conn.execute(
            f"SELECT {cols} FROM {source} WHERE {id_col} IN ({','.join('?' * len(part))})", part
        )
        rows.update((int(r[0]), tuple(r)) for r in cur)
    return rows


def _candidate_scores(
    conn: apsw.Connection,
    table: str,
    spec: _IndexSpec,
    ids: np.ndarray,
    q: np.ndarray,
    dim: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, exact cosines with unit `q`, filter column) of the candidate `ids`, from
    their stored vectors only (the rows' text is fetched for the results alone)."""
    found: list[tuple[Any, ...]] = []
    id_list = [int(i) for i in ids]
    for start in range(0, len(id_list), 500):
        part = id_list[start : start + 500]
        found += conn.execute(
            f"SELECT {spec.key}, embedding, {spec.extra} FROM {table} "
            f"WHERE {spec.key} IN ({','.join('?' * len(part))})",
            part,
        )
    keys = np.fromiter((r[0] for r in found), np.int64, len(found))
    extra = np.fromiter((r[2] for r in found), np.int64, len(found))
    if not found:
        return keys, np.empty(0, np.float32), extra
    scores = dot_rows(normalise_rows(decode_vectors([r[1] for r in found], dim)), q)
    return keys, scores, extra
