"""Semantic memory from the buffer: `/source "name"` marks a range of the conversation
as a named source. Its transcript is chunked (~800 characters, ~100 overlap, paragraphs
first), every chunk is embedded, and the source and all its memories are stored in one
transaction; an LLM summary is kept for display only.

The default range runs from the end of the previous buffer source + 1 to the newest
buffer row. Synchronous parts here; the service adds the LLM summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from nixx.embed.base import Embedder
from nixx.errors import ValidationError
from nixx.memory.chunking import chunk_text
from nixx.memory.summarize import transcript
from nixx.store.base import MemoryStore
from nixx.store.records import BufferRow, NewChunk

CHUNK_CHARS = 800
CHUNK_OVERLAP = 100


@dataclass(frozen=True)
class SourcePlan:
    name: str
    start_id: int
    end_id: int
    rows: list[BufferRow]
    text: str


def plan_source(
    store: MemoryStore, name: str, start_id: int | None, end_id: int | None
) -> SourcePlan:
    name = (name or "").strip()
    if not name:
        raise ValidationError("a source needs a non-empty name", param="name")
    if start_id is None:
        ends = [s.end_id for s in store.list_sources() if s.type == "buffer" and s.end_id]
        start_id = max(ends, default=0) + 1
    max_id = store.buffer_stats()["max_id"]
    if end_id is None:
        end_id = max_id
    if start_id < 1:
        raise ValidationError(f"start_id must be >= 1 (got {start_id})", param="start_id")
    if end_id < start_id:
        raise ValidationError(
            f"the range {start_id}..{end_id} is empty: end_id must be >= start_id "
            f"(the newest buffer row is {max_id})",
            param="end_id",
        )
    rows = [r for r in store.get_buffer(start_id, end_id) if r.role != "marker"]
    if not rows:
        raise ValidationError(
            f"the buffer has no messages between ids {start_id} and {end_id} "
            f"(the newest row is {max_id})",
            param="start_id",
        )
    return SourcePlan(name, start_id, end_id, rows, transcript(rows))


def embed_chunks(embedder: Embedder, plan: SourcePlan) -> list[NewChunk]:
    chunks = chunk_text(plan.text, target_chars=CHUNK_CHARS, overlap_chars=CHUNK_OVERLAP)
    if not chunks:
        raise ValidationError("the range holds no text to store", param="start_id")
    vectors = embedder.embed([c.text for c in chunks])
    total = len(chunks)
    return [
        NewChunk(
            content=c.text,
            embedding=vectors[i],
            metadata={"chunk": i, "total_chunks": total, "start": c.start, "end": c.end},
        )
        for i, c in enumerate(chunks)
    ]
