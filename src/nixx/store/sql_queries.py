"""The queries both SQL engines run alike, written once: `SqlTx`, the part of
`nixx.store.database.Tx` whose SQL differs between SQLite and PostgreSQL only in its
spelling (placeholders, how a list of ids is passed, how a vector is cast).

Statements are written with ``?`` placeholders and a few `Dialect` slots
(``{in_ids}``, ``{vec}``, ``{for_update}``, …); each engine fills them once at import
(`Dialect.statements`). The engines keep what they do their own way (inserts that
return their row, the embedder's column typing, export streaming, bulk import, locks):
`nixx.store.sqlite_queries`, `nixx.store.postgres_queries`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nixx.store.database import ChunkRow, ContentTable, Tx
from nixx.store.forgetting import ForgetLogEntry
from nixx.store.records import BufferRow, EmbeddingInfo, JsonObject, Memory, Source, Summary

BUFFER_COLS = "id, role, content, origin, created_at, meta"
SUMMARY_COLS = "id, content, tags, entities, start_buffer_id, end_buffer_id, created_at"
SOURCE_COLS = (
    "s.id, s.name, s.type, s.summary, s.start_id, s.end_id, s.created_at, s.meta, "
    "(SELECT count(*) FROM memories m WHERE m.source_id = s.id)"
)
MEMORY_COLS = "id, source_id, content, metadata, created_at"
_FORGET_COLS = "id, forgotten_at, kind, ids, counts"
_B, _S, _M = BUFFER_COLS, SUMMARY_COLS, MEMORY_COLS

#: The shared statements, by name (see the module docstring for the slots).
STATEMENTS = {
    "embedder": "SELECT model, dim FROM embedder",
    "content_vectors": "SELECT EXISTS (SELECT 1 FROM summaries) OR EXISTS (SELECT 1 FROM memories)",
    "name_embedder": "UPDATE embedder SET model = ?",
    "contents": "SELECT id, content FROM {table} ORDER BY id",
    "set_vector": "UPDATE {table} SET embedding = {vec} WHERE id = ?",
    "session_marker": "SELECT coalesce(max(id), 0) FROM buffer WHERE role = 'marker'",
    "session_tail": f"SELECT {_B} FROM buffer WHERE id > ? AND role != 'marker' "
    "ORDER BY id DESC LIMIT ?",
    "buffer_meta": "SELECT meta FROM buffer WHERE id = ?{for_update}",
    "set_buffer_meta": "UPDATE buffer SET meta = ? WHERE id = ?",
    "buffer_from": f"SELECT {_B} FROM buffer WHERE id >= ? ORDER BY id",
    "buffer_between": f"SELECT {_B} FROM buffer WHERE id BETWEEN ? AND ? ORDER BY id",
    "last_rows": f"SELECT {_B} FROM buffer WHERE role != 'marker' AND id > ? "
    "ORDER BY id DESC LIMIT ?",
    "last_marker": "SELECT max(id) FROM buffer WHERE role = 'marker'",
    "buffer_totals": "SELECT count(*), coalesce(max(id), 0) FROM buffer",
    "non_marker_rows": f"SELECT {_B} FROM buffer WHERE role != 'marker' ORDER BY id",
    "without_vector": f"SELECT {_B} FROM buffer b WHERE id > ? AND role != 'marker' "
    "AND NOT EXISTS (SELECT 1 FROM buffer_vectors v WHERE v.buffer_id = b.id) "
    "ORDER BY id LIMIT ?",
    "without_pieces": f"SELECT {_B} FROM buffer b WHERE id > ? AND EXISTS (SELECT 1 FROM "
    "buffer_vectors v WHERE v.buffer_id = b.id AND v.pieces IS NULL) ORDER BY id LIMIT ?",
    "set_pieces": "UPDATE buffer_vectors SET pieces = ? WHERE buffer_id = ? AND pieces IS NULL",
    "clear_buffer_vectors": "DELETE FROM buffer_vectors",
    "episodic_vectors": "SELECT EXISTS (SELECT 1 FROM buffer_vectors) "
    "OR EXISTS (SELECT 1 FROM summaries)",
    "buffer_vector_totals": "SELECT (SELECT count(*) FROM buffer_vectors), "
    "(SELECT count(*) FROM buffer WHERE role != 'marker')",
    "last_summarised": "SELECT max(end_buffer_id) FROM summaries",
    "unsummarised": f"SELECT {_B} FROM buffer WHERE role != 'marker' AND id > "
    "(SELECT coalesce(max(end_buffer_id), 0) FROM summaries) ORDER BY id",
    "summaries_page": f"SELECT {_S} FROM summaries ORDER BY id DESC LIMIT ? OFFSET ?",
    "count": "SELECT count(*) FROM {table}",
    "summary": f"SELECT {_S} FROM summaries WHERE id = ?",
    "summary_locked": f"SELECT {_S} FROM summaries WHERE id = ?{{for_update}}",
    "set_summary_content": "UPDATE summaries SET content = ?, embedding = {vec} WHERE id = ?",
    "set_summary_labels": "UPDATE summaries SET tags = ?, entities = ? WHERE id = ?",
    "lock_source": "SELECT 1 FROM sources WHERE id = ?{for_update}",
    "source": f"SELECT {SOURCE_COLS} FROM sources s WHERE s.id = ?",
    "set_source_summary": "UPDATE sources SET summary = ? WHERE id = ?",
    "set_source_meta": "UPDATE sources SET meta = ? WHERE id = ?",
    "delete_chunks": "DELETE FROM memories WHERE source_id = ?",
    "delete_source": "DELETE FROM sources WHERE id = ?",
    "chunks": f"SELECT {_M}, {{vec_out}} FROM memories WHERE source_id = ? ORDER BY id",
    "source_names": "SELECT id, name FROM sources WHERE id {in_ids}",
    "existing": "SELECT id FROM {table} WHERE id {in_ids}",
    "rows_in": "SELECT id, role FROM buffer WHERE id BETWEEN ? AND ? ORDER BY id",
    "summary_windows": "SELECT id, start_buffer_id, end_buffer_id FROM summaries",
    "buffer_sources": "SELECT id, start_id, end_id FROM sources WHERE type = 'buffer'",
    "delete": "DELETE FROM {table} WHERE {column} {in_ids}",
    "narrow_source": "UPDATE sources SET start_id = ?, end_id = ?, summary = NULL WHERE id = ?",
    # a buffer row's meta too: an assistant row keeps its tool calls' arguments and the
    # agent's name there (`meta.tools`, `meta.agent`)
    "find_buffer": f"SELECT {_B} FROM buffer WHERE role != 'marker' AND {{terms}} "
    "ORDER BY id LIMIT ?",
    "find_summaries": f"SELECT {_S} FROM summaries WHERE {{terms}} ORDER BY id LIMIT ?",
    "find_memories": f"SELECT {_M} FROM memories WHERE {{terms}} ORDER BY id LIMIT ?",
    "forget_all": f"SELECT {_FORGET_COLS} FROM forget_log ORDER BY id",
    "forget_newest": f"SELECT {_FORGET_COLS} FROM forget_log ORDER BY id DESC LIMIT ?",
    "state": "SELECT value FROM state WHERE key = ?",
    "state_locked": "SELECT value FROM state WHERE key = ?{for_update}",
    "put_state": "INSERT INTO state (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value{state_touched}",
    "drop_state": "DELETE FROM state WHERE key = ?",
    "all_state": "SELECT key, value FROM state ORDER BY key",
    "has_rows": "SELECT 1 FROM {table} LIMIT 1",
}


@dataclass(frozen=True)
class Dialect:
    """How one engine spells the shared statements."""

    placeholder: str  # "?" or "%s"
    in_ids: str  # ``id {in_ids}`` tests membership in one list parameter
    vec: str  # a vector parameter
    vec_out: str  # a vector column read back
    for_update: str  # a row lock, or ""
    state_touched: str  # more to set when a state key changes
    contains: str  # "content holds the parameter" (with the engine's placeholder)
    contains_row: str  # "content or meta holds the parameter" (likewise)

    def statements(self) -> dict[str, str]:
        slots = {
            "in_ids": self.in_ids,
            "vec": self.vec,
            "vec_out": self.vec_out,
            "for_update": self.for_update,
            "state_touched": self.state_touched,
            "table": "{table}",  # filled per call
            "column": "{column}",
            "terms": "{terms}",
        }
        return {
            name: sql.format(**slots).replace("?", self.placeholder)
            for name, sql in STATEMENTS.items()
        }


@dataclass(frozen=True)
class Rows:
    """Rows read with the shared column lists -> records, through one engine's decoders
    of a JSON column, a timestamp and a vector."""

    json: Callable[[Any], Any]
    time: Callable[[Any], str]
    vector: Callable[[Any], np.ndarray]

    def buffer_row(self, r: Sequence[Any]) -> BufferRow:
        return BufferRow(int(r[0]), r[1], r[2], r[3], self.time(r[4]), self.json(r[5]) or {})

    def summary(self, r: Sequence[Any], embedding: Any = None) -> Summary:
        return Summary(
            int(r[0]), r[1], list(self.json(r[2]) or []), self.json(r[3]) or {},
            int(r[4]), int(r[5]), self.time(r[6]),
            None if embedding is None else self.vector(embedding),
        )

    def source(self, r: Sequence[Any]) -> Source:
        return Source(
            int(r[0]), r[1], r[2], r[3], r[4], r[5], self.time(r[6]), self.json(r[7]) or {},
            int(r[8]),
        )

    def memory(self, r: Sequence[Any], embedding: Any = None) -> Memory:
        return Memory(
            int(r[0]), int(r[1]), r[2], self.json(r[3]) or {}, self.time(r[4]),
            None if embedding is None else self.vector(embedding),
        )


class SqlTx(Tx):
    """The shared queries over a few primitives each engine gives."""

    sql: dict[str, str]  # `Dialect.statements()` of the engine
    dialect: Dialect
    rows: Rows

    # ---- primitives -------------------------------------------------------------------
    @abstractmethod
    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute; the number of rows changed."""

    @abstractmethod
    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    def _json(self, value: Any) -> Any:
        """A JSON value as a parameter."""

    @abstractmethod
    def _vec(self, vector: np.ndarray) -> Any:
        """A vector as a parameter."""

    @abstractmethod
    def _ids(self, ids: Sequence[int]) -> Any:
        """A list of ids as the one parameter of ``{in_ids}``."""

    @abstractmethod
    def _tags(self, tags: list[str]) -> Any: ...

    def _first(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    def _value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._all(sql, params)[0][0]

    def _rows(self, name: str, params: Sequence[Any] = ()) -> list[BufferRow]:
        return [self.rows.buffer_row(r) for r in self._all(self.sql[name], params)]

    # ---- embedder -------------------------------------------------------------------
    def embedder(self) -> EmbeddingInfo | None:
        row = self._first(self.sql["embedder"])
        return EmbeddingInfo(model=row[0], dim=int(row[1])) if row else None

    def has_content_vectors(self) -> bool:
        return bool(self._value(self.sql["content_vectors"]))

    def name_embedder(self, model: str) -> None:
        self._run(self.sql["name_embedder"], (model,))

    def contents(self, table: ContentTable) -> dict[int, str]:
        return {int(r[0]): r[1] for r in self._all(self.sql["contents"].format(table=table))}

    def set_vectors(self, table: ContentTable, vectors: dict[int, np.ndarray]) -> None:
        self._many(
            self.sql["set_vector"].format(table=table),
            [(self._vec(vec), i) for i, vec in vectors.items()],
        )

    # ---- the next embedder's vectors ----------------------------------------------------
    def staged_digests(self) -> dict[tuple[str, int], str]:
        return {(r[0], int(r[1])): r[2] for r in self._all("SELECT kind, id, digest FROM vectors_next")}

    def stage(self, items: Sequence[tuple[str, int, bytes, bytes | None, str]]) -> None:
        p = self.dialect.placeholder
        self._many(
            f"INSERT INTO vectors_next (kind, id, embedding, pieces, digest) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (kind, id) DO UPDATE SET "
            "embedding = excluded.embedding, pieces = excluded.pieces, digest = excluded.digest",
            items,
        )

    def staged(self, kind: str) -> list[tuple[int, bytes, bytes | None]]:
        p = self.dialect.placeholder
        return [
            (int(r[0]), bytes(r[1]), None if r[2] is None else bytes(r[2]))
            for r in self._all(
                f"SELECT id, embedding, pieces FROM vectors_next WHERE kind = {p} ORDER BY id",
                (kind,),
            )
        ]

    def clear_staged(self) -> None:
        self._run("DELETE FROM vectors_next")

    # ---- buffer -----------------------------------------------------------------------
    def session_tail(self, n: int) -> list[BufferRow]:
        marker = self._value(self.sql["session_marker"])
        return self._rows("session_tail", (marker, n))

    def buffer_meta(self, row_id: int) -> JsonObject | None:
        row = self._first(self.sql["buffer_meta"], (row_id,))
        return None if row is None else dict(self.rows.json(row[0]) or {})

    def set_buffer_meta(self, row_id: int, meta: JsonObject) -> None:
        self._run(self.sql["set_buffer_meta"], (self._json(meta), row_id))

    def buffer_range(self, start_id: int, end_id: int | None) -> list[BufferRow]:
        if end_id is None:
            return self._rows("buffer_from", (start_id,))
        return self._rows("buffer_between", (start_id, end_id))

    def last_rows(self, n: int, after_id: int) -> list[BufferRow]:
        return self._rows("last_rows", (after_id, n))

    def last_marker_id(self) -> int:
        return int(self._value(self.sql["last_marker"]) or 0)

    def buffer_totals(self) -> tuple[int, int]:
        rows, max_id = self._all(self.sql["buffer_totals"])[0]
        return int(rows), int(max_id)

    def non_marker_rows(self) -> list[BufferRow]:
        return self._rows("non_marker_rows")

    def rows_without_vector(self, limit: int, after_id: int) -> list[BufferRow]:
        return self._rows("without_vector", (after_id, limit))

    def rows_without_pieces(self, limit: int, after_id: int) -> list[BufferRow]:
        return self._rows("without_pieces", (after_id, limit))

    def put_buffer_pieces(self, items: Sequence[tuple[int, bytes]]) -> int:
        return sum(self._run(self.sql["set_pieces"], (data, row_id)) for row_id, data in items)

    def clear_buffer_vectors(self) -> None:
        self._run(self.sql["clear_buffer_vectors"])

    def has_episodic_vectors(self) -> bool:
        return bool(self._value(self.sql["episodic_vectors"]))

    def buffer_vector_totals(self) -> tuple[int, int]:
        embedded, rows = self._all(self.sql["buffer_vector_totals"])[0]
        return int(embedded), int(rows)

    # ---- summaries --------------------------------------------------------------------
    def last_summarised_id(self) -> int:
        return int(self._value(self.sql["last_summarised"]) or 0)

    def unsummarised(self) -> list[BufferRow]:
        return self._rows("unsummarised")

    def summaries_page(self, limit: int, offset: int) -> list[Summary]:
        found = self._all(self.sql["summaries_page"], (limit, offset))
        return [self.rows.summary(r) for r in found]

    def count(self, table: ContentTable) -> int:
        return int(self._value(self.sql["count"].format(table=table)))

    def summary(self, summary_id: int, *, for_update: bool = False) -> Summary | None:
        row = self._first(self.sql["summary_locked" if for_update else "summary"], (summary_id,))
        return None if row is None else self.rows.summary(row)

    def set_summary_content(self, summary_id: int, content: str, vector: np.ndarray) -> None:
        self._run(self.sql["set_summary_content"], (content, self._vec(vector), summary_id))

    def set_summary_labels(
        self, summary_id: int, tags: list[str], entities: dict[str, list[str]]
    ) -> None:
        self._run(
            self.sql["set_summary_labels"], (self._tags(tags), self._json(entities), summary_id)
        )

    # ---- sources and memories ---------------------------------------------------------
    def source(self, source_id: int, *, for_update: bool = False) -> Source | None:
        if for_update and self._first(self.sql["lock_source"], (source_id,)) is None:
            return None
        row = self._first(self.sql["source"], (source_id,))
        return None if row is None else self.rows.source(row)

    def set_source_summary(self, source_id: int, summary: str) -> bool:
        return self._run(self.sql["set_source_summary"], (summary, source_id)) > 0

    def set_source_meta(self, source_id: int, meta: JsonObject) -> None:
        self._run(self.sql["set_source_meta"], (self._json(meta), source_id))

    def delete_chunks(self, source_id: int) -> None:
        self._run(self.sql["delete_chunks"], (source_id,))

    def delete_source(self, source_id: int) -> bool:
        return self._run(self.sql["delete_source"], (source_id,)) > 0

    def chunks(self, source_id: int) -> list[Memory]:
        return [self.rows.memory(r, r[5]) for r in self._all(self.sql["chunks"], (source_id,))]

    def source_names(self, ids: Sequence[int]) -> dict[int, str]:
        return {int(r[0]): r[1] for r in self._all(self.sql["source_names"], (self._ids(ids),))}

    def insert_chunks_as(self, sql: str, source_id: int, rows: Sequence[ChunkRow]) -> None:
        """`rows` inserted by `sql` taking (source id, content, vector, metadata)."""
        self._many(
            sql,
            [(source_id, text, self._vec(vec), self._json(meta)) for text, vec, meta in rows],
        )

    # ---- forgetting (nixx.store.forgetting.Ops) ----------------------------------------
    def existing(self, table: str, ids: Sequence[int]) -> set[int]:
        sql = self.sql["existing"].format(table=table)
        return {int(r[0]) for r in self._all(sql, (self._ids(ids),))}

    def rows_in(self, start: int, end: int) -> list[tuple[int, str]]:
        return [(int(r[0]), r[1]) for r in self._all(self.sql["rows_in"], (start, end))]

    def summary_windows(self) -> Iterable[tuple[int, int, int]]:
        return [(int(r[0]), int(r[1]), int(r[2])) for r in self._all(self.sql["summary_windows"])]

    def buffer_sources(self) -> Iterable[tuple[int, int | None, int | None]]:
        return [(int(r[0]), r[1], r[2]) for r in self._all(self.sql["buffer_sources"])]

    def delete(self, table: str, column: str, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        sql = self.sql["delete"].format(table=table, column=column)
        return self._run(sql, (self._ids(ids),))

    def narrow_source(self, source_id: int, start: int, end: int) -> None:
        self._run(self.sql["narrow_source"], (start, end, source_id))

    def _terms(self, name: str, test: str, terms: Sequence[str], limit: int) -> list[Any]:
        sql = self.sql[name].format(terms=" AND ".join(test for _ in terms))
        return self._all(sql, (*terms, limit))

    def find_buffer_text(self, terms: Sequence[str], limit: int) -> list[BufferRow]:
        found = self._terms("find_buffer", self.dialect.contains_row, terms, limit)
        return [self.rows.buffer_row(r) for r in found]

    def find_summary_text(self, terms: Sequence[str], limit: int) -> list[Summary]:
        found = self._terms("find_summaries", self.dialect.contains, terms, limit)
        return [self.rows.summary(r) for r in found]

    def find_memory_text(self, terms: Sequence[str], limit: int) -> list[Memory]:
        found = self._terms("find_memories", self.dialect.contains, terms, limit)
        return [self.rows.memory(r) for r in found]

    def forget_entries(self, limit: int | None) -> list[ForgetLogEntry]:
        if limit is None:
            rows = self._all(self.sql["forget_all"])
        else:
            rows = self._all(self.sql["forget_newest"], (limit,))
        return [
            ForgetLogEntry(
                int(r[0]), self.rows.time(r[1]), r[2], self.rows.json(r[3]), self.rows.json(r[4])
            )
            for r in rows
        ]

    # ---- state ------------------------------------------------------------------------
    def state(self, key: str, *, for_update: bool = False) -> tuple[bool, Any]:
        row = self._first(self.sql["state_locked" if for_update else "state"], (key,))
        return (False, None) if row is None else (True, self.rows.json(row[0]))

    def put_state(self, key: str, value: Any) -> None:
        self._run(self.sql["put_state"], (key, self._json(value)))

    def drop_state(self, key: str) -> None:
        self._run(self.sql["drop_state"], (key,))

    def all_state(self) -> Iterable[tuple[str, Any]]:
        return [(r[0], self.rows.json(r[1])) for r in self._all(self.sql["all_state"])]

    def has_rows(self, table: str) -> bool:
        return self._first(self.sql["has_rows"].format(table=table)) is not None
