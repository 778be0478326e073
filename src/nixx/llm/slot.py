"""The backend's one slot: what it holds, and how nixx's own calls get their prompt into it.

A local server with one slot (llama.cpp ``-np 1``, llama-cpp-python, Ollama with one
request at a time) keeps one evaluated prompt: a request is evaluated only from where it
differs from the one before (its prefix cache). It cannot stop a prompt it has begun to
evaluate; it can stop generating (its stream closed, or llama-cpp-python's
``interrupt_requests`` when another request waits). So, there, nixx's own calls (a
summary, the intent, a source's summary) are laid out so that they cost only their own
tokens and never the user's conversation:

- **A continuation of the conversation** (`Slot.continuation`): the latest user turn's
  request with its answer (`Slot.conversation`), then the call's instructions and material
  as one more user message behind `TASK_NOTE`. The backend evaluates only the task; the
  user's next request begins with the same messages, so it still finds them cached and
  nothing has to be sent again. A call that would not fit the context that way is sent on
  its own, as elsewhere (and the conversation is sent again after it: `nixx.llm.gate`).
- **In slices** (`slices`): before the call, requests for one token that each add at most
  `SliceSize.chars` characters to what the backend holds, sized from what the backend was
  seen to evaluate in a second (`SliceSize.observe`, aiming at `SLICE_SECONDS`). A user's
  turn that comes meanwhile waits for one slice at most, never for a whole prompt the
  server cannot stop; and what the slices of a conversation evaluated stays evaluated.

`Slot.held` is what nixx last sent the backend (with the answer, when one came whole):
an estimate — another program may use the same server — used only to cut slices.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SentMessage = dict[str, Any]

TASK_NOTE = (
    "(This message comes from nixx, the memory system, not from the user: it is a task for "
    "you. Do exactly what it asks and answer only that; the conversation goes on after it.)"
)
SLICE_SECONDS = 0.5  # what one slice should cost the backend to evaluate
FIRST_SLICE = 512  # characters, before anything was measured
MIN_SLICE, MAX_SLICE = 128, 32768  # characters
CHARS_PER_TOKEN = 3  # cautious: small models' tokenisers give fewer than English's 4
MESSAGE_TOKENS = 6  # a message's role and separators in a chat template
# request keys of the conversation that are not about the prompt (dropped from own calls)
_NOT_PROMPT = ("max_completion_tokens", "max_tokens", "n", "stream", "stream_options",
               "logprobs", "top_logprobs", "response_format", "stop", "temperature")


def text_of(message: SentMessage) -> str:
    """A message's text as the slicing counts it (its tool calls' JSON included)."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    else:
        text = ""
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"])
    return text


def tokens(messages: Sequence[SentMessage], extra: int = 0) -> int:
    """A cautious estimate of the tokens of `messages` (`extra`: characters besides)."""
    chars = sum(len(text_of(m)) for m in messages) + extra
    return chars // CHARS_PER_TOKEN + MESSAGE_TOKENS * len(messages)


def shared(held: Sequence[SentMessage], target: Sequence[SentMessage]) -> tuple[int, int]:
    """How far `target` begins with what `held` holds: (the index of its first message
    not held whole, the characters of that message's text held)."""
    i = 0
    while i < len(target) and i < len(held) and held[i] == target[i]:
        i += 1
    if i == len(target) or i == len(held) or held[i].get("role") != target[i].get("role"):
        return i, 0
    a, b = text_of(held[i]), text_of(target[i])
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return i, n


def slices(held: Sequence[SentMessage], target: Sequence[SentMessage], size: int) -> list[list[SentMessage]]:
    """Prefixes of `target` to send before it (one token asked of each), each adding at
    most `size` characters to the one before — the first to what `held` shares with
    `target` — and the last leaving at most `size` for `target` itself. A message's text
    is cut before a space (a tokeniser then reads the words of the cut as it will read
    them whole); a message whose content is not text is never cut."""
    size = max(1, size)
    m, ch = shared(held, target)
    out: list[list[SentMessage]] = []
    while sum(len(text_of(t)) for t in target[m:]) - ch > size:
        budget = size
        while budget > 0 and m < len(target):
            text = text_of(target[m])
            left = len(text) - ch
            if left <= budget:
                budget -= left  # an empty message costs no budget: the next one does
                m, ch = m + 1, 0
                continue
            if isinstance(target[m].get("content"), str) and not target[m].get("tool_calls"):
                ch = _cut(text, ch, ch + budget)
            else:
                m, ch = m + 1, 0  # not text: sent whole
            budget = 0
        if ch:
            out.append([*target[:m], {**target[m], "content": text_of(target[m])[:ch]}])
        else:
            out.append(list(target[:m]))
    return out


def _cut(text: str, low: int, high: int) -> int:
    """Where to cut `text` between `low` and `high`: before the last space, else `high`."""
    space = max(text.rfind(" ", low + 1, high + 1), text.rfind("\n", low + 1, high + 1))
    return space if space > low else high


@dataclass
class SliceSize:
    """The characters one slice adds: what the backend evaluates in about `SLICE_SECONDS`
    (each measured slice moves it three quarters of the way to the size it implies)."""

    chars: int = FIRST_SLICE

    def observe(self, chars: int, seconds: float) -> None:
        if chars < MIN_SLICE // 2 or seconds <= 0:
            return  # too little to measure: the request's own overhead dominates
        implied = chars / seconds * SLICE_SECONDS
        self.chars = int(min(MAX_SLICE, max(MIN_SLICE, (self.chars + 3 * implied) / 4)))


@dataclass
class Slot:
    """What a one-slot backend holds, as nixx knows it, and the latest user conversation
    it should keep holding (`conversation`: the turn's request, its answer appended)."""

    held: list[SentMessage] = field(default_factory=list)
    conversation: dict[str, Any] | None = None
    size: SliceSize = field(default_factory=SliceSize)
    continued: int = 0  # own calls sent as a continuation of the conversation
    alone: int = 0  # own calls sent on their own (no conversation, or it would not fit)

    def sent(self, messages: list[SentMessage]) -> None:
        """A request went out: the backend evaluates its prompt whether or not it is
        answered whole (a local server finishes a prompt it has begun)."""
        self.held = messages

    def answered(self, messages: list[SentMessage], answer: str) -> None:
        """Its answer came whole: the backend holds the answer after the prompt."""
        if self.held is messages:
            self.held = [*messages, {"role": "assistant", "content": answer}]

    def keep(self, request: dict[str, Any], answer: str) -> None:
        """A user's turn ended: `request` (what was sent) and `answer` are the
        conversation the next turn continues."""
        body = {k: v for k, v in request.items() if k not in _NOT_PROMPT}
        body["messages"] = [*request["messages"], {"role": "assistant", "content": answer}]
        self.conversation = body

    def room(self, own: dict[str, Any], context: int | None) -> int | None:
        """The characters of material `own` (a call's instructions and material, as for
        `continuation`) may carry and still continue the conversation within `context`
        tokens with its answer; None when there is no conversation or no room at all. A
        call whose material can be cut (the intent's newest rows) cuts it to this."""
        convo, messages = self.conversation, own.get("messages") or []
        if convo is None or context is None or not messages:
            return None
        task = {"role": "user", "content": f"{TASK_NOTE}\n\n{messages[0].get('content')}\n\n"}
        answer = own.get("max_tokens")
        tools = len(json.dumps(convo["tools"])) if convo.get("tools") else 0
        left = context - (answer if isinstance(answer, int) else 512) - tokens(
            [*convo["messages"], task], tools)
        return left * CHARS_PER_TOKEN if left > 0 else None

    def continuation(self, own: dict[str, Any], context: int | None) -> dict[str, Any] | None:
        """`own` (one of nixx's own calls: a system message with its instructions, a user
        message with its material) as a continuation of the conversation, on its model (the
        one the slot holds); None when there is none, `own` is not of that shape, or the
        whole would not fit `context` tokens with the call's answer."""
        convo, messages = self.conversation, own.get("messages") or []
        if convo is None:
            return None
        if len(messages) != 2 or [m.get("role") for m in messages] != ["system", "user"]:
            return None
        instructions, material = (m.get("content") for m in messages)
        if not isinstance(instructions, str) or not isinstance(material, str):
            return None
        room = self.room(own, context)
        if room is None or len(material) > room:
            return None
        task = {"role": "user", "content": f"{TASK_NOTE}\n\n{instructions}\n\n{material}"}
        out = {**convo, **{k: v for k, v in own.items() if k not in ("messages", "model")}}
        out["messages"] = [*convo["messages"], task]
        if out.get("tools") and out.get("tool_choice") not in (None, "auto", "none"):
            out["tool_choice"] = "auto"  # the turn forced a call; the task wants text
        return out

