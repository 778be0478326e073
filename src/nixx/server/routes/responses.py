"""`POST /v1/responses`: OpenAI's Responses API with memory, JSON or the event stream.

The translation is `nixx.server.dialects.responses` (`Responses`); the turn is the chat
route's (`NixxService.turn`, answered by `nixx.server.dialects.adapter.answer_turn`): the same recall, buffer rows (origin ``responses`` unless
``X-Nixx-Origin`` says otherwise), summaries and intent. With ``store`` (the default)
the answer's row keeps the request's new messages (``meta.response``) and the response
id points at it, so ``previous_response_id`` continues it; an id nixx does not hold is a
404 in OpenAI's error envelope (the Responses API's own). What is kept, and how far back a
continuation loads, is bounded (`nixx.memory.responses`); what a continuation loads is
held in the in-flight budget (`nixx.server.limits.hold_bytes`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, TypedDict

from fastapi import APIRouter, Query, Request
from fastapi import Response as HTTPResponse

from nixx.memory.episodic import Sender
from nixx.memory.responses import Chain
from nixx.server import shapes
from nixx.server.deps import ServiceDep, sender_of
from nixx.server.dialects.adapter import answer_turn
from nixx.server.dialects.responses import (
    Responses,
    ResponsesRequest,
    input_items,
    stored_response,
)
from nixx.server.limits import hold_bytes

router = APIRouter(tags=["responses"])
ORIGIN = "responses"


@router.post(
    "/v1/responses",
    responses={
        200: {
            "description": "A `response` object, or with `stream: true` a "
            "`text/event-stream` of Responses events ending with `response.completed`.",
            "content": {"text/event-stream": {}},
        }
    },
)
async def create_response(
    body: ResponsesRequest,
    service: ServiceDep,
    sender: Annotated[Sender, sender_of(ORIGIN)],
    reply: HTTPResponse,
    request: Request,
) -> Any:
    """One turn with memory, in the Responses API's shapes."""
    chain, window, model = Chain(), 0, body.model or ""
    if body.store or body.previous_response_id:
        model = await service.resolve_model(body.model)
        window, _ = await service.context_length(model)
    if body.previous_response_id:
        chain = await service.response_chain(body.previous_response_id, window,
                                             hold_bytes(request.scope))
    adapter = Responses(body, chain, window, model, service.save_response)
    return await answer_turn(service, adapter, sender, reply)


class InputItemsJson(TypedDict):
    """OpenAI's list of a response's input items."""

    object: str  # "list"
    data: list[dict[str, Any]]  # the items as the client sent them (`input_items`)
    first_id: str | None
    last_id: str | None
    has_more: bool


class DeletedJson(TypedDict):
    id: str
    object: str  # "response.deleted"
    deleted: bool


@router.get("/v1/responses/{response_id}", response_model=shapes.BODY)
async def get_response(response_id: str, service: ServiceDep) -> dict[str, Any]:
    """A stored response: its answer (``output``), ``status``, ``model`` and ``usage`` as
    kept; 404 when nixx holds no such response (never stored, deleted or forgotten)."""
    found = await service.get_response(response_id)
    created = int(datetime.fromisoformat(found.row.created_at).timestamp())
    return stored_response(response_id, found.record, found.said, found.row.content,
                           list(found.row.meta.get("tool_calls") or []), created)


@router.get("/v1/responses/{response_id}/input_items", response_model=shapes.BODY)
async def list_input_items(
    response_id: str,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    after: str | None = None,
) -> InputItemsJson:
    """The input items of a stored response, as kept (the newest that fit the context
    window: `nixx.memory.responses`), in OpenAI's list shape; ``order`` ``desc`` (the
    default, as at OpenAI) is newest first; ``after`` an item id to continue after."""
    found = await service.get_response(response_id)
    items = input_items(list(found.record.get("input") or []), response_id)
    if order == "desc":
        items.reverse()
    ids = [item["id"] for item in items]
    if after is not None:
        items = items[ids.index(after) + 1:] if after in ids else []
    page = items[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(items) > limit}


@router.delete("/v1/responses/{response_id}", response_model=shapes.BODY)
async def delete_response(response_id: str, service: ServiceDep) -> DeletedJson:
    """Delete a stored response: it can no longer be read or continued. The buffer rows
    its turn wrote stay in memory (`POST /v1/forget` forgets them)."""
    await service.delete_response(response_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}
