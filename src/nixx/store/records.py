"""Plain records the memory store returns. Embeddings are float32 numpy vectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Role = Literal["user", "assistant", "marker"]
Origin = Literal["tui", "vscode", "api", "responses", "anthropic"]
SourceType = Literal["buffer", "document", "repo", "web"]

#: An open JSON object as stored (a row's or a source's metadata): its keys are the
#: caller's, so it has no fixed shape to name.
JsonObject = dict[str, Any]
#: What embeds texts: one vector (a row of the array) per text, in order.
EmbedFn = Callable[[Sequence[str]], np.ndarray]

ROLES: tuple[str, ...] = ("user", "assistant", "marker")
ORIGINS: tuple[str, ...] = ("tui", "vscode", "api", "responses", "anthropic")
SOURCE_TYPES: tuple[str, ...] = ("buffer", "document", "repo", "web")
ENTITY_KINDS: tuple[str, ...] = ("tools", "people", "concepts", "files", "urls")


@dataclass(frozen=True)
class BufferRow:
    """One row of the episodic buffer (the append-only transcript)."""

    id: int
    role: str
    content: str
    origin: str
    created_at: str  # ISO 8601, UTC
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"incomplete": true}

    @property
    def words(self) -> int:
        return len(self.content.split())


@dataclass(frozen=True)
class BufferHit:
    row: BufferRow
    score: float  # higher is better: full text, BM25-style (backend scale); vectors, cosine
    # the row-vector ranker only: its best sentence's cosine, when that lifted the row
    # (`nixx.memory.pieces.lift`; the row is ranked by the higher of the two)
    sentence: float | None = None

    @property
    def rank_score(self) -> float:
        """What the row is ranked by: its score, or its sentence's cosine if higher."""
        return self.score if self.sentence is None else max(self.score, self.sentence)


@dataclass(frozen=True)
class Summary:
    """An LLM summary of the buffer window [start_buffer_id, end_buffer_id]."""

    id: int
    content: str
    tags: list[str]
    entities: dict[str, list[str]]
    start_buffer_id: int
    end_buffer_id: int
    created_at: str
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class SummaryHit:
    summary: Summary
    score: float  # cosine similarity


@dataclass(frozen=True)
class Source:
    """A curated unit of semantic memory: a marked buffer range or an ingested document."""

    id: int
    name: str
    type: str
    summary: str | None
    start_id: int | None  # buffer range, for type "buffer"
    end_id: int | None
    created_at: str
    meta: dict[str, Any] = field(default_factory=dict)  # path/url, content_hash, tags, ...
    chunk_count: int = 0


@dataclass(frozen=True)
class Memory:
    """One embedded chunk of a source."""

    id: int
    source_id: int
    content: str
    metadata: dict[str, Any]  # {"chunk": i, "total_chunks": n, ...provenance}
    created_at: str
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class MemoryHit:
    memory: Memory
    source_name: str
    score: float  # cosine similarity


@dataclass(frozen=True)
class NewChunk:
    """A chunk to store under a source, with its embedding."""

    content: str
    embedding: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EmbeddingInfo:
    """Which embedder the store's vectors were made with."""

    model: str
    dim: int
