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
3. The history is trimmed newest-first to the context budget (the answer's share: what
   the client asked for, at most half the window). The ``max_tokens`` sent is cut to
   what the prompt leaves of the window (`_clamp`; the routes say so in a header).
4. The backend is called (always streamed, so a cut keeps what was produced). Content
   is yielded as it arrives. Calls to nixx's own tools are run here and fed back, at
   most `tool_max_rounds` rounds; calls to tools the client sent end the turn with
   ``finish_reason="tool_calls"`` so the client runs them. nixx's own tools are offered
   only where they work and are wanted (`_Offer`, ``chat_tools``): by default not beside a
   client's own tools (a coding agent runs its tools behind its own sandbox), nor to a
   backend known to leave tool calls as text (`nixx.llm.facts`); the system message
   mentions them only when they are offered.
5. The answer is written to the buffer (marked ``{"incomplete": true}`` when the stream
   broke or the client went away), then summaries and intent are scheduled in the
   background.

Events: `Delta` (answer text), `Reasoning` (the model's thinking, as a reasoning backend
streams it apart from the answer: shown to the client, never stored — the buffer keeps
what was said, and recall should not bring back a model's scratch work), `ToolRun` (a
nixx tool ran), `ClientToolCalls`, and a final `Finished`. Errors are raised as `NixxError`s; partial answers are stored first.

A turn gets its collaborators (`TurnParts`: the recall, the episodic buffer, the LLM
client, the intent, the tools, ...), built once by `NixxService`; it never sees the
service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from anyio import to_thread

from nixx.errors import BackendError, ContextLengthExceeded, NixxError
from nixx.llm.facts import context_from_error, is_overflow
from nixx.llm.stream import StopWatch, StreamAccumulator
from nixx.memory.episodic import Sender
from nixx.memory.history import (
    CHARS_PER_TOKEN,
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
from nixx.memory.turn_events import (
    ClientToolCalls,
    Delta,
    Finished,
    Reasoning,
    ToolRun,
    TurnEvent,
    TurnInfo,
    TurnInput,
)

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.llm.client import ChatClient
    from nixx.llm.stream import AssistantToolCall, Usage
    from nixx.memory.episodic import Episodic
    from nixx.memory.layout import MemoryTrail
    from nixx.memory.recall import Recall, RecallContext
    from nixx.tools.registry import ToolRegistry
    from nixx.tools.schema import ToolSpec

log = logging.getLogger(__name__)

# Request keys nixx sets itself; everything else the client sent goes to the backend.
_OWN_KEYS = {"messages", "model", "stream", "tools", "n"}
@dataclass(frozen=True)
class TurnParts:
    """What a turn works with; `NixxService` builds it once."""

    settings: Settings
    recall: Recall
    episodic: Episodic
    llm: ChatClient
    tools: ToolRegistry | None  # nixx's own tools (None: none offered)
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
    """What the backend's rounds have produced so far (step 4), recorded in step 5."""

    model: str
    parts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_runs: list[ToolRun] = field(default_factory=list)
    client_calls: list[AssistantToolCall] = field(default_factory=list)
    refused_calls: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    # nixx's estimate of each round the backend sent no counts for (`_turn_usage`)
    uncounted: list[dict[str, int]] = field(default_factory=list)
    finish: str = "stop"
    stop_sequence: str | None = None
    exhausted: bool = False  # the tool rounds ran out
    failure: str | None = None
    assistant_row_id: int | None = None
    clamped: int | None = None  # the answer's max_tokens cut to what fits (`_clamp`)

    @property
    def content(self) -> str:
        return "".join(self.parts)

    def said(self, text: str, separate: bool) -> list[str]:
        """Record `text` of the answer; the pieces to send (a round's text after an
        earlier round's is set apart by a blank line)."""
        if not text:
            return []
        pieces = ["\n\n", text] if separate else [text]
        self.parts.extend(pieces)
        return pieces


@dataclass(frozen=True)
class _Request:
    """The client's request as the turn reads it."""

    body: dict[str, Any]
    messages: list[dict[str, Any]]
    leading: list[dict[str, Any]]  # the system/developer messages the client put first
    history: list[dict[str, Any]]
    user_text: str | None  # what is written to the buffer (None: no new user message)
    query: str | None  # what recall searches with
    sender: Sender  # who sent it: origin, the client's own name, the nxc persona

    @classmethod
    def read(
        cls, body: dict[str, Any], sender: Sender, remembered: Callable[[str], str] | None
    ) -> _Request:
        messages = [normalise(m) for m in body["messages"]]
        user_text, query = new_user_text(messages), latest_user_text(messages)
        if remembered is not None:
            user_text, query = _kept(user_text, remembered), _kept(query, remembered)
        leading, history = split_leading_system(messages)
        return cls(body, messages, leading, history, user_text, query, sender)


@dataclass(frozen=True)
class _Offer:
    """The tools a round may offer: the client's, then nixx's own (a client tool shadows
    a nixx tool of its name), and the request keys passed through to the backend.

    nixx's own are offered (``chat_tools``) never with ``tool_choice: "none"`` or for an
    nxc persona (its tools are the client's, confined by nxc); with ``off`` never; with
    ``on`` always; with ``auto`` only when the client sent no tools of its own — a coding
    agent (Codex CLI, Claude Code) runs its tools behind its sandbox and permission
    prompts, and nixx's would run inside nixx, past both (issue 39) — and the backend is
    not known to leave a tool call as text (llama-cpp-python, issue 38: every answer came
    back as a call written out)."""

    client: list[dict[str, Any]]
    client_names: set[str]
    nixx: list[ToolSpec]
    passthrough: dict[str, Any]

    @classmethod
    async def of(
        cls, parts: TurnParts, body: dict[str, Any], agent: str | None, model: str
    ) -> _Offer:
        client = list(body.get("tools") or [])
        names = {_tool_name(t) for t in client if isinstance(t, dict)}
        nixx: list[ToolSpec] = []
        if parts.tools is not None and await _offers_own_tools(parts, body, agent, model):
            nixx = [s for s in parts.tools.specs() if s["function"]["name"] not in names]
        return cls(client, names, nixx, {k: v for k, v in body.items() if k not in _OWN_KEYS})


async def _offers_own_tools(
    parts: TurnParts, body: dict[str, Any], agent: str | None, model: str
) -> bool:
    """Whether this request gets nixx's own tools (`_Offer`); the backend is asked what it
    says of itself (once per model, kept: `nixx.llm.facts`) only when that decides it."""
    setting = parts.settings.chat_tools
    if setting == "off" or body.get("tool_choice") == "none" or agent is not None:
        return False
    if setting == "on":
        return True
    if body.get("tools"):
        return False
    return (await parts.llm.facts(model)).tool_calls is not False


@dataclass
class _Context:
    """The model's context length in tokens and where that came from (a refusal that
    names a smaller one replaces it)."""

    length: int
    source: str


def _tool_name(tool: Any) -> str:
    return str((tool.get("function") or {}).get("name"))


def _add_usage(total: dict[str, int], usage: Mapping[str, object] | None) -> None:
    """Add one round's token counts to the turn's; ``cached_tokens`` is the backend's
    ``prompt_tokens_details.cached_tokens`` (the prompt's tokens its cache held),
    ``reasoning_tokens`` its ``completion_tokens_details.reasoning_tokens`` (the output's
    tokens of thinking)."""
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = (usage or {}).get(key)
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value
    for part, key in (("prompt_tokens_details", "cached_tokens"),
                      ("completion_tokens_details", "reasoning_tokens")):
        details = (usage or {}).get(part)
        value = details.get(key) if isinstance(details, dict) else None
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


def _estimated_usage(
    convo: list[dict[str, Any]], tools: list[Any], content: str
) -> dict[str, int]:
    """nixx's own counts (characters / 4, as its context budget counts) for a backend that
    reported none, marked ``estimated``: clients read ``usage`` on every answer (``llm``
    fails without it, Codex showed "tokens used 0")."""
    prompt = sum(estimate_tokens(m) for m in convo)
    prompt += len(json.dumps(tools)) // 4 if tools else 0
    completion = len(content) // 4 + (1 if content else 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "estimated": 1}


def _count_round(
    progress: _Progress, usage: Usage | None, convo: list[dict[str, Any]],
    offered: list[Any], said: str, calls: list[AssistantToolCall],
) -> None:
    """One round's token counts: the backend's `usage`, else nixx's estimate of the round
    (its prompt, what it `said` and the `calls` it made), kept apart (`_turn_usage`)."""
    _add_usage(progress.usage, usage)
    if usage is None:
        produced = said + (json.dumps(calls) if calls else "")
        progress.uncounted.append(_estimated_usage(convo, offered, produced))


def _turn_usage(progress: _Progress, convo: list[dict[str, Any]], offer: _Offer) -> dict[str, int]:
    """The turn's usage: the backend's counts of its rounds; nixx's estimate of the whole
    turn when it counted none; and when it counted some rounds but not others (a round
    nixx cut at a stop string ends before the backend's usage chunk), its counts plus
    nixx's estimate of the rounds it did not count, marked ``estimated``."""
    if not progress.usage:
        return _estimated_usage(convo, [*offer.client, *offer.nixx], progress.content)
    if not progress.uncounted:
        return progress.usage
    total = dict(progress.usage)
    for guess in progress.uncounted:
        _add_usage(total, guess)
    return {**total, "estimated": 1}


def _kept(text: str | None, remembered: Callable[[str], str]) -> str | None:
    if text is None:
        return None
    kept = remembered(text)
    return kept if kept.strip() else text


def _asked(body: dict[str, Any]) -> int | None:
    """The answer's length the client asked for (``max_completion_tokens``, else
    ``max_tokens``; the dialects translate theirs to ``max_tokens``)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _least(body: dict[str, Any], context_length: int) -> int:
    """The answer's share when nothing is asked, and the least a message must leave."""
    return min(_asked(body) or 1024, 1024, context_length // 4)


def _reserve(body: dict[str, Any], context_length: int) -> int:
    """The answer's share of the context while the history is fitted: what the client
    asked for, but at most half the window — coding agents ask for 32,000 or 128,000
    tokens whatever the model, and the answer then gets what the sent prompt leaves
    (`_clamp`) — else min(1024, a quarter of the window)."""
    asked = _asked(body)
    return min(asked, context_length // 2) if asked else _least(body, context_length)


def _check_fits(request: _Request, body: dict[str, Any], context_length: int) -> None:
    """Refuse, before anything is stored or sent, what trimming cannot make fit: the
    client's leading system text (``system``, ``instructions``, system and developer
    messages) and the last message are kept whole, so when they alone leave less than the
    answer's least share of the context window they would go to the backend whole (a 10
    MiB message did, to an 8,192-token model; a 15 MiB ``instructions`` too), and the
    message be stored, indexed, embedded and summarised on the way. A large
    ``max_tokens`` is never the cause: it is cut to what fits (`_clamp`)."""
    messages = request.messages
    if not messages:
        return
    least = _least(body, context_length)
    room = max(context_length - least, 0)
    system = sum(estimate_tokens(m) for m in request.leading)
    last = estimate_tokens(messages[-1]) if messages[-1] not in request.leading else 0
    if system + last <= room:
        return
    window = (f"the backend's context window is {context_length} tokens "
              f"(NIXX_CHAT_CONTEXT_LENGTH) and at least {least} of them are kept for the "
              f"answer, so")
    cure = ("set NIXX_CHAT_CONTEXT_LENGTH to the backend's real window if it is larger (a "
            "larger max_tokens, or Claude Code's CLAUDE_CODE_MAX_OUTPUT_TOKENS, is cut to "
            "what fits and is not the cause)")
    if system > room // 2:
        raise ContextLengthExceeded(
            f"the system instructions (system, instructions, system or developer messages) "
            f"are about {system} tokens and, with the last message's {last}, do not fit: "
            f"{window} instructions and the last message may take {room} together. Send "
            f"shorter instructions, or {cure}",
            param="system",
        )
    raise ContextLengthExceeded(
        f"the last message is about {last} tokens and does not fit: {window} a message may "
        f"take {room - system}{' beside the system instructions' if system else ''}. Send a "
        f"shorter message, or {cure}",
        param=f"messages.{len(messages) - 1}.content",
    )


def _schema_tokens(tools: Any) -> int:
    """nixx's estimate of the tokens the tools' schemas take in a request."""
    return len(json.dumps(tools or [])) // CHARS_PER_TOKEN


def _clamp(sent: dict[str, Any], context: _Context, progress: _Progress) -> None:
    """Cut the answer's ``max_tokens`` (``max_completion_tokens``) in `sent` to what the
    context leaves after the prompt and tools sent, as gateways do: a backend refuses, or
    stops at its window, a request whose prompt and answer pass it. `progress.clamped`
    says what was sent (the routes answer it as ``x-nixx-max-tokens-clamped``). When the
    prompt alone (by nixx's estimate) leaves less than the answer's least share, that
    share is sent and the backend decides: nixx's figure for the window may be low."""
    asked = _asked(sent)
    if asked is None:
        return
    used = sum(estimate_tokens(m) for m in sent["messages"])
    used += _schema_tokens(sent.get("tools"))
    room = context.length - used
    if asked <= room:
        return
    least = _least(sent, context.length)
    given = max(room, least)
    if given >= asked:
        return
    if room < least:
        log.warning("the prompt and tools sent are ~%d tokens of a %d-token context (%s): "
                    "the answer is given %d", used, context.length, context.source, given)
    if progress.clamped != given:
        log.info("max_tokens %d asked, %d sent: the context (%d tokens, %s) leaves no more "
                 "after the ~%d-token prompt", asked, given, context.length, context.source,
                 used)
    for key in ("max_completion_tokens", "max_tokens"):
        if key in sent:
            sent[key] = given
    progress.clamped = given


async def run_turn(
    parts: TurnParts, given: TurnInput, sender: Sender, info: TurnInfo | None = None
) -> AsyncGenerator[TurnEvent, None]:
    """Run the turn `given` by a dialect; `info` (when given) receives ``model`` and
    ``user_row_id`` as soon as they are known. `sender`: who sent the turn — its origin
    is the rows' column, its client name and nxc persona are in both rows' meta
    (``meta.client``, ``meta.agent``), and a persona is offered no nixx tools (the
    persona's are the client's tools, confined to its workspace by nxc). The five steps
    are the module's docstring's."""
    info = info if info is not None else {}
    body, answer_meta = given.body, given.answer_meta
    request = _Request.read(body, sender, given.remembered)
    _check_fits(request, body, parts.settings.chat_context_length)
    # 1. the user's message written, beside recall's rankers
    user_row_id, ctx = await _write_and_recall(parts, request, sender.origin, info)
    model = await parts.resolve_model(body.get("model"))
    info["model"] = model
    # 2. the prompt's memory placed (the prompt layout), the tools named when offered
    offer = await _Offer.of(parts, body, sender.agent, model)
    prompt = _Prompt.lay_out(parts, request, ctx, tools=bool(offer.nixx))
    # 3. the history trimmed to the context (again after a refusal that names a smaller one)
    context = _Context(*await parts.context_length(model))
    convo = prompt.fit(context.length, _schema_tokens([*offer.client, *offer.nixx]))
    # 4. the backend called, round after round of tools
    progress = _Progress(model)
    rounds = _call_backend(parts, request, offer, prompt, convo, context, progress)
    try:
        async for event in rounds:
            if progress.clamped is not None:
                info["max_tokens_clamped"] = progress.clamped
            yield event
    except NixxError as exc:
        progress.failure = exc.message
        log.warning("turn failed (%s): %s", sender.client or sender.origin, exc.message)
        raise
    except (asyncio.CancelledError, GeneratorExit):
        progress.failure = "the client went away before the answer was complete"
        raise
    finally:
        await rounds.aclose()
        # 5. what was produced stored, even when the stream broke or we were cancelled:
        #    the write runs as its own task, so a cancellation cannot interrupt it
        meta = _answer_meta(progress, ctx, request.sender.tags(), answer_meta)
        write = parts.spawn(_record_answer(parts, progress, sender.origin, meta, user_row_id))
        await asyncio.shield(write)
    yield Finished(
        finish_reason=progress.finish,
        model=progress.model,
        content=progress.content,
        usage=_turn_usage(progress, convo, offer),
        tool_runs=progress.tool_runs,
        client_tool_calls=progress.client_calls,
        recall_info=ctx.answer_info(),
        user_row_id=user_row_id,
        assistant_row_id=progress.assistant_row_id,
        trimmed=prompt.trimmed,
        reasoning="".join(progress.reasoning),
        stop_sequence=progress.stop_sequence,
    )


async def _write_and_recall(
    parts: TurnParts, request: _Request, origin: str, info: TurnInfo
) -> tuple[int | None, RecallContext]:
    """Step 1-2's threads, side by side: (a) write the user's message (fsync'd before
    the LLM is called) and read the intent; (b) the rankers of recall (full text; the
    query embedded, buffer-row and summary vectors), then, once (a) has said which rows
    the history holds, the fusion that leaves them out and the prompt, in the same
    thread (no second hop through the event loop)."""
    episodic, recall = parts.episodic, parts.recall
    history_count = sum(1 for m in request.history if m.get("role") in ("user", "assistant"))
    write_result: Future[tuple[int | None, int, str | None]] = Future()

    def write_user() -> tuple[int | None, int, str | None]:
        try:
            row = (episodic.record_user(request.user_text, origin, request.sender.tags())
                   if request.user_text is not None else None)
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
        ranked = recall.search(request.query)
        user_row_id, before_id, intent = write_result.result()
        exclude = [user_row_id] if user_row_id is not None else []
        return recall.finish(
            ranked, intent=intent, before_id=before_id, exclude_ids=exclude, query=request.query
        )

    written = asyncio.ensure_future(to_thread.run_sync(write_user))
    recalled = asyncio.ensure_future(to_thread.run_sync(recall_prompt))
    try:
        user_row_id, _before, _intent = await written
    except BaseException:
        # a write cancelled before its thread started never sets the result: the recall
        # thread must not wait for it forever
        with contextlib.suppress(InvalidStateError):
            write_result.set_exception(asyncio.CancelledError())
        recalled.cancel()
        raise
    info["user_row_id"] = user_row_id
    return user_row_id, await recalled


class _Prompt:
    """Steps 2 and 3: the system message (recall's prompt, then what the client put
    first), the memory where the prompt layout puts it (`nixx.memory.layout`), and the
    history trimmed newest-first to the context budget (the memory counts against it)."""

    def __init__(self, parts: TurnParts, request: _Request, ctx: RecallContext,
                 system: str) -> None:
        self.trail = parts.trail
        self.body = request.body
        self.ctx = ctx
        self.system = system
        self.leading = request.leading
        self.history = request.history
        self.keys: list[bytes] = []
        self.carried: list[str] = []
        self.trimmed = 0

    @classmethod
    def lay_out(
        cls, parts: TurnParts, request: _Request, ctx: RecallContext, *, tools: bool
    ) -> _Prompt:
        system = ctx.system_message(tools)
        extra = [text_of(m.get("content")) for m in request.leading
                 if text_of(m.get("content")).strip()]
        if extra:
            system = system + "\n\n" + "\n\n".join(extra)
        prompt = cls(parts, request, ctx, system)
        if ctx.layout == "cache" and prompt.trail is not None:
            prompt.keys = prompt.trail.keys(request.leading, request.history)
            prompt.history, prompt.carried = prompt.trail.carry(request.history, prompt.keys)
        return prompt

    def fit(self, length: int, tools: int = 0) -> list[dict[str, Any]]:
        """The messages sent for a context of `length` tokens, `tools` of them the tools'
        schemas (`trimmed`: how many of the history's were left out); the memory given is
        remembered for the next turns. The latest user message — the turn's task — is
        never trimmed away from the tool calls and results after it (a tool's result
        without its question is no request), and the answer's share shrinks to its least
        before the task would go."""
        ctx = self.ctx
        system_message = {"role": "system", "content": self.system}
        fixed = (tools + estimate_tokens(system_message)
                 + estimate_tokens({"content": memory_text(ctx.memory_block)}))
        last_user = max((i for i, m in enumerate(self.history) if m.get("role") == "user"),
                        default=None)
        task = sum(estimate_tokens(m) for m in self.history[last_user or 0:])
        reserve = _reserve(self.body, length)
        if length - reserve - fixed < task:
            reserve = _least(self.body, length)
        kept, self.trimmed = trim_history(self.history, max(length - reserve - fixed, 0))
        if last_user is not None and self.trimmed > last_user:
            kept, self.trimmed = list(self.history[last_user:]), last_user
        memory = ""
        if ctx.memory_block:
            kept_text = "\n".join(text_of(m.get("content")) for m in kept)
            still = [c for c in self.carried if c in kept_text]
            intent_now, items = dedupe(ctx.intent, ctx.recalled, still)
            memory = memory_text(build_memory_block(intent_now, items))
        if memory and not any(m.get("role") == "user" for m in kept):
            # no user message to carry it: the system message does, as in `system`
            system_message["content"] = f"{self.system}\n\n{ctx.memory_block}"
            memory = ""
        if memory and self.keys and self.trail is not None:
            last_user = max(i for i, m in enumerate(self.history) if m.get("role") == "user")
            self.trail.remember(self.keys[last_user], memory)
        return [system_message, *place_memory(kept, memory)]


def _round_request(
    request: _Request, offer: _Offer, model: str, convo: list[dict[str, Any]],
    offered: list[Any], round_no: int,
) -> dict[str, Any]:
    """What one round sends the backend."""
    out = {**offer.passthrough, "model": model, "messages": convo}
    out.pop("stop", None)  # nixx finds the stop strings itself (`nixx.llm.stream.StopWatch`)
    # usage arrives in streams only when asked for (OpenAI; llama.cpp, Ollama and vLLM
    # accept the option too); clients' gauges and `usage` need it
    out["stream_options"] = {**(request.body.get("stream_options") or {}), "include_usage": True}
    if offered:
        out["tools"] = offered
        if round_no > 0 and out.get("tool_choice") not in (None, "auto", "none"):
            # a forced call ("required" or one named function) was made in round 0;
            # forcing it again would loop until the round limit
            out["tool_choice"] = "auto"
    elif "tool_choice" in out:
        del out["tool_choice"]
    return out


async def _call_backend(
    parts: TurnParts, request: _Request, offer: _Offer, prompt: _Prompt,
    convo: list[dict[str, Any]], context: _Context, progress: _Progress,
) -> AsyncGenerator[Delta | Reasoning | ToolRun | ClientToolCalls, None]:
    """Step 4: the backend called, always streamed (a cut keeps what was produced), the
    user's turn first (nixx's own calls wait, or are stopped: `nixx.llm.gate`). Calls to
    nixx's own tools run here and are fed back, at most `tool_max_rounds` rounds; a call
    to a tool the client sent ends the turn (``finish_reason="tool_calls"``)."""
    model = progress.model
    max_rounds = parts.settings.tool_max_rounds
    round_no, retried = 0, False
    async with parts.llm.gate.user_turn():
        while round_no <= max_rounds:
            last_round = round_no == max_rounds
            offered = offer.client + ([] if last_round else list(offer.nixx))
            acc, watch = StreamAccumulator(), StopWatch(request.body.get("stop"))
            separate, before = bool(progress.parts), len(progress.content)
            sent = _round_request(request, offer, model, convo, offered, round_no)
            _clamp(sent, context, progress)
            chunks = parts.llm.stream(sent)
            try:
                async for chunk in chunks:
                    text = watch.feed(acc.add(chunk))
                    thought = acc.take_reasoning()
                    if thought:
                        progress.reasoning.append(thought)
                        yield Reasoning(thought)
                    for piece in progress.said(text, separate):
                        separate = False
                        yield Delta(piece)
                    if watch.matched:
                        break  # a stop string: the backend's stream is closed below
                else:
                    for piece in progress.said(watch.flush(), separate):
                        yield Delta(piece)
            except BackendError as exc:
                if round_no > 0 or progress.parts or acc.parts or acc.reasoning:
                    raise
                named = _context_refused(exc, context.length)
                if named is None or retried:
                    raise _explained(exc, sent, context.length, context.source) from None
                # the backend named its context: trimmed to it, the turn is sent again
                parts.llm.learn_context(model, named, "the backend's refusal")
                retried = True
                context.length, context.source = named, "the backend's refusal"
                convo = prompt.fit(context.length, _schema_tokens(offered))
                continue
            finally:
                await chunks.aclose()
            round_no += 1
            progress.model = acc.model or progress.model
            calls = acc.tool_calls()
            _count_round(progress, acc.usage, convo, offered, progress.content[before:], calls)
            if not calls:
                progress.finish = "stop" if watch.matched else acc.finish_reason or "stop"
                progress.stop_sequence = watch.matched
                if round_no == 1:
                    # what the backend's cache should hold for the next turn (`nixx.llm.slot`):
                    # the answer as shown (cut at a stop string), which the next turn sends
                    parts.llm.keep_prefix(sent, progress.content,
                                          budget=parts.settings.background_timeout,
                                          resend=parts.settings.chat_keep_prefix)
                break
            theirs = [c for c in calls if c["function"]["name"] in offer.client_names]
            if theirs:
                progress.client_calls = theirs
                yield ClientToolCalls(theirs)
                progress.finish = "tool_calls"
                break
            if last_round or parts.tools is None:
                progress.exhausted, progress.finish = True, "stop"
                break
            convo.append({"role": "assistant", "content": acc.content or None, "tool_calls": calls})
            offered_names = {_tool_name(t) for t in offered if isinstance(t, dict)}
            for call in calls:
                run = await _run_tool(parts.tools, call, offered_names, progress)
                yield run
                convo.append({"role": "tool", "tool_call_id": run.id, "content": run.result})
    if not progress.content.strip() and not progress.client_calls and not progress.exhausted:
        # an answer with nothing in it is no answer: never reported as a success
        raise BackendError(
            f"the LLM backend answered an empty message (finish_reason {progress.finish!r}); "
            "nothing was stored as the answer — send the message again",
            code="empty_answer",
        )


async def _run_tool(
    tools: ToolRegistry, call: AssistantToolCall, offered_names: set[str], progress: _Progress
) -> ToolRun:
    """Run one of nixx's own tool calls. Only tools offered in this round run: a call to
    anything else (tool_choice "none", a disabled tool, an injected name) is answered
    with an error, never run."""
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    if name in offered_names or name not in tools.names():
        # (the registry refuses unknown and disabled names itself)
        result = await to_thread.run_sync(tools.execute, name, arguments)
    else:
        progress.refused_calls.append(name)
        result = (
            f"error: the tool {name} was not offered in this request and did not "
            "run; answer without it"
        )
    run = ToolRun(call["id"], name, arguments, result)
    progress.tool_runs.append(run)
    return run


def _answer_meta(
    progress: _Progress, ctx: RecallContext, tagged: dict[str, Any] | None,
    answer_meta: dict[str, Any] | None,
) -> dict[str, Any]:
    """Step 5: the answer row's `meta` — how it ended, the tools it ran or asked for,
    what it was given from memory (the web page shows it for a past answer)."""
    meta: dict[str, Any] = {}
    if progress.failure is not None:
        meta = {"incomplete": True, "error": progress.failure}
    if progress.tool_runs:
        meta["tools"] = [{"name": r.name, "arguments": r.arguments} for r in progress.tool_runs]
    if progress.client_calls:
        meta["tool_calls"] = [
            {"id": c.get("id"), "name": c["function"]["name"],
             "arguments": c["function"]["arguments"]}
            for c in progress.client_calls
        ]
    if progress.exhausted:
        meta["tool_rounds_exhausted"] = True
    if ctx.recalled:
        meta["recalled"] = ctx.row_meta()
    if progress.refused_calls:
        meta["refused_tool_calls"] = progress.refused_calls
    if tagged:
        meta.update(tagged)
    if answer_meta:
        meta.update(answer_meta)
    return meta


def _context_refused(exc: BackendError, length: int) -> int | None:
    """The context length a refusal names, when it is smaller than the one the request
    was trimmed to (then the turn can be sent again, trimmed to it)."""
    if not is_overflow(exc.message):
        return None
    named = context_from_error(exc.message)
    return named if named is not None and named < length else None


def _explained(
    exc: BackendError, sent: dict[str, Any], length: int, source: str
) -> NixxError:
    """`exc`, saying so when the request was likely longer than the model's context: a
    refusal for the length (then a `ContextLengthExceeded`, 400: no retry fixes it), or
    nothing at all back from a request that filled most of the context (llama-cpp-python
    answers such a stream with an empty 200). The request's size counts its tools'
    schemas (a coding agent's are thousands of tokens), and the advice follows from it:
    a request larger than the window nixx assumes needs a larger one; one within it was
    refused by a model whose window is smaller than nixx assumes."""
    tools = _schema_tokens(sent.get("tools"))
    tokens = sum(estimate_tokens(m) for m in sent["messages"]) + tools
    overflow = is_overflow(exc.message)
    if not overflow and not (exc.details.get("code") == "stream_interrupted"
                             and tokens >= length // 2):
        return exc
    how = "refused it as too long" if overflow else "answered nothing"
    of_tools = f", ~{tools} of them the tools' schemas" if tools else ""
    if tokens > length:
        # first what to do: a client may show only the start of the message
        message = (f"the request is ~{tokens} tokens{of_tools}: more than the model's context "
                   f"of {length} tokens ({source}). Start the backend with a larger context "
                   "and set NIXX_CHAT_CONTEXT_LENGTH (chat_context_length) to it (a coding agent "
                   "needs ~32,768; Claude Code's output share is CLAUDE_CODE_MAX_OUTPUT_TOKENS), "
                   f"or send fewer tools or less history. The backend {how}: {exc.message}")
    else:
        message = (f"the request is ~{tokens} tokens{of_tools} and the backend {how}; nixx "
                   f"takes the model's context length to be {length} tokens ({source}). If "
                   "the model's context is smaller, set NIXX_CHAT_CONTEXT_LENGTH "
                   "(chat_context_length) to it; the history is then trimmed to fit. The "
                   f"backend: {exc.message}")
    if overflow:
        return ContextLengthExceeded(message, param="messages")
    return BackendError(message, **exc.details)


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
