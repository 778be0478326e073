"""The SQLite engine's queries: `nixx.store.engine.Tx` on one apsw connection.

Vectors are stored as float32 little-endian BLOBs, JSON as compact text, timestamps as
the ISO 8601 text of `portable.utc_now`. The in-memory vector indexes
(`nixx.store.sqlite_vectors`) follow the tables by their ids and the change counters of
``vector_state``; a write that replaces vectors in place bumps its ``epoch`` here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw
import numpy as np

from nixx.errors import ValidationError
from nixx.store.engine import ChunkRow, ContentTable, Section, Tx
from nixx.store.forgetting import ForgetLogEntry
from nixx.store.portable import as_vector, utc_now
from nixx.store.records import BufferRow, EmbeddingInfo, Memory, Source, Summary

BUFFER_COLS = "id, role, content, origin, created_at, meta"
# a row's columns without its vector (what a vector search's hits read), then with it
SUMMARY_HIT_COLS = "id, content, tags, entities, start_buffer_id, end_buffer_id, created_at"
SUMMARY_COLS = SUMMARY_HIT_COLS + ", embedding"
SOURCE_COLS = (
    "s.id, s.name, s.type, s.summary, s.start_id, s.end_id, s.created_at, s.meta, "
    "(SELECT count(*) FROM memories m WHERE m.source_id = s.id)"
)
MEMORY_HIT_COLS = "id, source_id, content, metadata, created_at"
MEMORY_COLS = MEMORY_HIT_COLS + ", embedding"
_FORGET_COLS = "id, forgotten_at, kind, ids, counts"


class SQLiteTx(Tx):
    """The queries on one connection, inside the transaction its engine opened."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._import_dim: int | None = None

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
        return one(self.conn, sql, params)

    # ---- embedder -------------------------------------------------------------------
    def embedder(self) -> EmbeddingInfo | None:
        row = self.conn.execute("SELECT model, dim FROM embedder WHERE id = 1").fetchone()
        return EmbeddingInfo(model=row[0], dim=int(row[1])) if row else None

    def has_content_vectors(self) -> bool:
        sql = "SELECT EXISTS (SELECT 1 FROM summaries) OR EXISTS (SELECT 1 FROM memories)"
        return bool(self._one(sql)[0])

    def bind(self, model: str, dim: int) -> None:
        self.conn.execute(
            "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?)",
            (model, dim, utc_now()),
        )

    def name_embedder(self, model: str) -> None:
        self.conn.execute("UPDATE embedder SET model = ? WHERE id = 1", (model,))

    def rebind(self, model: str, dim: int, old_dim: int) -> None:
        self.conn.execute("DELETE FROM buffer_vectors")
        self.conn.execute(
            "UPDATE embedder SET model = ?, dim = ?, bound_at = ? WHERE id = 1",
            (model, dim, utc_now()),
        )

    def bind_unnamed(self, dim: int) -> int:
        # BEGIN IMMEDIATE: no other writer can have bound one since this one read
        self.conn.execute(
            "INSERT OR IGNORE INTO embedder (id, model, dim, bound_at) VALUES (1, '', ?, ?)",
            (dim, utc_now()),
        )
        return dim

    # ---- reindex ----------------------------------------------------------------------
    def contents(self, table: ContentTable) -> dict[int, str]:
        return dict(self.conn.execute(f"SELECT id, content FROM {table} ORDER BY id"))

    def start_reindex(self) -> None:
        pass  # BLOB columns take vectors of any dimension

    def set_vectors(self, table: ContentTable, vectors: dict[int, np.ndarray]) -> None:
        self.conn.executemany(
            f"UPDATE {table} SET embedding = ? WHERE id = ?",
            ((blob(vec), i) for i, vec in vectors.items()),
        )

    def finish_reindex(self, model: str, dim: int) -> None:
        self.conn.execute(
            "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET model = excluded.model, dim = excluded.dim, "
            "bound_at = excluded.bound_at",
            (model, dim, utc_now()),
        )
        self.conn.execute("UPDATE vector_state SET epoch = abs(random())")

    # ---- buffer -----------------------------------------------------------------------
    def insert_buffer(
        self, role: str, content: str, origin: str, meta: dict[str, Any]
    ) -> BufferRow:
        created = utc_now()
        self.conn.execute(
            "INSERT INTO buffer (role, content, origin, meta, created_at) VALUES (?, ?, ?, ?, ?)",
            (role, content, origin, dumps(meta), created),
        )
        return BufferRow(self.conn.last_insert_rowid(), role, content, origin, created, meta)

    def session_tail(self, n: int) -> list[BufferRow]:
        marker = self._one("SELECT coalesce(max(id), 0) FROM buffer WHERE role = 'marker'")
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE id > ? AND role != 'marker' "
            "ORDER BY id DESC LIMIT ?",
            (marker[0], n),
        )

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[BufferRow]:
        return [buffer_row(r) for r in self.conn.execute(sql, params)]

    def buffer_meta(self, row_id: int) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT meta FROM buffer WHERE id = ?", (row_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def set_buffer_meta(self, row_id: int, meta: dict[str, Any]) -> None:
        self.conn.execute("UPDATE buffer SET meta = ? WHERE id = ?", (dumps(meta), row_id))

    def buffer_range(self, start_id: int, end_id: int | None) -> list[BufferRow]:
        if end_id is None:
            return self._rows(
                f"SELECT {BUFFER_COLS} FROM buffer WHERE id >= ? ORDER BY id", (start_id,)
            )
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE id BETWEEN ? AND ? ORDER BY id",
            (start_id, end_id),
        )

    def buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        rows: list[BufferRow] = []
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            rows += self._rows(
                f"SELECT {BUFFER_COLS} FROM buffer WHERE id IN ({','.join('?' * len(part))}) "
                "ORDER BY id",
                part,
            )
        return rows

    def last_rows(self, n: int, after_id: int) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE role != 'marker' AND id > ? "
            "ORDER BY id DESC LIMIT ?",
            (after_id, n),
        )

    def last_marker_id(self) -> int:
        return int(self._one("SELECT max(id) FROM buffer WHERE role = 'marker'")[0] or 0)

    def buffer_totals(self) -> tuple[int, int]:
        rows, max_id = self._one("SELECT count(*), max(id) FROM buffer")
        return int(rows), int(max_id or 0)

    def non_marker_rows(self) -> list[BufferRow]:
        return self._rows(f"SELECT {BUFFER_COLS} FROM buffer WHERE role != 'marker' ORDER BY id")

    # ---- buffer row vectors -----------------------------------------------------------
    def rows_without_vector(self, limit: int, after_id: int) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer b WHERE id > ? AND role != 'marker' "
            "AND NOT EXISTS (SELECT 1 FROM buffer_vectors v WHERE v.buffer_id = b.id) "
            "ORDER BY id LIMIT ?",
            (after_id, limit),
        )

    def put_buffer_vectors(self, items: Sequence[tuple[int, np.ndarray]]) -> int:
        written = 0
        for row_id, vec in items:
            # a new vector replaces the old one under a new seq (the index follows)
            self.conn.execute("DELETE FROM buffer_vectors WHERE buffer_id = ?", (row_id,))
            self.conn.execute(
                "INSERT INTO buffer_vectors (buffer_id, embedding) SELECT ?, ? "
                "WHERE EXISTS (SELECT 1 FROM buffer WHERE id = ? AND role != 'marker')",
                (row_id, blob(vec), row_id),
            )
            written += self.conn.changes()
        return written

    def clear_buffer_vectors(self) -> None:
        self.conn.execute("DELETE FROM buffer_vectors")

    def has_episodic_vectors(self) -> bool:
        sql = "SELECT EXISTS (SELECT 1 FROM buffer_vectors) OR EXISTS (SELECT 1 FROM summaries)"
        return bool(self._one(sql)[0])

    def buffer_vector_totals(self) -> tuple[int, int]:
        embedded = int(self._one("SELECT count(*) FROM buffer_vectors")[0])
        rows = int(self._one("SELECT count(*) FROM buffer WHERE role != 'marker'")[0])
        return embedded, rows

    # ---- summaries --------------------------------------------------------------------
    def last_summarised_id(self) -> int:
        return int(self._one("SELECT max(end_buffer_id) FROM summaries")[0] or 0)

    def unsummarised(self) -> list[BufferRow]:
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE role != 'marker' AND id > "
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
        created = utc_now()
        self.conn.execute(
            "INSERT INTO summaries (content, embedding, tags, entities, start_buffer_id, "
            "end_buffer_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (content, blob(vector), dumps(tags), dumps(entities), start_buffer_id,
             end_buffer_id, created),
        )
        row_id = self.conn.last_insert_rowid()
        return Summary(row_id, content, tags, entities, start_buffer_id, end_buffer_id, created)

    def summaries_page(self, limit: int, offset: int) -> list[Summary]:
        cur = self.conn.execute(
            f"SELECT {SUMMARY_HIT_COLS} FROM summaries ORDER BY id DESC LIMIT ? OFFSET ?",
            (limit, offset),
        )
        return [summary(r) for r in cur]

    def count(self, table: ContentTable) -> int:
        return int(self._one(f"SELECT count(*) FROM {table}")[0])

    def summary(self, summary_id: int, *, for_update: bool = False) -> Summary | None:
        row = self.conn.execute(
            f"SELECT {SUMMARY_HIT_COLS} FROM summaries WHERE id = ?", (summary_id,)
        ).fetchone()
        return None if row is None else summary(row)

    def set_summary_content(self, summary_id: int, content: str, vector: np.ndarray) -> None:
        self.conn.execute(
            "UPDATE summaries SET content = ?, embedding = ? WHERE id = ?",
            (content, blob(vector), summary_id),
        )
        # the in-memory indexes hold vectors by id: make every process reload them
        self.conn.execute("UPDATE vector_state SET epoch = abs(random()) WHERE name = 'summaries'")

    def set_summary_labels(
        self, summary_id: int, tags: list[str], entities: dict[str, list[str]]
    ) -> None:
        self.conn.execute(
            "UPDATE summaries SET tags = ?, entities = ? WHERE id = ?",
            (dumps(tags), dumps(entities), summary_id),
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
        self.conn.execute(
            "INSERT INTO sources (name, type, summary, start_id, end_id, meta, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, type, summary, start_id, end_id, dumps(meta), utc_now()),
        )
        return int(self.conn.last_insert_rowid())

    def insert_chunks(self, source_id: int, rows: Sequence[ChunkRow]) -> None:
        created = utc_now()
        self.conn.executemany(
            "INSERT INTO memories (source_id, content, embedding, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ((source_id, text, blob(vec), dumps(meta), created) for text, vec, meta in rows),
        )

    def source(self, source_id: int, *, for_update: bool = False) -> Source | None:
        row = self.conn.execute(
            f"SELECT {SOURCE_COLS} FROM sources s WHERE s.id = ?", (source_id,)
        ).fetchone()
        return None if row is None else source(row)

    def sources(self, meta_equals: dict[str, Any]) -> list[Source]:
        cur = self.conn.execute(f"SELECT {SOURCE_COLS} FROM sources s ORDER BY s.id DESC")
        # Sources number in the thousands at most: compare decoded JSON in Python, so
        # every JSON value (strings, numbers, booleans, null, lists) compares exactly.
        return [
            s
            for s in map(source, cur)
            if all(key in s.meta and s.meta[key] == value for key, value in meta_equals.items())
        ]

    def set_source_summary(self, source_id: int, summary: str) -> bool:
        self.conn.execute("UPDATE sources SET summary = ? WHERE id = ?", (summary, source_id))
        return bool(self.conn.changes())

    def set_source_meta(self, source_id: int, meta: dict[str, Any]) -> None:
        self.conn.execute("UPDATE sources SET meta = ? WHERE id = ?", (dumps(meta), source_id))

    def delete_chunks(self, source_id: int) -> None:
        self.conn.execute("DELETE FROM memories WHERE source_id = ?", (source_id,))

    def delete_source(self, source_id: int) -> bool:
        self.conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))
        return bool(self.conn.changes())

    def chunks(self, source_id: int) -> list[Memory]:
        cur = self.conn.execute(
            f"SELECT {MEMORY_COLS} FROM memories WHERE source_id = ? ORDER BY id", (source_id,)
        )
        return [memory(r, with_embedding=True) for r in cur]

    def source_names(self, ids: Sequence[int]) -> dict[int, str]:
        return dict(
            self.conn.execute(
                f"SELECT id, name FROM sources WHERE id IN ({','.join('?' * len(ids))})",
                list(ids),
            )
        )

    # ---- forgetting -------------------------------------------------------------------
    def lock(self, section: Section) -> None:
        # BEGIN IMMEDIATE holds the one write lock already
        if section == "import":
            self.conn.execute("PRAGMA defer_foreign_keys = ON")

    def existing(self, table: str, ids: Sequence[int]) -> set[int]:
        cur = self.conn.execute(
            f"SELECT id FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
            (dumps(list(ids)),),
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
            (dumps(list(ids)),),
        )
        return int(self.conn.changes())

    def narrow_source(self, source_id: int, start: int, end: int) -> None:
        self.conn.execute(
            "UPDATE sources SET start_id = ?, end_id = ?, summary = NULL WHERE id = ?",
            (start, end, source_id),
        )

    def log(self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]) -> tuple[int, str]:
        at = utc_now()
        self.conn.execute(
            "INSERT INTO forget_log (forgotten_at, kind, ids, counts) VALUES (?, ?, ?, ?)",
            (at, kind, dumps(ids), dumps(counts)),
        )
        return self.conn.last_insert_rowid(), at

    def find_buffer_text(self, terms: Sequence[str], limit: int) -> list[BufferRow]:
        # a buffer row's meta too: an assistant row keeps its tool calls' arguments and
        # the agent's name there (`meta.tools`, `meta.agent`)
        in_row = " AND ".join("instr(lower(content || ' ' || meta), ?) > 0" for _ in terms)
        return self._rows(
            f"SELECT {BUFFER_COLS} FROM buffer WHERE role != 'marker' AND {in_row} "
            "ORDER BY id LIMIT ?",
            (*terms, limit),
        )

    def find_summary_text(self, terms: Sequence[str], limit: int) -> list[Summary]:
        cur = self.conn.execute(
            f"SELECT {SUMMARY_HIT_COLS} FROM summaries WHERE {_contains(terms)} "
            "ORDER BY id LIMIT ?",
            (*terms, limit),
        )
        return [summary(r) for r in cur]

    def find_memory_text(self, terms: Sequence[str], limit: int) -> list[Memory]:
        cur = self.conn.execute(
            f"SELECT {MEMORY_HIT_COLS} FROM memories WHERE {_contains(terms)} ORDER BY id LIMIT ?",
            (*terms, limit),
        )
        return [memory(r) for r in cur]

    def forget_entries(self, limit: int | None) -> list[ForgetLogEntry]:
        if limit is None:
            cur = self.conn.execute(f"SELECT {_FORGET_COLS} FROM forget_log ORDER BY id")
        else:
            cur = self.conn.execute(
                f"SELECT {_FORGET_COLS} FROM forget_log ORDER BY id DESC LIMIT ?", (limit,)
            )
        return [
            ForgetLogEntry(int(r[0]), r[1], r[2], json.loads(r[3]), json.loads(r[4])) for r in cur
        ]

    # ---- state ------------------------------------------------------------------------
    def state(self, key: str, *, for_update: bool = False) -> tuple[bool, Any]:
        row = self.conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return (False, None) if row is None else (True, json.loads(row[0]))

    def put_state(self, key: str, value: Any) -> None:
        self.conn.execute(
            "INSERT INTO state (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, dumps(value)),
        )

    def drop_state(self, key: str) -> None:
        self.conn.execute("DELETE FROM state WHERE key = ?", (key,))

    def all_state(self) -> Iterable[tuple[str, Any]]:
        for key, value in self.conn.execute("SELECT key, value FROM state ORDER BY key"):
            yield key, json.loads(value)

    # ---- export / import --------------------------------------------------------------
    def export_buffer(self) -> Iterator[tuple[BufferRow, np.ndarray | None]]:
        for r in self.conn.execute(
            "SELECT b.id, b.role, b.content, b.origin, b.created_at, b.meta, v.embedding "
            "FROM buffer b LEFT JOIN buffer_vectors v ON v.buffer_id = b.id ORDER BY b.id"
        ):
            yield buffer_row(r[:6]), None if r[6] is None else np.frombuffer(r[6], dtype="<f4")

    def export_summaries(self) -> Iterator[Summary]:
        for r in self.conn.execute(f"SELECT {SUMMARY_COLS} FROM summaries ORDER BY id"):
            yield summary(r, with_embedding=True)

    def export_sources(self) -> Iterator[Source]:
        yield from map(source, self.conn.execute(f"SELECT {SOURCE_COLS} FROM sources s ORDER BY s.id"))

    def export_memories(self) -> Iterator[Memory]:
        for r in self.conn.execute(f"SELECT {MEMORY_COLS} FROM memories ORDER BY id"):
            yield memory(r, with_embedding=True)

    def has_rows(self, table: str) -> bool:
        return bool(self._one(f"SELECT EXISTS (SELECT 1 FROM {table})")[0])

    def load(self, kind: str, batch: list[dict[str, Any]]) -> None:
        for rec in batch:
            self._load_one(kind, rec)

    def finish_load(self) -> None:
        self.conn.execute("UPDATE vector_state SET epoch = abs(random())")

    def _vector(self, rec: dict[str, Any], what: str) -> bytes:
        """An imported record's vector, checked against the export's first one."""
        vec = as_vector(rec["embedding"], self._import_dim, what=f"{what} {rec['id']} embedding")
        if self._import_dim is None:
            self._import_dim = vec.shape[0]
            self.bind_unnamed(self._import_dim)
        return blob(vec)

    def _load_one(self, kind: str, rec: dict[str, Any]) -> None:
        if kind == "embedder":
            self.conn.execute(
                "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?)",
                (str(rec["model"]), int(rec["dim"]), utc_now()),
            )
            self._import_dim = int(rec["dim"])
        elif kind == "state":
            self.conn.execute(
                "INSERT INTO state (key, value) VALUES (?, ?)", (rec["key"], dumps(rec["value"]))
            )
        elif kind in _INSERTS:
            sql, row = _INSERTS[kind]
            self.conn.execute(sql, row(self, rec))
            if kind == "buffer" and rec.get("embedding") is not None and rec["role"] != "marker":
                self.conn.execute(
                    "INSERT INTO buffer_vectors (buffer_id, embedding) VALUES (?, ?)",
                    (int(rec["id"]), self._vector(rec, "buffer")),
                )
        else:
            raise ValidationError(f"unknown export record type {kind!r}")


#: How `SQLiteTx.load` inserts each record type with a row of its own: (SQL, row maker).
_INSERTS: dict[str, tuple[str, Any]] = {
    "buffer": (
        f"INSERT INTO buffer ({BUFFER_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
        lambda tx, r: (
            int(r["id"]), r["role"], r["content"], r["origin"], r["created_at"],
            dumps(r.get("meta") or {}),
        ),
    ),
    "summary": (
        f"INSERT INTO summaries ({SUMMARY_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        lambda tx, r: (
            int(r["id"]), r["content"], dumps(r.get("tags") or []), dumps(r.get("entities") or {}),
            int(r["start_buffer_id"]), int(r["end_buffer_id"]), r["created_at"],
            tx._vector(r, "summary"),
        ),
    ),
    "source": (
        "INSERT INTO sources (id, name, type, summary, start_id, end_id, meta, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        lambda tx, r: (
            int(r["id"]), r["name"], r["source_type"], r.get("summary"), r.get("start_id"),
            r.get("end_id"), dumps(r.get("meta") or {}), r["created_at"],
        ),
    ),
    "memory": (
        f"INSERT INTO memories ({MEMORY_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
        lambda tx, r: (
            int(r["id"]), int(r["source_id"]), r["content"], dumps(r.get("metadata") or {}),
            r["created_at"], tx._vector(r, "memory"),
        ),
    ),
    "forget": (
        "INSERT INTO forget_log (id, forgotten_at, kind, ids, counts) VALUES (?, ?, ?, ?, ?)",
        lambda tx, r: (
            int(r["id"]), r["at"], r["kind"], dumps(r.get("ids") or {}),
            dumps(r.get("counts") or {}),
        ),
    ),
}


def _contains(terms: Sequence[str]) -> str:
    return " AND ".join("instr(lower(content), ?) > 0" for _ in terms)


# ---- row conversion -------------------------------------------------------------------


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def blob(vec: np.ndarray) -> bytes:
    return vec.astype("<f4").tobytes()


def one(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
    """The single row of an aggregate query."""
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return tuple(row)


def buffer_row(r: Sequence[Any]) -> BufferRow:
    return BufferRow(
        id=int(r[0]),
        role=r[1],
        content=r[2],
        origin=r[3],
        created_at=r[4],
        # most rows (every user row) carry none: a search builds ~100 rows
        meta={} if r[5] == "{}" else json.loads(r[5]),
    )


def summary(r: Sequence[Any], *, with_embedding: bool = False) -> Summary:
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


def source(r: Sequence[Any]) -> Source:
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


def memory(r: Sequence[Any], *, with_embedding: bool = False) -> Memory:
    return Memory(
        id=int(r[0]),
        source_id=int(r[1]),
        content=r[2],
        metadata=json.loads(r[3]),
        created_at=r[4],
        embedding=np.frombuffer(r[5], dtype="<f4").astype(np.float32) if with_embedding else None,
    )
