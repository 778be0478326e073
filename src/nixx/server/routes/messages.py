"""`POST /v1/messages` (and `/v1/messages/count_tokens`): Anthropic's Messages API with
memory, JSON or Anthropic's event stream.

The translation is `nixx.server.dialects.anthropic` (`Messages`); the turn is the chat
route's (`NixxService.turn`, answered by `nixx.server.dialects.adapter.answer_turn`): the
same recall, buffer rows (origin ``anthropic`` unless ``X-Nixx-Origin`` says otherwise),
summaries and intent. Errors on these paths are in Anthropic's shape
(`nixx.server.errors.envelope_for`); the API key may come as ``x-api-key``
(`nixx.server.auth`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Response

from nixx.memory.episodic import Sender
from nixx.server.deps import ServiceDep, sender_of
from nixx.server.dialects import anthropic
from nixx.server.dialects.adapter import answer_turn

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
    return await answer_turn(service, anthropic.Messages(body), sender, response)


@router.post("/v1/messages/count_tokens")
async def count_tokens(body: anthropic.CountTokensRequest) -> dict[str, int]:
    """nixx's estimate of the request's input tokens (characters / 4, as its own context
    budget counts), without calling the backend. Recall's system prompt is not counted."""
    return {"input_tokens": anthropic.count_tokens(body)}
