"""Accumulate a streamed chat completion: content, reasoning and tool-call deltas.

OpenAI streams a tool call in pieces: the first delta for an ``index`` carries the
call's ``id`` and ``function.name``, later ones append to ``function.arguments``.
`StreamAccumulator` folds those pieces back into whole calls.

Reasoning models served by llama.cpp, vLLM and DeepSeek stream their thinking apart
from the answer, as ``delta.reasoning_content``; vLLM's newer versions, Ollama and
OpenRouter name it ``delta.reasoning``. Either is read (``reasoning_content`` when a delta
carries both, so text sent twice is taken once); a value that is not a string is
ignored, as is any other field nixx does not read.

A request's stop strings are nixx's to find (`StopWatch`), not the backend's: only vLLM
says which one ended an answer (llama.cpp, llama-cpp-python and Ollama do not on the
OpenAI route), and Anthropic's clients are owed ``stop_sequence``. The backend is sent no
``stop``; the watch holds back a tail as long as the longest stop string but one, cuts
the text at the first match, and the turn then closes the backend's stream. Every piece
of text is searched for every stop string, so a request gives at most `MAX_STOPS` of at
most `MAX_STOP_CHARS` characters each (`check_stops`, run by the dialects: 1.5 million
stop strings, 13 MB of JSON, held the event loop 27 ms a chunk).

`check_chunk` and `check_completion` are the one validation of what a backend sends:
`ChatClient` runs every streamed chunk and every completion through them, so nothing
downstream (the turn, summaries, intent) meets a wrongly shaped value. A chunk or
completion of the wrong shape raises `BackendError` (502) naming what was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from nixx.errors import BackendError, ValidationError

# -- the shapes `check_chunk` and `check_completion` vouch for (the fields nixx reads; a
# backend's other fields pass through unread) ------------------------------------------


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, as the backend wrote it


class AssistantToolCall(TypedDict):
    """A whole tool call, as an assistant message carries it."""

    id: str
    type: str  # "function"
    function: FunctionCall


class _Said(TypedDict, total=False):
    """What an answer's message and a chunk's delta both carry."""

    role: str
    content: str | None
    reasoning_content: str
    reasoning: str


class AnswerMessage(_Said, total=False):
    tool_calls: list[AssistantToolCall]


class _Choice(TypedDict, total=False):
    index: int
    finish_reason: str | None


class CompletionChoice(_Choice, total=False):
    message: AnswerMessage


class Usage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, Any]  # cached_tokens
    completion_tokens_details: dict[str, Any]  # reasoning_tokens
    estimated: int  # 1: nixx's own count (the backend sent none)


class _Head(TypedDict, total=False):
    """What a completion and a chunk both carry besides their choices."""

    id: str
    object: str
    created: int
    model: str | None
    usage: Usage | None


class Completion(_Head, total=False):
    """A ``chat.completion`` (`check_completion`): at least one choice."""

    choices: list[CompletionChoice]


class ToolCallDelta(TypedDict, total=False):
    index: int
    id: str
    type: str
    function: dict[str, str]  # name and/or a piece of the arguments


class ChunkDelta(_Said, total=False):
    tool_calls: list[ToolCallDelta]


class ChunkChoice(_Choice, total=False):
    delta: ChunkDelta


class CompletionChunk(_Head, total=False):
    """A ``chat.completion.chunk`` (`check_chunk`)."""

    choices: list[ChunkChoice]


@dataclass
class ToolCallAccumulator:
    id: str = ""
    name: str = ""
    arguments: str = ""

    def to_message(self) -> AssistantToolCall:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class StreamAccumulator:
    """Feed it chunks (`add`); read `content`, `tool_calls()`, `finish_reason`, `usage`;
    `take_reasoning()` gives the reasoning text that arrived since it was last called."""

    parts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    _untaken: list[str] = field(default_factory=list)
    calls: dict[int, ToolCallAccumulator] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None

    def add(self, chunk: CompletionChunk) -> str:
        """Fold one chunk in; return the content text it carried ('' if none)."""
        if chunk.get("model") and not self.model:
            self.model = str(chunk["model"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content")
            if not isinstance(thought, str) or not thought:
                thought = delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                self._untaken.append(thought)
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.parts.append(piece)
                text += piece
            for call in delta.get("tool_calls") or []:
                index = int(call.get("index", len(self.calls)))
                acc = self.calls.setdefault(index, ToolCallAccumulator())
                if call.get("id"):
                    acc.id = str(call["id"])
                fn = call.get("function") or {}
                if fn.get("name"):
                    acc.name += str(fn["name"]) if not acc.name else ""
                if fn.get("arguments"):
                    acc.arguments += str(fn["arguments"])
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return text

    @property
    def content(self) -> str:
        return "".join(self.parts)

    def take_reasoning(self) -> str:
        """The reasoning text of the chunks added since the last call ('' if none)."""
        text = "".join(self._untaken)
        self._untaken.clear()
        return text

    def tool_calls(self) -> list[AssistantToolCall]:
        calls = []
        for index in sorted(self.calls):
            acc = self.calls[index]
            if not acc.id:
                acc.id = f"call_{index}"
            calls.append(acc.to_message())
        return calls


#: the most stop strings a request may give, and the longest one (`check_stops`)
MAX_STOPS = 64
MAX_STOP_CHARS = 1000


def check_stops(stop: str | list[str] | None, param: str) -> None:
    """Refuse stop strings past the bounds (the module docstring): a 400 naming `param`
    (chat's ``stop``, Messages' ``stop_sequences``) and the bounds."""
    given = [stop] if isinstance(stop, str) else stop or []
    if len(given) > MAX_STOPS or any(len(s) > MAX_STOP_CHARS for s in given):
        raise ValidationError(
            f"{param} takes at most {MAX_STOPS} stop strings of at most {MAX_STOP_CHARS} "
            f"characters each (got {len(given)}, the longest "
            f"{max((len(s) for s in given), default=0)} characters)",
            param=param,
        )


class StopWatch:
    """Finds the request's stop strings in a streamed answer: `feed` each piece of text
    and send on what it returns (the text before any match, less a tail that could still
    begin one); `matched` is the stop string found (the one whose end comes first, as a
    server reading token by token would stop); `flush`
    gives the tail held back when the stream ended without one."""

    def __init__(self, stop: Any) -> None:
        given = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
        self.stops = [s for s in given if isinstance(s, str) and s]
        self.matched: str | None = None
        self._keep = max((len(s) for s in self.stops), default=1) - 1
        self._held = ""

    def feed(self, text: str) -> str:
        if not self.stops:
            return text
        if self.matched is not None:
            return ""
        buf = self._held + text
        # the stop string completed first, as a server reading token by token stops
        found = [(buf.find(s) + len(s), buf.find(s), s) for s in self.stops if s in buf]
        if found:
            _, at, self.matched = min(found)
            self._held = ""
            return buf[:at]
        cut = max(len(buf) - self._keep, 0)
        self._held = buf[cut:]
        return buf[:cut]

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


def _shape_error(what: str, where: str, value: Any, *, streamed: bool) -> BackendError:
    shown = repr(value)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return BackendError(
        f"the LLM backend sent a malformed {what}: {where} is {shown}",
        code="stream_interrupted" if streamed else "malformed_completion",
    )


def _optional(
    obj: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    what: str,
    where: str,
    streamed: bool,
) -> None:
    value = obj.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise _shape_error(what, f"{where}.{key}", value, streamed=streamed)


def _check_tool_calls(calls: Any, what: str, where: str, streamed: bool) -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        raise _shape_error(what, where, calls, streamed=streamed)
    for i, call in enumerate(calls):
        at = f"{where}[{i}]"
        if not isinstance(call, dict):
            raise _shape_error(what, at, call, streamed=streamed)
        _optional(call, "index", int, what, at, streamed)
        _optional(call, "id", str, what, at, streamed)
        fn = call.get("function")
        if fn is None:
            continue
        if not isinstance(fn, dict):
            raise _shape_error(what, f"{at}.function", fn, streamed=streamed)
        _optional(fn, "name", str, what, f"{at}.function", streamed)
        _optional(fn, "arguments", str, what, f"{at}.function", streamed)


def _check_usage(data: dict[str, Any], what: str, streamed: bool) -> None:
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise _shape_error(what, "usage", usage, streamed=streamed)
    _optional(data, "model", str, what, "chunk" if streamed else "completion", streamed)


def check_chunk(chunk: Any) -> CompletionChunk:
    """`chunk` when it has the shape of an OpenAI ``chat.completion.chunk`` (the fields
    nixx reads: choices[].index/delta/finish_reason, delta.content/role/tool_calls,
    usage, model); raises `BackendError` (``stream_interrupted``) otherwise."""
    what = "stream chunk"
    if not isinstance(chunk, dict):
        raise _shape_error(what, "the chunk", chunk, streamed=True)
    _check_usage(chunk, what, True)
    choices = chunk.get("choices")
    if choices is None:
        return cast(CompletionChunk, chunk)
    if not isinstance(choices, list):
        raise _shape_error(what, "choices", choices, streamed=True)
    for i, choice in enumerate(choices):
        at = f"choices[{i}]"
        if not isinstance(choice, dict):
            raise _shape_error(what, at, choice, streamed=True)
        _optional(choice, "index", int, what, at, True)
        _optional(choice, "finish_reason", str, what, at, True)
        delta = choice.get("delta")
        if delta is None:
            continue
        if not isinstance(delta, dict):
            raise _shape_error(what, f"{at}.delta", delta, streamed=True)
        _optional(delta, "content", str, what, f"{at}.delta", True)
        _optional(delta, "role", str, what, f"{at}.delta", True)
        _check_tool_calls(delta.get("tool_calls"), what, f"{at}.delta.tool_calls", True)
    return cast(CompletionChunk, chunk)


def check_completion(data: Any) -> Completion:
    """`data` when it is a ``chat.completion`` with at least one choice whose message
    has the shape nixx reads; raises `BackendError` (502) otherwise."""
    what = "completion"
    if not isinstance(data, dict):
        raise _shape_error(what, "the answer", data, streamed=False)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BackendError(
            "the LLM backend sent a completion without choices", code="malformed_completion"
        )
    _check_usage(data, what, False)
    for i, choice in enumerate(choices):
        at = f"choices[{i}]"
        if not isinstance(choice, dict):
            raise _shape_error(what, at, choice, streamed=False)
        _optional(choice, "finish_reason", str, what, at, False)
        message = choice.get("message")
        if message is None:
            continue
        if not isinstance(message, dict):
            raise _shape_error(what, f"{at}.message", message, streamed=False)
        _optional(message, "content", str, what, f"{at}.message", False)
        _check_tool_calls(message.get("tool_calls"), what, f"{at}.message.tool_calls", False)
    return cast(Completion, data)
