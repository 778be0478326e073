"""`POST /v1/ingest`: read a file or folder (under the workspace), a web page, or text
given inline into semantic memory. A thin shell over `nixx.ingest.Ingestor`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from nixx.errors import BackendError, ValidationError
from nixx.server import shapes
from nixx.server.deps import ServiceDep

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


@router.post("/v1/ingest")
async def ingest(body: IngestRequest, service: ServiceDep) -> dict[str, Any]:
    """Ingest one of `path`, `url` or `text`; returns the source created (or replaced, or
    found unchanged) with counts, and why there is no summary when the LLM failed."""
    from nixx.ingest.pipeline import Ingestor

    given = [k for k in ("path", "url", "text") if getattr(body, k) is not None]
    if len(given) != 1:
        raise ValidationError(
            'give exactly one of "path", "url" or "text"'
            + (f" (got {', '.join(given)})" if given else ""),
            param="path",
        )
    settings = service.settings
    ingestor = Ingestor(service.store, service.embedder, settings)
    if body.path is not None:
        path = body.path
        result = await service.run(
            lambda: ingestor.ingest_path(
                path, name=body.name, tags=body.tags, root=settings.workspace
            )
        )
    elif body.url is not None:
        url = body.url
        result = await service.run(lambda: ingestor.ingest_url(url, name=body.name, tags=body.tags))
    else:
        if body.name is None:
            raise ValidationError('"text" needs a "name" for the source', param="name")
        text, name = body.text or "", body.name
        result = await service.run(lambda: ingestor.ingest_text(text, name=name, tags=body.tags))

    summary_error = None
    if result.summary_input:  # changed, or unchanged but still without a summary
        from nixx.ingest.summary import summarise

        try:
            model = await service.resolve_model(None)
            summary = await summarise(service.llm, model, result.source.name, result.summary_input)
        except BackendError as exc:
            summary_error = exc.message
        else:
            if summary:
                source_id = result.source.id
                await service.run(service.store.set_source_summary, source_id, summary)
                result.source = await service.run(service.store.get_source, source_id)
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
