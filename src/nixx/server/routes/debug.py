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
        "system_prompt": ctx.system_prompt,
        "base_prompt": ctx.base_prompt,
        "intent": ctx.intent,
        "recall_enabled": ctx.recall_enabled,
        "threshold": ctx.threshold,
        "row_floor": ctx.row_floor,
        "budget_tokens": ctx.budget_tokens,
        "considered": ctx.considered,
        "query": ctx.query,
        "before_buffer_id": ctx.before_buffer_id,
        "recalled": [item.info() for item in ctx.recalled],
        "recalled_summaries": [shapes.summary_hit(h) for h in ctx.hits],
    }
