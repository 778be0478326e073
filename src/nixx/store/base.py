"""The memory-store interface: the seed's four tables (buffer, summaries, sources,
memories) plus a small key/value `state` (intent, runtime switches).

Both backends (`sqlite`, `postgres`) implement this class and pass one contract suite
(`tests/store/contract.py`). Methods are synchronous and thread-safe; async callers
(the server) run them in a worker thread. Every write is atomic: a method either
stores everything it was given or nothing.

Vectors are float32 numpy arrays. Cosine similarity is computed on the vectors as
given; embedders return L2-normalised vectors so cosine equals the dot product.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from nixx.store.forgetting import ForgetLogEntry, ForgetResult
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

EmbedFn = Callable[[Sequence[str]], np.ndarray]


class MemoryStore(ABC):
    """Persistent memory. Obtain one with `nixx.store.open_store()`."""

    backend: str  # "sqlite" | "postgres"

    # ---- lifecycle & schema --------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def schema_version(self) -> int:
        """The migration version the database is at (0 for an empty database)."""

    @abstractmethod
    def migrate(self) -> list[int]:
        """Apply pending migrations, each in its own transaction; return those applied."""

    def warm_vector_indexes(self) -> Any:
        """Start preparing vector search in the background (the server calls this at
        start); never blocks. A no-op where the database holds the indexes (PostgreSQL)."""
        return None

    def vector_indexes_warming(self) -> bool:
        """Whether `warm_vector_indexes` is still preparing an index (searches are exact
        and slower meanwhile)."""
        return False

    # ---- embedder identity ---------------------------------------------------------
    @abstractmethod
    def embedding_info(self) -> EmbeddingInfo | None:
        """The model and dimension the stored vectors were made with, if any yet."""

    @abstractmethod
    def bind_embedder(self, model: str, dim: int) -> None:
        """Record the embedder on first use; raise `EmbedderMismatch` (saying to run
        `nixx reindex`) when vectors of another model or dimension are stored."""

    @abstractmethod
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
        """Re-embed every summary and memory with `embed` and record (model, dim).
        Buffer row vectors are re-embedded too when `buffer_text` is given (it maps a
        batch of non-marker rows, in id order, to the texts to embed), else dropped
        (they are derived data: the background queue makes them again).
        Atomic: on failure the old vectors and embedder stay. Returns vectors written."""

    # ---- episodic: buffer ----------------------------------------------------------
    @abstractmethod
    def append_buffer(
        self, role: str, content: str, origin: str = "api", meta: dict[str, Any] | None = None
    ) -> BufferRow:
        """Append one row. Raises `ValidationError` on an unknown role or origin."""

    @abstractmethod
    def append_user_once(
        self, content: str, origin: str = "api", meta: dict[str, Any] | None = None
    ) -> BufferRow:
        """Append a turn's user message unless it is a retry, atomically (one transaction,
        so concurrent identical requests give one row): when the session's newest row,
        skipping answers marked incomplete, is this same message from the same origin,
        that row is returned instead (see `retried_user_row`)."""

    @abstractmethod
    def update_buffer_meta(self, row_id: int, meta: dict[str, Any]) -> None:
        """Merge `meta` into a row's metadata (e.g. mark an answer incomplete)."""

    @abstractmethod
    def get_buffer(self, start_id: int, end_id: int | None = None) -> list[BufferRow]:
        """Rows with start_id <= id <= end_id (to the newest when end_id is None)."""

    @abstractmethod
    def get_buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        """The rows with these ids (those that exist), in id order: one query for rows
        far apart (a search's results and their neighbours)."""

    @abstractmethod
    def last_buffer_rows(self, n: int, *, after_id: int = 0) -> list[BufferRow]:
        """The newest `n` non-marker rows with id > after_id, oldest first."""

    @abstractmethod
    def last_marker_id(self) -> int:
        """Id of the newest `marker` row (0 when there is none): a session starts after it."""

    @abstractmethod
    def search_buffer(self, query: str, limit: int = 10) -> list[BufferHit]:
        """Full-text search over non-marker rows, best first. Terms are OR-ed and ranked
        by BM25 (both engines), so a question finds rows that share only some of its words;
        a hit's score is the share of the question's term weight (the sum of its words'
        IDFs) the row carries. An empty or stop-word-only query returns []."""

    @abstractmethod
    def buffer_stats(self) -> dict[str, int]:
        """``{"rows", "max_id"}``."""

    # ---- episodic: buffer row vectors ------------------------------------------------
    @abstractmethod
    def buffer_rows_without_vector(self, limit: int, *, after_id: int = 0) -> list[BufferRow]:
        """Up to `limit` non-marker rows with id > after_id that have no vector yet,
        oldest first (the background queue's work list)."""

    @abstractmethod
    def add_buffer_vectors(self, items: Sequence[tuple[int, np.ndarray]]) -> int:
        """Store (buffer id, vector) pairs in one transaction, replacing a row's earlier
        vector. Ids of missing or marker rows are skipped. Returns the vectors stored.
        Raises `EmbedderMismatch` on a wrong dimension."""

    @abstractmethod
    def search_buffer_vectors(
        self, embedding: np.ndarray, *, limit: int, before_id: int | None = None
    ) -> list[BufferHit]:
        """Buffer rows by cosine similarity of their vectors, best first
        (`BufferHit.score` is the cosine); `before_id` keeps rows with id < before_id."""

    @abstractmethod
    def has_episodic_vectors(self) -> bool:
        """Whether any buffer row vector or summary is stored: when not, a search has
        nothing to compare a query vector with and need not embed the query. Cheap
        (two EXISTS probes)."""

    @abstractmethod
    def buffer_vector_stats(self) -> dict[str, int]:
        """``{"embedded", "pending"}``: non-marker rows with and without a vector."""

    # ---- episodic: summaries -------------------------------------------------------
    @abstractmethod
    def last_summarised_id(self) -> int:
        """The highest `end_buffer_id` of any summary (0 when there is none)."""

    @abstractmethod
    def unsummarised(self) -> list[BufferRow]:
        """Non-marker buffer rows after `last_summarised_id()`, oldest first."""

    @abstractmethod
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

    @abstractmethod
    def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        """Newest first, without embeddings."""

    @abstractmethod
    def count_summaries(self) -> int: ...

    @abstractmethod
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

    # ---- semantic: sources & memories ----------------------------------------------
    @abstractmethod
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
        """Create a source and its memories in one transaction."""

    @abstractmethod
    def replace_source(
        self,
        source_id: int,
        chunks: Sequence[NewChunk],
        *,
        summary: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Source:
        """Swap a source's memories (and summary/meta when given) in one transaction."""

    @abstractmethod
    def set_source_summary(self, source_id: int, summary: str) -> None: ...

    @abstractmethod
    def get_source(self, source_id: int) -> Source:
        """Raises `NotFound`."""

    @abstractmethod
    def find_sources(self, **meta_equals: Any) -> list[Source]:
        """Sources whose `meta` has every given key equal to the given value
        (e.g. ``find_sources(path="/x/notes.md")``)."""

    @abstractmethod
    def list_sources(self) -> list[Source]:
        """Newest first, with `chunk_count`."""

    @abstractmethod
    def delete_source(self, source_id: int) -> None:
        """Delete a source and its memories. Raises `NotFound`."""

    @abstractmethod
    def source_chunks(self, source_id: int) -> list[Memory]:
        """A source's memories in chunk order. Raises `NotFound`."""

    @abstractmethod
    def search_memories(
        self, embedding: np.ndarray, *, limit: int, threshold: float | None = None
    ) -> list[MemoryHit]:
        """Memories by cosine similarity, best first, at or above `threshold`."""

    @abstractmethod
    def count_memories(self) -> int: ...

    # ---- forgetting and editing (see nixx.store.forgetting) ----------------------
    @abstractmethod
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

    @abstractmethod
    def get_summary(self, summary_id: int) -> Summary:
        """Without its embedding. Raises `NotFound`."""

    @abstractmethod
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

    @abstractmethod
    def find_text(
        self, terms: Sequence[str], limit: int
    ) -> tuple[list[BufferRow], list[Summary], list[Memory]]:
        """Non-marker buffer rows, summaries and memories whose text contains every
        term (case-insensitive substring), at most `limit` of each, oldest first."""

    @abstractmethod
    def forget_log(self, limit: int = 100) -> list[ForgetLogEntry]:
        """The newest `limit` deletions, newest first."""

    def scrub(self) -> dict[str, Any]:
        """After a deletion: remove deleted text from the files on disk where the
        backend can (SQLite: full-text index merged, WAL checkpointed and truncated)."""
        return {}

    @abstractmethod
    def vacuum(self) -> dict[str, Any]:
        """Rewrite the storage so freed space holds no old rows (`nixx db vacuum`)."""

    # ---- state ---------------------------------------------------------------------
    @abstractmethod
    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Atomically replace the value under `key` by `fn(current or None)`; a result
        of None deletes the key. Returns the new value."""

    @abstractmethod
    def get_state(self, key: str, default: Any = None) -> Any:
        """A JSON value stored under `key` (intent, runtime switches, counters)."""

    @abstractmethod
    def set_state(self, key: str, value: Any) -> None: ...

    @abstractmethod
    def delete_state(self, key: str) -> None: ...

    # ---- export / import (portable JSONL records) ----------------------------------
    @abstractmethod
    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every stored record as plain JSON-able dicts (see docs/storage.md)."""

    @abstractmethod
    def import_records(self, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Load records written by `export_records` into an empty store, keeping ids.
        One transaction. Returns counts per record type."""


#: How many of the session's newest rows `append_user_once` looks at.
RETRY_TAIL = 16


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
