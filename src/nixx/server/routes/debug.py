"""`GET /v1/debug/context`: the system prompt the next turn would send, broken out."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from nixx.server import shapes
from nixx.server.deps import ServiceDep

router = APIRouter(tags=["debug"])


@router.get("/v1/debug/context")
async def context(
    service: ServiceDep,
    query: str | None = Query(
        default=None,
        max_length=4000,
        description="Recall against this text (default: the newest user message of the session).",
    ),
) -> dict[str, Any]:
    ctx = await service.context(query)
    return {
        **ctx.info(),
        "recalled_summaries": [shapes.summary_hit(h) for h in ctx.hits],
    }
