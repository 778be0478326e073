"""`POST /v1/responses`: OpenAI's Responses API with memory, JSON or the event stream.

The translation is `nixx.server.dialects.responses`; the turn is the chat route's
(`NixxService.turn`): the same recall, buffer rows (origin ``responses`` unless
``X-Nixx-Origin`` says otherwise), summaries and intent. With ``store`` (the default)
the answer's row keeps the request's new messages (``meta.response``) and the response
id points at it, so ``previous_response_id`` continues it; an id nixx does not hold is a
404 in OpenAI's error envelope (the Responses API's own). What is kept, and how far back a
continuation loads, is bounded (`nixx.memory.responses`); what a continuation loads is
held in the in-flight budget (`nixx.server.limits.hold_bytes`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi import Response as HTTPResponse
from fastapi.responses import StreamingResponse

from nixx.memory.episodic import Sender
from nixx.memory.responses import Chain, bounded_input
from nixx.memory.turn import Finished, TurnInfo
from nixx.server.deps import ServiceDep, sender_of
from nixx.server.dialects.responses import (
    Response,
    ResponsesRequest,
    chat_request,
    input_items,
    input_messages,
    stored_response,
)
from nixx.server.dialects.system import remembered
from nixx.server.limits import hold_bytes
from nixx.server.shapes import turn_headers, turn_memory

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
    added = input_messages(body.input)
    chat = chat_request(body, chain.messages, added)
    response = Response(body, body.model or "")
    answer_meta = None
    if body.store:
        kept, left_out = bounded_input(added, window)
        record: dict[str, Any] = {"id": response.id, "previous": body.previous_response_id,
                                  "input": kept, "start": chain.next_start}
        if left_out:
            record["left_out"] = left_out
        answer_meta = {"response": record}
    info: TurnInfo = {}
    events = service.turn(chat, sender, info, answer_meta=answer_meta,
                          remembered=remembered)

    async def on_done(done: Finished) -> dict[str, Any]:
        if body.store and done.assistant_row_id is not None:
            said = {"status": Response.status_of(done), "model": done.model or model,
                    "usage": done.usage}
            await service.save_response(response.id, done.assistant_row_id, said)
        return {"nixx": turn_memory(done)}

    if body.stream:
        # as on the chat route: a backend that fails before answering is a plain HTTP error
        try:
            first = await events.__anext__()
        except BaseException:
            await events.aclose()  # type: ignore[attr-defined]
            raise
        response.model = str(info.get("model") or response.model)
        return StreamingResponse(
            response.stream(events, first, on_done),
            media_type="text/event-stream",
            headers=turn_headers(info, stream=True),
        )
    done: Finished | None = None
    async for event in events:
        if isinstance(event, Finished):
            done = event
    assert done is not None
    reply.headers.update(turn_headers(info))
    return {**response.finish(done), **(await on_done(done))}


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, service: ServiceDep) -> dict[str, Any]:
    """A stored response: its answer (``output``), ``status``, ``model`` and ``usage`` as
    kept; 404 when nixx holds no such response (never stored, deleted or forgotten)."""
    found = await service.get_response(response_id)
    created = int(datetime.fromisoformat(found.row.created_at).timestamp())
    return stored_response(response_id, found.record, found.said, found.row.content,
                           list(found.row.meta.get("tool_calls") or []), created)


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(
    response_id: str,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    after: str | None = None,
) -> dict[str, Any]:
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


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, service: ServiceDep) -> dict[str, Any]:
    """Delete a stored response: it can no longer be read or continued. The buffer rows
    its turn wrote stay in memory (`POST /v1/forget` forgets them)."""
    await service.delete_response(response_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}
