"""What a database engine gives the memory store: the narrow protocol under
`nixx.store.base.MemoryStore`.

The store holds every rule once (validation, errors and their wording, meta merging,
the retried-user-row rule, the forget plan, reindex, export and import); an engine holds
only its SQL and its strengths, in two parts:

- `Database`: the connection(s) and what works on them as a whole: transactions
  (`read`, `snapshot`, `write`, `export`), schema, full-text search, vector search, the
  after-write hook, the disk-level chores (`scrub`, `vacuum`).
- `Tx`: the queries, section by section, on one open transaction. A `Tx` is also the
  `nixx.store.forgetting.Ops` a forget runs on.

Vectors cross this seam as validated float32 numpy arrays; each engine encodes them its
own way (SQLite: little-endian BLOBs; PostgreSQL: pgvector's binary input). Rows come
back as the records of `nixx.store.records`.

The model is eventsourcing's recorders under its application: one abstract suite
(tests/store/contract.py) runs on every engine through the one store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from nixx.store.forgetting import ForgetLogEntry
from nixx.store.records import (
    BufferHit,
    BufferRow,
    EmbeddingInfo,
    JsonObject,
    Memory,
    Source,
    Summary,
    SummaryHit,
)
from nixx.store.reports import ScrubReport, VacuumReport

#: What a write transaction asks to have to itself (SQLite's ``BEGIN IMMEDIATE`` already
#: serialises every writer; PostgreSQL takes an advisory or table lock).
LockSection = Literal["embedder", "user_row", "forget", "import"]
#: The tables whose vectors are made from their own `content` (reindex re-embeds them).
ContentTable = Literal["summaries", "memories"]
CONTENT_TABLES: tuple[ContentTable, ...] = ("summaries", "memories")
#: A table a forget reads or deletes from (`nixx.store.forgetting.Ops`).
Table = Literal["buffer", "summaries", "sources", "memories"]
#: A table `import_records` refuses to fill when it has rows already.
IMPORT_TABLES = ("buffer", "summaries", "sources", "memories", "state", "embedder", "forget_log")
#: An after-write event (`Database.after_write`).
Event = Literal["buffer_vectors", "forget"]
#: (content, vector, metadata) of a chunk ready to insert.
ChunkRow = tuple[str, np.ndarray, JsonObject]


@dataclass(frozen=True)
class NewSummary:
    """A validated summary to insert (`MemoryStore.add_summary`)."""

    content: str
    vector: np.ndarray
    tags: list[str]
    entities: dict[str, list[str]]
    start_buffer_id: int
    end_buffer_id: int


@dataclass(frozen=True)
class NewSource:
    """A validated source to insert (`MemoryStore.add_source`), without its chunks."""

    name: str
    type: str
    summary: str | None
    start_id: int | None
    end_id: int | None
    meta: JsonObject


class RowVector(NamedTuple):
    """A buffer row's vector as written: the row's id, its vector, and its pieces
    (`portable.pieces_blob`; None: a row of one sentence)."""

    id: int
    vector: np.ndarray
    pieces: bytes | None = None


@dataclass(frozen=True)
class VectorQuery:
    """A vector search: the `limit` rows nearest `embedding` by cosine, at or above
    `threshold`; `before` keeps buffer rows with a smaller id, or summaries ending
    before that buffer id."""

    embedding: np.ndarray
    limit: int
    threshold: float | None = None
    before: int | None = None


class Tx(ABC):
    """The queries of one open transaction (see the module docstring)."""

    # ---- embedder -------------------------------------------------------------------
    @abstractmethod
    def embedder(self) -> EmbeddingInfo | None: ...

    @abstractmethod
    def has_content_vectors(self) -> bool:
        """Whether any summary or memory (vectors not derived from the buffer) is stored."""

    @abstractmethod
    def bind(self, model: str, dim: int) -> None:
        """Record the first embedder."""

    @abstractmethod
    def name_embedder(self, model: str) -> None:
        """Name the unnamed embedder vectors were stored under before any binding."""

    @abstractmethod
    def rebind(self, model: str, dim: int, old_dim: int) -> None:
        """Another embedder for a store with no content vectors: buffer vectors dropped."""

    @abstractmethod
    def bind_unnamed(self, dim: int) -> int:
        """Record an unnamed embedder of `dim` unless one is bound (by another
        connection meanwhile); return the dimension bound now."""

    # ---- reindex ----------------------------------------------------------------------
    @abstractmethod
    def contents(self, table: ContentTable) -> dict[int, str]:
        """id -> content of every row, ids ascending."""

    @abstractmethod
    def start_reindex(self) -> None:
        """Ready the vector columns for vectors of any dimension."""

    @abstractmethod
    def set_vectors(self, table: ContentTable, vectors: dict[int, np.ndarray]) -> None: ...

    @abstractmethod
    def finish_reindex(self, model: str, dim: int) -> None:
        """Record (model, dim) as the embedder of every vector now stored."""

    # ---- the next embedder's vectors (MemoryStore.begin_switch) -------------------------
    @abstractmethod
    def staged_digests(self) -> dict[tuple[str, int], str]:
        """(kind, id) -> digest of every staged vector."""

    @abstractmethod
    def stage(self, items: Sequence[tuple[str, int, bytes, bytes | None, str]]) -> None:
        """Store or replace staged (kind, id, float32 bytes, pieces, digest)."""

    @abstractmethod
    def staged(self, kind: str) -> list[tuple[int, bytes, bytes | None]]:
        """(id, float32 bytes, pieces) of every staged vector of `kind`."""

    @abstractmethod
    def clear_staged(self) -> None: ...

    # ---- buffer -----------------------------------------------------------------------
    @abstractmethod
    def insert_buffer(
        self, role: str, content: str, origin: str, meta: JsonObject
    ) -> BufferRow: ...

    @abstractmethod
    def session_tail(self, n: int) -> list[BufferRow]:
        """The newest `n` non-marker rows after the newest marker, newest first."""

    @abstractmethod
    def buffer_meta(self, row_id: int) -> JsonObject | None:
        """A row's metadata, locked for update (None: no such row)."""

    @abstractmethod
    def set_buffer_meta(self, row_id: int, meta: JsonObject) -> None: ...

    @abstractmethod
    def buffer_range(self, start_id: int, end_id: int | None) -> list[BufferRow]: ...

    @abstractmethod
    def buffer_rows(self, ids: Sequence[int]) -> list[BufferRow]:
        """The rows with these (sorted, distinct) ids that exist, in id order."""

    @abstractmethod
    def last_rows(self, n: int, after_id: int) -> list[BufferRow]:
        """The newest `n` non-marker rows with id > after_id, newest first."""

    @abstractmethod
    def last_marker_id(self) -> int: ...

    @abstractmethod
    def buffer_totals(self) -> tuple[int, int]:
        """(rows, max id)."""

    @abstractmethod
    def non_marker_rows(self) -> list[BufferRow]:
        """Every non-marker row, oldest first."""

    # ---- buffer row vectors -----------------------------------------------------------
    @abstractmethod
    def rows_without_vector(self, limit: int, after_id: int) -> list[BufferRow]: ...

    @abstractmethod
    def put_buffer_vectors(self, items: Sequence[RowVector]) -> int:
        """Store or replace the vectors (and pieces) of the rows that exist and are not
        markers; return how many were stored."""

    @abstractmethod
    def buffer_pieces(self, ids: Sequence[int]) -> dict[int, bytes]:
        """The stored pieces (`portable.pieces_blob`) of those of `ids` that have any."""

    @abstractmethod
    def rows_without_pieces(self, limit: int, after_id: int) -> list[BufferRow]:
        """Rows whose vector has no pieces yet (NULL: not split), oldest first."""

    @abstractmethod
    def put_buffer_pieces(self, items: Sequence[tuple[int, bytes]]) -> int:
        """Set the pieces of rows whose vector has none yet; return how many were set."""

    @abstractmethod
    def clear_buffer_vectors(self) -> None: ...

    @abstractmethod
    def has_episodic_vectors(self) -> bool: ...

    @abstractmethod
    def buffer_vector_totals(self) -> tuple[int, int]:
        """(rows with a vector, non-marker rows)."""

    # ---- summaries --------------------------------------------------------------------
    @abstractmethod
    def last_summarised_id(self) -> int: ...

    @abstractmethod
    def unsummarised(self) -> list[BufferRow]: ...

    @abstractmethod
    def insert_summary(self, new: NewSummary) -> Summary:
        """The new summary, without its embedding."""

    @abstractmethod
    def summaries_page(self, limit: int, offset: int) -> list[Summary]: ...

    @abstractmethod
    def count(self, table: ContentTable) -> int: ...

    @abstractmethod
    def summary(self, summary_id: int, *, for_update: bool = False) -> Summary | None: ...

    @abstractmethod
    def set_summary_content(self, summary_id: int, content: str, vector: np.ndarray) -> None: ...

    @abstractmethod
    def set_summary_labels(
        self, summary_id: int, tags: list[str], entities: dict[str, list[str]]
    ) -> None: ...

    # ---- sources and memories ---------------------------------------------------------
    @abstractmethod
    def insert_source(self, new: NewSource) -> int: ...

    @abstractmethod
    def insert_chunks(self, source_id: int, rows: Sequence[ChunkRow]) -> None: ...

    @abstractmethod
    def source(self, source_id: int, *, for_update: bool = False) -> Source | None: ...

    @abstractmethod
    def sources(self, meta_equals: JsonObject) -> list[Source]:
        """Newest first; those whose meta has every given key equal to the value."""

    @abstractmethod
    def set_source_summary(self, source_id: int, summary: str) -> bool:
        """False when there is no such source."""

    @abstractmethod
    def set_source_meta(self, source_id: int, meta: JsonObject) -> None: ...

    @abstractmethod
    def delete_chunks(self, source_id: int) -> None: ...

    @abstractmethod
    def delete_source(self, source_id: int) -> bool:
        """False when there is no such source."""

    @abstractmethod
    def chunks(self, source_id: int) -> list[Memory]:
        """A source's memories with their embeddings, in chunk order."""

    @abstractmethod
    def source_names(self, ids: Sequence[int]) -> dict[int, str]: ...

    # ---- forgetting (nixx.store.forgetting.Ops) ----------------------------------------
    @abstractmethod
    def lock(self, section: LockSection) -> None:
        """Have `section` to this transaction until it ends."""

    @abstractmethod
    def existing(self, table: str, ids: Sequence[int]) -> set[int]: ...

    @abstractmethod
    def rows_in(self, start: int, end: int) -> list[tuple[int, str]]: ...

    @abstractmethod
    def summary_windows(self) -> Iterable[tuple[int, int, int]]: ...

    @abstractmethod
    def buffer_sources(self) -> Iterable[tuple[int, int | None, int | None]]: ...

    @abstractmethod
    def delete(self, table: str, column: str, ids: Sequence[int]) -> int: ...

    @abstractmethod
    def narrow_source(self, source_id: int, start: int, end: int) -> None: ...

    @abstractmethod
    def log(
        self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]
    ) -> tuple[int, str]: ...

    @abstractmethod
    def find_buffer_text(self, terms: Sequence[str], limit: int) -> list[BufferRow]:
        """Non-marker rows whose content or meta holds every (lower-case) term, oldest
        first (`MemoryStore.find_text`)."""

    @abstractmethod
    def find_summary_text(self, terms: Sequence[str], limit: int) -> list[Summary]: ...

    @abstractmethod
    def find_memory_text(self, terms: Sequence[str], limit: int) -> list[Memory]: ...

    @abstractmethod
    def forget_entries(self, limit: int | None) -> list[ForgetLogEntry]:
        """The newest `limit` entries, newest first; None: every entry, oldest first."""

    # ---- state ------------------------------------------------------------------------
    @abstractmethod
    def state(self, key: str, *, for_update: bool = False) -> tuple[bool, Any]:
        """(whether `key` is set, its value)."""

    @abstractmethod
    def put_state(self, key: str, value: Any) -> None: ...

    @abstractmethod
    def drop_state(self, key: str) -> None: ...

    @abstractmethod
    def all_state(self) -> Iterable[tuple[str, Any]]: ...

    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """`fn(current or None)` stored under `key` (None deletes it); the new value."""
        found, current = self.state(key, for_update=True)
        value = fn(current if found else None)
        if value is None:
            self.drop_state(key)
        else:
            self.put_state(key, value)
        return value

    # ---- export / import --------------------------------------------------------------
    @abstractmethod
    def export_buffer(self) -> Iterator[tuple[BufferRow, np.ndarray | None, bytes | None]]:
        """Every buffer row, with its vector and its pieces (`portable.pieces_blob`)."""

    @abstractmethod
    def export_summaries(self) -> Iterator[Summary]: ...

    @abstractmethod
    def export_sources(self) -> Iterator[Source]: ...

    @abstractmethod
    def export_memories(self) -> Iterator[Memory]: ...

    @abstractmethod
    def has_rows(self, table: str) -> bool: ...

    @abstractmethod
    def load(self, kind: str, batch: list[dict[str, Any]]) -> None:
        """Insert a batch of validated export records of one type, keeping their ids."""

    @abstractmethod
    def finish_load(self) -> None: ...


class Database(ABC):
    """A database under the memory store (see the module docstring)."""

    backend: str
    #: The database as messages name it (a file path, a URL without its password).
    where: str

    @abstractmethod
    def read(self) -> AbstractContextManager[Tx]:
        """For one statement (or several that need not agree)."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[Tx]:
        """Several statements that see one state of the database."""

    @abstractmethod
    def write(self) -> AbstractContextManager[Tx]:
        """One write transaction: all of it or nothing."""

    @abstractmethod
    def export(self) -> AbstractContextManager[Tx]:
        """A snapshot that lasts however long the export takes to consume."""

    def after_write(self, event: Event) -> None:  # noqa: B027 - a hook, empty by default
        """Called after a committed write of `event`'s kind (caches, indexes)."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def migrate(self) -> list[int]: ...

    @abstractmethod
    def search_text(self, query: str, limit: int) -> list[BufferHit]:
        """Full-text search (`MemoryStore.search_buffer`); `limit` > 0."""

    @abstractmethod
    def common_words(self, query: str) -> list[str]:
        """`MemoryStore.common_words`."""

    @abstractmethod
    def nearest_buffer(self, query: VectorQuery) -> list[BufferHit]: ...

    @abstractmethod
    def nearest_summaries(self, query: VectorQuery) -> list[SummaryHit]: ...

    @abstractmethod
    def nearest_memories(self, query: VectorQuery) -> list[tuple[Memory, float]]: ...

    def warm_vector_indexes(self) -> object:
        return None

    def vector_indexes_warming(self) -> bool:
        return False

    @abstractmethod
    def scrub(self) -> ScrubReport: ...

    @abstractmethod
    def vacuum(self) -> VacuumReport: ...
