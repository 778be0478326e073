"""`/v1/sources*`: semantic memory — named sources and their embedded chunks."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from nixx.errors import ValidationError
from nixx.server import shapes
from nixx.server.deps import ServiceDep
from nixx.server.edge import MAX_ID, Id

if TYPE_CHECKING:
    from nixx.memory.forget import ForgetAnswer

router = APIRouter(tags=["sources"])


class SourceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    start_id: StrictInt | None = Field(
        default=None, ge=1, le=MAX_ID, description="Default: the previous buffer source's end + 1."
    )
    end_id: StrictInt | None = Field(
        default=None, ge=1, le=MAX_ID, description="Default: the newest row."
    )


class SourceSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000)
    limit: StrictInt = Field(default=5, ge=1, le=100)


class SourceAnswerJson(TypedDict):
    source: shapes.SourceJson


class CreatedSourceJson(SourceAnswerJson):
    summary_error: str | None  # why it has no display summary (None: fine)


class SourcesJson(TypedDict):
    sources: list[shapes.SourceJson]


class ChunksJson(TypedDict):
    source_id: int
    chunks: list[shapes.MemoryJson]


class SourceSearchJson(TypedDict):
    query: str
    results: list[shapes.MemoryHitJson]  # best first


@router.post("/v1/sources", response_model=shapes.BODY)
async def create_source(body: SourceRequest, service: ServiceDep) -> CreatedSourceJson:
    """Mark a buffer range as a named source: chunked, embedded, summarised for display."""
    source, problem = await service.create_source(body.name, body.start_id, body.end_id)
    return {"source": shapes.source(source), "summary_error": problem}


@router.get("/v1/sources", response_model=shapes.BODY)
async def list_sources(
    service: ServiceDep,
    name: str | None = Query(
        default=None, max_length=200, description="Only sources whose name contains this."
    ),
) -> SourcesJson:
    """Every source, newest first (with `name`: case-insensitive substring of the name)."""
    items = await service.list_sources(name)
    return {"sources": [shapes.source(s) for s in items]}


@router.delete("/v1/sources/{source_id}", response_model=shapes.BODY)
async def delete_source(service: ServiceDep, source_id: int = Path(ge=1, le=MAX_ID)) -> ForgetAnswer:
    """Forget a source with all its memories."""
    return await service.forget_source(source_id)


@router.get("/v1/sources/{source_id}", response_model=shapes.BODY)
async def get_source(source_id: Id, service: ServiceDep) -> SourceAnswerJson:
    return {"source": shapes.source(await service.get_source(source_id))}


@router.get("/v1/sources/{source_id}/chunks", response_model=shapes.BODY)
async def source_chunks(source_id: Id, service: ServiceDep) -> ChunksJson:
    chunks = await service.source_chunks(source_id)
    return {"source_id": source_id, "chunks": [shapes.memory(m) for m in chunks]}


@router.post("/v1/sources/search", response_model=shapes.BODY)
async def search_sources(body: SourceSearch, service: ServiceDep) -> SourceSearchJson:
    """Semantic recall over every source's memories, best first."""
    if not body.query.strip():
        raise ValidationError("query must contain some text", param="query")
    hits = await service.search_sources(body.query, body.limit)
    return {"query": body.query, "results": [shapes.memory_hit(h) for h in hits]}
