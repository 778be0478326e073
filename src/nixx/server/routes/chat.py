"""`POST /v1/chat/completions`: OpenAI's chat API with memory, JSON or SSE.

The request is accepted as OpenAI clients send it (content as a string, an array of
parts or null; system, developer, tool messages; client tools). The turn itself lives in
`nixx.memory.turn`; this module only translates its events to OpenAI's response shapes.

Streaming follows OpenAI's chunk shape strictly: every chunk is a
``chat.completion.chunk`` with ``choices``; the stream ends with ``data: [DONE]``. nixx
adds one optional key, ``nixx``, to some chunks (a server-side tool ran; the final
chunk's memory details) — clients ignore unknown keys. A stream that breaks after it
started ends with a chunk carrying ``error`` (OpenAI's envelope body, ``choices: []``)
and then ``[DONE]``; the official `openai` client raises `APIError` on it.

A reasoning backend's thinking (`Reasoning` events) is passed on as llama.cpp, vLLM and
DeepSeek send it: ``delta.reasoning_content`` in the stream, ``message.reasoning_content``
in a JSON answer — clients that show thinking (Open WebUI, LibreChat, Continue) read that
field, the others ignore it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from nixx.errors import NixxError, ValidationError
from nixx.memory.episodic import Sender
from nixx.memory.turn import (
    RESULT_PREVIEW,
    ClientToolCalls,
    Delta,
    Finished,
    Reasoning,
    ToolRun,
    TurnInfo,
)
from nixx.server.deps import ServiceDep, sender_of
from nixx.server.errors import nixx_error_body
from nixx.server.shapes import turn_headers, turn_memory

router = APIRouter(tags=["chat"])


def completion_id() -> str:
    """OpenAI's wire id of one completion (`chatcmpl-...`), shared by its chunks."""
    return f"chatcmpl-nixx{time.time_ns():x}"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any] | str] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's request. Fields not listed are passed through to the backend."""

    model_config = ConfigDict(extra="allow")
    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="nixx answers one choice.")
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)


def _check_tools(tools: list[dict[str, Any]] | None) -> None:
    for i, tool in enumerate(tools or []):
        fn = tool.get("function")
        if (
            tool.get("type", "function") != "function"
            or not isinstance(fn, dict)
            or not fn.get("name")
        ):
            raise ValidationError(
                f'tools[{i}] must be {{"type": "function", "function": {{"name": ...}}}}',
                param=f"tools.{i}",
            )


def _chunk(
    cid: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _sse(data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def _tool_run_info(event: ToolRun) -> dict[str, Any]:
    result = (
        event.result if len(event.result) <= RESULT_PREVIEW else event.result[:RESULT_PREVIEW] + "…"
    )
    return {"id": event.id, "name": event.name, "arguments": event.arguments, "result": result}


def _client_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": i, **call} for i, call in enumerate(calls)]


async def _stream(
    events: AsyncIterator[Any],
    first: Any,
    model: str,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    cid, created = completion_id(), int(time.time())
    try:
        yield _sse(_chunk(cid, created, model, {"role": "assistant", "content": ""}))
        event: Any = first
        while True:
            if isinstance(event, Delta):
                yield _sse(_chunk(cid, created, model, {"content": event.text}))
            elif isinstance(event, Reasoning):
                yield _sse(_chunk(cid, created, model, {"reasoning_content": event.text}))
            elif isinstance(event, ToolRun):
                chunk = _chunk(cid, created, model, {})
                chunk["nixx"] = {"tool_run": _tool_run_info(event)}
                yield _sse(chunk)
            elif isinstance(event, ClientToolCalls):
                yield _sse(_chunk(cid, created, model, {"tool_calls": _client_calls(event.calls)}))
            elif isinstance(event, Finished):
                model = event.model or model
                chunk = _chunk(cid, created, model, {}, event.finish_reason)
                chunk["nixx"] = turn_memory(event)
                yield _sse(chunk)
                if include_usage:
                    usage = _usage(event.usage)
                    tail = {**_chunk(cid, created, model, {}), "choices": [], "usage": usage}
                    yield _sse(tail)
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                break
    except NixxError as exc:
        tail = {**_chunk(cid, created, model, {}), "choices": []}
        tail.update(nixx_error_body(exc))
        yield _sse(tail)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    yield _sse("[DONE]")


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
    _check_tools(body.tools)
    data = body.model_dump(exclude_unset=True)
    data["messages"] = [m.model_dump(exclude_unset=True) for m in body.messages]
    info: TurnInfo = {}
    events = service.turn(data, sender, info)
    if body.stream:
        # The first event is awaited here, so a backend that fails before answering
        # anything gets a plain HTTP error (503/502) instead of a broken stream.
        try:
            first = await events.__anext__()
        except BaseException:
            await events.aclose()  # type: ignore[attr-defined]
            raise
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        return StreamingResponse(
            _stream(events, first, str(info.get("model") or ""), include_usage),
            media_type="text/event-stream",
            headers=turn_headers(info, stream=True),
        )

    done: Finished | None = None
    async for event in events:
        if isinstance(event, Finished):
            done = event
    assert done is not None
    content = done.content if done.content or not done.client_tool_calls else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if done.reasoning:
        message["reasoning_content"] = done.reasoning
    if done.client_tool_calls:
        message["tool_calls"] = done.client_tool_calls
    reply: dict[str, Any] = {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": done.model,
        "system_fingerprint": None,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": done.finish_reason}
        ],
    }
    reply["usage"] = _usage(done.usage)  # nixx's estimate when the backend sent none
    reply["nixx"] = turn_memory(done)
    response.headers.update(turn_headers(info))
    return reply


def _usage(counted: dict[str, int]) -> dict[str, Any]:
    """The token counts: the backend's (what it left out completed from the rest where
    that is arithmetic, else 0; ``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens`` when it said),
    else nixx's estimate, marked ``estimated: true``."""
    usage: dict[str, Any] = {"prompt_tokens": counted.get("prompt_tokens", 0),
                             "completion_tokens": counted.get("completion_tokens", 0)}
    usage["total_tokens"] = counted.get(
        "total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    if "cached_tokens" in counted:
        usage["prompt_tokens_details"] = {"cached_tokens": counted["cached_tokens"]}
    if "reasoning_tokens" in counted:
        usage["completion_tokens_details"] = {"reasoning_tokens": counted["reasoning_tokens"]}
    if counted.get("estimated"):
        usage["estimated"] = True
    return usage
