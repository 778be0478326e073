"""The PostgreSQL engine's queries: `nixx.store.engine.Tx` on one pooled connection.

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

from nixx.store.engine import ChunkRow, ContentTable, Section, Tx
from nixx.store.forgetting import ForgetLogEntry
from nixx.store.postgres_load import Loader
from nixx.store.postgres_schema import lock_vector_tables, narrow_vectors, widen_vectors
from nixx.store.records import BufferRow, EmbeddingInfo, Memory, Source, Summary

_EMBEDDER_LOCK = 7_346_102  # pg_advisory_xact_lock keys (arbitrary, fixed)
_USER_ROW_LOCK = 7_346_103

BUFFER_COLS = "id, role, content, origin, created_at, meta"
SUMMARY_COLS = "id, content, tags, entities, start_buffer_id, end_buffer_id, created_at"
SOURCE_COLS = (
    "s.id, s.name, s.type, s.summary, s.start_id, s.end_id, s.created_at, s.meta, "
    "(SELECT count(*) FROM memories m WHERE m.source_id = s.id) AS chunk_count"
)
MEMORY_COLS = "id, source_id, content, metadata, created_at"
#: Read vectors in binary: exact, and far cheaper to parse than the text form.
VEC_OUT = "vector_send(embedding)"
_FORGET_COLS = "id, forgotten_at, kind, ids, counts"

Conn = psycopg.Connection[Any]


class PostgresTx(Tx):
    """The queries on one pooled connection, inside its transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self._loader: Loader | None = None  # made by the first `load`

    def _value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        assert row is not None
        return row[0]

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[BufferRow]:
        return [buffer_row(r) for r in self.conn.execute(sql, params).fetchall()]

    # ---- embedder -------------------------------------------------------------------
    def embedder(self) -> EmbeddingInfo | None:
        row = self.conn.execute("SELECT model, dim FROM embedder").fetchone()
        return EmbeddingInfo(model=row[0], dim=int(row[1])) if row else None

    def has_content_vectors(self) -> bool:
        return bool(
            self._value("SELECT EXISTS (SELECT 1 FROM summaries) OR EXISTS (SELECT 1 FROM memories)")
        )

    def bind(self, model: str, dim: int) -> None:
        self.conn.execute("INSERT INTO embedder (model, dim) VALUES (%s, %s)", (model, dim))
        narrow_vectors(self.conn, dim)

    def name_embedder(self, model: str) -> None:
        self.conn.execute("UPDATE embedder SET model = %s, bound_at = now()", (model,))

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
    def contents(self, table: ContentTable) -> dict[int, str]:
        return dict(self.conn.execute(f"SELECT id, content FROM {table} ORDER BY id").fetchall())

    def start_reindex(self) -> None:
        self.conn.execute("LOCK TABLE buffer_vectors, summaries, memories IN EXCLUSIVE MODE")
        widen_vectors(self.conn)

    def set_vectors(self, table: ContentTable, vectors: dict[int, np.ndarray]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {table} SET embedding = %s::vector WHERE id = %s",
                [(vec, i) for i, vec in vectors.items()],
            )

    def finish_reindex(self, model: str, dim: int) -> None:
        self.conn.execute("DELETE FROM embedder")
        self.conn.execute("INSERT INTO embedder (model, dim) VALUES (%s, %s)", (model, dim))
        narrow_vectors(self.conn, dim)

    # ---- buffer -----------------------------------------------------------------------
    def insert_buffer(
        self, role: str, content: str, origin: str, meta: dict[str, Any]
    ) -> BufferRow:
        row = self.conn.execute(
            f"INSERT INTO buffer (role, content, origin, meta) VALUES (%s, %s, %s, %s) "
            f"RETURNING {BUFFER_COLS}",
            (role, content, origin, Jsonb(meta)),
        ).fetchone()
        assert row is not None
        return buffer_row(row)

    def session_tail(self, n: int) -> list[BufferRow]:
        marker = self._value("SELECT coalesce(max(id), 0) FROM buffer WHERE role = 'marker'")
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE id > %s AND role != 'marker' "
            "ORDER BY id DESC LIMIT %s",
            (marker, n),
        )

    def buffer_meta(self, row_id: int) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT meta FROM buffer WHERE id = %s FOR UPDATE", (row_id,)
        ).fetchone()
        return None if row is None else dict(row[0] or {})

    def set_buffer_meta(self, row_id: int, meta: dict[str, Any]) -> None:
        self.conn.execute("UPDATE buffer SET meta = %s WHERE id = %s", (Jsonb(meta), row_id))

    def buffer_range(self, start_id: int, end_id: int | None) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE id >= %s "
            "AND (%s::bigint IS NULL OR id <= %s::bigint) ORDER BY id",
            (start_id, end_id, end_id),
        )

    def buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE id = ANY(%s::bigint[]) ORDER BY id",
            (list(ids),),
        )

    def last_rows(self, n: int, after_id: int) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND id > %s "
            "ORDER BY id DESC LIMIT %s",
            (after_id, n),
        )

    def last_marker_id(self) -> int:
        return int(self._value("SELECT max(id) FROM buffer WHERE role = 'marker'") or 0)

    def buffer_totals(self) -> tuple[int, int]:
        row = self.conn.execute("SELECT count(*), coalesce(max(id), 0) FROM buffer").fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def non_marker_rows(self) -> list[BufferRow]:
        return self._rows(f"SELECT {BUFFER_COLS} FROM buffer WHERE role <> 'marker' ORDER BY id")

    # ---- buffer row vectors -----------------------------------------------------------
    def rows_without_vector(self, limit: int, after_id: int) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer b WHERE id > %s AND role <> 'marker' "
            "AND NOT EXISTS (SELECT 1 FROM buffer_vectors v WHERE v.buffer_id = b.id) "
            "ORDER BY id LIMIT %s",
            (after_id, limit),
        )

    def put_buffer_vectors(self, items: Sequence[tuple[int, np.ndarray]]) -> int:
        existing = {
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM buffer WHERE id = ANY(%s) AND role <> 'marker'",
                ([i for i, _ in items],),
            )
        }
        rows = [(i, vec) for i, vec in items if i in existing]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO buffer_vectors (buffer_id, embedding) VALUES (%s, %s::vector) "
                    "ON CONFLICT (buffer_id) DO UPDATE SET embedding = EXCLUDED.embedding",
                    rows,
                )
        return len(rows)

    def clear_buffer_vectors(self) -> None:
        self.conn.execute("DELETE FROM buffer_vectors")

    def has_episodic_vectors(self) -> bool:
        return bool(
            self._value(
                "SELECT EXISTS (SELECT 1 FROM buffer_vectors) OR EXISTS (SELECT 1 FROM summaries)"
            )
        )

    def buffer_vector_totals(self) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM buffer_vectors), "
            "(SELECT count(*) FROM buffer WHERE role <> 'marker')"
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    # ---- summaries --------------------------------------------------------------------
    def last_summarised_id(self) -> int:
        return int(self._value("SELECT max(end_buffer_id) FROM summaries") or 0)

    def unsummarised(self) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND id > "
            "(SELECT coalesce(max(end_buffer_id), 0) FROM summaries) ORDER BY id"
        )

    def insert_summary(
        self,
        content: str,
        vector: np.ndarray,
        tags: list[str],
        entities: dict[str, list[str]],
        start_buffer_id: int,
        end_buffer_id: int,
    ) -> Summary:
        row = self.conn.execute(
            "INSERT INTO summaries (content, embedding, tags, entities, start_buffer_id, "
            f"end_buffer_id) VALUES (%s, %s::vector, %s, %s, %s, %s) RETURNING {SUMMARY_COLS}",
            (content, vector, tags, Jsonb(entities), start_buffer_id, end_buffer_id),
        ).fetchone()
        assert row is not None
        return summary(row)

    def summaries_page(self, limit: int, offset: int) -> list[Summary]:
        rows = self.conn.execute(
            f"SELECT {SUMMARY_COLS} FROM summaries ORDER BY id DESC LIMIT %s OFFSET %s",
            (limit, offset),
        ).fetchall()
        return [summary(r) for r in rows]

    def count(self, table: ContentTable) -> int:
        return int(self._value(f"SELECT count(*) FROM {table}"))

    def summary(self, summary_id: int, *, for_update: bool = False) -> Summary | None:
        lock = " FOR UPDATE" if for_update else ""
        row = self.conn.execute(
            f"SELECT {SUMMARY_COLS} FROM summaries WHERE id = %s{lock}", (summary_id,)
        ).fetchone()
        return None if row is None else summary(row)

    def set_summary_content(self, summary_id: int, content: str, vector: np.ndarray) -> None:
        self.conn.execute(
            "UPDATE summaries SET content = %s, embedding = %s::vector WHERE id = %s",
            (content, vector, summary_id),
        )

    def set_summary_labels(
        self, summary_id: int, tags: list[str], entities: dict[str, list[str]]
    ) -> None:
        self.conn.execute(
            "UPDATE summaries SET tags = %s, entities = %s WHERE id = %s",
            (tags, Jsonb(entities), summary_id),
        )

    # ---- sources and memories ---------------------------------------------------------
    def insert_source(
        self,
        name: str,
        type: str,
        summary: str | None,
        start_id: int | None,
        end_id: int | None,
        meta: dict[str, Any],
    ) -> int:
        return int(
            self._value(
                "INSERT INTO sources (name, type, summary, start_id, end_id, meta) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (name, type, summary, start_id, end_id, Jsonb(meta)),
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

    def source(self, source_id: int, *, for_update: bool = False) -> Source | None:
        if for_update and not self.conn.execute(
            "SELECT 1 FROM sources WHERE id = %s FOR UPDATE", (source_id,)
        ).fetchone():
            return None
        row = self.conn.execute(
            f"SELECT {SOURCE_COLS} FROM sources s WHERE s.id = %s", (source_id,)
        ).fetchone()
        return None if row is None else source(row)

    def sources(self, meta_equals: dict[str, Any]) -> list[Source]:
        # `@>` narrows through the GIN index; the per-key test makes it equality.
        conds = ["s.meta @> %s"] + ["s.meta -> %s = %s"] * len(meta_equals)
        params: list[Any] = [Jsonb(meta_equals)]
        for key, value in meta_equals.items():
            params += [key, Jsonb(value)]
        where = f"WHERE {' AND '.join(conds)} " if meta_equals else ""
        rows = self.conn.execute(
            f"SELECT {SOURCE_COLS} FROM sources s {where}ORDER BY s.id DESC",
            params if meta_equals else (),
        ).fetchall()
        return [source(r) for r in rows]

    def set_source_summary(self, source_id: int, summary: str) -> bool:
        cur = self.conn.execute(
            "UPDATE sources SET summary = %s WHERE id = %s", (summary, source_id)
        )
        return cur.rowcount > 0

    def set_source_meta(self, source_id: int, meta: dict[str, Any]) -> None:
        self.conn.execute("UPDATE sources SET meta = %s WHERE id = %s", (Jsonb(meta), source_id))

    def delete_chunks(self, source_id: int) -> None:
        self.conn.execute("DELETE FROM memories WHERE source_id = %s", (source_id,))

    def delete_source(self, source_id: int) -> bool:
        return self.conn.execute("DELETE FROM sources WHERE id = %s", (source_id,)).rowcount > 0

    def chunks(self, source_id: int) -> list[Memory]:
        rows = self.conn.execute(
            f"SELECT {MEMORY_COLS}, {VEC_OUT} FROM memories WHERE source_id = %s ORDER BY id",
            (source_id,),
        ).fetchall()
        return [memory(r, r[5]) for r in rows]

    def source_names(self, ids: Sequence[int]) -> dict[int, str]:
        return dict(
            self.conn.execute(
                "SELECT id, name FROM sources WHERE id = ANY(%s)", (list(ids),)
            ).fetchall()
        )

    # ---- forgetting -------------------------------------------------------------------
    def lock(self, section: Section) -> None:
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

    def log(self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]) -> tuple[int, str]:
        row = self.conn.execute(
            "INSERT INTO forget_log (kind, ids, counts) VALUES (%s, %s, %s) "
            "RETURNING id, forgotten_at",
            (kind, Jsonb(ids), Jsonb(counts)),
        ).fetchone()
        assert row is not None
        return int(row[0]), iso_utc(row[1])

    def find_buffer_text(self, terms: Sequence[str], limit: int) -> list[BufferRow]:
        # a buffer row's meta too (`meta.tools` arguments, `meta.agent`)
        in_row = " AND ".join(
            "strpos(lower(content || ' ' || meta::text), %s) > 0" for _ in terms
        )
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE role <> 'marker' AND {in_row} "
            "ORDER BY id LIMIT %s",
            (*terms, limit),
        )

    def find_summary_text(self, terms: Sequence[str], limit: int) -> list[Summary]:
        rows = self.conn.execute(
            f"SELECT {SUMMARY_COLS} FROM summaries WHERE {_contains(terms)} ORDER BY id LIMIT %s",
            (*terms, limit),
        ).fetchall()
        return [summary(r) for r in rows]

    def find_memory_text(self, terms: Sequence[str], limit: int) -> list[Memory]:
        rows = self.conn.execute(
            f"SELECT {MEMORY_COLS} FROM memories WHERE {_contains(terms)} ORDER BY id LIMIT %s",
            (*terms, limit),
        ).fetchall()
        return [memory(r) for r in rows]

    def forget_entries(self, limit: int | None) -> list[ForgetLogEntry]:
        if limit is None:
            rows = self.conn.execute(
                f"SELECT {_FORGET_COLS} FROM forget_log ORDER BY id"
            ).fetchall()
        else:
            rows = self.conn.execute(
                f"SELECT {_FORGET_COLS} FROM forget_log ORDER BY id DESC LIMIT %s", (limit,)
            ).fetchall()
        return [ForgetLogEntry(int(r[0]), iso_utc(r[1]), r[2], r[3], r[4]) for r in rows]

    # ---- state ------------------------------------------------------------------------
    def state(self, key: str, *, for_update: bool = False) -> tuple[bool, Any]:
        if for_update:
            # the row lock serialises concurrent updates of one key; a key not there yet
            # is guarded by a transaction-scoped advisory lock on its hash
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
        lock = " FOR UPDATE" if for_update else ""
        row = self.conn.execute(
            f"SELECT value FROM state WHERE key = %s{lock}", (key,)
        ).fetchone()
        return (False, None) if row is None else (True, row[0])

    def put_state(self, key: str, value: Any) -> None:
        self.conn.execute(
            "INSERT INTO state (key, value) VALUES (%s, %s) ON CONFLICT (key) "
            "DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
            (key, Jsonb(value)),
        )

    def drop_state(self, key: str) -> None:
        self.conn.execute("DELETE FROM state WHERE key = %s", (key,))

    def all_state(self) -> Iterable[tuple[str, Any]]:
        return self.conn.execute("SELECT key, value FROM state ORDER BY key").fetchall()

    # ---- export / import --------------------------------------------------------------
    def _stream(self, sql: str) -> Iterator[Any]:
        with self.conn.cursor(name="nixx_export") as cur:
            cur.itersize = 2000
            cur.execute(sql)
            yield from cur

    def export_buffer(self) -> Iterator[tuple[BufferRow, np.ndarray | None]]:
        for r in self._stream(
            f"SELECT {', '.join('b.' + c for c in BUFFER_COLS.split(', '))}, "
            "vector_send(v.embedding) FROM buffer b "
            "LEFT JOIN buffer_vectors v ON v.buffer_id = b.id ORDER BY b.id"
        ):
            yield buffer_row(r), None if r[6] is None else parse_vector(r[6])

    def export_summaries(self) -> Iterator[Summary]:
        for r in self._stream(f"SELECT {SUMMARY_COLS}, {VEC_OUT} FROM summaries ORDER BY id"):
            yield summary(r, r[7])

    def export_sources(self) -> Iterator[Source]:
        yield from map(
            source,  # chunk_count (0) is not exported
            self._stream(
                "SELECT id, name, type, summary, start_id, end_id, created_at, meta, 0 "
                "FROM sources ORDER BY id"
            ),
        )

    def export_memories(self) -> Iterator[Memory]:
        for r in self._stream(f"SELECT {MEMORY_COLS}, {VEC_OUT} FROM memories ORDER BY id"):
            yield memory(r, r[5])

    def has_rows(self, table: str) -> bool:
        return self.conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None

    def load(self, kind: str, batch: list[dict[str, Any]]) -> None:
        if self._loader is None:
            self._loader = Loader(self.conn)
        self._loader.load(kind, batch)

    def finish_load(self) -> None:
        if self._loader is not None:
            self._loader.finish()


def _contains(terms: Sequence[str]) -> str:
    return " AND ".join("strpos(lower(content), %s) > 0" for _ in terms)


# ---- row -> record -----------------------------------------------------------------------
def parse_vector(data: bytes) -> np.ndarray:
    """pgvector's binary form (`vector_send(embedding)`) -> float32 array."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


def iso_utc(value: datetime) -> str:
    """The one timestamp format of nixx: ISO 8601, UTC, microseconds, ``Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def buffer_row(r: Sequence[Any]) -> BufferRow:
    return BufferRow(
        id=r[0], role=r[1], content=r[2], origin=r[3], created_at=iso_utc(r[4]), meta=r[5] or {}
    )


def summary(r: Sequence[Any], embedding: bytes | None = None) -> Summary:
    return Summary(
        id=r[0],
        content=r[1],
        tags=list(r[2] or []),
        entities=r[3] or {},
        start_buffer_id=r[4],
        end_buffer_id=r[5],
        created_at=iso_utc(r[6]),
        embedding=parse_vector(embedding) if embedding is not None else None,
    )


def source(r: Sequence[Any]) -> Source:
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


def memory(r: Sequence[Any], embedding: bytes | None = None) -> Memory:
    return Memory(
        id=r[0],
        source_id=r[1],
        content=r[2],
        metadata=r[3] or {},
        created_at=iso_utc(r[4]),
        embedding=parse_vector(embedding) if embedding is not None else None,
    )
