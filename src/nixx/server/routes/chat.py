"""`POST /v1/chat/completions`: OpenAI's chat API with memory, JSON or SSE. The
translation is `nixx.server.dialects.openai_chat` (its docstring says the wire rules);
the turn is `NixxService.turn`, answered by `nixx.server.dialects.adapter.answer_turn`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Response

from nixx.memory.episodic import Sender
from nixx.server.deps import ServiceDep, sender_of
from nixx.server.dialects.adapter import answer_turn
from nixx.server.dialects.openai_chat import ChatCompletionRequest, ChatCompletions

router = APIRouter(tags=["chat"])


@router.post(
    "/v1/chat/completions",
    responses={
        200: {
            "description": "A `chat.completion` object, or with `stream: true` a "
            "`text/event-stream` of `chat.completion.chunk` objects ending with `[DONE]`.",
            "content": {"text/event-stream": {}},
        }
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    service: ServiceDep,
    sender: Annotated[Sender, sender_of("api")],
    response: Response,
) -> Any:
    """One turn with memory: recall, intent, tools, and the buffer written once."""
    return await answer_turn(service, ChatCompletions(body), sender, response)
