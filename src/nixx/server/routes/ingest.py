"""`POST /v1/ingest`: read a file or folder (under the workspace), a web page, or text
given inline into semantic memory. A thin shell over `nixx.ingest.Ingestor`."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from nixx.memory.sources import IngestSpec
from nixx.server import shapes
from nixx.server.deps import ServiceDep

if TYPE_CHECKING:
    from nixx.ingest.pipeline import SkippedJson

router = APIRouter(tags=["ingest"])


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A file or folder, relative to NIXX_WORKSPACE (or absolute inside it).",
    )
    url: str | None = Field(
        default=None, min_length=1, max_length=8192, description="An http(s) web page."
    )
    text: str | None = Field(
        default=None, min_length=1, description="Text to store as a source; needs `name`."
    )
    name: str | None = Field(
        default=None, min_length=1, max_length=200, description="Name of the source."
    )
    tags: list[str] | str | None = Field(
        default=None, description="Tags: a list or a comma-separated string."
    )


class IngestAnswerJson(TypedDict):
    status: str  # "created" | "replaced" | "unchanged"
    sources: list[shapes.SourceJson]
    files: int
    chunks: int
    embedded: int
    reused: int  # chunks whose vectors were kept
    skipped: list[SkippedJson]
    summary_error: str | None  # why the source has no display summary (None: fine)


@router.post("/v1/ingest", response_model=shapes.BODY)
async def ingest(body: IngestRequest, service: ServiceDep) -> IngestAnswerJson:
    """Ingest one of `path`, `url` or `text`; returns the source created (or replaced, or
    found unchanged) with counts, and why there is no summary when the LLM failed."""
    result, summary_error = await service.ingest(IngestSpec(
        path=body.path, url=body.url, text=body.text, name=body.name, tags=body.tags))
    data = result.to_dict()
    return {
        "status": result.status,
        "sources": [shapes.source(result.source)],
        "files": data["files"],
        "chunks": data["chunks"],
        "embedded": data["embedded"],
        "reused": data["reused"],
        "skipped": data["skipped"],
        "summary_error": summary_error,
    }
