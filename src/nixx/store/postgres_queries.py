"""The PostgreSQL engine's queries: `nixx.store.database.Tx` on one pooled connection.

Vectors go to the server as numpy arrays (pgvector's binary input, the dumper of
`nixx.store.postgres`) and are read back in binary (`vector_send`); JSON travels as
``jsonb``; timestamps come back as `datetime` and leave as the ISO text of `iso_utc`.
The vector columns are typed ``vector(N)`` with HNSW indexes once an embedder is bound
(`narrow_vectors`) and plain ``vector`` while a reindex or an import rewrites them
(`widen_vectors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from nixx.store import sql_queries as shared
from nixx.store.database import ChunkRow, LockSection, NewSource, NewSummary, RowVector
from nixx.store.postgres_load import Loader
from nixx.store.postgres_schema import lock_vector_tables, narrow_vectors, widen_vectors
from nixx.store.records import BufferRow, JsonObject, Memory, Source, Summary

_EMBEDDER_LOCK = 7_346_102  # pg_advisory_xact_lock keys (arbitrary, fixed)
_USER_ROW_LOCK = 7_346_103

#: Read vectors in binary: exact, and far cheaper to parse than the text form.
VEC_OUT = "vector_send(embedding)"
DIALECT = shared.Dialect(
    placeholder="%s",
    in_ids="= ANY(?)",
    vec="?::vector",
    vec_out=VEC_OUT,
    for_update=" FOR UPDATE",
    state_touched=", updated_at = now()",
    contains="strpos(lower(content), %s) > 0",
    contains_row="strpos(lower(content || ' ' || meta::text), %s) > 0",
)
_SQL = DIALECT.statements()


def parse_vector(data: bytes) -> np.ndarray:
    """pgvector's binary form (`vector_send(embedding)`) -> float32 array."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


def iso_utc(value: datetime) -> str:
    """The one timestamp format of nixx: ISO 8601, UTC, microseconds, ``Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _same(value: Any) -> Any:
    return value  # jsonb and text[] arrive decoded


ROWS = shared.Rows(json=_same, time=iso_utc, vector=parse_vector)

Conn = psycopg.Connection[Any]


class PostgresTx(shared.SqlTx):
    """The queries on one pooled connection, inside its transaction."""

    sql = _SQL
    dialect = DIALECT
    rows = ROWS

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self._loader: Loader | None = None  # made by the first `load`

    # ---- primitives -------------------------------------------------------------------
    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.conn.execute(sql, params).fetchall()

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self.conn.execute(sql, params).rowcount)

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(sql, rows)

    def _json(self, value: Any) -> Any:
        return Jsonb(value)


    def _vec(self, vector: np.ndarray) -> Any:
        return vector  # pgvector's binary input (the engine's dumper)

    def _ids(self, ids: Sequence[int]) -> Any:
        return list(ids)

    def _tags(self, tags: list[str]) -> Any:
        return tags






    # ---- embedder -------------------------------------------------------------------
    def bind(self, model: str, dim: int) -> None:
        self.conn.execute("INSERT INTO embedder (model, dim) VALUES (%s, %s)", (model, dim))
        narrow_vectors(self.conn, dim)

    def rebind(self, model: str, dim: int, old_dim: int) -> None:
        lock_vector_tables(self.conn)
        self.conn.execute("DELETE FROM buffer_vectors")
        self.conn.execute(
            "UPDATE embedder SET model = %s, dim = %s, bound_at = now()", (model, dim)
        )
        if old_dim != dim:
            widen_vectors(self.conn)
            narrow_vectors(self.conn, dim)

    def bind_unnamed(self, dim: int) -> int:
        self.lock("embedder")
        info = self.embedder()
        if info is not None:  # bound meanwhile by another connection
            return info.dim
        self.conn.execute("INSERT INTO embedder (model, dim) VALUES ('', %s)", (dim,))
        narrow_vectors(self.conn, dim)
        return dim

    # ---- reindex ----------------------------------------------------------------------
    def start_reindex(self) -> None:
        self.conn.execute("LOCK TABLE buffer_vectors, summaries, memories IN EXCLUSIVE MODE")
        widen_vectors(self.conn)

    def finish_reindex(self, model: str, dim: int) -> None:
        self.conn.execute("DELETE FROM embedder")
        self.conn.execute("INSERT INTO embedder (model, dim) VALUES (%s, %s)", (model, dim))
        narrow_vectors(self.conn, dim)

    # ---- buffer -----------------------------------------------------------------------
    def insert_buffer(
        self, role: str, content: str, origin: str, meta: JsonObject
    ) -> BufferRow:
        row = self.conn.execute(
            f"INSERT INTO buffer (role, content, origin, meta) VALUES (%s, %s, %s, %s) "
            f"RETURNING {shared.BUFFER_COLS}",
            (role, content, origin, Jsonb(meta)),
        ).fetchone()
        assert row is not None
        return ROWS.buffer_row(row)

    def buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        sql = f"SELECT {shared.BUFFER_COLS} FROM buffer WHERE id = ANY(%s::bigint[]) ORDER BY id"
        return [ROWS.buffer_row(r) for r in self._all(sql, (list(ids),))]

    # ---- buffer row vectors -----------------------------------------------------------
    def put_buffer_vectors(self, items: Sequence[RowVector]) -> int:
        existing = {
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM buffer WHERE id = ANY(%s) AND role <> 'marker'",
                ([item.id for item in items],),
            )
        }
        rows = [(i, vec, pieces) for i, vec, pieces in items if i in existing]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO buffer_vectors (buffer_id, embedding, pieces) "
                    "VALUES (%s, %s::vector, %s) ON CONFLICT (buffer_id) DO UPDATE "
                    "SET embedding = EXCLUDED.embedding, pieces = EXCLUDED.pieces",
                    rows,
                )
        return len(rows)

    def buffer_pieces(self, ids: Sequence[int]) -> dict[int, bytes]:
        rows = self.conn.execute(
            "SELECT buffer_id, pieces FROM buffer_vectors "
            "WHERE buffer_id = ANY(%s::bigint[]) AND pieces IS NOT NULL",
            ([int(i) for i in ids],),
        )
        return {int(r[0]): bytes(r[1]) for r in rows}

    # ---- summaries --------------------------------------------------------------------
    def insert_summary(self, new: NewSummary) -> Summary:
        row = self.conn.execute(
            "INSERT INTO summaries (content, embedding, tags, entities, start_buffer_id, "
            "end_buffer_id) VALUES (%s, %s::vector, %s, %s, %s, %s) "
            f"RETURNING {shared.SUMMARY_COLS}",
            (new.content, new.vector, new.tags, Jsonb(new.entities), new.start_buffer_id,
             new.end_buffer_id),
        ).fetchone()
        assert row is not None
        return ROWS.summary(row)

    # ---- sources and memories ---------------------------------------------------------
    def insert_source(self, new: NewSource) -> int:
        return int(
            self._value(
                "INSERT INTO sources (name, type, summary, start_id, end_id, meta) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (new.name, new.type, new.summary, new.start_id, new.end_id, Jsonb(new.meta)),
            )
        )

    def insert_chunks(self, source_id: int, rows: Sequence[ChunkRow]) -> None:
        if not rows:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memories (content, embedding, source_id, metadata) "
                "VALUES (%s, %s::vector, %s, %s)",
                [(content, vec, source_id, Jsonb(meta)) for content, vec, meta in rows],
            )

    def sources(self, meta_equals: JsonObject) -> list[Source]:
        # `@>` narrows through the GIN index; the per-key test makes it equality.
        conds = ["s.meta @> %s"] + ["s.meta -> %s = %s"] * len(meta_equals)
        params: list[Any] = [Jsonb(meta_equals)]
        for key, value in meta_equals.items():
            params += [key, Jsonb(value)]
        where = f"WHERE {' AND '.join(conds)} " if meta_equals else ""
        rows = self.conn.execute(
            f"SELECT {shared.SOURCE_COLS} FROM sources s {where}ORDER BY s.id DESC",
            params if meta_equals else (),
        ).fetchall()
        return [ROWS.source(r) for r in rows]

    # ---- forgetting -------------------------------------------------------------------
    def lock(self, section: LockSection) -> None:
        if section == "user_row":  # serialised against every other append_user_once
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_USER_ROW_LOCK,))
        elif section == "forget":  # no summary or source may appear (or change) meanwhile
            self.conn.execute("LOCK TABLE summaries, sources IN EXCLUSIVE MODE")
        else:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_EMBEDDER_LOCK,))
            if section == "import":
                self.conn.execute(
                    "LOCK TABLE buffer, summaries, sources, memories, state IN EXCLUSIVE MODE"
                )

    def log(self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]) -> tuple[int, str]:
        row = self.conn.execute(
            "INSERT INTO forget_log (kind, ids, counts) VALUES (%s, %s, %s) "
            "RETURNING id, forgotten_at",
            (kind, Jsonb(ids), Jsonb(counts)),
        ).fetchone()
        assert row is not None
        return int(row[0]), iso_utc(row[1])

    # ---- state ------------------------------------------------------------------------
    def state(self, key: str, *, for_update: bool = False) -> tuple[bool, Any]:
        if for_update:
            # the row lock serialises concurrent updates of one key; a key not there yet
            # is guarded by a transaction-scoped advisory lock on its hash
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
        return super().state(key, for_update=for_update)

    # ---- export / import --------------------------------------------------------------
    def _stream(self, sql: str) -> Iterator[Any]:
        with self.conn.cursor(name="nixx_export") as cur:
            cur.itersize = 2000
            cur.execute(sql)
            yield from cur

    def export_buffer(self) -> Iterator[tuple[BufferRow, np.ndarray | None, bytes | None]]:
        for r in self._stream(
            f"SELECT {', '.join('b.' + c for c in shared.BUFFER_COLS.split(', '))}, "
            "vector_send(v.embedding), v.pieces FROM buffer b "
            "LEFT JOIN buffer_vectors v ON v.buffer_id = b.id ORDER BY b.id"
        ):
            vec = None if r[6] is None else parse_vector(r[6])
            yield ROWS.buffer_row(r), vec, None if r[7] is None else bytes(r[7])

    def export_summaries(self) -> Iterator[Summary]:
        sql = f"SELECT {shared.SUMMARY_COLS}, {VEC_OUT} FROM summaries ORDER BY id"
        for r in self._stream(sql):
            yield ROWS.summary(r, r[7])

    def export_sources(self) -> Iterator[Source]:
        yield from map(
            ROWS.source,  # chunk_count (0) is not exported
            self._stream(
                "SELECT id, name, type, summary, start_id, end_id, created_at, meta, 0 "
                "FROM sources ORDER BY id"
            ),
        )

    def export_memories(self) -> Iterator[Memory]:
        for r in self._stream(f"SELECT {shared.MEMORY_COLS}, {VEC_OUT} FROM memories ORDER BY id"):
            yield ROWS.memory(r, r[5])

    def load(self, kind: str, batch: list[dict[str, Any]]) -> None:
        if self._loader is None:
            self._loader = Loader(self.conn)
        self._loader.load(kind, batch)

    def finish_load(self) -> None:
        if self._loader is not None:
            self._loader.finish()
