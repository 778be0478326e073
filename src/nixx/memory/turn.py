"""One chat turn, from the client's OpenAI request to the events a shell renders.

1. The turn's new user message (the last message, when it is a user message) is written
   to the buffer — once, before the backend is called — while, in a second worker
   thread, recall's rankers run on the latest user message (full text over the buffer,
   vectors over buffer rows and summaries: `nixx.memory.recall.Recall.search`).
2. The system prompt is built (`nixx.memory.recall`): base prompt, current intent,
   recalled excerpts and summaries from outside the history the client sent, above the
   floor and within the token budget; system/developer messages the client put first are appended to
   it, so the backend gets exactly one leading system message.
3. The history is trimmed newest-first to the context budget.
4. The backend is called (always streamed, so a cut keeps what was produced). Content
   is yielded as it arrives. Calls to nixx's own tools are run here and fed back, at
   most `tool_max_rounds` rounds; calls to tools the client sent end the turn with
   ``finish_reason="tool_calls"`` so the client runs them.
5. The answer is written to the buffer (marked ``{"incomplete": true}`` when the stream
   broke or the client went away), then summaries and intent are scheduled in the
   background.

Events: `Delta` (answer text), `ToolRun` (a nixx tool ran), `ClientToolCalls`, and a
final `Finished`. Errors are raised as `NixxError`s; partial answers are stored first.

A turn gets its collaborators (`TurnParts`: the recall, the episodic buffer, the LLM
client, the intent, the tools, ...), built once by `NixxService`; it never sees the
service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from anyio import to_thread

from nixx.errors import ContextLengthExceeded, NixxError
from nixx.llm.stream import StreamAccumulator
from nixx.memory.history import (
    estimate_tokens,
    latest_user_text,
    new_user_text,
    normalise,
    split_leading_system,
    text_of,
    trim_history,
)

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.llm.client import ChatClient
    from nixx.memory.episodic import Episodic
    from nixx.memory.recall import Recall, RecallContext

# Request keys nixx sets itself; everything else the client sent goes to the backend.
_OWN_KEYS = {"messages", "model", "stream", "tools", "n"}
RESULT_PREVIEW = 200


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class ToolRun:
    id: str
    name: str
    arguments: str
    result: str


@dataclass(frozen=True)
class ClientToolCalls:
    calls: list[dict[str, Any]]


@dataclass(frozen=True)
class Finished:
    finish_reason: str
    model: str
    content: str
    usage: dict[str, int]
    tool_runs: list[ToolRun] = field(default_factory=list)
    client_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # what was recalled (`RecallContext.answer_info()`: summary ids, items and scores)
    recall_info: dict[str, Any] = field(default_factory=dict)
    user_row_id: int | None = None
    assistant_row_id: int | None = None
    trimmed: int = 0


@dataclass(frozen=True)
class TurnParts:
    """What a turn works with; `NixxService` builds it once."""

    settings: Settings
    recall: Recall
    episodic: Episodic
    llm: ChatClient
    tools: Any | None  # the `nixx.tools` registry (None: no nixx tools)
    intent: Callable[[], str | None]  # the current intent's text (blocking)
    resolve_model: Callable[[str | None], Awaitable[str]]
    # run a write as its own task, kept alive when the request is cancelled
    spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]
    after_turn: Callable[[], None]  # schedule the background work a new row may make due


@dataclass
class _Progress:
    parts: list[str] = field(default_factory=list)
    tool_runs: list[ToolRun] = field(default_factory=list)
    client_calls: list[dict[str, Any]] = field(default_factory=list)
    assistant_row_id: int | None = None

    @property
    def content(self) -> str:
        return "".join(self.parts)


def _add_usage(total: dict[str, int], usage: dict[str, Any] | None) -> None:
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = (usage or {}).get(key)
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


def _reserve(body: dict[str, Any], context_length: int) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return min(1024, context_length // 4)


def _check_fits(messages: list[dict[str, Any]], body: dict[str, Any], context_length: int) -> None:
    """Refuse, before anything is stored or sent, a last message that alone is larger
    than the context window less the answer's reserve: trimming keeps the last message
    always, so it would go to the backend whole (a 10 MiB message did, to an 8,192-token
    model), and be stored, indexed, embedded and summarised on the way."""
    if not messages:
        return
    room = context_length - _reserve(body, context_length)
    cost = estimate_tokens(messages[-1])
    if cost > room:
        raise ContextLengthExceeded(
            f"the last message is about {cost} tokens; the backend's context window is "
            f"{context_length} (NIXX_CHAT_CONTEXT_LENGTH), {room} of them for the messages "
            "once the answer's share is kept: send less",
            param=f"messages.{len(messages) - 1}.content",
        )


async def run_turn(
    parts: TurnParts,
    body: dict[str, Any],
    origin: str,
    info: dict[str, Any] | None = None,
    *,
    agent: str | None = None,
) -> AsyncIterator[Delta | ToolRun | ClientToolCalls | Finished]:
    """Run the turn; `info` (when given) receives ``model`` and ``user_row_id`` as soon
    as they are known. `agent`: the nxc persona the turn runs for — both buffer rows carry
    it (``meta.agent``) and nixx's own tools are not offered (the persona's are the
    client's tools, confined to its workspace by nxc)."""
    tagged = {"agent": agent} if agent else None
    info = info if info is not None else {}
    settings = parts.settings
    recall, episodic, tools = parts.recall, parts.episodic, parts.tools
    messages = [normalise(m) for m in body["messages"]]
    user_text = new_user_text(messages)
    query = latest_user_text(messages)
    leading, history = split_leading_system(messages)
    history_count = sum(1 for m in history if m.get("role") in ("user", "assistant"))
    _check_fits(messages, body, settings.chat_context_length)

    # 1-2. two worker threads side by side: (a) write the user's message (fsync'd
    #    before the LLM is called) and read the intent; (b) the rankers of recall (full
    #    text; the query embedded, buffer-row and summary vectors), then, once (a) has
    #    said which rows the history holds, the fusion that leaves them out and the
    #    prompt, in the same thread (no second hop through the event loop).
    write_result: Future[tuple[int | None, int, str | None]] = Future()

    def write_user() -> tuple[int | None, int, str | None]:
        try:
            row = episodic.record_user(user_text, origin, tagged) if user_text is not None else None
            before = episodic.oldest_in_history(history_count)
            result = (row.id if row else None), before, parts.intent()
        except BaseException as exc:
            with contextlib.suppress(InvalidStateError):
                write_result.set_exception(exc)
            raise
        with contextlib.suppress(InvalidStateError):
            write_result.set_result(result)
        return result

    def recall_prompt() -> RecallContext:
        ranked = recall.search(query)
        user_row_id, before_id, intent = write_result.result()
        exclude = [user_row_id] if user_row_id is not None else []
        return recall.finish(
            ranked, intent=intent, before_id=before_id, exclude_ids=exclude, query=query
        )

    written = asyncio.ensure_future(to_thread.run_sync(write_user))
    recalled = asyncio.ensure_future(to_thread.run_sync(recall_prompt))
    try:
        user_row_id, before_id, intent = await written
    except BaseException:
        # a write cancelled before its thread started never sets the result: the recall
        # thread must not wait for it forever
        with contextlib.suppress(InvalidStateError):
            write_result.set_exception(asyncio.CancelledError())
        recalled.cancel()
        raise
    info["user_row_id"] = user_row_id
    ctx = await recalled
    model = await parts.resolve_model(body.get("model"))
    info["model"] = model
    system = ctx.system_prompt
    extra = [text_of(m.get("content")) for m in leading if text_of(m.get("content")).strip()]
    if extra:
        system = system + "\n\n" + "\n\n".join(extra)
    system_message = {"role": "system", "content": system}

    # 3. trim the history to the budget
    budget = (
        settings.chat_context_length
        - _reserve(body, settings.chat_context_length)
        - estimate_tokens(system_message)
    )
    kept, trimmed = trim_history(history, max(budget, 0))
    convo: list[dict[str, Any]] = [system_message, *kept]

    # 4. tools: the client's, then nixx's own (a client tool shadows a nixx tool)
    client_tools = list(body.get("tools") or [])
    client_names = {
        str((t.get("function") or {}).get("name")) for t in client_tools if isinstance(t, dict)
    }
    nixx_specs: list[dict[str, Any]] = []
    if tools is not None and body.get("tool_choice") != "none" and agent is None:
        nixx_specs = [s for s in tools.specs() if s["function"]["name"] not in client_names]
    passthrough = {k: v for k, v in body.items() if k not in _OWN_KEYS}

    progress = _Progress()
    usage: dict[str, int] = {}
    finish = "stop"
    model_out = model
    failure: str | None = None
    exhausted = False
    refused_calls: list[str] = []
    try:
        for round_no in range(settings.tool_max_rounds + 1):
            last_round = round_no == settings.tool_max_rounds
            offered = client_tools + ([] if last_round else nixx_specs)
            request = {**passthrough, "model": model, "messages": convo}
            # usage arrives in streams only when asked for (OpenAI; llama.cpp, Ollama and
            # vLLM accept the option too); clients' gauges and `usage` need it
            request["stream_options"] = {
                **(body.get("stream_options") or {}),
                "include_usage": True,
            }
            if offered:
                request["tools"] = offered
                if round_no > 0 and request.get("tool_choice") not in (None, "auto", "none"):
                    # a forced call ("required" or one named function) was made in round 0;
                    # forcing it again would loop until the round limit
                    request["tool_choice"] = "auto"
            elif "tool_choice" in request:
                del request["tool_choice"]
            acc = StreamAccumulator()
            separate = bool(progress.parts)
            async for chunk in parts.llm.stream(request):
                text = acc.add(chunk)
                if text:
                    if separate:
                        progress.parts.append("\n\n")
                        yield Delta("\n\n")
                        separate = False
                    progress.parts.append(text)
                    yield Delta(text)
            model_out = acc.model or model_out
            _add_usage(usage, acc.usage)
            calls = acc.tool_calls()
            if not calls:
                finish = acc.finish_reason or "stop"
                break
            # only tools offered in this round run: a call to anything else (tool_choice
            # "none", a disabled tool, an injected name) is answered with an error, never run
            offered_names = {
                str((t.get("function") or {}).get("name")) for t in offered if isinstance(t, dict)
            }
            ours = [c for c in calls if c["function"]["name"] not in client_names]
            theirs = [c for c in calls if c["function"]["name"] in client_names]
            if theirs:
                progress.client_calls = theirs
                yield ClientToolCalls(theirs)
                finish = "tool_calls"
                break
            if last_round or tools is None:
                exhausted = True
                finish = "stop"
                break
            convo.append({"role": "assistant", "content": acc.content or None, "tool_calls": ours})
            for call in ours:
                name, arguments = call["function"]["name"], call["function"]["arguments"]
                if name in offered_names or name not in tools.names():
                    # (the registry refuses unknown and disabled names itself)
                    result = await to_thread.run_sync(tools.execute, name, arguments)
                else:
                    refused_calls.append(name)
                    result = (
                        f"error: the tool {name} was not offered in this request and did not "
                        "run; answer without it"
                    )
                run = ToolRun(call["id"], name, arguments, result)
                progress.tool_runs.append(run)
                yield run
                convo.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    except NixxError as exc:
        failure = exc.message
        raise
    except (asyncio.CancelledError, GeneratorExit):
        failure = "the client went away before the answer was complete"
        raise
    finally:
        # Store what was produced even when the stream broke or we were cancelled: the
        # write runs as its own task, so a cancellation cannot interrupt it.
        meta: dict[str, Any] = {}
        if failure is not None:
            meta = {"incomplete": True, "error": failure}
        if progress.tool_runs:
            meta["tools"] = [{"name": r.name, "arguments": r.arguments} for r in progress.tool_runs]
        if progress.client_calls:
            meta["tool_calls"] = [
                {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                for c in progress.client_calls
            ]
        if exhausted:
            meta["tool_rounds_exhausted"] = True
        if ctx.recalled:
            # what this answer was given from memory (the web page shows it for a past answer)
            meta["recalled"] = ctx.row_meta()
        if refused_calls:
            meta["refused_tool_calls"] = refused_calls
        if tagged:
            meta.update(tagged)
        write = parts.spawn(_record_answer(parts, progress, origin, meta, user_row_id))
        await asyncio.shield(write)

    yield Finished(
        finish_reason=finish,
        model=model_out,
        content=progress.content,
        usage=usage,
        tool_runs=progress.tool_runs,
        client_tool_calls=progress.client_calls,
        recall_info=ctx.answer_info(),
        user_row_id=user_row_id,
        assistant_row_id=progress.assistant_row_id,
        trimmed=trimmed,
    )


async def _record_answer(
    parts: TurnParts,
    progress: _Progress,
    origin: str,
    meta: dict[str, Any],
    user_row_id: int | None,
) -> None:
    content = progress.content
    if content.strip() or meta.get("tool_calls"):
        row = await to_thread.run_sync(parts.episodic.record_assistant, content, origin, meta)
        progress.assistant_row_id = row.id
    if content.strip() or user_row_id is not None:
        parts.after_turn()
