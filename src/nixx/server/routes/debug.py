"""`GET /v1/debug/context`: the system prompt the next turn would send, broken out."""

from __future__ import annotations

from fastapi import APIRouter, Query

from nixx.memory.recall import RecallInfo
from nixx.server import shapes
from nixx.server.deps import ServiceDep


class ContextJson(RecallInfo):
    """The recall's explanation (`RecallInfo`) with the summaries it recalled."""

    recalled_summaries: list[shapes.SummaryHitJson]


router = APIRouter(tags=["debug"])


@router.get("/v1/debug/context", response_model=shapes.BODY)
async def context(
    service: ServiceDep,
    query: str | None = Query(
        default=None,
        max_length=4000,
        description="Recall against this text (default: the newest user message of the session).",
    ),
) -> ContextJson:
    ctx = await service.context(query)
    return {
        **ctx.info(),
        "recalled_summaries": [shapes.summary_hit(h) for h in ctx.hits],
    }
