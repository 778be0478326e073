"""The memory store: the seed's four tables (buffer, summaries, sources, memories) plus
a small key/value `state` (intent, runtime switches) and the forget log.

`MemoryStore` holds every rule once — validation and the errors it raises, meta
merging, the retried-user-row rule, record building, the forget plan, reindex, export
and import — over an `Database` (`nixx.store.database`) that holds only SQL: SQLite
(`nixx.store.sqlite`) or PostgreSQL (`nixx.store.postgres`). One contract suite
(`tests/store/contract.py`) runs on both.

Methods are synchronous and thread-safe; async callers (the server) run them in a
worker thread. Every write is atomic: a method either stores everything it was given or
nothing.

Vectors are float32 numpy arrays. Cosine similarity is computed on the vectors as
given; embedders return L2-normalised vectors so cosine equals the dot product.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from nixx.errors import Conflict, EmbedderMismatch, NotFound, ValidationError
from nixx.store import forgetting, validation
from nixx.store.database import (
    CONTENT_TABLES,
    IMPORT_TABLES,
    ChunkRow,
    ContentTable,
    Database,
    NewSource,
    NewSummary,
    RowVector,
    Tx,
    VectorQuery,
)
from nixx.store.export_check import RecordReader
from nixx.store.forgetting import ForgetLogEntry, ForgetResult
from nixx.store.portable import (
    ExportRecord,
    RawRecord,
    as_vector,
    buffer_record,
    checked_pieces,
    forget_record,
    header_record,
    memory_record,
    pieces_blob,
    pieces_of,
    source_record,
    summary_record,
)
from nixx.store.records import (
    BufferHit,
    BufferRow,
    EmbeddingInfo,
    EmbedFn,
    Memory,
    MemoryHit,
    NewChunk,
    Source,
    Summary,
    SummaryHit,
)
from nixx.store.reports import BufferStats, BufferVectorStats, ScrubReport, VacuumReport
from nixx.store.switching import Switching

#: A JSON object a caller hands the store (metadata); stored as a copy.
JsonIn = Mapping[str, object]

#: How many of the session's newest rows `append_user_once` looks at.
RETRY_TAIL = 16
class MemoryStore(Switching):
    """Persistent memory. Obtain one with `nixx.store.open_store()`."""

    backend: str  # "sqlite" | "postgres"

    def __init__(self, engine: Database) -> None:
        self._engine = engine
        self.backend = engine.backend

    # ---- lifecycle & schema --------------------------------------------------------
    def close(self) -> None:
        self._engine.close()

    def schema_version(self) -> int:
        """The migration version the database is at (0 for an empty database)."""
        return self._engine.schema_version()

    def migrate(self) -> list[int]:
        """Apply pending migrations, each in its own transaction; return those applied."""
        return self._engine.migrate()

    def warm_vector_indexes(self) -> object:
        """Start preparing vector search in the background (the server calls this at
        start); never blocks. A no-op where the database holds the indexes (PostgreSQL)."""
        return self._engine.warm_vector_indexes()

    def vector_indexes_warming(self) -> bool:
        """Whether `warm_vector_indexes` is still preparing an index (searches are exact
        and slower meanwhile)."""
        return self._engine.vector_indexes_warming()

    # ---- embedder identity ---------------------------------------------------------
    def embedding_info(self) -> EmbeddingInfo | None:
        """The model and dimension the stored vectors were made with, if any yet."""
        with self._engine.read() as tx:
            return tx.embedder()

    def bind_embedder(self, model: str, dim: int) -> None:
        """Record the embedder on first use; raise `EmbedderMismatch` (saying to run
        `nixx reindex`) when vectors of another model or dimension are stored."""
        dim = validation.embedder(model, dim, "bind_embedder")
        info = self.embedding_info()
        if info is not None and (info.model, info.dim) == (model, dim):
            return  # the common case, without taking the write lock
        with self._engine.write() as tx:
            tx.lock("embedder")
            current = tx.embedder()
            if current is None:
                tx.bind(model, dim)
            elif (current.model, current.dim) == (model, dim):
                return
            elif current.dim == dim and current.model == "":
                tx.name_embedder(model)  # vectors stored before any binding
            elif tx.has_content_vectors():
                raise _mismatch(current, model, dim)
            else:
                # only buffer vectors (derived from the buffer), if any: dropped, the
                # background queue embeds the rows again with the new model
                tx.rebind(model, dim, current.dim)

    def _vectors(
        self, tx: Tx, vectors: Sequence[object], labels: Sequence[str]
    ) -> list[np.ndarray]:
        """`vectors` checked against the bound dimension (and each other). Vectors
        stored before any `bind_embedder` record an unnamed embedder of their dimension."""
        info = tx.embedder()
        dim = info.dim if info else None
        out = []
        for vec, label in zip(vectors, labels, strict=True):
            arr = as_vector(vec, dim, what=label)
            dim = arr.shape[0]
            out.append(arr)
        if info is None and dim is not None and tx.bind_unnamed(dim) != dim:
            return self._vectors(tx, vectors, labels)  # bound meanwhile: check again
        return out

    def reindex(
        self,
        embed: EmbedFn,
        model: str,
        dim: int,
        *,
        batch_size: int = 64,
        progress: Callable[[int, int], None] | None = None,
        buffer_text: Callable[[Sequence[BufferRow]], list[list[str]]] | None = None,
    ) -> int:
        """Re-embed every summary and memory with `embed` and record (model, dim).
        Buffer row vectors are re-embedded too when `buffer_text` is given (it maps a
        batch of non-marker rows, in id order, to the texts to embed: for each row its
        vector's text, then its pieces', `nixx.memory.pieces`), else dropped
        (they are derived data: the background queue makes them again).
        Atomic: on failure the old vectors and embedder stay. Returns vectors written.

        Everything is embedded from a snapshot first, outside the write transaction;
        rows written meanwhile are embedded inside it, so nothing is missed."""
        job = _Reindex(embed, validation.embedder(model, dim, "reindex"), batch_size, progress)
        with self._engine.snapshot() as tx:
            texts = {table: tx.contents(table) for table in CONTENT_TABLES}
            rows = tx.non_marker_rows() if buffer_text is not None else []
        job.total = sum(len(t) for t in texts.values()) + len(rows)
        job.report()
        vectors = {table: job.embed(list(texts[table].items())) for table in CONTENT_TABLES}
        row_vectors: list[RowVector] = []
        for start in range(0, len(rows), job.batch_size):
            batch = rows[start : start + job.batch_size]
            assert buffer_text is not None
            row_vectors += job.embed_rows(batch, buffer_text(batch))
        with self._engine.write() as tx:
            tx.lock("embedder")
            tx.start_reindex()
            # Buffer vectors are derived data: re-embedded here when `buffer_text` is
            # given, else dropped for the background queue to make again.
            tx.clear_buffer_vectors()
            written = tx.put_buffer_vectors(row_vectors) if row_vectors else 0
            for table in CONTENT_TABLES:
                written += self._reindex_table(tx, job, table, texts[table], vectors[table])
            tx.finish_reindex(model, job.dim)
        return written

    @staticmethod
    def _reindex_table(
        tx: Tx,
        job: _Reindex,
        table: ContentTable,
        seen: dict[int, str],
        done: dict[int, np.ndarray],
    ) -> int:
        current = tx.contents(table)
        missing = [(i, t) for i, t in current.items() if i not in done or seen.get(i) != t]
        if missing:  # rows written while we embedded
            job.total += len(missing)
            done = done | job.embed(missing)
        tx.set_vectors(table, {i: done[i] for i in current})
        return len(current)

    # ---- episodic: buffer ----------------------------------------------------------
    def append_buffer(
        self, role: str, content: str, origin: str = "api", meta: JsonIn | None = None
    ) -> BufferRow:
        """Append one row. Raises `ValidationError` on an unknown role or origin."""
        checked = validation.buffer_row(role, content, origin, meta)
        with self._engine.write() as tx:
            return tx.insert_buffer(role, content, origin, checked)

    def append_user_once(
        self, content: str, origin: str = "api", meta: JsonIn | None = None
    ) -> BufferRow:
        """Append a turn's user message unless it is a retry, atomically (one transaction,
        so concurrent identical requests give one row): when the session's newest row,
        skipping answers marked incomplete, is this same message from the same origin,
        that row is returned instead (see `retried_user_row`)."""
        checked = validation.buffer_row("user", content, origin, meta)
        with self._engine.write() as tx:
            tx.lock("user_row")  # the check and the insert are one
            reuse = retried_user_row(tx.session_tail(RETRY_TAIL), content, origin)
            if reuse is not None:
                return reuse
            return tx.insert_buffer("user", content, origin, checked)

    def update_buffer_meta(self, row_id: int, meta: JsonIn) -> None:
        """Merge `meta` into a row's metadata (e.g. mark an answer incomplete)."""
        checked = validation.json_object(meta, "meta")
        with self._engine.write() as tx:
            old = tx.buffer_meta(row_id)
            if old is None:
                raise NotFound(f"buffer row {row_id} does not exist")
            tx.set_buffer_meta(row_id, {**old, **checked})

    def get_buffer(self, start_id: int, end_id: int | None = None) -> list[BufferRow]:
        """Rows with start_id <= id <= end_id (to the newest when end_id is None)."""
        with self._engine.read() as tx:
            return tx.buffer_range(start_id, end_id)

    def get_buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        """The rows with these ids (those that exist), in id order: one query for rows
        far apart (a search's results and their neighbours)."""
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return []
        with self._engine.read() as tx:
            return tx.buffer_rows(wanted)

    def last_buffer_rows(self, n: int, *, after_id: int = 0) -> list[BufferRow]:
        """The newest `n` non-marker rows with id > after_id, oldest first."""
        if n <= 0:
            return []
        with self._engine.read() as tx:
            return tx.last_rows(n, after_id)[::-1]

    def last_marker_id(self) -> int:
        """Id of the newest `marker` row (0 when there is none): a session starts after it."""
        with self._engine.read() as tx:
            return tx.last_marker_id()

    def search_buffer(self, query: str, limit: int = 10) -> list[BufferHit]:
        """Full-text search over non-marker rows, best first. Terms are OR-ed and ranked
        by BM25 (both engines), so a question finds rows that share only some of its words;
        a hit's score is the share of the question's term weight (the sum of its words'
        IDFs) the row carries. An empty or stop-word-only query returns []."""
        if limit <= 0:
            return []
        return self._engine.search_text(query or "", limit)

    def common_words(self, query: str) -> list[str]:
        """The content words of `query` (`fts_query.query_terms`) that a quarter of the
        buffer's rows or more contain (`term_stats.COMMON_SHARE`), when it holds
        `term_stats.COMMON_MIN_ROWS` rows or more: words that tell few rows from the
        others (in a conversation between people, each speaker's name). bm25 weighs them
        down by their IDF; the fused search leaves them out of the question it embeds
        (`nixx.memory.search.vector_text`), so the vector ranker, too, stops matching
        every row of a person the question names."""
        return self._engine.common_words(query or "")

    def buffer_stats(self) -> BufferStats:
        with self._engine.read() as tx:
            rows, max_id = tx.buffer_totals()
        return {"rows": rows, "max_id": max_id}

    # ---- episodic: buffer row vectors ------------------------------------------------
    def buffer_rows_without_vector(self, limit: int, *, after_id: int = 0) -> list[BufferRow]:
        """Up to `limit` non-marker rows with id > after_id that have no vector yet,
        oldest first (the background queue's work list)."""
        if limit <= 0:
            return []
        with self._engine.read() as tx:
            return tx.rows_without_vector(limit, after_id)

    def add_buffer_vectors(
        self,
        items: Sequence[tuple[int, np.ndarray]],
        pieces: Mapping[int, np.ndarray] | None = None,
    ) -> int:
        """Store (buffer id, vector) pairs in one transaction, replacing a row's earlier
        vector, with the rows' `pieces` (buffer id -> a k x dim matrix, one vector per
        sentence: `nixx.memory.pieces`; a row missing from it has none; None: the rows are
        not split, `add_buffer_pieces` gives them theirs later). Ids of missing or
        marker rows are skipped. Returns the vectors stored. Raises `EmbedderMismatch` on
        a wrong dimension."""
        if not items:
            return 0
        ids = [int(i) for i, _ in items]
        with self._engine.write() as tx:
            vectors = self._vectors(
                tx, [v for _, v in items], [f"buffer row {i} embedding" for i in ids]
            )
            rows = [
                RowVector(i, vec, checked_pieces(pieces, i, vec.shape[0]))
                for i, vec in zip(ids, vectors, strict=True)
            ]
            written = tx.put_buffer_vectors(rows)
        self._engine.after_write("buffer_vectors")
        return written

    def buffer_rows_without_pieces(self, limit: int, *, after_id: int = 0) -> list[BufferRow]:
        """Up to `limit` rows with id > after_id whose vector has no pieces yet (a store or
        an import from before them), oldest first: the queue's second work list."""
        with self._engine.read() as tx:
            return tx.rows_without_pieces(limit, after_id) if limit > 0 else []

    def add_buffer_pieces(self, pieces: Mapping[int, np.ndarray]) -> int:
        """Give rows whose vector has no pieces yet their `pieces` (buffer id -> k x dim;
        an empty matrix: the row has none). Returns how many rows were given them."""
        with self._engine.write() as tx:
            info = tx.embedder()
            if info is None or not pieces:
                return 0
            blobs = [(i, checked_pieces(pieces, i, info.dim) or b"") for i in pieces]
            return tx.put_buffer_pieces(blobs)

    def buffer_pieces(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The piece vectors (k x dim, float32) of those of `ids` that have any."""
        with self._engine.read() as tx:
            found = tx.buffer_pieces(ids) if ids else {}
            info = tx.embedder() if found else None
        return {i: pieces_of(d, info.dim) for i, d in found.items() if d} if info else {}

    def search_buffer_vectors(
        self, embedding: np.ndarray, *, limit: int, before_id: int | None = None
    ) -> list[BufferHit]:
        """Buffer rows by cosine similarity of their vectors, best first
        (`BufferHit.score` is the cosine); `before_id` keeps rows with id < before_id."""
        if limit <= 0:
            return []
        return self._engine.nearest_buffer(VectorQuery(embedding, limit, before=before_id))

    def has_episodic_vectors(self) -> bool:
        """Whether any buffer row vector or summary is stored: when not, a search has
        nothing to compare a query vector with and need not embed the query. Cheap
        (two EXISTS probes)."""
        with self._engine.read() as tx:
            return tx.has_episodic_vectors()

    def buffer_vector_stats(self) -> BufferVectorStats:
        """Non-marker rows with a vector (``embedded``) and without (``pending``)."""
        with self._engine.snapshot() as tx:
            embedded, rows = tx.buffer_vector_totals()
        return {"embedded": embedded, "pending": max(0, rows - embedded)}

    # ---- episodic: summaries -------------------------------------------------------
    def last_summarised_id(self) -> int:
        """The highest `end_buffer_id` of any summary (0 when there is none)."""
        with self._engine.read() as tx:
            return tx.last_summarised_id()

    def unsummarised(self) -> list[BufferRow]:
        """Non-marker buffer rows after `last_summarised_id()`, oldest first."""
        with self._engine.read() as tx:
            return tx.unsummarised()

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
        """Store a summary of the buffer window. Raises `ValidationError` when the
        range does not name existing rows, `EmbedderMismatch` on a wrong dimension."""
        tag_list, entity_map = validation.summary(
            content, tags, entities, start_buffer_id, end_buffer_id
        )
        ends = sorted({start_buffer_id, end_buffer_id})
        with self._engine.write() as tx:
            (vec,) = self._vectors(tx, [embedding], ["summary embedding"])
            if len(tx.existing("buffer", ends)) != len(ends):
                raise ValidationError(
                    f"summary range {start_buffer_id}..{end_buffer_id} does not name "
                    "existing buffer rows",
                    param="start_buffer_id",
                )
            summary = tx.insert_summary(
                NewSummary(content, vec, tag_list, entity_map, start_buffer_id, end_buffer_id)
            )
        return dataclasses.replace(summary, embedding=vec.copy())

    def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        """Newest first, without embeddings."""
        with self._engine.read() as tx:
            return tx.summaries_page(max(0, limit), max(0, offset))

    def count_summaries(self) -> int:
        with self._engine.read() as tx:
            return tx.count("summaries")

    def search_summaries(
        self,
        embedding: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        before_buffer_id: int | None = None,
    ) -> list[SummaryHit]:
        """Summaries by cosine similarity, best first, at or above `threshold`.
        `before_buffer_id` keeps only summaries ending before that buffer id (used to
        leave out the current session, whose messages are already in the history)."""
        if limit <= 0:
            return []
        return self._engine.nearest_summaries(
            VectorQuery(embedding, limit, threshold, before_buffer_id)
        )

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
        meta: JsonIn | None = None,
    ) -> Source:
        """Create a source and its memories in one transaction."""
        checked = validation.source(name, type, start_id, end_id, meta)
        with self._engine.write() as tx:
            for row_id in sorted({i for i in (start_id, end_id) if i is not None}):
                if not tx.existing("buffer", [row_id]):
                    raise ValidationError(
                        f"source range names buffer row {row_id}, which does not exist"
                    )
            rows = self._chunk_rows(tx, chunks)
            source_id = tx.insert_source(NewSource(name, type, summary, start_id, end_id, checked))
            tx.insert_chunks(source_id, rows)
            return _found(tx.source(source_id), source_id)

    def _chunk_rows(self, tx: Tx, chunks: Sequence[NewChunk]) -> list[ChunkRow]:
        """Validate every chunk before anything is written."""
        contents = [validation.chunk_content(i, c.content) for i, c in enumerate(chunks)]
        vectors = self._vectors(
            tx, [c.embedding for c in chunks], [f"chunk {i} embedding" for i in range(len(chunks))]
        )
        metadata = [validation.json_object(c.metadata, "metadata") for c in chunks]
        return list(zip(contents, vectors, metadata, strict=True))

    def replace_source(
        self,
        source_id: int,
        chunks: Sequence[NewChunk],
        *,
        summary: str | None = None,
        meta: JsonIn | None = None,
    ) -> Source:
        """Swap a source's memories (and summary/meta when given) in one transaction."""
        new_meta = None if meta is None else validation.json_object(meta, "meta")
        with self._engine.write() as tx:
            _found(tx.source(source_id, for_update=True), source_id)
            rows = self._chunk_rows(tx, chunks)
            tx.delete_chunks(source_id)
            tx.insert_chunks(source_id, rows)
            if summary is not None:
                tx.set_source_summary(source_id, summary)
            if new_meta is not None:
                tx.set_source_meta(source_id, new_meta)
            return _found(tx.source(source_id), source_id)

    def set_source_summary(self, source_id: int, summary: str) -> None:
        with self._engine.write() as tx:
            if not tx.set_source_summary(source_id, summary):
                raise _no_source(source_id)

    def get_source(self, source_id: int) -> Source:
        """Raises `NotFound`."""
        with self._engine.read() as tx:
            return _found(tx.source(source_id), source_id)

    def find_sources(self, **meta_equals: object) -> list[Source]:
        """Sources whose `meta` has every given key equal to the given value
        (e.g. ``find_sources(path="/x/notes.md")``)."""
        with self._engine.read() as tx:
            return tx.sources(dict(meta_equals))

    def list_sources(self) -> list[Source]:
        """Newest first, with `chunk_count`."""
        with self._engine.read() as tx:
            return tx.sources({})

    def delete_source(self, source_id: int) -> None:
        """Delete a source and its memories. Raises `NotFound`."""
        with self._engine.write() as tx:
            if not tx.delete_source(source_id):
                raise _no_source(source_id)

    def source_chunks(self, source_id: int) -> list[Memory]:
        """A source's memories in chunk order. Raises `NotFound`."""
        with self._engine.snapshot() as tx:
            _found(tx.source(source_id), source_id)
            return tx.chunks(source_id)

    def search_memories(
        self, embedding: np.ndarray, *, limit: int, threshold: float | None = None
    ) -> list[MemoryHit]:
        """Memories by cosine similarity, best first, at or above `threshold`."""
        if limit <= 0:
            return []
        found = self._engine.nearest_memories(VectorQuery(embedding, limit, threshold))
        if not found:
            return []
        with self._engine.read() as tx:
            names = tx.source_names(sorted({m.source_id for m, _ in found}))
        return [
            MemoryHit(memory=m, source_name=names.get(m.source_id, ""), score=s) for m, s in found
        ]

    def count_memories(self) -> int:
        with self._engine.read() as tx:
            return tx.count("memories")

    # ---- forgetting and editing (see nixx.store.forgetting) ----------------------
    def forget(
        self,
        kind: str,
        *,
        buffer_ids: Sequence[int] = (),
        summary_ids: Sequence[int] = (),
        source_ids: Sequence[int] = (),
        memory_ids: Sequence[int] = (),
    ) -> ForgetResult:
        """Delete the given rows and what would keep their text (summaries covering a
        deleted buffer row, the memories of buffer sources that held one), queue the
        repairs, and log the deletion, in one transaction. Raises `NotFound` naming the
        first id that does not exist (and deletes nothing)."""
        with self._engine.write() as tx:
            tx.lock("forget")  # no summary or source may appear between plan and deletes
            result = forgetting.execute(tx, kind, buffer_ids, summary_ids, source_ids, memory_ids)
        self._engine.after_write("forget")
        return result

    def get_summary(self, summary_id: int) -> Summary:
        """Without its embedding. Raises `NotFound`."""
        with self._engine.read() as tx:
            found = tx.summary(summary_id)
        if found is None:
            raise NotFound(f"summary {summary_id} does not exist")
        return found

    def update_summary(
        self,
        summary_id: int,
        *,
        content: str | None = None,
        embedding: np.ndarray | None = None,
        tags: Sequence[str] | None = None,
        entities: dict[str, list[str]] | None = None,
    ) -> Summary:
        """Correct a summary (new content needs its new embedding); logged as a
        ``summary_edit``. Raises `NotFound`."""
        with self._engine.write() as tx:
            cur = tx.summary(summary_id, for_update=True)
            if cur is None:
                raise NotFound(f"summary {summary_id} does not exist")
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
                (vec,) = self._vectors(tx, [embedding], ["summary embedding"])
                tx.set_summary_content(summary_id, content, vec)
            tx.set_summary_labels(summary_id, new_tags, new_entities)
            tx.log("summary_edit", *forgetting.edit_log(summary_id))
            updated = tx.summary(summary_id)
        assert updated is not None
        return updated

    def find_text(
        self, terms: Sequence[str], limit: int
    ) -> tuple[list[BufferRow], list[Summary], list[Memory]]:
        """Non-marker buffer rows, summaries and memories whose text contains every
        term (case-insensitive substring), at most `limit` of each, oldest first."""
        lowered = [t.lower() for t in terms if t]
        if not lowered or limit <= 0:
            return [], [], []
        with self._engine.snapshot() as tx:
            return (
                tx.find_buffer_text(lowered, limit),
                tx.find_summary_text(lowered, limit),
                tx.find_memory_text(lowered, limit),
            )

    def forget_log(self, limit: int = 100) -> list[ForgetLogEntry]:
        """The newest `limit` deletions, newest first."""
        with self._engine.read() as tx:
            return tx.forget_entries(max(0, limit))

    def scrub(self) -> ScrubReport:
        """After a deletion: remove deleted text from the files on disk where the
        backend can (SQLite: full-text index merged, WAL checkpointed and truncated)."""
        return self._engine.scrub()

    def vacuum(self) -> VacuumReport:
        """Rewrite the storage so freed space holds no old rows (`nixx db vacuum`)."""
        return self._engine.vacuum()

    # ---- state ---------------------------------------------------------------------
    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Atomically replace the value under `key` by `fn(current or None)`; a result
        of None deletes the key. Returns the new value."""
        validation.state_key(key)
        with self._engine.write() as tx:
            return tx.update_state(key, fn)

    def get_state(self, key: str, default: Any = None) -> Any:
        """A JSON value stored under `key` (intent, runtime switches, counters)."""
        with self._engine.read() as tx:
            found, value = tx.state(key)
        return value if found else default

    def set_state(self, key: str, value: Any) -> None:
        validation.state_key(key)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"state {key!r} must be JSON-serialisable: {exc}") from None
        with self._engine.write() as tx:
            tx.put_state(key, value)

    def delete_state(self, key: str) -> None:
        with self._engine.write() as tx:
            tx.drop_state(key)

    # ---- export / import (portable JSONL records) ----------------------------------
    def export_records(self) -> Iterator[ExportRecord]:
        """Every stored record as plain JSON-able dicts (see docs/storage.md), from one
        snapshot however long the caller takes to consume them."""
        with self._engine.export() as tx:
            yield header_record()
            info = tx.embedder()
            if info is not None:
                yield {"type": "embedder", "model": info.model, "dim": info.dim}
            for key, value in tx.all_state():
                yield {"type": "state", "key": key, "value": value}
            for row, vec, pieces in tx.export_buffer():
                kept = None if pieces is None or vec is None else pieces_of(pieces, len(vec))
                yield buffer_record(row, vec, kept)
            yield from map(summary_record, tx.export_summaries())
            yield from map(source_record, tx.export_sources())
            yield from map(memory_record, tx.export_memories())
            yield from map(forget_record, tx.forget_entries(None))

    def import_records(self, records: Iterable[RawRecord]) -> dict[str, int]:
        """Load records written by `export_records` into an empty store, keeping ids.
        One transaction. Returns counts per record type."""
        reader = RecordReader(records)  # validates order, fields and values as it goes
        with self._engine.write() as tx:
            tx.lock("import")
            for table in IMPORT_TABLES:
                if tx.has_rows(table):
                    raise Conflict(
                        f"cannot import into {self._engine.where}: the store is not empty "
                        f"(it has {table} rows); import into a new, empty database"
                    )
            for kind, batch in reader.batches():
                tx.load(kind, batch)
            tx.finish_load()
        return dict(reader.counts)


class _Reindex:
    """The embedding half of `MemoryStore.reindex`: batches, checks, progress."""

    def __init__(
        self,
        embed: EmbedFn,
        dim: int,
        batch_size: int,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.embed_fn, self.dim, self.progress = embed, dim, progress
        self.batch_size = max(1, batch_size)
        self.done = self.total = 0

    def report(self) -> None:
        if self.progress:
            self.progress(self.done, self.total)

    def embed(self, items: Sequence[tuple[int, str]]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            vectors = self._checked([text for _, text in batch])
            out.update((row_id, vec) for (row_id, _), vec in zip(batch, vectors, strict=True))
            self.done += len(batch)
            self.report()
        return out

    def embed_rows(
        self, rows: Sequence[BufferRow], texts: Sequence[list[str]]
    ) -> list[RowVector]:
        """One batch of buffer rows: each row's texts (its vector's, then its pieces')
        embedded in one call; a row counts once towards the progress."""
        vectors = self._checked([t for row_texts in texts for t in row_texts])
        out, k = [], 0
        for row, row_texts in zip(rows, texts, strict=True):
            n = len(row_texts)
            pieces = pieces_blob(vectors[k + 1 : k + n]) if n > 1 else b""
            out.append(RowVector(row.id, vectors[k], pieces))
            k += n
        self.done += len(rows)
        self.report()
        return out

    def _checked(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embed_fn(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise EmbedderMismatch(
                f"the embedder returned vectors of shape {vectors.shape}, expected "
                f"({len(texts)}, {self.dim}); check the model's dimension"
            )
        if not np.isfinite(vectors).all():
            raise ValidationError("the embedder returned NaN or infinite values")
        return vectors


def retried_user_row(
    newest_first: Sequence[BufferRow], content: str, origin: str
) -> BufferRow | None:
    """The user row a retried request should reuse: walking back over answers marked
    incomplete (a stream cut, a client gone away), the first other row, when it is this
    same message from the same origin. Markers end the walk (a new session)."""
    for row in newest_first:
        if row.role == "assistant" and row.meta.get("incomplete"):
            continue
        if row.role == "user" and row.content == content and row.origin == origin:
            return row
        return None
    return None


def _mismatch(current: EmbeddingInfo, model: str, dim: int) -> EmbedderMismatch:
    stored = current.model or "an unnamed model"
    return EmbedderMismatch(
        f"this memory store's vectors were made with {stored} ({current.dim} dimensions) "
        f"but the configured embedder is {model} ({dim} dimensions). Run `nixx reindex` to "
        "re-embed every summary and memory with the configured embedder, or configure the "
        "original one (NIXX_EMBED_PROVIDER / NIXX_EMBED_MODEL).",
        stored_model=current.model,
        stored_dim=current.dim,
        model=model,
        dim=dim,
    )


def _no_source(source_id: int) -> NotFound:
    return NotFound(f"source {source_id} does not exist")


def _found(source: Source | None, source_id: int) -> Source:
    if source is None:
        raise _no_source(source_id)
    return source
