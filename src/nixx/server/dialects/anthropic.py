"""Anthropic's Messages API (`POST /v1/messages`) translated onto the chat turn.

Request → chat request:

- ``system`` (a string or text blocks) is the leading system message.
- ``{"role": "system"}`` messages inside ``messages`` (Claude Code sends them from
  2.1.154; 2.1.197, what npm installs on Node 20, does not retry without them) are
  taken: before the first user or assistant message they follow ``system`` in the
  leading system message; later ones stay in place as ``<system-reminder>`` spans on
  the user's side (`nixx.server.dialects.system`, whose docstring says why).
- ``<system-reminder>…</system-reminder>`` spans (the harness text Claude Code puts in the
  user's message: environment, file lists, reminders) go to the backend but are not
  stored in the user's buffer row nor recalled against (`system.remembered`); a message that is
  only reminders is stored whole.
- ``messages``: content a string or blocks. ``text`` blocks are text; ``image`` blocks
  (``base64`` or ``url`` sources) become ``image_url`` parts; ``document`` blocks with a
  plain-text source are text (after their title), a PDF one is a 400 naming what is
  taken; an assistant's ``tool_use``
  blocks are its ``tool_calls`` (``input`` as JSON arguments); a user's ``tool_result``
  blocks become tool messages, placed before the rest of that user message (a turn that
  only returns tool results adds no user row). ``thinking``/``redacted_thinking`` and
  other blocks are dropped (nothing nixx's backend could read).
- ``tools``: client tools (``name``, ``description``, ``input_schema``) become function
  tools; Anthropic's server tools (a versioned ``type`` such as ``web_search_20250305``
  or ``bash_20250124``) are dropped — nothing would run them. ``tool_choice`` ``auto``/
  ``any``/``tool``/``none`` → ``auto``/``required``/the function/``none``
  (``disable_parallel_tool_use`` → ``parallel_tool_calls: false``); ``max_tokens``,
  ``stop_sequences`` (→ ``stop``), ``temperature``, ``top_p`` pass; ``top_k``,
  ``metadata``, ``thinking``, ``service_tier`` are accepted and not sent on.

Turn events → the ``message`` object, or with ``stream`` Anthropic's events
(``message_start``, ``ping``, ``content_block_start``/``_delta``/``_stop`` — text
deltas, and a ``tool_use`` block's input as one ``input_json_delta`` — ``message_delta``
with the stop reason and usage, ``message_stop``; a turn failing after the stream began
ends with an ``error`` event in Anthropic's error shape). ``stop_reason``: ``tool_use``
when the client's tools were called, ``max_tokens`` at the token limit,
``stop_sequence`` when one of ``stop_sequences`` ended it (nixx finds them in the text
itself, on every backend: `nixx.llm.stream.StopWatch`), else ``end_turn``.

A reasoning backend's thinking (`Reasoning` events) is a ``thinking`` block before the
text it preceded (streamed as ``thinking_delta``s) when the request asked for thinking
(``thinking.type`` ``enabled`` or ``adaptive``); without that it is left out, as Anthropic
answers — a client that did not ask may read ``content[0]`` as the text. Anthropic's
thinking blocks carry a ``signature`` (its proof the text is the model's, checked when
the block is sent back); nixx has none to give, so ``signature`` is ``""`` — a thinking
block sent back is dropped like every one (above), so nothing checks it.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nixx.errors import NixxError, ValidationError
from nixx.llm.stream import AssistantToolCall, check_stops
from nixx.memory.history import estimate_tokens
from nixx.memory.turn_events import (
    ClientToolCalls,
    Delta,
    Finished,
    Reasoning,
    TurnInfo,
    TurnInput,
)
from nixx.server.dialects.adapter import Adapter
from nixx.server.dialects.system import place_system, remembered
from nixx.server.errors import answer_of, anthropic_envelope
from nixx.server.shapes import turn_memory

STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens"}


def _stop(done: Finished) -> dict[str, Any]:
    """``stop_reason`` and ``stop_sequence``: the stop string the turn found in the answer
    (the backend is sent none, so it cannot end the answer on one unseen)."""
    if done.stop_sequence is not None:
        return {"stop_reason": "stop_sequence", "stop_sequence": done.stop_sequence}
    return {"stop_reason": STOP_REASONS.get(done.finish_reason, "end_turn"),
            "stop_sequence": None}


class AnthropicMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class CountTokensRequest(BaseModel):
    """The body of `POST /v1/messages/count_tokens` (the Messages request without
    ``max_tokens``). Fields not listed are accepted and not sent on."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None


class MessagesRequest(CountTokensRequest):
    """Anthropic's Messages request body."""

    max_tokens: int = Field(ge=1)
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    thinking: dict[str, Any] | None = None

    @property
    def shows_thinking(self) -> bool:
        """Whether the client asked for thinking blocks (Anthropic sends none otherwise)."""
        return (self.thinking or {}).get("type") in ("enabled", "adaptive")


def new_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


# ---- request ------------------------------------------------------------------------


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string", param=where)
    return value


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        media = _text(source.get("media_type"), f"{where}.source.media_type")
        data = _text(source.get("data"), f"{where}.source.data")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if isinstance(source, dict) and source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": _text(source.get("url"),
                                                                f"{where}.source.url")}}
    raise ValidationError(f"{where}.source must be a base64 or url image source",
                          param=f"{where}.source")


def _parts(blocks: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    parts = []
    for i, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": _text(block.get("text"), f"{where}.{i}.text")})
        elif kind == "image":
            parts.append(_image(block, f"{where}.{i}"))
        elif kind == "document":
            parts.append({"type": "text", "text": _document(block, f"{where}.{i}")})
    return parts


def _document(block: dict[str, Any], where: str) -> str:
    """A ``document`` block's text: a plain-text source (``source.type: "text"``, its
    ``data``) or a ``content`` source of text blocks, after its ``title`` when it has one.
    A PDF (``base64``, ``url``, ``file``) is refused, never dropped in silence: nixx's
    backend reads text, and nixx does not extract it."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "text" and isinstance(source, dict):
        text = _text(source.get("data"), f"{where}.source.data")
    elif kind == "content" and isinstance(source, dict) and isinstance(source.get("content"), list):
        text = "\n".join(p["text"] for p in _parts(source["content"], f"{where}.source.content")
                         if p["type"] == "text")
    else:
        raise ValidationError(
            f"{where}: nixx takes document blocks whose source is plain text (type \"text\", "
            f"or \"content\" of text blocks), not {kind!r}: PDFs are not read; send the "
            "document's text instead", param=f"{where}.source")
    title = block.get("title")
    return f"{title}\n\n{text}" if isinstance(title, str) and title else text


def _content(parts: list[dict[str, Any]]) -> Any:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(p["text"] for p in _parts(content, f"{where}.content")
                         if p["type"] == "text")
    else:
        raise ValidationError(f"{where}.content must be a string or blocks",
                              param=f"{where}.content")
    if block.get("is_error"):
        text = "error: " + text
    return {"role": "tool", "tool_call_id": _text(block.get("tool_use_id"),
                                                  f"{where}.tool_use_id"), "content": text}


def to_messages(messages: list[AnthropicMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages.{i}.content"
        if isinstance(message.content, str):
            out.append({"role": message.role, "content": message.content})
            continue
        if message.role == "system":
            out.append({"role": "system", "content": _system(message.content, where)})
            continue
        blocks = message.content
        if message.role == "user":
            out.extend(_tool_result(b, f"{where}.{j}") for j, b in enumerate(blocks)
                       if b.get("type") == "tool_result")
            parts = _parts(blocks, where)
            if parts or not any(b.get("type") == "tool_result" for b in blocks):
                out.append({"role": "user", "content": _content(parts)})
            continue
        calls = []
        for j, block in enumerate(blocks):
            if block.get("type") == "tool_use":
                arguments = block.get("input", {})
                calls.append({
                    "id": _text(block.get("id"), f"{where}.{j}.id"),
                    "type": "function",
                    "function": {"name": _text(block.get("name"), f"{where}.{j}.name"),
                                 "arguments": json.dumps(arguments, ensure_ascii=False)},
                })
        answer: dict[str, Any] = {"role": "assistant",
                                  "content": _content(_parts(blocks, where)) or None}
        if calls:
            answer["tool_calls"] = calls
        out.append(answer)
    return out


def _system(system: str | list[dict[str, Any]] | None, where: str = "system") -> str:
    if system is None or isinstance(system, str):
        return system or ""
    return "\n".join(p["text"] for p in _parts(system, where) if p["type"] == "text")


def _tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools or []):
        if tool.get("type") not in (None, "custom"):
            continue  # a server tool (web_search_..., bash_...): nothing here runs it
        fn: dict[str, Any] = {"name": _text(tool.get("name"), f"tools.{i}.name")}
        if tool.get("description") is not None:
            fn["description"] = tool["description"]
        schema = tool.get("input_schema")
        fn["parameters"] = schema if isinstance(schema, dict) else {"type": "object"}
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: dict[str, Any] | None, chat: dict[str, Any]) -> None:
    if not choice:
        return
    if choice.get("disable_parallel_tool_use"):
        chat["parallel_tool_calls"] = False
    kind = choice.get("type")
    if kind == "tool":
        chat["tool_choice"] = {"type": "function",
                               "function": {"name": _text(choice.get("name"),
                                                          "tool_choice.name")}}
    elif kind in ("auto", "any", "none"):
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
    else:
        raise ValidationError("tool_choice.type must be auto, any, tool or none",
                              param="tool_choice.type")
    if "tools" not in chat:
        chat.pop("tool_choice", None)
        chat.pop("parallel_tool_calls", None)


def chat_request(body: MessagesRequest) -> dict[str, Any]:
    messages = to_messages(body.messages)
    system = _system(body.system)
    if system:
        messages.insert(0, {"role": "system", "content": system})
    chat: dict[str, Any] = {"messages": place_system(messages), "max_tokens": body.max_tokens}
    if body.model:
        chat["model"] = body.model
    tools = _tools(body.tools)
    if tools:
        chat["tools"] = tools
    _tool_choice(body.tool_choice, chat)
    if body.stop_sequences:
        chat["stop"] = body.stop_sequences
    for key in ("temperature", "top_p"):
        if getattr(body, key) is not None:
            chat[key] = getattr(body, key)
    return chat


def count_tokens(body: CountTokensRequest) -> int:
    """nixx's estimate of the request's input tokens (the same estimate its context
    budget uses: characters / 4 and a few per message), not the backend's tokenizer."""
    messages = to_messages(body.messages)
    total = sum(estimate_tokens(m) for m in messages)
    system = _system(body.system)
    if system:
        total += estimate_tokens({"content": system})
    if body.tools:
        total += len(json.dumps(_tools(body.tools))) // 4
    return total


# ---- answer -------------------------------------------------------------------------


def _tool_use(call: AssistantToolCall) -> dict[str, Any]:
    fn = call["function"]
    try:
        parsed = json.loads(fn["arguments"] or "{}")
    except ValueError:
        parsed = None
    given = parsed if isinstance(parsed, dict) else {"arguments": fn["arguments"]}
    return {"type": "tool_use", "id": call.get("id"), "name": fn["name"], "input": given}


def _usage(done: Finished) -> dict[str, Any]:
    """Anthropic's usage of the turn's counts: ``input_tokens`` are those the backend's
    cache did not hold (``cache_read_input_tokens`` are those it did; Anthropic counts
    them apart, OpenAI's ``prompt_tokens`` includes them); nixx's estimate when the
    backend sent none, marked ``estimated: true``."""
    counted = done.usage
    cached = counted.get("cached_tokens", 0)
    usage: dict[str, Any] = {
        "input_tokens": max(counted.get("prompt_tokens", 0) - cached, 0),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": counted.get("completion_tokens", 0),
    }
    if counted.get("estimated"):
        usage["estimated"] = True
    return usage


def _event(kind: str, **data: Any) -> bytes:
    payload = json.dumps({"type": kind, **data}, ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n".encode()


class Messages(Adapter):
    """The Messages dialect of one request (the module docstring)."""

    def __init__(self, body: MessagesRequest) -> None:
        check_stops(body.stop_sequences, "stop_sequences")
        self.given = TurnInput(chat_request(body), remembered=remembered)
        self.streams = body.stream
        self.model = body.model or ""
        self.thinking = body.shows_thinking  # reasoning shown as thinking blocks
        self.blocks = _Blocks()

    def opening(self, info: TurnInfo) -> list[bytes]:
        start: dict[str, Any] = {
            "id": new_id(), "type": "message", "role": "assistant",
            "model": str(info.get("model") or self.model), "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}
        return [_event("message_start", message=start), _event("ping")]

    def delta(self, event: Delta) -> list[bytes]:
        return self.blocks.text(event)

    def reasoning(self, event: Reasoning) -> list[bytes]:
        return self.blocks.text(event) if self.thinking else []

    def client_calls(self, event: ClientToolCalls) -> list[bytes]:
        out = self.blocks.close()
        for call in event.calls:
            out.extend(self.blocks.tool_use(call))
        return out

    async def finished(self, done: Finished) -> list[bytes]:
        return [*self.blocks.close(),
                _event("message_delta", delta=_stop(done), usage=_usage(done),
                       nixx=turn_memory(done)),
                _event("message_stop")]

    def failed(self, exc: NixxError) -> list[bytes]:
        status, code = answer_of(exc)
        return [_event("error", error=anthropic_envelope(exc.message, status, code)["error"])]

    async def answer(self, done: Finished) -> dict[str, Any]:
        """The ``message`` of a turn that ran to its end, its reasoning shown when asked."""
        content: list[dict[str, Any]] = []
        if self.thinking and done.reasoning:
            content.append({"type": "thinking", "thinking": done.reasoning, "signature": ""})
        if done.content:
            content.append({"type": "text", "text": done.content})
        content.extend(_tool_use(c) for c in done.client_tool_calls)
        return {
            "id": new_id(), "type": "message", "role": "assistant",
            "model": done.model or self.model, "content": content,
            **_stop(done), "usage": _usage(done), "nixx": turn_memory(done),
        }


class _Blocks:
    """The content blocks of a streamed message: their indexes and the open one."""

    def __init__(self) -> None:
        self.index = -1
        self.open: str | None = None  # "text" or "thinking"

    def text(self, event: Delta | Reasoning) -> list[bytes]:
        """A text or thinking delta, opening its block (and closing the other) first."""
        kind = "text" if isinstance(event, Delta) else "thinking"
        out = self.close() if self.open not in (None, kind) else []
        if self.open is None:
            self.index += 1
            self.open = kind
            block = ({"type": "text", "text": ""} if kind == "text"
                     else {"type": "thinking", "thinking": "", "signature": ""})
            out.append(_event("content_block_start", index=self.index, content_block=block))
        delta = ({"type": "text_delta", "text": event.text} if kind == "text"
                 else {"type": "thinking_delta", "thinking": event.text})
        out.append(_event("content_block_delta", index=self.index, delta=delta))
        return out

    def close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        return [_event("content_block_stop", index=self.index)]

    def tool_use(self, call: AssistantToolCall) -> list[bytes]:
        self.index += 1
        block = _tool_use(call)
        return [
            _event("content_block_start", index=self.index, content_block={**block, "input": {}}),
            _event("content_block_delta", index=self.index, delta={
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}),
            _event("content_block_stop", index=self.index),
        ]
