"""The SQLite engine's queries: `nixx.store.database.Tx` on one apsw connection — the
shared statements of `nixx.store.sql_queries` in SQLite's spelling, and what SQLite
does its own way.

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
from nixx.store.database import ChunkRow, LockSection, NewSource, NewSummary, RowVector
from nixx.store.portable import as_vector, record_pieces, utc_now
from nixx.store.records import BufferRow, JsonObject, Memory, Source, Summary
from nixx.store.sql_queries import (
    BUFFER_COLS,
    MEMORY_COLS,
    SOURCE_COLS,
    SUMMARY_COLS,
    Dialect,
    Rows,
    SqlTx,
)

# a row's columns without its vector (what a vector search's hits read), then with it
SUMMARY_HIT_COLS = SUMMARY_COLS
MEMORY_HIT_COLS = MEMORY_COLS
SUMMARY_VEC_COLS = SUMMARY_COLS + ", embedding"
MEMORY_VEC_COLS = MEMORY_COLS + ", embedding"

DIALECT = Dialect(
    placeholder="?",
    in_ids="IN (SELECT value FROM json_each(?))",
    vec="?",
    vec_out="embedding",
    for_update="",  # BEGIN IMMEDIATE: a writer has the whole file
    state_touched="",
    contains="instr(lower(content), ?) > 0",
    contains_row="instr(lower(content || ' ' || meta), ?) > 0",
)
_SQL = DIALECT.statements()


def _loads(text: str) -> Any:
    # most rows (every user row) carry no meta: a search builds ~100 rows
    return {} if text == "{}" else json.loads(text)


def _vector(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


ROWS = Rows(json=_loads, time=str, vector=_vector)


class SQLiteTx(SqlTx):
    """The queries on one connection, inside the transaction its engine opened."""

    sql = _SQL
    dialect = DIALECT
    rows = ROWS

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._import_dim: int | None = None

    # ---- primitives -------------------------------------------------------------------
    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self.conn.execute(sql, params))

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        self.conn.execute(sql, params)
        return int(self.conn.changes())

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def _json(self, value: Any) -> Any:
        return dumps(value)


    def _vec(self, vector: np.ndarray) -> Any:
        return blob(vector)

    def _ids(self, ids: Sequence[int]) -> Any:
        return dumps(list(ids))

    def _tags(self, tags: list[str]) -> Any:
        return dumps(tags)






    # ---- embedder -------------------------------------------------------------------
    def bind(self, model: str, dim: int) -> None:
        self.conn.execute(
            "INSERT INTO embedder (id, model, dim, bound_at) VALUES (1, ?, ?, ?)",
            (model, dim, utc_now()),
        )

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
    def start_reindex(self) -> None:
        pass  # BLOB columns take vectors of any dimension

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
        self, role: str, content: str, origin: str, meta: JsonObject
    ) -> BufferRow:
        created = utc_now()
        self.conn.execute(
            "INSERT INTO buffer (role, content, origin, meta, created_at) VALUES (?, ?, ?, ?, ?)",
            (role, content, origin, dumps(meta), created),
        )
        return BufferRow(self.conn.last_insert_rowid(), role, content, origin, created, meta)

    def buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        rows: list[BufferRow] = []
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            sql = f"SELECT {BUFFER_COLS} FROM buffer WHERE id IN ({','.join('?' * len(part))}) "
            rows += map(ROWS.buffer_row, self.conn.execute(sql + "ORDER BY id", part))
        return rows

    # ---- buffer row vectors -----------------------------------------------------------
    def put_buffer_vectors(self, items: Sequence[RowVector]) -> int:
        written = 0
        for row_id, vec, pieces in items:
            # a new vector replaces the old one under a new seq (the index follows)
            self.conn.execute("DELETE FROM buffer_vectors WHERE buffer_id = ?", (row_id,))
            self.conn.execute(
                "INSERT INTO buffer_vectors (buffer_id, embedding, pieces) SELECT ?, ?, ? "
                "WHERE EXISTS (SELECT 1 FROM buffer WHERE id = ? AND role != 'marker')",
                (row_id, blob(vec), pieces, row_id),
            )
            written += self.conn.changes()
        return written

    def buffer_pieces(self, ids: Sequence[int]) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for start in range(0, len(ids), 500):
            part = [int(i) for i in ids[start : start + 500]]
            sql = (
                "SELECT buffer_id, pieces FROM buffer_vectors WHERE pieces IS NOT NULL "
                f"AND buffer_id IN ({','.join('?' * len(part))})"
            )
            out.update((int(r[0]), bytes(r[1])) for r in self.conn.execute(sql, part))
        return out

    # ---- summaries --------------------------------------------------------------------
    def insert_summary(self, new: NewSummary) -> Summary:
        created = utc_now()
        self.conn.execute(
            "INSERT INTO summaries (content, embedding, tags, entities, start_buffer_id, "
            "end_buffer_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (new.content, blob(new.vector), dumps(new.tags), dumps(new.entities),
             new.start_buffer_id, new.end_buffer_id, created),
        )
        return Summary(
            self.conn.last_insert_rowid(), new.content, new.tags, new.entities,
            new.start_buffer_id, new.end_buffer_id, created,
        )

    def set_summary_content(self, summary_id: int, content: str, vector: np.ndarray) -> None:
        super().set_summary_content(summary_id, content, vector)
        # the in-memory indexes hold vectors by id: make every process reload them
        self.conn.execute("UPDATE vector_state SET epoch = abs(random()) WHERE name = 'summaries'")

    # ---- sources and memories ---------------------------------------------------------
    def insert_source(self, new: NewSource) -> int:
        self.conn.execute(
            "INSERT INTO sources (name, type, summary, start_id, end_id, meta, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (new.name, new.type, new.summary, new.start_id, new.end_id, dumps(new.meta),
             utc_now()),
        )
        return int(self.conn.last_insert_rowid())

    def insert_chunks(self, source_id: int, rows: Sequence[ChunkRow]) -> None:
        created = utc_now()
        self.conn.executemany(
            "INSERT INTO memories (source_id, content, embedding, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ((source_id, text, blob(vec), dumps(meta), created) for text, vec, meta in rows),
        )

    def sources(self, meta_equals: JsonObject) -> list[Source]:
        cur = self.conn.execute(f"SELECT {SOURCE_COLS} FROM sources s ORDER BY s.id DESC")
        # Sources number in the thousands at most: compare decoded JSON in Python, so
        # every JSON value (strings, numbers, booleans, null, lists) compares exactly.
        return [
            s
            for s in map(ROWS.source, cur)
            if all(key in s.meta and s.meta[key] == value for key, value in meta_equals.items())
        ]

    # ---- forgetting -------------------------------------------------------------------
    def lock(self, section: LockSection) -> None:
        # BEGIN IMMEDIATE holds the one write lock already
        if section == "import":
            self.conn.execute("PRAGMA defer_foreign_keys = ON")

    def log(self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]) -> tuple[int, str]:
        at = utc_now()
        self.conn.execute(
            "INSERT INTO forget_log (forgotten_at, kind, ids, counts) VALUES (?, ?, ?, ?)",
            (at, kind, dumps(ids), dumps(counts)),
        )
        return self.conn.last_insert_rowid(), at

    # ---- export / import --------------------------------------------------------------
    def export_buffer(self) -> Iterator[tuple[BufferRow, np.ndarray | None, bytes | None]]:
        for r in self.conn.execute(
            "SELECT b.id, b.role, b.content, b.origin, b.created_at, b.meta, v.embedding, "
            "v.pieces FROM buffer b LEFT JOIN buffer_vectors v ON v.buffer_id = b.id "
            "ORDER BY b.id"
        ):
            vec = None if r[6] is None else np.frombuffer(r[6], dtype="<f4")
            yield ROWS.buffer_row(r[:6]), vec, None if r[7] is None else bytes(r[7])

    def export_summaries(self) -> Iterator[Summary]:
        for r in self.conn.execute(f"SELECT {SUMMARY_VEC_COLS} FROM summaries ORDER BY id"):
            yield ROWS.summary(r, r[7])

    def export_sources(self) -> Iterator[Source]:
        sql = f"SELECT {SOURCE_COLS} FROM sources s ORDER BY s.id"
        yield from map(ROWS.source, self.conn.execute(sql))

    def export_memories(self) -> Iterator[Memory]:
        for r in self.conn.execute(f"SELECT {MEMORY_VEC_COLS} FROM memories ORDER BY id"):
            yield ROWS.memory(r, r[5])

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
                vec = self._vector(rec, "buffer")
                self.conn.execute(
                    "INSERT INTO buffer_vectors (buffer_id, embedding, pieces) VALUES (?, ?, ?)",
                    (int(rec["id"]), vec, record_pieces(rec, self._import_dim)),
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
        f"INSERT INTO summaries ({SUMMARY_VEC_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
        f"INSERT INTO memories ({MEMORY_VEC_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
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





