"""OpenAI's Responses API (`POST /v1/responses`) translated onto the chat turn.

Request → chat request:

- ``input``: a string (one user message) or items: messages (``role`` user, assistant,
  system or developer; content a string or ``input_text``/``output_text``/``refusal``/
  ``input_image`` parts), ``function_call`` (an assistant tool call; consecutive calls
  join one assistant message) and ``function_call_output`` (a tool message). Items of
  other types (``reasoning``, ``item_reference``, built-in tool calls) are dropped: nixx
  never produces them, and the backend could not read them.
- ``instructions`` is the leading system message (not carried to a continuation, as at
  OpenAI); ``previous_response_id`` puts the stored conversation before ``input``.
- ``system`` and ``developer`` messages (Codex sends ``developer`` items) before the
  first user or assistant message follow ``instructions`` in the leading system message;
  later ones stay in place as ``<system-reminder>`` spans on the user's side, kept out of
  the user's buffer row (`nixx.server.dialects.system`, whose docstring says why).
- ``tools``: function tools become chat tools; other kinds (``web_search``,
  ``file_search``, ``custom``, ``local_shell``, ``mcp``, ...) are dropped — the model is
  not told of tools nothing would run. ``tool_choice`` maps onto chat's (a choice of a
  built-in tool becomes ``auto``). ``max_output_tokens`` → ``max_tokens``;
  ``temperature``, ``top_p``, ``parallel_tool_calls`` pass; ``text.format`` becomes
  ``response_format``; ``reasoning.effort`` → ``reasoning_effort``. ``reasoning.summary``,
  ``include``, ``metadata``, ``truncation``, ``service_tier`` and other fields are
  accepted and not sent on; ``background: true``
  is refused (400: nixx answers in the foreground).

Turn events → the Response object, or with ``stream`` the event stream
(``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta``/``.done``,
``response.function_call_arguments.delta``/``.done``, ``response.output_item.done``,
``response.completed`` — ``response.incomplete`` when the backend stopped at the token
limit; a turn that fails after the stream began ends with ``error`` then
``response.failed``). Each event carries ``sequence_number``.

A reasoning backend's thinking (`Reasoning` events) is a ``reasoning`` output item before
the message: its text in ``content`` (``reasoning_text`` parts), ``summary`` empty — it is
the model's own text, not a summary, as OpenAI serves open-weight models' reasoning —
streamed as ``response.content_part.added``, ``response.reasoning_text.delta``/``.done``.
It is not stored: a stored response read back, or continued, has no reasoning item.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from nixx.errors import NixxError, ValidationError
from nixx.memory.responses import Chain, bounded_input
from nixx.memory.turn_events import ClientToolCalls, Delta, Finished, Reasoning, TurnInput
from nixx.server.dialects.adapter import Adapter
from nixx.server.dialects.system import place_system, remembered
from nixx.server.shapes import turn_memory

if TYPE_CHECKING:
    from nixx.llm.stream import AssistantToolCall
    from nixx.memory.turn_events import TurnInfo

ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text", "text")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


class ResponsesRequest(BaseModel):
    """The Responses API's request body; fields not listed are accepted and not sent on."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, max_length=200)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    store: bool = True
    background: bool | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None


# ---- request ------------------------------------------------------------------------


def _part(part: Any, where: str) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        raise ValidationError(f"{where} must be a content part object", param=where)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": _str(part.get("text"), f"{where}.text")}
    if kind == "refusal":
        return {"type": "text", "text": _str(part.get("refusal"), f"{where}.refusal")}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise ValidationError(
        f"{where}: nixx takes text and input_image (image_url) parts, not {kind!r}", param=where
    )


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string", param=where)
    return value


def _content(content: Any, where: str) -> Any:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_part(p, f"{where}.{i}") for i, p in enumerate(content)]
        if all(p["type"] == "text" for p in parts):
            return "\n".join(p["text"] for p in parts)
        return parts
    raise ValidationError(f"{where} must be a string or a list of content parts", param=where)


def _output_text(output: Any, where: str) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = []
        for i, part in enumerate(output):
            text = _part(part, f"{where}.{i}")
            if text["type"] == "text":
                texts.append(text["text"])
        return "\n".join(texts)
    raise ValidationError(f"{where} must be a string or a list of content parts", param=where)


def input_messages(value: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The chat messages the request's ``input`` adds (see the module docstring)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        where = f"input.{i}"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ROLES:
                raise ValidationError(
                    f"{where}.role must be one of {', '.join(ROLES)}", param=f"{where}.role"
                )
            messages.append({"role": role, "content": _content(item.get("content"),
                                                               f"{where}.content")})
        elif kind == "function_call":
            call = {
                "id": _str(item.get("call_id"), f"{where}.call_id"),
                "type": "function",
                "function": {
                    "name": _str(item.get("name"), f"{where}.name"),
                    "arguments": _str(item.get("arguments", "{}"), f"{where}.arguments"),
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":  # the same answer's calls
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({
                "role": "tool",
                "tool_call_id": _str(item.get("call_id"), f"{where}.call_id"),
                "content": _output_text(item.get("output"), f"{where}.output"),
            })
        # any other item (reasoning, item_reference, built-in tool calls) is dropped
    return messages


def _tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools or []):
        if tool.get("type") != "function":
            continue  # built-in tools nixx does not serve: not offered to the model
        fn: dict[str, Any] = {"name": _str(tool.get("name"), f"tools.{i}.name")}
        if not fn["name"]:
            raise ValidationError(f"tools.{i}.name must not be empty", param=f"tools.{i}.name")
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                fn[key] = tool[key]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: str | dict[str, Any] | None, have_tools: bool) -> Any:
    if choice is None or not have_tools:
        return None
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise ValidationError("tool_choice must be auto, none, required or a function",
                                  param="tool_choice")
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    return "auto"


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    fmt = (text or {}).get("format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    return None


def chat_request(
    body: ResponsesRequest, history: list[dict[str, Any]], added: list[dict[str, Any]]
) -> dict[str, Any]:
    """The chat request of the turn: instructions, the stored `history`, the `added`
    messages of this request, and the translated options."""
    if body.background:
        raise ValidationError("background responses are not served: nixx answers in the "
                              "foreground (leave background out)", param="background")
    messages = list(history) + list(added)
    if body.instructions:
        messages.insert(0, {"role": "system", "content": body.instructions})
    if not messages:
        raise ValidationError("input is required (a string or a list of items)", param="input")
    tools = _tools(body.tools)
    chat: dict[str, Any] = {"messages": place_system(messages)}
    if body.model:
        chat["model"] = body.model
    if tools:
        chat["tools"] = tools
    choice = _tool_choice(body.tool_choice, bool(tools))
    if choice is not None:
        chat["tool_choice"] = choice
    if body.max_output_tokens is not None:
        chat["max_tokens"] = body.max_output_tokens
    for key in ("temperature", "top_p", "parallel_tool_calls"):
        if getattr(body, key) is not None:
            chat[key] = getattr(body, key)
    fmt = _response_format(body.text)
    if fmt is not None:
        chat["response_format"] = fmt
    effort = (body.reasoning or {}).get("effort")
    if isinstance(effort, str) and effort:
        chat["reasoning_effort"] = effort  # chat's name for it (OpenAI, vLLM, llama.cpp)
    return chat


# ---- stored responses read back -------------------------------------------------------


def input_items(messages: list[dict[str, Any]], response_id: str) -> list[dict[str, Any]]:
    """The Responses items of a stored response's input (chat messages, as kept), oldest
    first; ids are the response's, numbered (items are not stored apart)."""
    items: list[dict[str, Any]] = []
    tag = response_id.removeprefix("resp_")
    for message in messages:
        role = message.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id"),
                          "output": message.get("content") or "", "status": "completed"})
            continue
        content = message.get("content")
        kind = "output_text" if role == "assistant" else "input_text"
        parts = [{"type": kind, "text": content}] if isinstance(content, str) and content else [
            {"type": kind, "text": p.get("text", "")} if p.get("type") == "text"
            else {"type": "input_image", "image_url": (p.get("image_url") or {}).get("url"),
                  "detail": (p.get("image_url") or {}).get("detail", "auto")}
            for p in content or [] if isinstance(p, dict)]
        if parts:
            items.append({"type": "message", "role": role, "status": "completed",
                          "content": parts})
        items.extend(Response.call_item(c) for c in message.get("tool_calls") or [])
    for i, item in enumerate(items):
        item.setdefault("id", f"{'msg' if item['type'] == 'message' else 'fc'}_{tag}_{i}")
    return items


def stored_response(
    response_id: str, record: dict[str, Any], said: dict[str, Any], content: str,
    tool_calls: list[dict[str, Any]], created_at: int,
) -> dict[str, Any]:
    """The Response object of a stored response (``GET /v1/responses/{id}``): what was
    kept of it — its answer, status, model and usage; the request's options were not."""
    body = ResponsesRequest(previous_response_id=record.get("previous"))
    response = Response(body, str(said.get("model") or ""))
    response.id, response.created_at = response_id, created_at
    if content:
        response.output.append(Response.message_item(f"msg_{response_id[5:]}", content,
                                                      "completed"))
    response.output.extend(Response.call_item(
        {"id": str(c.get("id") or ""), "type": "function",
         "function": {"name": str(c.get("name") or ""),
                      "arguments": str(c.get("arguments") or "")}})
        for c in tool_calls)
    out = response.object(str(said.get("status") or "completed"))
    counted = said.get("usage")
    out["usage"] = usage(counted) if isinstance(counted, dict) else None
    return out


# ---- answer -------------------------------------------------------------------------


def usage(counted: dict[str, int]) -> dict[str, Any]:
    """The Responses usage of the turn's counts: the backend's (``cached_tokens`` its
    cache held, ``reasoning_tokens`` of thinking when it said), else nixx's estimate,
    marked ``estimated: true``."""
    prompt, completion = counted.get("prompt_tokens", 0), counted.get("completion_tokens", 0)
    out: dict[str, Any] = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": counted.get("cached_tokens", 0)},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": counted.get("reasoning_tokens", 0)},
        "total_tokens": counted.get("total_tokens", prompt + completion),
    }
    if counted.get("estimated"):
        out["estimated"] = True
    return out


class Response:
    """One response being built: its id and the request's fields it echoes."""

    def __init__(self, body: ResponsesRequest, model: str) -> None:
        self.id = new_id("resp")
        self.created_at = int(time.time())
        self.model = model
        self.body = body
        self.output: list[dict[str, Any]] = []

    def object(
        self,
        status: str,
        *,
        done: Finished | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = self.body
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "model": (done.model if done and done.model else self.model),
            "output": list(self.output),
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "previous_response_id": body.previous_response_id,
            "reasoning": {"effort": None, "summary": None},
            "store": body.store,
            "temperature": body.temperature,
            "text": body.text or {"format": {"type": "text"}},
            "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
            "tools": [t for t in body.tools or [] if t.get("type") == "function"],
            "top_p": body.top_p,
            "truncation": "disabled",
            "usage": usage(done.usage) if done is not None else None,
            "metadata": getattr(body, "metadata", None) or {},
        }

    @staticmethod
    def status_of(done: Finished) -> str:
        return "incomplete" if done.finish_reason == "length" else "completed"

    @staticmethod
    def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
        content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        return {"id": item_id, "type": "message", "status": status, "role": "assistant",
                "content": content if status == "completed" or text else []}

    @staticmethod
    def reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
        content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
        return {"id": item_id, "type": "reasoning", "status": status, "summary": [],
                "content": content}

    @staticmethod
    def call_item(call: AssistantToolCall, arguments: str | None = None) -> dict[str, Any]:
        fn = call["function"]
        return {
            "id": "fc_" + str(call.get("id") or secrets.token_hex(8)).removeprefix("call_"),
            "type": "function_call",
            "status": "completed" if arguments is None else "in_progress",
            "call_id": call.get("id"),
            "name": fn["name"],
            "arguments": fn["arguments"] if arguments is None else arguments,
        }

    def finish(self, done: Finished) -> dict[str, Any]:
        """The whole Response of a turn that ran to its end (not streamed)."""
        if done.reasoning:
            self.output.append(self.reasoning_item(new_id("rs"), done.reasoning, "completed"))
        if done.content:
            self.output.append(self.message_item(new_id("msg"), done.content, "completed"))
        self.output.extend(self.call_item(c) for c in done.client_tool_calls)
        return self.object(self.status_of(done), done=done)


#: save(response id, answer row id, what is kept of the answer): the response kept
Store = Callable[[str, int, dict[str, Any]], Awaitable[None]]


class Responses(Adapter):
    """The Responses dialect of one request (the module docstring). `chain`: the stored
    conversation a continuation loads (`previous_response_id`, read by the route);
    `window`: the model's context length, which bounds what is kept of the input;
    `save`: keeps the response (with ``store``), before ``response.completed`` is sent,
    so a client continuing at once finds it."""

    def __init__(self, body: ResponsesRequest, chain: Chain, window: int, model: str,
                 save: Store) -> None:
        added = input_messages(body.input)
        chat = chat_request(body, chain.messages, added)
        self.response = Response(body, body.model or "")
        self.body, self.model, self.save = body, model, save
        answer_meta = None
        if body.store:
            kept, left_out = bounded_input(added, window)
            record: dict[str, Any] = {"id": self.response.id,
                                      "previous": body.previous_response_id,
                                      "input": kept, "start": chain.next_start}
            if left_out:
                record["left_out"] = left_out
            answer_meta = {"response": record}
        self.given = TurnInput(chat, answer_meta=answer_meta, remembered=remembered)
        self.streams = body.stream
        self._seq = 0
        self.item: dict[str, Any] | None = None  # the open message or reasoning item
        self.text: list[str] = []

    async def _kept(self, done: Finished) -> dict[str, Any]:
        """The response stored (with ``store``); the key nixx adds (``nixx``: the memory
        details)."""
        if self.body.store and done.assistant_row_id is not None:
            said = {"status": Response.status_of(done), "model": done.model or self.model,
                    "usage": done.usage}
            await self.save(self.response.id, done.assistant_row_id, said)
        return {"nixx": turn_memory(done)}

    async def answer(self, done: Finished) -> dict[str, Any]:
        return {**self.response.finish(done), **(await self._kept(done))}

    # ---- streaming --------------------------------------------------------------------
    def _event(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._seq, **data}
        self._seq += 1
        return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

    def opening(self, info: TurnInfo) -> list[bytes]:
        self.response.model = str(info.get("model") or self.response.model)
        return [self._event("response.created", response=self.response.object("in_progress")),
                self._event("response.in_progress",
                            response=self.response.object("in_progress"))]

    def _said(self, kind: str, text: str) -> list[bytes]:
        """Text of a message (`kind` ``message``) or reasoning item, opening it first (and
        closing the other)."""
        out: list[bytes] = []
        if self.item is not None and self.item["type"] != kind:
            out.extend(self._close_open())
        if self.item is None:
            self.item = self._open_item(kind)
            out.extend(self._opened(self.item))
        self.text.append(text)
        out.append(self._event(
            f"response.{'output' if kind == 'message' else 'reasoning'}_text.delta",
            item_id=self.item["id"], output_index=len(self.response.output) - 1,
            content_index=0, delta=text, **({"logprobs": []} if kind == "message" else {})))
        return out

    def delta(self, event: Delta) -> list[bytes]:
        return self._said("message", event.text)

    def reasoning(self, event: Reasoning) -> list[bytes]:
        return self._said("reasoning", event.text)

    def client_calls(self, event: ClientToolCalls) -> list[bytes]:
        out = self._close_open()
        for call in event.calls:
            out.extend(self._call_events(call))
        return out

    async def finished(self, done: Finished) -> list[bytes]:
        out = self._close_open()
        extra = await self._kept(done)
        final = {**self.response.object(Response.status_of(done), done=done), **extra}
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        out.append(self._event(kind, response=final))
        return out

    def failed(self, exc: NixxError) -> list[bytes]:
        error = {"code": exc.kind, "message": exc.message}
        return [self._event("error", code=exc.kind, message=exc.message, param=exc.param),
                self._event("response.failed",
                            response=self.response.object("failed", error=error))]

    def _close_open(self) -> list[bytes]:
        if self.item is None:
            return []
        out = self._close_item(self.item, "".join(self.text))
        self.item, self.text = None, []
        return out

    def _open_item(self, kind: str) -> dict[str, Any]:
        item = (Response.message_item(new_id("msg"), "", "in_progress") if kind == "message"
                else Response.reasoning_item(new_id("rs"), "", "in_progress"))
        self.response.output.append(item)
        return item

    def _opened(self, item: dict[str, Any]) -> list[bytes]:
        index = len(self.response.output) - 1
        part = ({"type": "output_text", "text": "", "annotations": []}
                if item["type"] == "message" else {"type": "reasoning_text", "text": ""})
        return [
            self._event("response.output_item.added", output_index=index, item=item),
            self._event("response.content_part.added", item_id=item["id"], output_index=index,
                        content_index=0, part=part),
        ]

    def _close_item(self, item: dict[str, Any], text: str) -> list[bytes]:
        index = self.response.output.index(item)
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            done = Response.message_item(item["id"], text, "completed")
            text_done = self._event("response.output_text.done", item_id=item["id"],
                                    output_index=index, content_index=0, text=text,
                                    logprobs=[])
        else:
            part = {"type": "reasoning_text", "text": text}
            done = Response.reasoning_item(item["id"], text, "completed")
            text_done = self._event("response.reasoning_text.done", item_id=item["id"],
                                    output_index=index, content_index=0, text=text)
        self.response.output[index] = done
        return [
            text_done,
            self._event("response.content_part.done", item_id=item["id"], output_index=index,
                        content_index=0, part=part),
            self._event("response.output_item.done", output_index=index, item=done),
        ]

    def _call_events(self, call: AssistantToolCall) -> list[bytes]:
        index = len(self.response.output)
        started = Response.call_item(call, arguments="")
        done = Response.call_item(call)
        self.response.output.append(done)
        arguments = done["arguments"]
        return [
            self._event("response.output_item.added", output_index=index, item=started),
            self._event("response.function_call_arguments.delta", item_id=done["id"],
                        output_index=index, delta=arguments),
            self._event("response.function_call_arguments.done", item_id=done["id"],
                        output_index=index, name=done["name"], arguments=arguments),
            self._event("response.output_item.done", output_index=index, item=done),
        ]
