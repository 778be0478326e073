"""`/v1/episodic/*`: status and switches, manual summaries, search, transcript, summaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from nixx.errors import ValidationError
from nixx.memory.episodic import CLIENT_NAME
from nixx.memory.forget import SummaryCorrection
from nixx.server import shapes
from nixx.server.deps import ServiceDep
from nixx.server.edge import MAX_ID

if TYPE_CHECKING:
    from nixx.memory.forget import ForgetAnswer
    from nixx.memory.service import MemoryStatus

router = APIRouter(tags=["episodic"])
TRANSCRIPT_MAX_ROWS = 1000
SEARCH_MAX_LIMIT = 100


class EpisodicConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interval: StrictInt | None = Field(
        default=None, ge=1, description="Unsummarised words that trigger a summary."
    )
    recall: StrictBool | None = Field(default=None, description="Episodic recall on or off.")


class SummaryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: list[str] = Field(default_factory=list, max_length=20, description="Kept as typed.")


class SummaryEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str | None = Field(
        default=None, min_length=1, max_length=20_000, description="Corrected text (re-embedded)."
    )
    tags: list[str] | None = Field(default=None, max_length=20)
    entities: dict[str, list[str]] | None = Field(
        default=None, description="tools, people, concepts, files, urls"
    )


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000)
    limit: StrictInt = Field(default=10, ge=1, le=SEARCH_MAX_LIMIT)
    client: str | None = Field(
        default=None,
        pattern=f"^{CLIENT_NAME.pattern}$",
        description="Only rows this client wrote: its own name (`meta.client`: "
        "`claude-code`, `codex-cli`, what `X-Nixx-Client` said) or an origin "
        "(`tui`, `anthropic`, ...). Summaries are left out.",
    )


class SummaryAnswerJson(TypedDict):
    summary: shapes.SummaryJson


class SearchJson(TypedDict):
    query: str
    results: list[shapes.ResultJson]  # fused, best first
    buffer: list[shapes.BufferHitJson]  # full text over the buffer
    summaries: list[shapes.SummaryHitJson]  # vectors over summaries


class TranscriptJson(TypedDict):
    start: int
    end: int | None
    rows: list[shapes.RowJson]
    truncated: bool  # more rows up to `end` than `limit`


class SummariesJson(TypedDict):
    total: int
    summaries: list[shapes.SummaryJson]


@router.get("/v1/episodic/status", response_model=shapes.BODY)
async def status(service: ServiceDep) -> MemoryStatus:
    """Interval, unsummarised words, counts, recall on/off, background-job state."""
    return await service.status()


@router.post("/v1/episodic/config", response_model=shapes.BODY)
async def config(body: EpisodicConfig, service: ServiceDep) -> MemoryStatus:
    """Change the summary interval and/or recall at run time (kept across restarts).
    Returns the status after the change."""
    return await service.configure(interval=body.interval, recall=body.recall)


@router.post("/v1/episodic/summary", response_model=shapes.BODY)
async def summary(service: ServiceDep, body: SummaryRequest | None = None) -> SummaryAnswerJson:
    """Summarise the unsummarised window now; the user's tags are kept as typed."""
    tags = [t.strip() for t in (body.tags if body else []) if t.strip()]
    created = await service.summarise_now(tags)
    return {"summary": shapes.summary(created)}


@router.post("/v1/episodic/search", response_model=shapes.BODY)
async def search(body: SearchRequest, service: ServiceDep) -> SearchJson:
    """The fused search over buffer rows and summaries (`results`, best first), and, as
    before, full text over the buffer (`buffer`) and vectors over summaries (`summaries`)."""
    if not body.query.strip():
        raise ValidationError("query must contain some text", param="query")
    answer = await service.search(body.query, body.limit, body.client)
    return {
        "query": body.query,
        "results": [shapes.result(r) for r in answer.results],
        "buffer": [shapes.buffer_hit(h) for h in answer.buffer],
        "summaries": [shapes.summary_hit(h) for h in answer.summaries],
    }


@router.get("/v1/episodic/transcript", response_model=shapes.BODY)
async def transcript(
    service: ServiceDep,
    start: int = Query(ge=1, le=MAX_ID, description="First buffer id."),
    end: int | None = Query(
        default=None, ge=1, le=MAX_ID, description="Last buffer id (default: newest)."
    ),
    limit: int = Query(
        default=200, ge=1, le=TRANSCRIPT_MAX_ROWS, description="At most this many rows."
    ),
) -> TranscriptJson:
    """Buffer rows with start <= id <= end (markers included), at most `limit`."""
    if end is not None and end < start:
        raise ValidationError(f"end ({end}) must be >= start ({start})", param="end")
    last = end if end is not None else min(start + limit - 1, MAX_ID)
    rows = await service.transcript(start, last)
    rows = rows[:limit]
    return {
        "start": start,
        "end": end,
        "rows": [shapes.row(r) for r in rows],
        "truncated": end is not None and len(rows) == limit and rows[-1].id < end,
    }


@router.get("/v1/episodic/summaries", response_model=shapes.BODY)
async def summaries(
    service: ServiceDep,
    limit: int = Query(default=50, ge=1, le=500),
    offset: int = Query(default=0, ge=0, le=MAX_ID),
) -> SummariesJson:
    """Stored summaries, newest first."""
    items, total = await service.summaries_page(limit, offset)
    return {"total": total, "summaries": [shapes.summary(s) for s in items]}


@router.delete("/v1/episodic/summaries/{summary_id}", response_model=shapes.BODY)
async def delete_summary(service: ServiceDep, summary_id: int = Path(ge=1, le=MAX_ID)) -> ForgetAnswer:
    """Forget one summary (its buffer rows stay)."""
    return await service.forget_summary(summary_id)


@router.patch("/v1/episodic/summaries/{summary_id}", response_model=shapes.BODY)
async def edit_summary(
    body: SummaryEdit, service: ServiceDep, summary_id: int = Path(ge=1, le=MAX_ID)
) -> SummaryAnswerJson:
    """Correct a summary's content, tags or entities; new content is embedded again."""
    edited = await service.update_summary(summary_id, SummaryCorrection(
        content=body.content, tags=body.tags, entities=body.entities))
    return {"summary": shapes.summary(edited)}
