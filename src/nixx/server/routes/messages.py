"""`POST /v1/messages` (and `/v1/messages/count_tokens`): Anthropic's Messages API with
memory, JSON or Anthropic's event stream.

The translation is `nixx.server.dialects.anthropic`; the turn is the chat route's
(`NixxService.turn`): the same recall, buffer rows (origin ``anthropic`` unless
``X-Nixx-Origin`` says otherwise), summaries and intent. Errors on these paths are in
Anthropic's shape (`nixx.server.errors.envelope_for`); the API key may come as
``x-api-key`` (`nixx.server.auth`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse

from nixx.memory.episodic import Sender
from nixx.memory.turn import Finished, TurnInfo
from nixx.server.deps import ServiceDep, sender_of
from nixx.server.dialects import anthropic
from nixx.server.dialects.system import remembered
from nixx.server.shapes import turn_headers, turn_memory

router = APIRouter(tags=["messages"])
ORIGIN = "anthropic"


@router.post(
    "/v1/messages",
    responses={
        200: {
            "description": "A `message` object, or with `stream: true` a `text/event-stream` "
            "of Anthropic's events ending with `message_stop`.",
            "content": {"text/event-stream": {}},
        }
    },
)
async def create_message(
    body: anthropic.MessagesRequest,
    service: ServiceDep,
    sender: Annotated[Sender, sender_of(ORIGIN)],
    response: Response,
) -> Any:
    """One turn with memory, in Anthropic's Messages shapes."""
    chat = anthropic.chat_request(body)
    info: TurnInfo = {}
    events = service.turn(chat, sender, info, remembered=remembered)
    if body.stream:
        try:
            first = await events.__anext__()
        except BaseException:
            await events.aclose()  # type: ignore[attr-defined]
            raise
        model = str(info.get("model") or body.model or "")
        return StreamingResponse(
            anthropic.stream(events, first, model, turn_memory, body.shows_thinking),
            media_type="text/event-stream",
            headers=turn_headers(info, stream=True),
        )
    done: Finished | None = None
    async for event in events:
        if isinstance(event, Finished):
            done = event
    assert done is not None
    response.headers.update(turn_headers(info))
    return {**anthropic.message(done, body.model or "", body.shows_thinking),
            "nixx": turn_memory(done)}


@router.post("/v1/messages/count_tokens")
async def count_tokens(body: anthropic.CountTokensRequest) -> dict[str, int]:
    """nixx's estimate of the request's input tokens (characters / 4, as its own context
    budget counts), without calling the backend. Recall's system prompt is not counted."""
    return {"input_tokens": anthropic.count_tokens(body)}
