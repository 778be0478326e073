"""The PostgreSQL + pgvector memory store: the seed's schema (`tsvector` + GIN for the
buffer, `vector` + HNSW for summaries and memories), a psycopg 3 connection pool, one
transaction per method.

    store = PostgresStore("postgresql://nixx@db.example/nixx")
    store.migrate()

`PostgresStore` is the backend-neutral `MemoryStore` over `PostgresDatabase`, which holds
the pool, the errors PostgreSQL's are translated into, migrations, and the searches
(full text and HNSW, below); its queries are `nixx.store.postgres_queries`.

Vectors travel to the server in pgvector's binary format (a psycopg dumper for numpy
arrays, local to this store's connections) and come back as text. Full-text search ORs
the query's lexemes and ranks them by BM25 as FTS5 does (`SEARCH_BUFFER_SQL`); vector search orders by cosine
distance (`<=>`) through the HNSW index, with pgvector's iterative scan so a filter
never starves the result. See docs/storage.md.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pgerr
from psycopg.adapt import AdaptersMap, Dumper
from psycopg.pq import Format
from psycopg_pool import ConnectionPool, PoolTimeout

from nixx import migrations
from nixx.errors import EmbedderMismatch, SchemaError, StoreError, ValidationError
from nixx.migrations import Migration
from nixx.store.base import MemoryStore
from nixx.store.database import Database, Event, VectorQuery
from nixx.store.portable import as_vector
from nixx.store.postgres_queries import ROWS, PostgresTx
from nixx.store.postgres_schema import MIGRATIONS, MIGRATIONS_TABLE
from nixx.store.records import BufferHit, Memory, SummaryHit
from nixx.store.reports import ScrubReport, VacuumReport
from nixx.store.sql_queries import BUFFER_COLS as _BUFFER_COLS
from nixx.store.sql_queries import MEMORY_COLS as _MEMORY_COLS
from nixx.store.sql_queries import SUMMARY_COLS as _SUMMARY_COLS

_MIGRATE_LOCK = 7_346_101  # pg_advisory_xact_lock key (arbitrary, fixed)

#: what a forget answers on PostgreSQL (docs/memory.md, "Forgetting")
PG_WAL_NOTE = (
    "deleted from the tables; PostgreSQL's write-ahead log (pg_wal) and any WAL archive or "
    "replica still hold the text until the server recycles those segments (after "
    "checkpoints; `nixx db vacuum` does not reach them): ask the database's administrator "
    "to run CHECKPOINT and rotate the WAL (pg_switch_wal()) where that matters"
)


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


@dataclass(frozen=True)
class PostgresOptions:
    """The levers of a `PostgresStore` (docs/storage.md)."""

    pool_size: int  # pooled connections at most
    ef_search: int  # hnsw.ef_search of every connection
    connect_timeout: float  # seconds


class PostgresStore(MemoryStore):
    """Memory in PostgreSQL with pgvector. Thread-safe: every call borrows a pooled
    connection for one transaction."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        ef_search: int = 100,
        connect_timeout: float = 10.0,
    ) -> None:
        self.engine = PostgresDatabase(url, PostgresOptions(pool_size, ef_search, connect_timeout))
        super().__init__(self.engine)
        self.url = url


class PostgresDatabase(Database):
    """PostgreSQL + pgvector under `MemoryStore` (see the module docstring)."""

    backend = "postgres"

    def __init__(self, url: str, options: PostgresOptions) -> None:
        pool_size, ef_search, connect_timeout = (
            options.pool_size,
            options.ef_search,
            options.connect_timeout,
        )
        self.url = url
        self.ef_search = ef_search
        # the buffer's full-text term statistics (`_term_weights`); emptied by a forget
        self._term_cache: dict[str, Any] = {}
        self._safe_url = redact_url(url)
        self.where = self._safe_url
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

    # ---- transactions ----------------------------------------------------------------
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

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        with self._conn() as conn:
            yield PostgresTx(conn)

    write = read

    @contextmanager
    def snapshot(self) -> Iterator[PostgresTx]:
        with self._conn() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PostgresTx(conn)

    # One snapshot for the whole export, however long it takes to consume.
    export = snapshot

    def after_write(self, event: Event) -> None:
        if event == "forget":
            self._term_cache = {}  # fewer rows: frequencies read before may be too high

    def close(self) -> None:
        self._pool.close()

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
            MIGRATIONS,
            f"at {self._safe_url}",
            transaction=self._migrating,
            current=current,
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

    # ---- search ---------------------------------------------------------------------
    def search_text(self, query: str, limit: int) -> list[BufferHit]:
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
        return [BufferHit(row=ROWS.buffer_row(r), score=float(r[6] or 0.0) / total) for r in rows]

    def common_words(self, query: str) -> list[str]:
        from nixx.store.fts_query import query_terms
        from nixx.store.term_stats import COMMON_MIN_ROWS, COMMON_SHARE

        terms = query_terms(query)
        if not terms:
            return []
        with self._conn() as conn:
            cache = self._term_frequencies(conn, terms)
        total, df = cache["rows"], cache["df"]
        if total < COMMON_MIN_ROWS:
            return []
        return [t for t in terms if (df.get(t) or 0) >= COMMON_SHARE * total]

    def _term_weights(
        self, conn: psycopg.Connection[Any], terms: list[str]
    ) -> tuple[dict[str, float], float]:
        """({word: IDF} of the words full text matches, the rows' average length), as the
        SQLite store weighs them (`term_stats`): frequencies cached per process and read
        again once the buffer grew by a tenth; words in half the rows or more left out of a
        store of `MIN_ROWS` rows or more; words the english configuration drops left out."""
        from nixx.store.term_stats import IDF_FLOOR, MIN_ROWS, idf

        cache = self._term_frequencies(conn, terms)
        df: dict[str, int | None] = cache["df"]
        total = cache["rows"]
        weights = {t: idf(df[t] or 0, total) for t in terms if df.get(t) is not None}
        if total >= MIN_ROWS:
            weights = {t: w for t, w in weights.items() if w > IDF_FLOOR}
        return weights, max(1.0, cache["avg"])

    def _term_frequencies(self, conn: psycopg.Connection[Any], terms: list[str]) -> dict[str, Any]:
        """The frequency cache, holding `terms`: {"rows", "avg", "max_id", "df": {word:
        rows containing it, None for a word the english configuration drops}}. The dict
        returned is the one read and filled here: another thread may swap in a new one."""
        from nixx.store.term_stats import REFRESH_GROWTH

        cache = self._term_cache
        top = conn.execute("SELECT coalesce(max(id), 0) FROM buffer").fetchone()
        max_id = int(top[0]) if top else 0
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
        return cache

    def nearest_buffer(self, query: VectorQuery) -> list[BufferHit]:
        before = query.before is not None
        rows = self._nearest(search_buffer_vectors_sql(before=before), query)
        return [BufferHit(row=ROWS.buffer_row(r), score=1.0 - float(r[-1])) for r in rows]

    def nearest_summaries(self, query: VectorQuery) -> list[SummaryHit]:
        before, threshold = query.before is not None, query.threshold is not None
        rows = self._nearest(search_summaries_sql(before=before, threshold=threshold), query)
        return [SummaryHit(summary=ROWS.summary(r), score=1.0 - float(r[-1])) for r in rows]

    def nearest_memories(self, query: VectorQuery) -> list[tuple[Memory, float]]:
        rows = self._nearest(search_memories_sql(threshold=query.threshold is not None), query)
        return [(ROWS.memory(r), 1.0 - float(r[-1])) for r in rows]

    def _nearest(self, sql: str, query: VectorQuery) -> list[Any]:
        threshold = query.threshold
        with self._conn() as conn:
            info = PostgresTx(conn).embedder()
            if info is None:  # nothing stored yet
                return []
            q = as_vector(query.embedding, info.dim, what="query embedding")
            return conn.execute(
                sql,
                {
                    "before": query.before,
                    "q": q,
                    "limit": query.limit,
                    "max_dist": None if threshold is None else 1.0 - float(threshold),
                },
            ).fetchall()

    # ---- storage ------------------------------------------------------------------------
    def scrub(self) -> ScrubReport:
        """PostgreSQL removes deleted rows from its tables (`VACUUM` makes the space
        reusable) but its write-ahead log keeps the deleted text until the server
        recycles those segments: nothing a client can scrub. Said where a forget answers."""
        return {"backend": "postgres", "note": PG_WAL_NOTE}

    def vacuum(self) -> VacuumReport:
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
