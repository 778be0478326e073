"""`/v1/forget*`: find and forget what memory holds about something, and the log of
what was forgotten (ids and counts, never the text). See docs/memory.md "Forgetting"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from nixx.memory.forget import ForgetAnswer, Matches
from nixx.server import shapes
from nixx.server.deps import ServiceDep

if TYPE_CHECKING:
    from nixx.store.forgetting import ForgetLogJson

router = APIRouter(tags=["forget"])


class ForgetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=1000, description="Every word must occur.")
    dry_run: StrictBool = Field(default=True, description="Only list what matches.")
    ids: list[str] | None = Field(
        default=None,
        max_length=10_000,
        description="With dry_run false: the ids the dry run listed to delete (buffer:ID, "
        "summary:ID, memory:ID).",
    )


class ForgetIds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[str] = Field(min_length=1, max_length=10_000)


class DryRunJson(Matches):
    dry_run: Literal[True]


class ForgottenJson(ForgetAnswer):
    dry_run: Literal[False]
    query: str


class ForgetLogPageJson(TypedDict):
    log: list[ForgetLogJson]  # newest first


@router.post("/v1/forget", response_model=shapes.BODY)
async def forget(body: ForgetRequest, service: ServiceDep) -> DryRunJson | ForgottenJson:
    """Dry run (default): the buffer rows, summaries and memories whose text contains every
    word of `query`, with ids and a snippet. With `dry_run: false`: delete exactly `ids`."""
    if body.dry_run:
        return {"dry_run": True, **await service.forget_matches(body.query)}
    done = await service.forget_query(body.query, body.ids or [])
    return {"dry_run": False, "query": body.query, **done}


@router.post("/v1/forget/ids", response_model=shapes.BODY)
async def forget_ids(body: ForgetIds, service: ServiceDep) -> ForgetAnswer:
    """Delete the items named by reference (buffer:12, summary:3, source:2, memory:40)."""
    return await service.forget_refs(body.ids)


@router.get("/v1/forget/log", response_model=shapes.BODY)
async def forget_log(
    service: ServiceDep, limit: int = Query(default=100, ge=1, le=1000)
) -> ForgetLogPageJson:
    """The newest deletions first: when, what kind, which ids, how many."""
    return {"log": [e.to_dict() for e in await service.forget_log(limit)]}
