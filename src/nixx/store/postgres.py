"""The PostgreSQL + pgvector memory store: the seed's schema (`tsvector` + GIN for the
buffer, `vector` + HNSW for summaries and memories), a psycopg 3 connection pool, one
transaction per method.

    store = PostgresStore("postgresql://nixx@db.example/nixx")
    store.migrate()

Vectors travel to the server in pgvector's binary format (a psycopg dumper for numpy
arrays, local to this store's connections) and come back as text. Full-text search ORs
the query's lexemes and ranks with `ts_rank_cd`; vector search orders by cosine
distance (`<=>`) through the HNSW index, with pgvector's iterative scan so a filter
never starves the result. See docs/storage.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pgerr
from psycopg.adapt import AdaptersMap, Dumper
from psycopg.pq import Format
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from nixx import migrations
from nixx.errors import (
    Conflict,
    EmbedderMismatch,
    NotFound,
    SchemaError,
    StoreError,
    ValidationError,
)
from nixx.migrations import Migration
from nixx.store import forgetting, validation
from nixx.store.base import RETRY_TAIL, EmbedFn, MemoryStore, retried_user_row
from nixx.store.forgetting import ForgetLogEntry, ForgetResult
from nixx.store.portable import as_vector
from nixx.store.postgres_schema import (
    HNSW_MAX_DIM,
    MIGRATIONS,
    MIGRATIONS_TABLE,
    VECTOR_TABLES,
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

_MIGRATE_LOCK = 7_346_101  # pg_advisory_xact_lock keys (arbitrary, fixed)
_EMBEDDER_LOCK = 7_346_102
_USER_ROW_LOCK = 7_346_103

_BUFFER_COLS = "id, role, content, origin, created_at, meta"
#: what a forget answers on PostgreSQL (docs/memory.md, "Forgetting")
PG_WAL_NOTE = (
    "deleted from the tables; PostgreSQL's write-ahead log (pg_wal) and any WAL archive or "
    "replica still hold the text until the server recycles those segments (after "
    "checkpoints; `nixx db vacuum` does not reach them): ask the database's administrator "
    "to run CHECKPOINT and rotate the WAL (pg_switch_wal()) where that matters"
)
_SUMMARY_COLS = "id, content, tags, entities, start_buffer_id, end_buffer_id, created_at"
_SOURCE_COLS = (
    "s.id, s.name, s.type, s.summary, s.start_id, s.end_id, s.created_at, s.meta, "
    "(SELECT count(*) FROM memories m WHERE m.source_id = s.id) AS chunk_count"
)
_MEMORY_COLS = "id, source_id, content, metadata, created_at"


# ---- adaptation ------------------------------------------------------------------------
class _VectorDumper(Dumper):
    """numpy array -> pgvector binary input (int16 dim, int16 unused, float32 BE).
    The oid is left unknown: every query casts the parameter (``%s::vector``)."""

    format = Format.BINARY
    oid = 0

    def dump(self, obj: Any) -> bytes:
        arr = np.asarray(obj, dtype=">f4").ravel()
        return struct.pack(">HH", arr.shape[0], 0) + arr.tobytes()


def _adapters() -> AdaptersMap:
    adapters = AdaptersMap(psycopg.adapters)
    adapters.register_dumper(np.ndarray, _VectorDumper)
    return adapters


def _parse_vector(data: bytes) -> np.ndarray:
    """pgvector's binary form (`vector_send(embedding)`) -> float32 array."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


#: Read vectors in binary: exact, and far cheaper to parse than the text form.
_VEC_OUT = "vector_send(embedding)"


def iso_utc(value: datetime) -> str:
    """The one timestamp format of nixx: ISO 8601, UTC, microseconds, ``Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(f"{what}: created_at must be an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{what}: created_at {value!r} is not ISO 8601") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def redact_url(url: str) -> str:
    """`url` without its password (``postgresql://user:***@host/db``)."""
    url = re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", url)


# ---- the search queries (module level so tests can EXPLAIN exactly these) -------------
#: Full-text search: OR-ed lexemes through the GIN index on `tsv`, ranked as FTS5's bm25()
#: ranks (`term_stats`): each matched word adds its IDF, saturated by the row's length
#: (k1 1.2, b 0.75; a chat row says a word once), over the question's whole term weight —
#: ts_rank_cd knows no IDF, so there a speaker's name weighed as much as a rare word.
#: Parameters: (the matched words' tsquery, their IDFs, the word tsqueries, average
#: length, tsquery again, limit).
SEARCH_BUFFER_SQL = (
    "WITH t AS MATERIALIZED (SELECT w, to_tsquery('english', term) AS q "
    "  FROM unnest(%s::float8[], %s::text[]) AS u(w, term)) "
    f"SELECT {_BUFFER_COLS}, "
    "(SELECT sum(w) FROM t WHERE buffer.tsv @@ t.q) "
    "* 2.2 / (1 + 1.2 * (0.25 + 0.75 * length(tsv) / %s::float8)) AS score "
    "FROM buffer WHERE tsv @@ to_tsquery('english', %s) AND role <> 'marker' "
    "ORDER BY score DESC, id DESC LIMIT %s"
)
#: The document frequency of each word (0 rows for a word the english configuration drops:
#: `nodes` 0). Parameter: the words.
TERM_FREQUENCIES_SQL = (
    "SELECT term, numnode(to_tsquery('english', term)) AS nodes, "
    "(SELECT count(*) FROM buffer WHERE tsv @@ to_tsquery('english', term)) "
    "FROM unnest(%s::text[]) AS term"
)
#: Rows and their average length, for IDF and length saturation.
BUFFER_TERM_TOTALS_SQL = (
    "SELECT count(*), coalesce(avg(length(tsv)), 1), coalesce(max(id), 0) FROM buffer "
    "WHERE role <> 'marker'"
)


def _nearest_sql(select: str, threshold: bool) -> str:
    """`select` (yielding a `dist` column) ordered by cosine distance through the HNSW
    index, wrapped so pgvector's relaxed iterative scan is re-sorted exactly. The
    threshold is applied after the LIMIT: exact, because rows come in distance order,
    and it keeps the index scan short. Parameters: q, limit, max_dist (+ the select's)."""
    return (
        f"WITH nearest AS MATERIALIZED ({select} ORDER BY dist LIMIT %(limit)s) "
        "SELECT * FROM nearest "
        + ("WHERE dist <= %(max_dist)s " if threshold else "")
        + "ORDER BY dist, id"
    )


def search_summaries_sql(*, before: bool, threshold: bool) -> str:
    where = "WHERE end_buffer_id < %(before)s" if before else ""
    return _nearest_sql(
        f"SELECT {_SUMMARY_COLS}, embedding <=> %(q)s::vector AS dist FROM summaries {where}",
        threshold,
    )


def search_buffer_vectors_sql(*, before: bool) -> str:
    """Nearest buffer rows through the HNSW index on buffer_vectors, joined to their rows."""
    where = "WHERE buffer_id < %(before)s" if before else ""
    return (
        "WITH nearest AS MATERIALIZED (SELECT buffer_id, embedding <=> %(q)s::vector AS dist "
        f"FROM buffer_vectors {where} ORDER BY dist LIMIT %(limit)s) "
        f"SELECT {', '.join('b.' + c for c in _BUFFER_COLS.split(', '))}, n.dist "
        "FROM nearest n JOIN buffer b ON b.id = n.buffer_id ORDER BY n.dist, b.id"
    )


def search_memories_sql(*, threshold: bool) -> str:
    return _nearest_sql(
        f"SELECT {_MEMORY_COLS}, embedding <=> %(q)s::vector AS dist FROM memories", threshold
    )


# ---- row -> record -----------------------------------------------------------------------
def _buffer_row(r: Sequence[Any]) -> BufferRow:
    return BufferRow(
        id=r[0], role=r[1], content=r[2], origin=r[3], created_at=iso_utc(r[4]), meta=r[5] or {}
    )


def _summary(r: Sequence[Any], embedding: bytes | None = None) -> Summary:
    return Summary(
        id=r[0],
        content=r[1],
        tags=list(r[2] or []),
        entities=r[3] or {},
        start_buffer_id=r[4],
        end_buffer_id=r[5],
        created_at=iso_utc(r[6]),
        embedding=_parse_vector(embedding) if embedding is not None else None,
    )


def _source(r: Sequence[Any]) -> Source:
    return Source(
        id=r[0],
        name=r[1],
        type=r[2],
        summary=r[3],
        start_id=r[4],
        end_id=r[5],
        created_at=iso_utc(r[6]),
        meta=r[7] or {},
        chunk_count=int(r[8]),
    )


def _memory(r: Sequence[Any], embedding: bytes | None = None) -> Memory:
    return Memory(
        id=r[0],
        source_id=r[1],
        content=r[2],
        metadata=r[3] or {},
        created_at=iso_utc(r[4]),
        embedding=_parse_vector(embedding) if embedding is not None else None,
    )


class PostgresStore(MemoryStore):
    """Memory in PostgreSQL with pgvector. Thread-safe: every call borrows a pooled
    connection for one transaction."""

    backend = "postgres"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        ef_search: int = 100,
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.ef_search = ef_search
        # the buffer's full-text term statistics (`_term_weights`); emptied by a forget
        self._term_cache: dict[str, Any] = {}
        self._safe_url = redact_url(url)
        self._adapters = _adapters()
        conninfo = url.replace("postgres://", "postgresql://", 1)
        try:  # a direct first connection gives the precise reason when it fails
            psycopg.connect(conninfo, connect_timeout=max(1, int(connect_timeout))).close()
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {self._safe_url}: {str(exc).strip()}. "
                "Check that the server is running and reachable, and that the user, password "
                "and database in NIXX_DB_URL are right (the database must exist: "
                "createdb <name>).",
                url=self._safe_url,
            ) from None
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"context": self._adapters, "connect_timeout": max(1, int(connect_timeout))},
            configure=self._configure,
            check=ConnectionPool.check_connection,  # survive a server restart
            open=True,
            name="nixx-store",
        )
        self._timeout = 60.0

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        # Placeholders for pgvector's settings are accepted before the library loads.
        conn.execute(f"SET hnsw.ef_search = {int(self.ef_search)}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.commit()

    # ---- plumbing -------------------------------------------------------------------
    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction (committed on success), with
        PostgreSQL errors translated into nixx's."""
        try:
            with self._pool.connection(timeout=self._timeout) as conn:
                yield conn
        except PoolTimeout:
            raise StoreError(
                f"no connection to PostgreSQL at {self._safe_url} within {self._timeout:.0f}s "
                "(server down, or every pooled connection busy)"
            ) from None
        except pgerr.UndefinedTable as exc:
            raise SchemaError(
                f"the database at {self._safe_url} has no nixx schema ({exc.diag.message_primary}); "
                "run `nixx db migrate`"
            ) from None
        except pgerr.DataException as exc:
            msg = str(exc).strip()
            if "dimensions" in msg:
                raise EmbedderMismatch(
                    f"vector dimension does not match the store: {msg}. Run `nixx reindex` to "
                    "re-embed the store with the configured embedder."
                ) from None
            raise ValidationError(f"PostgreSQL rejected the value: {msg}") from None
        except (pgerr.ForeignKeyViolation, pgerr.CheckViolation, pgerr.NotNullViolation) as exc:
            raise ValidationError(f"invalid record: {exc.diag.message_primary}") from None
        except psycopg.DataError as exc:  # client side, e.g. a NUL character in text
            raise ValidationError(f"cannot store the value in PostgreSQL: {exc}") from None
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL at {self._safe_url} failed: {str(exc).strip()}") from None
        except psycopg.Error as exc:  # anything else the server refused
            raise StoreError(f"PostgreSQL at {self._safe_url}: {str(exc).strip()}") from None

    def close(self) -> None:
        self._pool.close()

    # ---- schema ---------------------------------------------------------------------
    def schema_version(self) -> int:
        with self._conn() as conn:
            if conn.execute("SELECT to_regclass('nixx_migrations')").fetchone()[0] is None:  # type: ignore[index]
                return 0
            row = conn.execute("SELECT coalesce(max(version), 0) FROM nixx_migrations").fetchone()
            return int(row[0])  # type: ignore[index]

    def migrate(self) -> list[int]:
        with self._migrating() as conn:
            self._ensure_vector_extension(conn)
            conn.execute(MIGRATIONS_TABLE)

        def current(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute("SELECT coalesce(max(version), 0) FROM nixx_migrations").fetchone()
            return int(row[0])  # type: ignore[index]

        def record(conn: psycopg.Connection[Any], step: Migration) -> None:
            conn.execute(
                "INSERT INTO nixx_migrations (version, name) VALUES (%s, %s)",
                (step.version, step.name),
            )

        return migrations.run(
            MIGRATIONS, f"at {self._safe_url}", transaction=self._migrating, current=current,
            record=record,
        )

    @contextmanager
    def _migrating(self) -> Iterator[psycopg.Connection[Any]]:
        """One migration transaction: a pooled connection under the migration lock."""
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
            yield conn

    def _ensure_vector_extension(self, conn: psycopg.Connection[Any]) -> None:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except (pgerr.UndefinedFile, pgerr.FeatureNotSupported) as exc:
            raise StoreError(
                f"PostgreSQL at {self._safe_url} has no pgvector: `CREATE EXTENSION vector` "
                "needs the pgvector package installed on the database server (e.g. "
                "`apt install postgresql-NN-pgvector`, or the pgvector/pgvector Docker image). "
                f"Server said: {exc.diag.message_primary}"
            ) from None
        except pgerr.InsufficientPrivilege:
            raise StoreError(
                f"the user in NIXX_DB_URL ({self._safe_url}) may not create the pgvector "
                "extension: have a superuser run `CREATE EXTENSION vector;` in that database once"
            ) from None

    # ---- embedder identity ------------------------------------------------------------
    def embedding_info(self) -> EmbeddingInfo | None:
        with self._conn() as conn:
            return self._embedder(conn)

    @staticmethod
    def _embedder(conn: psycopg.Connection[Any]) -> EmbeddingInfo | None:
        row = conn.execute("SELECT model, dim FROM embedder").fetchone()
        return EmbeddingInfo(model=row[0], dim=int(row[1])) if row else None

    def bind_embedder(self, model: str, dim: int) -> None:
        dim = validation.embedder(model, dim, "bind_embedder")
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_EMBEDDER_LOCK,))
            current = self._embedder(conn)
            if current is None:
                conn.execute("INSERT INTO embedder (model, dim) VALUES (%s, %s)", (model, dim))
                self._narrow_vectors(conn, dim)
                return
            if (current.model, current.dim) == (model, dim):
                return
            if current.dim == dim and current.model == "":
                # vectors stored before any binding: name their model
                conn.execute("UPDATE embedder SET model = %s, bound_at = now()", (model,))
                return
            if self._has_vectors(conn):
                raise _mismatch(current, model, dim)
            # only buffer vectors (derived from the buffer), if any: dropped, the
            # background queue embeds the rows again with the new model
            self._lock_vector_tables(conn)
            conn.execute("DELETE FROM buffer_vectors")
            conn.execute("UPDATE embedder SET model = %s, dim = %s, bound_at = now()", (model, dim))
            if current.dim != dim:
                self._widen_vectors(conn)
                self._narrow_vectors(conn, dim)

    @staticmethod
    def _has_vectors(conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM summaries) OR EXISTS (SELECT 1 FROM memories)"
        ).fetchone()
        return bool(row[0])  # type: ignore[index]

    @staticmethod
    def _lock_vector_tables(conn: psycopg.Connection[Any]) -> None:
        """All the vector tables at once, in the order readers lock them (a statement
        reading several takes them in this order, e.g. `has_episodic_vectors`): an
        ALTER of one table after another, each locking as it goes, deadlocked with a
        concurrent turn's search holding one and wanting the next."""
        conn.execute("LOCK TABLE buffer_vectors, summaries, memories IN ACCESS EXCLUSIVE MODE")

    @staticmethod
    def _narrow_vectors(conn: psycopg.Connection[Any], dim: int) -> None:
        """Type the vector columns `vector(dim)` and build their HNSW indexes."""
        PostgresStore._lock_vector_tables(conn)
        for table in VECTOR_TABLES:
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dim})")
            if dim <= HNSW_MAX_DIM:
                conn.execute(
                    f"CREATE INDEX IF NOT EXISTS {table}_embedding_hnsw ON {table} "
                    "USING hnsw (embedding vector_cosine_ops)"
                )

    @staticmethod
    def _widen_vectors(conn: psycopg.Connection[Any]) -> None:
        PostgresStore._lock_vector_tables(conn)
        for table in VECTOR_TABLES:
            conn.execute(f"DROP INDEX IF EXISTS {table}_embedding_hnsw")
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector")

    def _vectors(
        self, conn: psycopg.Connection[Any], vectors: Sequence[Any], what: str
    ) -> list[np.ndarray]:
        """Validate vectors against the bound dimension. Vectors stored before any
        `bind_embedder` record an unnamed embedder of their dimension (as SQLite does)."""
        info = self._embedder(conn)
        dim = info.dim if info else None
        out = []
        for i, vec in enumerate(vectors):
            label = what if len(vectors) == 1 else f"{what} {i}"
            arr = as_vector(vec, dim, what=label)
            dim = arr.shape[0]
            out.append(arr)
        if info is None and dim is not None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_EMBEDDER_LOCK,))
            if self._embedder(conn) is None:
                conn.execute("INSERT INTO embedder (model, dim) VALUES ('', %s)", (dim,))
                self._narrow_vectors(conn, dim)
            else:  # bound meanwhile by another connection: check again
                return self._vectors(conn, vectors, what)
        return out

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
        written = 0

        def embed_checked(texts: list[str]) -> np.ndarray:
            vectors = np.asarray(embed(texts), dtype=np.float32)
            if vectors.shape != (len(texts), dim):
                raise EmbedderMismatch(
                    f"the embedder returned vectors of shape {vectors.shape}, "
                    f"expected ({len(texts)}, {dim}) for {model}"
                )
            if not np.all(np.isfinite(vectors)):
                raise ValidationError("the embedder returned NaN or infinity")
            return vectors

        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_EMBEDDER_LOCK,))
            conn.execute("LOCK TABLE buffer_vectors, summaries, memories IN EXCLUSIVE MODE")
            row = conn.execute(
                "SELECT (SELECT count(*) FROM summaries) + (SELECT count(*) FROM memories), "
                "(SELECT count(*) FROM buffer WHERE role <> 'marker')"
            ).fetchone()
            assert row is not None
            total = int(row[0]) + (int(row[1]) if buffer_text is not None else 0)
            if progress:
                progress(0, total)
            self._widen_vectors(conn)
            for table in ("summaries", "memories"):
                last = 0
                while True:
                    rows = conn.execute(
                        f"SELECT id, content FROM {table} WHERE id > %s ORDER BY id LIMIT %s",
                        (last, batch_size),
                    ).fetchall()
                    if not rows:
                        break
                    vectors = embed_checked([r[1] for r in rows])
                    with conn.cursor() as cur:
                        cur.executemany(
                            f"UPDATE {table} SET embedding = %s::vector WHERE id = %s",
                            [(vec, r[0]) for vec, r in zip(vectors, rows, strict=True)],
                        )
                    written += len(rows)
                    last = rows[-1][0]
                    if progress:
                        progress(written, total)
            # Buffer vectors are derived data: re-embedded when `buffer_text` is given,
            # else dropped for the background queue to make again.
            conn.execute("DELETE FROM buffer_vectors")
            last = 0
            while buffer_text is not None:
                buffer_rows = [
                    _buffer_row(r)
                    for r in conn.execute(
                        f"SELECT {_BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND id > %s "
                        "ORDER BY id LIMIT %s",
                        (last, batch_size),
                    ).fetchall()
                ]
                if not buffer_rows:
                    break
                vectors = embed_checked(buffer_text(buffer_rows))
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO buffer_vectors (buffer_id, embedding) VALUES (%s, %s::vector)",
                        [(r.id, vec) for r, vec in zip(buffer_rows, vectors, strict=True)],
                    )
                written += len(buffer_rows)
                last = buffer_rows[-1].id
                if progress:
                    progress(written, total)
            conn.execute("DELETE FROM embedder")
            conn.execute("INSERT INTO embedder (model, dim) VALUES (%s, %s)", (model, dim))
            self._narrow_vectors(conn, dim)
        return written

    # ---- episodic: buffer ---------------------------------------------------------------
    def append_buffer(
        self, role: str, content: str, origin: str = "api", meta: dict[str, Any] | None = None
    ) -> BufferRow:
        meta = validation.buffer_row(role, content, origin, meta)
        with self._conn() as conn:
            row = conn.execute(
                f"INSERT INTO buffer (role, content, origin, meta) VALUES (%s, %s, %s, %s) "
                f"RETURNING {_BUFFER_COLS}",
                (role, content, origin, Jsonb(meta)),
            ).fetchone()
        return _buffer_row(row)  # type: ignore[arg-type]

    def append_user_once(
        self, content: str, origin: str = "api", meta: dict[str, Any] | None = None
    ) -> BufferRow:
        meta = validation.buffer_row("user", content, origin, meta)
        with self._conn() as conn:
            # one transaction, serialised against every other append_user_once
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_USER_ROW_LOCK,))
            marker = conn.execute(
                "SELECT coalesce(max(id), 0) FROM buffer WHERE role = 'marker'"
            ).fetchone()
            tail = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id > %s AND role != 'marker' "
                "ORDER BY id DESC LIMIT %s",
                (marker[0], RETRY_TAIL),  # type: ignore[index]
            ).fetchall()
            reuse = retried_user_row([_buffer_row(r) for r in tail], content, origin)
            if reuse is not None:
                return reuse
            row = conn.execute(
                f"INSERT INTO buffer (role, content, origin, meta) VALUES ('user', %s, %s, %s) "
                f"RETURNING {_BUFFER_COLS}",
                (content, origin, Jsonb(meta)),
            ).fetchone()
        return _buffer_row(row)  # type: ignore[arg-type]

    def update_buffer_meta(self, row_id: int, meta: dict[str, Any]) -> None:
        meta = validation.json_object(meta, "meta")
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE buffer SET meta = meta || %s WHERE id = %s", (Jsonb(meta), row_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"buffer row {row_id} does not exist")

    def get_buffer(self, start_id: int, end_id: int | None = None) -> list[BufferRow]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id >= %s "
                "AND (%s::bigint IS NULL OR id <= %s::bigint) ORDER BY id",
                (start_id, end_id, end_id),
            ).fetchall()
        return [_buffer_row(r) for r in rows]

    def get_buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE id = ANY(%s::bigint[]) ORDER BY id",
                (wanted,),
            ).fetchall()
        return [_buffer_row(r) for r in rows]

    def last_buffer_rows(self, n: int, *, after_id: int = 0) -> list[BufferRow]:
        if n <= 0:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND id > %s "
                "ORDER BY id DESC LIMIT %s",
                (after_id, n),
            ).fetchall()
        return [_buffer_row(r) for r in reversed(rows)]

    def last_marker_id(self) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT max(id) FROM buffer WHERE role = 'marker'").fetchone()
        return int(row[0] or 0)  # type: ignore[index]

    def search_buffer(self, query: str, limit: int = 10) -> list[BufferHit]:
        from nixx.store.fts_query import query_terms

        terms = query_terms(query or "")  # letters/digits only: no tsquery syntax
        if limit <= 0 or not terms:
            return []
        with self._conn() as conn:
            weights, avg_len = self._term_weights(conn, terms)
            total = sum(weights.values())
            if total <= 0:
                return []
            words = list(weights)
            rows = conn.execute(
                SEARCH_BUFFER_SQL,
                (list(weights.values()), words, avg_len, " | ".join(words), limit),
            ).fetchall()
        return [BufferHit(row=_buffer_row(r), score=float(r[6] or 0.0) / total) for r in rows]

    def _term_weights(
        self, conn: psycopg.Connection[Any], terms: list[str]
    ) -> tuple[dict[str, float], float]:
        """({word: IDF} of the words full text matches, the rows' average length), as the
        SQLite store weighs them (`term_stats`): frequencies cached per process and read
        again once the buffer grew by a tenth; words in half the rows or more left out of a
        store of `MIN_ROWS` rows or more; words the english configuration drops left out."""
        from nixx.store.term_stats import IDF_FLOOR, MIN_ROWS, REFRESH_GROWTH, idf

        cache = self._term_cache
        top = conn.execute("SELECT coalesce(max(id), 0) FROM buffer").fetchone()
        max_id = int(top[0]) if top else 0  # type: ignore[index]
        if not cache or max_id > cache["max_id"] * (1 + REFRESH_GROWTH):
            row = conn.execute(BUFFER_TERM_TOTALS_SQL).fetchone()
            assert row is not None
            # a new dict, swapped in whole: another thread reads the old one meanwhile
            cache = {"rows": int(row[0]), "avg": float(row[1]), "max_id": int(row[2]), "df": {}}
            self._term_cache = cache
        df: dict[str, int | None] = cache["df"]
        unknown = [t for t in terms if t not in df]
        if unknown:
            for term, nodes, count in conn.execute(TERM_FREQUENCIES_SQL, (unknown,)):
                df[term] = int(count) if nodes else None
        total = cache["rows"]
        weights = {t: idf(df[t] or 0, total) for t in terms if df.get(t) is not None}
        if total >= MIN_ROWS:
            weights = {t: w for t, w in weights.items() if w > IDF_FLOOR}
        return weights, max(1.0, cache["avg"])

    def buffer_stats(self) -> dict[str, int]:
        with self._conn() as conn:
            row = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM buffer").fetchone()
        return {"rows": int(row[0]), "max_id": int(row[1])}  # type: ignore[index]

    # ---- episodic: buffer row vectors -------------------------------------------------
    def buffer_rows_without_vector(self, limit: int, *, after_id: int = 0) -> list[BufferRow]:
        if limit <= 0:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer b WHERE id > %s AND role <> 'marker' "
                "AND NOT EXISTS (SELECT 1 FROM buffer_vectors v WHERE v.buffer_id = b.id) "
                "ORDER BY id LIMIT %s",
                (after_id, limit),
            ).fetchall()
        return [_buffer_row(r) for r in rows]

    def add_buffer_vectors(self, items: Sequence[tuple[int, np.ndarray]]) -> int:
        if not items:
            return 0
        with self._conn() as conn:
            vectors = self._vectors(conn, [vec for _, vec in items], "buffer row embedding")
            ids = [int(i) for i, _ in items]
            existing = {
                r[0]
                for r in conn.execute(
                    "SELECT id FROM buffer WHERE id = ANY(%s) AND role <> 'marker'", (ids,)
                )
            }
            rows = [(i, vec) for i, vec in zip(ids, vectors, strict=True) if i in existing]
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO buffer_vectors (buffer_id, embedding) VALUES (%s, %s::vector) "
                        "ON CONFLICT (buffer_id) DO UPDATE SET embedding = EXCLUDED.embedding",
                        rows,
                    )
        return len(rows)

    def search_buffer_vectors(
        self, embedding: np.ndarray, *, limit: int, before_id: int | None = None
    ) -> list[BufferHit]:
        if limit <= 0:
            return []
        rows = self._nearest(
            search_buffer_vectors_sql(before=before_id is not None),
            embedding,
            limit,
            None,
            {"before": before_id},
        )
        return [BufferHit(row=_buffer_row(r), score=1.0 - float(r[-1])) for r in rows]

    def has_episodic_vectors(self) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM buffer_vectors) OR EXISTS (SELECT 1 FROM summaries)"
            ).fetchone()
        return bool(row[0])  # type: ignore[index]

    def buffer_vector_stats(self) -> dict[str, int]:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM buffer_vectors), "
                "(SELECT count(*) FROM buffer WHERE role <> 'marker')"
            ).fetchone()
        assert row is not None
        return {"embedded": int(row[0]), "pending": max(0, int(row[1]) - int(row[0]))}

    # ---- episodic: summaries ----------------------------------------------------------
    def last_summarised_id(self) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT max(end_buffer_id) FROM summaries").fetchone()
        return int(row[0] or 0)  # type: ignore[index]

    def unsummarised(self) -> list[BufferRow]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND id > "
                "(SELECT coalesce(max(end_buffer_id), 0) FROM summaries) ORDER BY id"
            ).fetchall()
        return [_buffer_row(r) for r in rows]

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
        with self._conn() as conn:
            (vec,) = self._vectors(conn, [embedding], "summary embedding")
            found = conn.execute(
                "SELECT count(*) FROM buffer WHERE id IN (%s, %s)",
                (start_buffer_id, end_buffer_id),
            ).fetchone()[0]  # type: ignore[index]
            if found != len({start_buffer_id, end_buffer_id}):
                raise ValidationError(
                    f"summary range {start_buffer_id}..{end_buffer_id} does not name existing "
                    "buffer rows",
                    param="start_buffer_id",
                )
            row = conn.execute(
                "INSERT INTO summaries (content, embedding, tags, entities, start_buffer_id, "
                f"end_buffer_id) VALUES (%s, %s::vector, %s, %s, %s, %s) RETURNING {_SUMMARY_COLS}",
                (
                    content,
                    vec,
                    tags,
                    Jsonb(entities),
                    start_buffer_id,
                    end_buffer_id,
                ),
            ).fetchone()
        return dataclasses.replace(
            _summary(row),  # type: ignore[arg-type]
            embedding=vec.copy(),
        )

    def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_SUMMARY_COLS} FROM summaries ORDER BY id DESC LIMIT %s OFFSET %s",
                (max(0, limit), max(0, offset)),
            ).fetchall()
        return [_summary(r) for r in rows]

    def count_summaries(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT count(*) FROM summaries").fetchone()[0])  # type: ignore[index]

    def search_summaries(
        self,
        embedding: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        before_buffer_id: int | None = None,
    ) -> list[SummaryHit]:
        if limit <= 0:
            return []
        rows = self._nearest(
            search_summaries_sql(
                before=before_buffer_id is not None, threshold=threshold is not None
            ),
            embedding,
            limit,
            threshold,
            {"before": before_buffer_id},
        )
        return [SummaryHit(summary=_summary(r), score=1.0 - float(r[-1])) for r in rows]

    def _nearest(
        self,
        sql: str,
        embedding: np.ndarray,
        limit: int,
        threshold: float | None,
        params: dict[str, Any],
    ) -> list[Any]:
        with self._conn() as conn:
            info = self._embedder(conn)
            if info is None:  # nothing stored yet
                return []
            q = as_vector(embedding, info.dim, what="query embedding")
            return conn.execute(
                sql,
                {
                    **params,
                    "q": q,
                    "limit": limit,
                    "max_dist": None if threshold is None else 1.0 - float(threshold),
                },
            ).fetchall()

    # ---- semantic: sources & memories ---------------------------------------------------
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
        with self._conn() as conn:
            for row_id in {start_id, end_id} - {None}:
                if not conn.execute("SELECT 1 FROM buffer WHERE id = %s", (row_id,)).fetchone():
                    raise ValidationError(
                        f"source range names buffer row {row_id}, which does not exist"
                    )
            rows = self._chunk_rows(conn, chunks)
            source_id = conn.execute(
                "INSERT INTO sources (name, type, summary, start_id, end_id, meta) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (name, type, summary, start_id, end_id, Jsonb(meta)),
            ).fetchone()[0]  # type: ignore[index]
            self._insert_chunks(conn, source_id, rows)
            return self._get_source(conn, source_id)

    def _chunk_rows(
        self, conn: psycopg.Connection[Any], chunks: Sequence[NewChunk]
    ) -> list[tuple[str, np.ndarray, dict[str, Any]]]:
        """Validate every chunk before anything is written."""
        for i, chunk in enumerate(chunks):
            validation.chunk_content(i, chunk.content)
        vectors = self._vectors(conn, [c.embedding for c in chunks], "chunk embedding")
        return [
            (c.content, vec, validation.json_object(c.metadata, "metadata"))
            for c, vec in zip(chunks, vectors, strict=True)
        ]

    @staticmethod
    def _insert_chunks(
        conn: psycopg.Connection[Any],
        source_id: int,
        rows: Sequence[tuple[str, np.ndarray, dict[str, Any]]],
    ) -> None:
        if not rows:
            return
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memories (content, embedding, source_id, metadata) "
                "VALUES (%s, %s::vector, %s, %s)",
                [(content, vec, source_id, Jsonb(meta)) for content, vec, meta in rows],
            )

    def replace_source(
        self,
        source_id: int,
        chunks: Sequence[NewChunk],
        *,
        summary: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Source:
        with self._conn() as conn:
            if not conn.execute(
                "SELECT 1 FROM sources WHERE id = %s FOR UPDATE", (source_id,)
            ).fetchone():
                raise NotFound(f"source {source_id} does not exist")
            rows = self._chunk_rows(conn, chunks)
            conn.execute("DELETE FROM memories WHERE source_id = %s", (source_id,))
            self._insert_chunks(conn, source_id, rows)
            if summary is not None:
                conn.execute("UPDATE sources SET summary = %s WHERE id = %s", (summary, source_id))
            if meta is not None:
                conn.execute(
                    "UPDATE sources SET meta = %s WHERE id = %s",
                    (Jsonb(validation.json_object(meta, "meta")), source_id),
                )
            return self._get_source(conn, source_id)

    def set_source_summary(self, source_id: int, summary: str) -> None:
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE sources SET summary = %s WHERE id = %s", (summary, source_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"source {source_id} does not exist")

    def get_source(self, source_id: int) -> Source:
        with self._conn() as conn:
            return self._get_source(conn, source_id)

    @staticmethod
    def _get_source(conn: psycopg.Connection[Any], source_id: int) -> Source:
        row = conn.execute(
            f"SELECT {_SOURCE_COLS} FROM sources s WHERE s.id = %s", (source_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"source {source_id} does not exist")
        return _source(row)

    def find_sources(self, **meta_equals: Any) -> list[Source]:
        if not meta_equals:
            return self.list_sources()
        # `@>` narrows through the GIN index; the per-key test makes it equality.
        conds = ["s.meta @> %s"] + ["s.meta -> %s = %s"] * len(meta_equals)
        params: list[Any] = [Jsonb(meta_equals)]
        for key, value in meta_equals.items():
            params += [key, Jsonb(value)]
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_SOURCE_COLS} FROM sources s WHERE {' AND '.join(conds)} "
                "ORDER BY s.id DESC",
                params,
            ).fetchall()
        return [_source(r) for r in rows]

    def list_sources(self) -> list[Source]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_SOURCE_COLS} FROM sources s ORDER BY s.id DESC"
            ).fetchall()
        return [_source(r) for r in rows]

    def delete_source(self, source_id: int) -> None:
        with self._conn() as conn:
            if conn.execute("DELETE FROM sources WHERE id = %s", (source_id,)).rowcount == 0:
                raise NotFound(f"source {source_id} does not exist")

    def source_chunks(self, source_id: int) -> list[Memory]:
        with self._conn() as conn:
            if not conn.execute("SELECT 1 FROM sources WHERE id = %s", (source_id,)).fetchone():
                raise NotFound(f"source {source_id} does not exist")
            rows = conn.execute(
                f"SELECT {_MEMORY_COLS}, {_VEC_OUT} FROM memories WHERE source_id = %s ORDER BY id",
                (source_id,),
            ).fetchall()
        return [_memory(r, r[5]) for r in rows]

    def search_memories(
        self, embedding: np.ndarray, *, limit: int, threshold: float | None = None
    ) -> list[MemoryHit]:
        if limit <= 0:
            return []
        rows = self._nearest(
            search_memories_sql(threshold=threshold is not None),
            embedding,
            limit,
            threshold,
            {},
        )
        if not rows:
            return []
        with self._conn() as conn:
            names = dict(
                conn.execute(
                    "SELECT id, name FROM sources WHERE id = ANY(%s)",
                    (list({r[1] for r in rows}),),
                ).fetchall()
            )
        return [
            MemoryHit(memory=_memory(r), source_name=names.get(r[1], ""), score=1.0 - float(r[-1]))
            for r in rows
        ]

    def count_memories(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])  # type: ignore[index]

    # ---- forgetting and editing ------------------------------------------------------
    def forget(
        self,
        kind: str,
        *,
        buffer_ids: Sequence[int] = (),
        summary_ids: Sequence[int] = (),
        source_ids: Sequence[int] = (),
        memory_ids: Sequence[int] = (),
    ) -> ForgetResult:
        with self._conn() as conn:
            # no summary or source may appear (or change) between the plan and the deletes
            conn.execute("LOCK TABLE summaries, sources IN EXCLUSIVE MODE")
            result = forgetting.execute(
                _ForgetOps(conn), kind, buffer_ids, summary_ids, source_ids, memory_ids
            )
        self._term_cache = {}  # fewer rows: frequencies read before may be too high
        return result

    def get_summary(self, summary_id: int) -> Summary:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_SUMMARY_COLS} FROM summaries WHERE id = %s", (summary_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"summary {summary_id} does not exist")
        return _summary(row)

    def update_summary(
        self,
        summary_id: int,
        *,
        content: str | None = None,
        embedding: np.ndarray | None = None,
        tags: Sequence[str] | None = None,
        entities: dict[str, list[str]] | None = None,
    ) -> Summary:
        with self._conn() as conn:
            old = conn.execute(
                f"SELECT {_SUMMARY_COLS} FROM summaries WHERE id = %s FOR UPDATE", (summary_id,)
            ).fetchone()
            if old is None:
                raise NotFound(f"summary {summary_id} does not exist")
            cur = _summary(old)
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
                (vec,) = self._vectors(conn, [embedding], "summary embedding")
                conn.execute(
                    "UPDATE summaries SET content = %s, embedding = %s::vector WHERE id = %s",
                    (content, vec, summary_id),
                )
            conn.execute(
                "UPDATE summaries SET tags = %s, entities = %s WHERE id = %s",
                (new_tags, Jsonb(new_entities), summary_id),
            )
            _ForgetOps(conn).log("summary_edit", *forgetting.edit_log(summary_id))
            row = conn.execute(
                f"SELECT {_SUMMARY_COLS} FROM summaries WHERE id = %s", (summary_id,)
            ).fetchone()
        return _summary(row)  # type: ignore[arg-type]

    def find_text(
        self, terms: Sequence[str], limit: int
    ) -> tuple[list[BufferRow], list[Summary], list[Memory]]:
        terms = [t.lower() for t in terms if t]
        if not terms or limit <= 0:
            return [], [], []
        where = " AND ".join("strpos(lower(content), %s) > 0" for _ in terms)
        # a buffer row's meta too (`meta.tools` arguments, `meta.agent`)
        in_row = " AND ".join("strpos(lower(content || ' ' || meta::text), %s) > 0"
                              for _ in terms)
        with self._conn() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            buffer = conn.execute(
                f"SELECT {_BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND {in_row} "
                "ORDER BY id LIMIT %s",
                (*terms, limit),
            ).fetchall()
            summaries = conn.execute(
                f"SELECT {_SUMMARY_COLS} FROM summaries WHERE {where} ORDER BY id LIMIT %s",
                (*terms, limit),
            ).fetchall()
            memories = conn.execute(
                f"SELECT {_MEMORY_COLS} FROM memories WHERE {where} ORDER BY id LIMIT %s",
                (*terms, limit),
            ).fetchall()
        return (
            [_buffer_row(r) for r in buffer],
            [_summary(r) for r in summaries],
            [_memory(r) for r in memories],
        )

    def forget_log(self, limit: int = 100) -> list[ForgetLogEntry]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, forgotten_at, kind, ids, counts FROM forget_log "
                "ORDER BY id DESC LIMIT %s",
                (max(0, limit),),
            ).fetchall()
        return [ForgetLogEntry(int(r[0]), iso_utc(r[1]), r[2], r[3], r[4]) for r in rows]

    def scrub(self) -> dict[str, Any]:
        """PostgreSQL removes deleted rows from its tables (`VACUUM` makes the space
        reusable) but its write-ahead log keeps the deleted text until the server
        recycles those segments: nothing a client can scrub. Said where a forget answers."""
        return {"backend": "postgres", "note": PG_WAL_NOTE}

    def vacuum(self) -> dict[str, Any]:
        """``VACUUM (FULL, ANALYZE)`` of nixx's tables: each is rewritten into new files
        without its dead rows (which plain VACUUM only marks reusable). Takes an
        exclusive lock on each table while it runs."""
        tables = ("buffer", "summaries", "sources", "memories", "state", "forget_log")
        with self._pool.connection(timeout=self._timeout) as conn:
            conn.autocommit = True
            try:
                size = "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) t"
                before = int(conn.execute(size, (list(tables),)).fetchone()[0] or 0)  # type: ignore[index]
                for table in tables:
                    conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
                after = int(conn.execute(size, (list(tables),)).fetchone()[0] or 0)  # type: ignore[index]
            finally:
                conn.autocommit = False
        return {"backend": "postgres", "bytes_before": before, "bytes_after": after}

    # ---- state ----------------------------------------------------------------------
    def get_state(self, key: str, default: Any = None) -> Any:
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM state WHERE key = %s", (key,)).fetchone()
        return default if row is None else row[0]

    def set_state(self, key: str, value: Any) -> None:
        validation.state_key(key)
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"state {key!r} must be JSON: {exc}") from None
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO state (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                (key, Jsonb(value)),
            )

    def delete_state(self, key: str) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM state WHERE key = %s", (key,))

    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        validation.state_key(key)
        with self._conn() as conn:
            return self._update_state(conn, key, fn)

    @staticmethod
    def _update_state(conn: psycopg.Connection[Any], key: str, fn: Callable[[Any], Any]) -> Any:
        # the row lock serialises concurrent updates of one key; a key not there yet is
        # guarded by a transaction-scoped advisory lock on its hash
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
        row = conn.execute("SELECT value FROM state WHERE key = %s FOR UPDATE", (key,)).fetchone()
        value = fn(None if row is None else row[0])
        if value is None:
            conn.execute("DELETE FROM state WHERE key = %s", (key,))
        else:
            conn.execute(
                "INSERT INTO state (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                (key, Jsonb(value)),
            )
        return value

    # ---- export / import ------------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        from nixx.store.portable import (
            buffer_record,
            forget_record,
            header_record,
            memory_record,
            source_record,
            summary_record,
        )

        with self._conn() as conn:
            # One snapshot for the whole export, however long it takes to consume.
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield header_record()
            info = self._embedder(conn)
            if info is not None:
                yield {"type": "embedder", "model": info.model, "dim": info.dim}
            for key, value in conn.execute("SELECT key, value FROM state ORDER BY key"):
                yield {"type": "state", "key": key, "value": value}
            for r in self._stream(
                conn,
                f"SELECT {', '.join('b.' + c for c in _BUFFER_COLS.split(', '))}, "
                "vector_send(v.embedding) FROM buffer b "
                "LEFT JOIN buffer_vectors v ON v.buffer_id = b.id ORDER BY b.id",
            ):
                vec = None if r[6] is None else _parse_vector(r[6])
                yield buffer_record(_buffer_row(r), vec)
            for r in self._stream(
                conn, f"SELECT {_SUMMARY_COLS}, {_VEC_OUT} FROM summaries ORDER BY id"
            ):
                yield summary_record(_summary(r, r[7]))
            for r in self._stream(
                conn,
                "SELECT id, name, type, summary, start_id, end_id, created_at, meta, 0 "
                "FROM sources ORDER BY id",
            ):
                yield source_record(_source(r))  # chunk_count (0) is not exported
            for r in self._stream(
                conn, f"SELECT {_MEMORY_COLS}, {_VEC_OUT} FROM memories ORDER BY id"
            ):
                yield memory_record(_memory(r, r[5]))
            for r in conn.execute(
                "SELECT id, forgotten_at, kind, ids, counts FROM forget_log ORDER BY id"
            ):
                yield forget_record(ForgetLogEntry(int(r[0]), iso_utc(r[1]), r[2], r[3], r[4]))

    @staticmethod
    def _stream(conn: psycopg.Connection[Any], sql: str) -> Iterator[Any]:
        with conn.cursor(name="nixx_export") as cur:
            cur.itersize = 2000
            cur.execute(sql)
            yield from cur

    def import_records(self, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        from nixx.store.export_file import RecordReader

        reader = RecordReader(records)
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_EMBEDDER_LOCK,))
            conn.execute("LOCK TABLE buffer, summaries, sources, memories, state IN EXCLUSIVE MODE")
            for table in (
                "buffer",
                "summaries",
                "sources",
                "memories",
                "state",
                "embedder",
                "forget_log",
            ):
                if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                    raise Conflict(
                        f"cannot import into {self._safe_url}: the store is not empty (it has "
                        f"{table} rows); import into a new database"
                    )
            loader = _Loader(conn)
            for kind, batch in reader.batches():
                loader.load(kind, batch)
            loader.finish()
        return reader.counts


class _ForgetOps:
    """`nixx.store.forgetting.Ops` on an open PostgreSQL transaction."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def existing(self, table: str, ids: Sequence[int]) -> set[int]:
        cur = self.conn.execute(f"SELECT id FROM {table} WHERE id = ANY(%s)", (list(ids),))
        return {int(r[0]) for r in cur.fetchall()}

    def rows_in(self, start: int, end: int) -> list[tuple[int, str]]:
        cur = self.conn.execute(
            "SELECT id, role FROM buffer WHERE id BETWEEN %s AND %s ORDER BY id", (start, end)
        )
        return [(int(r[0]), r[1]) for r in cur.fetchall()]

    def summary_windows(self) -> Iterable[tuple[int, int, int]]:
        return self.conn.execute(
            "SELECT id, start_buffer_id, end_buffer_id FROM summaries"
        ).fetchall()

    def buffer_sources(self) -> Iterable[tuple[int, int | None, int | None]]:
        return self.conn.execute(
            "SELECT id, start_id, end_id FROM sources WHERE type = 'buffer'"
        ).fetchall()

    def delete(self, table: str, column: str, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        cur = self.conn.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", (list(ids),))
        return int(cur.rowcount)

    def narrow_source(self, source_id: int, start: int, end: int) -> None:
        self.conn.execute(
            "UPDATE sources SET start_id = %s, end_id = %s, summary = NULL WHERE id = %s",
            (start, end, source_id),
        )

    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        return PostgresStore._update_state(self.conn, key, fn)

    def log(self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]) -> tuple[int, str]:
        row = self.conn.execute(
            "INSERT INTO forget_log (kind, ids, counts) VALUES (%s, %s, %s) "
            "RETURNING id, forgotten_at",
            (kind, Jsonb(ids), Jsonb(counts)),
        ).fetchone()
        assert row is not None
        return int(row[0]), iso_utc(row[1])


class _Loader:
    """Bulk-loads validated import batches with COPY, keeping ids."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.dim: int | None = None
        self.embedder: EmbeddingInfo | None = None
        self.widened = False

    def load(self, kind: str, batch: list[dict[str, Any]]) -> None:
        conn = self.conn
        if kind == "embedder":
            rec = batch[-1]
            self.embedder = EmbeddingInfo(model=rec["model"], dim=int(rec["dim"]))
            self.dim = self.embedder.dim
            conn.execute("DELETE FROM embedder")
            conn.execute(
                "INSERT INTO embedder (model, dim) VALUES (%s, %s)",
                (self.embedder.model, self.embedder.dim),
            )
            # Load without the HNSW indexes; `finish` narrows the columns and builds them.
            PostgresStore._widen_vectors(conn)
            self.widened = True
            return
        if kind == "state":
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO state (key, value) VALUES (%s, %s)",
                    [(r["key"], Jsonb(r["value"])) for r in batch],
                )
            return
        vectored = batch  # the records carrying a vector
        if kind == "buffer":
            vectored = [
                r for r in batch if r.get("embedding") is not None and r["role"] != "marker"
            ]
        if kind in ("summary", "memory") or (kind == "buffer" and vectored):
            if self.dim is None:  # no embedder record: an unnamed one of this dimension
                self.embedder = EmbeddingInfo(model="", dim=len(vectored[0]["embedding"]))
                self.dim = self.embedder.dim
                conn.execute("INSERT INTO embedder (model, dim) VALUES ('', %s)", (self.dim,))
                PostgresStore._widen_vectors(conn)
                self.widened = True
            for r in vectored:
                if len(r["embedding"]) != self.dim:
                    raise EmbedderMismatch(
                        f"{kind} {r['id']} embedding has {len(r['embedding'])} dimensions but "
                        f"the export's vectors have {self.dim}"
                    )
        table, columns, row = _LOAD[kind]
        if kind in ("summary", "memory"):  # vectors go as binary parameters
            marks = ", ".join("%s::vector" if c == "embedding" else "%s" for c in columns)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                    [row(r) for r in batch],
                )
            return
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for r in batch:
                copy.write_row(row(r))
        if kind == "buffer" and vectored:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO buffer_vectors (buffer_id, embedding) VALUES (%s, %s::vector)",
                    [
                        (r["id"], _vector_param(r["embedding"], f"buffer {r['id']}"))
                        for r in vectored
                    ],
                )

    def finish(self) -> None:
        conn = self.conn
        for table in ("buffer", "summaries", "sources", "memories", "forget_log"):
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
            )
        if self.widened and self.embedder is not None:
            PostgresStore._narrow_vectors(conn, self.embedder.dim)


def _vector_param(values: list[float], what: str) -> np.ndarray:
    try:
        vec = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValidationError(f"{what}: the embedding must be an array of numbers") from None
    if vec.ndim != 1 or not np.isfinite(vec).all():
        raise ValidationError(f"{what}: the embedding must be a flat array of finite numbers")
    return vec


_LOAD: dict[str, tuple[str, tuple[str, ...], Callable[[dict[str, Any]], tuple[Any, ...]]]] = {
    "buffer": (
        "buffer",
        ("id", "role", "content", "origin", "meta", "created_at"),
        lambda r: (
            r["id"],
            r["role"],
            r["content"],
            r["origin"],
            Jsonb(r["meta"]),
            parse_iso(r["created_at"], f"buffer {r['id']}"),
        ),
    ),
    "summary": (
        "summaries",
        (
            "id",
            "content",
            "embedding",
            "tags",
            "entities",
            "start_buffer_id",
            "end_buffer_id",
            "created_at",
        ),
        lambda r: (
            r["id"],
            r["content"],
            _vector_param(r["embedding"], f"summary {r['id']}"),
            list(r["tags"]),
            Jsonb(r["entities"]),
            r["start_buffer_id"],
            r["end_buffer_id"],
            parse_iso(r["created_at"], f"summary {r['id']}"),
        ),
    ),
    "source": (
        "sources",
        ("id", "name", "type", "summary", "start_id", "end_id", "meta", "created_at"),
        lambda r: (
            r["id"],
            r["name"],
            r["source_type"],
            r["summary"],
            r["start_id"],
            r["end_id"],
            Jsonb(r["meta"]),
            parse_iso(r["created_at"], f"source {r['id']}"),
        ),
    ),
    "forget": (
        "forget_log",
        ("id", "forgotten_at", "kind", "ids", "counts"),
        lambda r: (
            r["id"],
            parse_iso(r["at"], f"forget {r['id']}"),
            r["kind"],
            Jsonb(r["ids"]),
            Jsonb(r["counts"]),
        ),
    ),
    "memory": (
        "memories",
        ("id", "content", "embedding", "source_id", "metadata", "created_at"),
        lambda r: (
            r["id"],
            r["content"],
            _vector_param(r["embedding"], f"memory {r['id']}"),
            r["source_id"],
            Jsonb(r["metadata"]),
            parse_iso(r["created_at"], f"memory {r['id']}"),
        ),
    ),
}


def _mismatch(current: EmbeddingInfo, model: str, dim: int) -> EmbedderMismatch:
    return EmbedderMismatch(
        f"this store holds vectors made by {current.model} ({current.dim}-d), but the "
        f"configured embedder is {model} ({dim}-d). Run `nixx reindex` to re-embed everything "
        f"with {model}, or configure {current.model} again (NIXX_EMBED_MODEL).",
        stored_model=current.model,
        stored_dim=current.dim,
    )
