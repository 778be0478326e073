"""The JSON shapes of store records in API responses (one place, so every endpoint
that returns a buffer row or a summary returns the same object)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nixx.store.records import (
    BufferHit,
    BufferRow,
    Memory,
    MemoryHit,
    Source,
    Summary,
    SummaryHit,
)

if TYPE_CHECKING:
    from nixx.memory.turn import Finished


def turn_memory(done: Finished) -> dict[str, Any]:
    """The ``nixx`` key of a turn's answer (every dialect): what was recalled, the rows
    written, what was trimmed, the nixx tools that ran."""
    return {
        **done.recall_info,
        "user_row_id": done.user_row_id,
        "assistant_row_id": done.assistant_row_id,
        "trimmed_messages": done.trimmed,
        "tool_runs": [
            {"id": r.id, "name": r.name, "arguments": r.arguments} for r in done.tool_runs
        ],
    }


def row(r: BufferRow) -> dict[str, Any]:
    return {
        "id": r.id,
        "role": r.role,
        "content": r.content,
        "origin": r.origin,
        "created_at": r.created_at,
        "meta": r.meta or {},
    }


def buffer_hit(h: BufferHit) -> dict[str, Any]:
    return {**row(h.row), "score": h.score}


def summary(s: Summary) -> dict[str, Any]:
    return {
        "id": s.id,
        "content": s.content,
        "tags": list(s.tags),
        "entities": s.entities,
        "start_buffer_id": s.start_buffer_id,
        "end_buffer_id": s.end_buffer_id,
        "created_at": s.created_at,
    }


def summary_hit(h: SummaryHit) -> dict[str, Any]:
    return {**summary(h.summary), "score": h.score}


def result(r: Any) -> dict[str, Any]:
    """One item of the fused search (`nixx.memory.search.Result`)."""
    why = {
        "score": r.score,
        "cosine": r.cosine,
        "bm25": r.bm25,
        "ranks": dict(r.ranks),
        "why": dict(r.why),
    }
    if r.kind == "buffer":
        return {
            "kind": "buffer",
            **row(r.row),
            "buffer_id": r.row.id,
            **why,
            "repeats": list(r.repeats),
            "context": [row(c) for c in r.context],
        }
    return {"kind": "summary", **summary(r.summary), "summary_id": r.summary.id, **why}


def source(s: Source) -> dict[str, Any]:
    return {
        "id": s.id,
        "name": s.name,
        "type": s.type,
        "summary": s.summary,
        "start_id": s.start_id,
        "end_id": s.end_id,
        "created_at": s.created_at,
        "meta": s.meta or {},
        "chunk_count": s.chunk_count,
    }


def memory(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "source_id": m.source_id,
        "content": m.content,
        "metadata": m.metadata,
        "created_at": m.created_at,
    }


def memory_hit(h: MemoryHit) -> dict[str, Any]:
    return {**memory(h.memory), "source_name": h.source_name, "score": h.score}
