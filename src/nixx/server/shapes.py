"""The JSON shapes of store records in API responses (one place, so every endpoint
that returns a buffer row or a summary returns the same object), each named (`RowJson`,
`SummaryJson`, …): the routes, the web pages and the dialects read them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

from nixx.store.records import (
    BufferHit,
    BufferRow,
    Memory,
    MemoryHit,
    Source,
    Summary,
    SummaryHit,
)

#: How FastAPI checks and writes every route's JSON body: an object, passed as it is to
#: pydantic-core's serializer (`response_model=shapes.BODY` on the route). The route's
#: return annotation names the body's shape (a TypedDict here or beside the route) for
#: readers and mypy; FastAPI does not read it, so the shapes stay plain ``typing``
#: TypedDicts (pydantic refuses those on Python 3.11), and nothing is dropped or coerced
#: on the way out.
BODY: Any = dict[str, Any]

if TYPE_CHECKING:
    from nixx.memory.recall import RecalledBrief
    from nixx.memory.search import Result
    from nixx.memory.turn_events import Finished, TurnInfo


class ToolRunJson(TypedDict):
    id: str
    name: str
    arguments: str


class TurnMemoryJson(TypedDict):
    """The ``nixx`` key of a turn's answer: its recall (`RecallAnswerInfo`), the rows it
    wrote, the history messages trimmed to fit, the nixx tools that ran."""

    recalled_summaries: list[int]
    recalled: list[RecalledBrief]
    user_row_id: int | None
    assistant_row_id: int | None
    trimmed_messages: int
    tool_runs: list[ToolRunJson]


class RowJson(TypedDict):
    id: int
    role: str
    content: str
    origin: str
    created_at: str
    meta: dict[str, Any]  # the row's own open JSON (e.g. {"incomplete": true})


class BufferHitJson(RowJson):
    score: float


class SummaryJson(TypedDict):
    id: int
    content: str
    tags: list[str]
    entities: dict[str, list[str]]
    start_buffer_id: int
    end_buffer_id: int
    created_at: str


class SummaryHitJson(SummaryJson):
    score: float


class _Why(TypedDict):
    score: float
    cosine: float | None
    sentence_cosine: float | None
    bm25: float | None
    ranks: dict[str, int]
    why: dict[str, float]


class BufferResultJson(RowJson, _Why):
    """A buffer row of the fused search, with the rows around it (`context`)."""

    kind: Literal["buffer"]
    buffer_id: int
    repeats: list[int]
    context: list[RowJson]


class SummaryResultJson(SummaryJson, _Why):
    kind: Literal["summary"]
    summary_id: int


ResultJson = BufferResultJson | SummaryResultJson


class SourceJson(TypedDict):
    id: int
    name: str
    type: str
    summary: str | None
    start_id: int | None
    end_id: int | None
    created_at: str
    meta: dict[str, Any]  # the source's own open JSON (path/url, hash, tags, …)
    chunk_count: int


class MemoryJson(TypedDict):
    id: int
    source_id: int
    content: str
    metadata: dict[str, Any]  # the chunk's provenance, open JSON
    created_at: str


class MemoryHitJson(MemoryJson):
    source_name: str
    score: float


def turn_memory(done: Finished) -> TurnMemoryJson:
    """The ``nixx`` key of a turn's answer (every dialect)."""
    return {
        **done.recall_info,
        "user_row_id": done.user_row_id,
        "assistant_row_id": done.assistant_row_id,
        "trimmed_messages": done.trimmed,
        "tool_runs": [
            {"id": r.id, "name": r.name, "arguments": r.arguments} for r in done.tool_runs
        ],
    }


CLAMP_HEADER = "x-nixx-max-tokens-clamped"
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def turn_headers(info: TurnInfo, *, stream: bool = False) -> dict[str, str]:
    """The headers of a turn's answer (every dialect): ``x-nixx-max-tokens-clamped: <n>``
    when the answer's ``max_tokens`` was cut to what the context leaves (the client asked
    for more; `nixx.memory.turn._clamp`), and the event stream's own."""
    headers = dict(STREAM_HEADERS) if stream else {}
    if "max_tokens_clamped" in info:
        headers[CLAMP_HEADER] = str(info["max_tokens_clamped"])
    return headers


def row(r: BufferRow) -> RowJson:
    return {
        "id": r.id,
        "role": r.role,
        "content": r.content,
        "origin": r.origin,
        "created_at": r.created_at,
        "meta": r.meta or {},
    }


def buffer_hit(h: BufferHit) -> BufferHitJson:
    return {**row(h.row), "score": h.score}


def summary(s: Summary) -> SummaryJson:
    return {
        "id": s.id,
        "content": s.content,
        "tags": list(s.tags),
        "entities": s.entities,
        "start_buffer_id": s.start_buffer_id,
        "end_buffer_id": s.end_buffer_id,
        "created_at": s.created_at,
    }


def summary_hit(h: SummaryHit) -> SummaryHitJson:
    return {**summary(h.summary), "score": h.score}


def result(r: Result) -> ResultJson:
    """One item of the fused search (`nixx.memory.search.Result`)."""
    why: _Why = {
        "score": r.score,
        "cosine": r.cosine,
        "sentence_cosine": r.sentence_cosine,
        "bm25": r.bm25,
        "ranks": dict(r.ranks),
        "why": dict(r.why),
    }
    if r.kind == "buffer":
        assert r.row is not None
        return {
            "kind": "buffer",
            **row(r.row),
            "buffer_id": r.row.id,
            **why,
            "repeats": list(r.repeats),
            "context": [row(c) for c in r.context],
        }
    assert r.summary is not None
    return {"kind": "summary", **summary(r.summary), "summary_id": r.summary.id, **why}


def source(s: Source) -> SourceJson:
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


def memory(m: Memory) -> MemoryJson:
    return {
        "id": m.id,
        "source_id": m.source_id,
        "content": m.content,
        "metadata": m.metadata,
        "created_at": m.created_at,
    }


def memory_hit(h: MemoryHit) -> MemoryHitJson:
    return {**memory(h.memory), "source_name": h.source_name, "score": h.score}
