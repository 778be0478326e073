"""OpenAI chat completions as a dialect of the turn (`nixx.server.dialects.adapter`):
the route is `nixx.server.routes.chat`.

The request is accepted as OpenAI clients send it (content as a string, an array of
parts or null; system, developer, tool messages; client tools). The turn itself lives in
`nixx.memory.turn`; this module only translates its events to OpenAI's response shapes
(`ChatCompletions`).

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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nixx.errors import NixxError, ValidationError
from nixx.llm.stream import check_stops
from nixx.memory.turn_events import (
    RESULT_PREVIEW,
    ClientToolCalls,
    Delta,
    Finished,
    Reasoning,
    ToolRun,
    TurnInfo,
    TurnInput,
)
from nixx.server.dialects.adapter import Adapter
from nixx.server.errors import nixx_error_body
from nixx.server.shapes import turn_memory


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
    stop: str | list[str] | None = None


def check_tools(tools: list[dict[str, Any]] | None) -> None:
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


def _sse(data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def _tool_run_info(event: ToolRun) -> dict[str, Any]:
    result = (
        event.result if len(event.result) <= RESULT_PREVIEW else event.result[:RESULT_PREVIEW] + "…"
    )
    return {"id": event.id, "name": event.name, "arguments": event.arguments, "result": result}


class ChatCompletions(Adapter):
    """The chat completions dialect of one request (the module docstring)."""

    def __init__(self, body: ChatCompletionRequest) -> None:
        check_tools(body.tools)
        check_stops(body.stop, "stop")
        data = body.model_dump(exclude_unset=True)
        data["messages"] = [m.model_dump(exclude_unset=True) for m in body.messages]
        self.given = TurnInput(data)
        self.streams = body.stream
        self.include_usage = bool((body.stream_options or {}).get("include_usage"))
        self.id, self.created, self.model = completion_id(), int(time.time()), ""

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def opening(self, info: TurnInfo) -> list[bytes]:
        self.model = str(info.get("model") or "")
        return [_sse(self._chunk({"role": "assistant", "content": ""}))]

    def delta(self, event: Delta) -> list[bytes]:
        return [_sse(self._chunk({"content": event.text}))]

    def reasoning(self, event: Reasoning) -> list[bytes]:
        return [_sse(self._chunk({"reasoning_content": event.text}))]

    def tool_run(self, event: ToolRun) -> list[bytes]:
        chunk = self._chunk({})
        chunk["nixx"] = {"tool_run": _tool_run_info(event)}
        return [_sse(chunk)]

    def client_calls(self, event: ClientToolCalls) -> list[bytes]:
        calls = [{"index": i, **call} for i, call in enumerate(event.calls)]
        return [_sse(self._chunk({"tool_calls": calls}))]

    async def finished(self, done: Finished) -> list[bytes]:
        self.model = done.model or self.model
        chunk = self._chunk({}, done.finish_reason)
        chunk["nixx"] = turn_memory(done)
        out = [_sse(chunk)]
        if self.include_usage:
            out.append(_sse({**self._chunk({}), "choices": [], "usage": _usage(done.usage)}))
        return out

    def failed(self, exc: NixxError) -> list[bytes]:
        tail = {**self._chunk({}), "choices": []}
        tail.update(nixx_error_body(exc))
        return [_sse(tail)]

    def closing(self) -> list[bytes]:
        return [_sse("[DONE]")]

    async def answer(self, done: Finished) -> dict[str, Any]:
        content = done.content if done.content or not done.client_tool_calls else None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if done.reasoning:
            message["reasoning_content"] = done.reasoning
        if done.client_tool_calls:
            message["tool_calls"] = done.client_tool_calls
        return {
            "id": completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": done.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": done.finish_reason}],
            "usage": _usage(done.usage),  # nixx's estimate when the backend sent none
            "nixx": turn_memory(done),
        }


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
