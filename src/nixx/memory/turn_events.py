"""A turn as its shells see it: the typed input a dialect hands the turn (`TurnInput`),
what the turn tells before its first event (`TurnInfo`), and its events (`TurnEvent`:
text, reasoning, a nixx tool's run, the client's tool calls, and `Finished` last). The
turn itself is `nixx.memory.turn`; the dialects that translate these to a wire format
are `nixx.server.dialects`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from nixx.memory.recall import RecallAnswerInfo

if TYPE_CHECKING:
    from nixx.llm.stream import AssistantToolCall

RESULT_PREVIEW = 200  # characters of a nixx tool's result a stream shows


class TurnInfo(TypedDict, total=False):
    """What a turn tells its shell as soon as it is known, before its first event: the
    chat route and the dialects read ``model`` for their first chunk."""

    model: str
    user_row_id: int | None
    max_tokens_clamped: int  # the answer's max_tokens sent, cut to what fits (`_clamp`)


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Reasoning:
    text: str


@dataclass(frozen=True)
class ToolRun:
    id: str
    name: str
    arguments: str
    result: str


@dataclass(frozen=True)
class ClientToolCalls:
    calls: list[AssistantToolCall]


def _nothing_recalled() -> RecallAnswerInfo:
    return {"recalled_summaries": [], "recalled": []}


@dataclass(frozen=True)
class Finished:
    finish_reason: str
    model: str
    content: str
    usage: dict[str, int]
    tool_runs: list[ToolRun] = field(default_factory=list)
    client_tool_calls: list[AssistantToolCall] = field(default_factory=list)
    # what was recalled (`RecallContext.answer_info()`: summary ids, items and scores)
    recall_info: RecallAnswerInfo = field(default_factory=_nothing_recalled)
    user_row_id: int | None = None
    assistant_row_id: int | None = None
    trimmed: int = 0
    reasoning: str = ""  # the backend's reasoning text, every round's (not stored)
    # the request's stop string that ended the answer (`nixx.llm.stream.StopWatch`)
    stop_sequence: str | None = None


TurnEvent = Delta | Reasoning | ToolRun | ClientToolCalls | Finished


@dataclass(frozen=True)
class TurnInput:
    """What a dialect hands the turn (`nixx.server.dialects.adapter`): the request in chat
    completions' shape, more keys for the answer's row (a dialect's own record, e.g. the
    Responses API's ``response``), and what of the user's text is remembered — written to
    the buffer and recalled against (a dialect drops its client's harness text; the
    backend still gets all of it; text it would leave empty is kept whole)."""

    body: dict[str, Any]
    answer_meta: dict[str, Any] | None = None
    remembered: Callable[[str], str] | None = None


