"""One chat turn, from the client's OpenAI request to the events a shell renders.

1. The turn's new user message (the last message, when it is a user message) is written
   to the buffer — once, before the backend is called — while, in a second worker
   thread, recall's rankers run on the latest user message (full text over the buffer,
   vectors over buffer rows and summaries: `nixx.memory.recall.Recall.search`).
2. The prompt's memory is built (`nixx.memory.recall`): current intent, recalled
   excerpts and summaries from outside the history the client sent, above the floor and
   within the token budget. Where it goes is the prompt layout (``prompt_layout``):
   ``cache`` (default) adds it to the latest user message, after its text
   (`place_memory`), so the request begins with what the previous one sent and a
   backend's prefix cache keeps it; ``system`` puts it in the system message after the
   base prompt, as the seed did. System/developer messages the client put first are
   appended to the system message, so the backend gets exactly one leading system message.
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
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from anyio import to_thread

from nixx.errors import BackendError, ContextLengthExceeded, NixxError
from nixx.llm.facts import context_from_error, is_overflow
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
from nixx.memory.layout import dedupe, memory_text, place_memory
from nixx.memory.recall import build_memory_block

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.llm.client import ChatClient
    from nixx.memory.episodic import Episodic
    from nixx.memory.layout import MemoryTrail
    from nixx.memory.recall import Recall, RecallContext

log = logging.getLogger(__name__)

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
    # (the model's context length in tokens, where that came from), for a model
    context_length: Callable[[str], Awaitable[tuple[int, str]]]
    # the `cache` prompt layout: the memory added to each user message sent (`layout`)
    trail: MemoryTrail | None = None


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


def _kept(text: str | None, remembered: Callable[[str], str]) -> str | None:
    if text is None:
        return None
    kept = remembered(text)
    return kept if kept.strip() else text


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
    answer_meta: dict[str, Any] | None = None,
    remembered: Callable[[str], str] | None = None,
) -> AsyncIterator[Delta | ToolRun | ClientToolCalls | Finished]:
    """Run the turn; `info` (when given) receives ``model`` and ``user_row_id`` as soon
    as they are known. `agent`: the nxc persona the turn runs for — both buffer rows carry
    it (``meta.agent``) and nixx's own tools are not offered (the persona's are the
    client's tools, confined to its workspace by nxc). `answer_meta`: more keys for the
    answer's row (a dialect's own record, e.g. the Responses API's ``response``).
    `remembered`: what of the user's text is written to the buffer and recalled against
    (a dialect drops its client's harness text; the backend still gets all of it; text
    it would leave empty is kept whole)."""
    tagged = {"agent": agent} if agent else None
    info = info if info is not None else {}
    settings = parts.settings
    recall, episodic, tools = parts.recall, parts.episodic, parts.tools
    messages = [normalise(m) for m in body["messages"]]
    user_text = new_user_text(messages)
    query = latest_user_text(messages)
    if remembered is not None:
        user_text = _kept(user_text, remembered)
        query = _kept(query, remembered)
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

    # 3. the prompt layout (`nixx.memory.layout`), then the history trimmed to the budget
    #    (the memory counts against it): the model's context as the backend says, else
    #    the setting
    context_length, context_source = await parts.context_length(model)
    keys: list[bytes] = []
    carried: list[str] = []
    if ctx.layout == "cache" and parts.trail is not None:
        keys = parts.trail.keys(leading, history)
        history, carried = parts.trail.carry(history, keys)

    def build(length: int) -> tuple[list[dict[str, Any]], int, str]:
        system_message = {"role": "system", "content": system}
        budget = (
            length
            - _reserve(body, length)
            - estimate_tokens(system_message)
            - estimate_tokens({"content": memory_text(ctx.memory_block)})
        )
        kept, trimmed = trim_history(history, max(budget, 0))
        memory = ""
        if ctx.memory_block:
            kept_text = "\n".join(text_of(m.get("content")) for m in kept)
            still = [c for c in carried if c in kept_text]
            intent_now, items = dedupe(ctx.intent, ctx.recalled, still)
            memory = memory_text(build_memory_block(intent_now, items))
        if memory and not any(m.get("role") == "user" for m in kept):
            # no user message to carry it: the system message does, as in `system`
            system_message["content"] = f"{system}\n\n{ctx.memory_block}"
            memory = ""
        return [system_message, *place_memory(kept, memory)], trimmed, memory

    def remember(memory: str) -> None:
        """The memory this request gave its latest user message, for the next requests."""
        if memory and keys:
            last_user = max(i for i, m in enumerate(history) if m.get("role") == "user")
            parts.trail.remember(keys[last_user], memory)  # type: ignore[union-attr]

    convo, trimmed, memory = build(context_length)
    remember(memory)

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
    gate = contextlib.AsyncExitStack()
    usage: dict[str, int] = {}
    finish = "stop"
    model_out = model
    failure: str | None = None
    exhausted = False
    refused_calls: list[str] = []
    try:
        # the user comes first: nixx's own calls wait, or are stopped (`nixx.llm.gate`)
        await gate.enter_async_context(parts.llm.gate.user_turn())
        round_no = 0
        retried = False
        while round_no <= settings.tool_max_rounds:
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
            try:
                async for chunk in parts.llm.stream(request):
                    text = acc.add(chunk)
                    if text:
                        if separate:
                            progress.parts.append("\n\n")
                            yield Delta("\n\n")
                            separate = False
                        progress.parts.append(text)
                        yield Delta(text)
            except BackendError as exc:
                if round_no > 0 or progress.parts or acc.parts:
                    raise
                named = _context_refused(exc, context_length)
                if named is not None and not retried:
                    # the backend named its context: trimmed to it, the turn is sent again
                    parts.llm.learn_context(model, named, "the backend's refusal")
                    retried = True
                    context_length, context_source = named, "the backend's refusal"
                    convo, trimmed, memory = build(context_length)
                    remember(memory)
                    continue
                raise _explained(exc, convo, context_length, context_source) from None
            round_no += 1
            model_out = acc.model or model_out
            _add_usage(usage, acc.usage)
            calls = acc.tool_calls()
            if not calls:
                finish = acc.finish_reason or "stop"
                if round_no == 1 and settings.chat_keep_prefix:
                    # what the backend's cache should hold for the next turn (`nixx.llm.gate`)
                    parts.llm.keep_prefix(request, acc.content,
                                          budget=settings.background_timeout)
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
        if not progress.content.strip() and not progress.client_calls and not exhausted:
            # an answer with nothing in it is no answer: never reported as a success
            raise BackendError(
                f"the LLM backend answered an empty message (finish_reason {finish!r}); "
                "nothing was stored as the answer — send the message again",
                code="empty_answer",
            )
    except NixxError as exc:
        failure = exc.message
        log.warning("turn failed (%s): %s", origin, exc.message)
        raise
    except (asyncio.CancelledError, GeneratorExit):
        failure = "the client went away before the answer was complete"
        raise
    finally:
        await gate.aclose()
        # Store what was produced even when the stream broke or we were cancelled: the
        # write runs as its own task, so a cancellation cannot interrupt it.
        meta: dict[str, Any] = {}
        if failure is not None:
            meta = {"incomplete": True, "error": failure}
        if progress.tool_runs:
            meta["tools"] = [{"name": r.name, "arguments": r.arguments} for r in progress.tool_runs]
        if progress.client_calls:
            meta["tool_calls"] = [
                {"id": c.get("id"), "name": c["function"]["name"],
                 "arguments": c["function"]["arguments"]}
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
        if answer_meta:
            meta.update(answer_meta)
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


def _context_refused(exc: BackendError, length: int) -> int | None:
    """The context length a refusal names, when it is smaller than the one the request
    was trimmed to (then the turn can be sent again, trimmed to it)."""
    if not is_overflow(exc.message):
        return None
    named = context_from_error(exc.message)
    return named if named is not None and named < length else None


def _explained(
    exc: BackendError, convo: list[dict[str, Any]], length: int, source: str
) -> BackendError:
    """`exc`, saying so when the request was likely longer than the model's context: a
    refusal for the length, or nothing at all back from a request that filled most of
    the context (llama-cpp-python answers such a stream with an empty 200)."""
    tokens = sum(estimate_tokens(m) for m in convo)
    overflow = is_overflow(exc.message)
    if not overflow and not (exc.details.get("code") == "stream_interrupted"
                             and tokens >= length // 2):
        return exc
    how = "the backend refused it as too long" if overflow else "the backend answered nothing"
    details = {**exc.details, "code": "context_length_exceeded" if overflow
               else exc.details.get("code")}
    return BackendError(
        f"{exc.message} — the request was ~{tokens} tokens and {how}: nixx takes the "
        f"model's context length to be {length} tokens ({source}). If the model's context "
        "is smaller, set chat_context_length (NIXX_CHAT_CONTEXT_LENGTH) to it; the history "
        "is then trimmed to fit",
        **details,
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
