"""Recall: the per-turn memory of the prompt.

Where it goes is the prompt layout (``NIXX_PROMPT_LAYOUT``; the turn places it:
`nixx.memory.turn`): under ``system`` (the seed's) all of it is the system message, under
``cache`` (the default) the system message is the base prompt alone and the memory block
(`RecallContext.memory_block`, the sections below without the base) goes into the latest
user message. Order, as users of the original expect: the base prompt, then ``## Current Intent``
(when one is set), then ``## Recalled Memories`` — a framing paragraph, then the recalled
items best first: verbatim excerpts of earlier conversation (each with its date and
buffer ids) and summaries (with their tags).

The items come from the fused search (`nixx.memory.search`) over the latest user message,
leaving out what the client already sent in this turn's history (buffer rows from the
oldest row of that history on, summaries ending there or later) and the turn's own row.
Recall takes search's order. A buffer row is recalled only when its cosine to the message
reaches the row floor or it carries most of the message's term weight (`WORD_FLOOR`: a
rare name the question asks about is evidence a vector may miss), a summary when its
cosine reaches the summary threshold (both calibrated per embedding model: `nixx.embed`),
so an unrelated message recalls nothing; then items are taken in that order until the
token budget (`NIXX_RECALL_TOKENS`) is spent. A short answer ("yes, Tuesday")
comes with the question before it, a question with the short answer after it, and rows
next to each other become one excerpt.

`Recall` is the whole of it, built once by `NixxService` and handed to each turn
(`nixx.memory.turn`): `search` runs the rankers (one worker thread, beside the write of
the turn's user row), `finish` fuses them and picks what the prompt recalls, returning a
`RecallContext` — the prompt, and the explanation every shell shows of it (`info()` for
/v1/debug/context and the web context page, `answer_info()` for the ``nixx`` key of a
chat answer, `row_meta()` for the answer's buffer row). `for_next_turn` is what the next
turn would recall (/v1/debug/context, the web context page).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from nixx.config import Settings
from nixx.errors import NixxError
from nixx.memory import intent as intent_state
from nixx.memory import search as fused
from nixx.memory.episodic import Episodic
from nixx.memory.history import CHARS_PER_TOKEN
from nixx.memory.prompts import (
    INTENT_FRAMING,
    INTENT_HEADING,
    RECALL_FRAMING,
    RECALL_HEADING,
    SYSTEM_PROMPT,
    TOOLS_PROMPT,
)
from nixx.memory.search import Result
from nixx.priority import Foreground
from nixx.store.base import MemoryStore
from nixx.store.records import BufferRow, SummaryHit

log = logging.getLogger(__name__)

# A row shorter than this after a question is its answer: the two are shown together.
SHORT_ROW_CHARS = 80
# One excerpt row is cut to this many characters.
EXCERPT_ROW_CHARS = 600
# fused results a turn's recall looks at before the floor and the budget
RECALL_CANDIDATES = 20
# A row carrying this share of the question's term weight (its full-text score: the IDFs of
# the question's words it says over all of theirs) is recalled whatever its cosine: a rare
# name or word the question asks about is evidence a vector may miss. Measured with
# bench/bench_recall.py --floor on both sets: 0.6 recalls more evidence than the cosine
# floor alone and no more unrelated rows (0.5 lets some in).
WORD_FLOOR = 0.6
# A row whose best sentence (`nixx.memory.pieces`) is this much over the row floor is
# recalled on it. A row's sentences are shorter than the row and it has several, so the
# best of them runs nearer an unrelated question than a whole row does: at the row floor
# itself they doubled the unrelated questions that inject something (assistant set 6-7 % ->
# 12-15 %); at 0.10 over it, on all six benchmark runs, no more unrelated questions inject
# anything and up to 2.2 points more of the evidence rows are recalled (none more on the
# assistant set; bench/bench_recall.py --floor, docs/performance.md).
SENTENCE_MARGIN = 0.10


def default_threshold(model: str) -> float:
    """The recall threshold for summaries calibrated for an embedding model (0.4 for
    mxbai-embed-large, 0.3 for all-MiniLM-L6-v2 and models without a calibration):
    `nixx.embed`'s table."""
    from nixx.embed import default_recall_threshold

    return float(default_recall_threshold(model))


def default_row_floor(model: str) -> float:
    """The cosine a buffer row needs to be recalled, calibrated per embedding model."""
    from nixx.embed import default_row_floor as floor

    return float(floor(model))


class RecalledInfo(TypedDict):
    """One recalled item explained (`Recalled.info`): an item of `RecallInfo`'s
    ``recalled`` (/v1/debug/context, the web context page)."""

    kind: str  # "buffer" | "summary"
    id: int
    score: float
    cosine: float | None
    # a row's best sentence's cosine, when it lifted the row (null: none did)
    sentence_cosine: float | None
    created_at: str
    buffer_ids: list[int]
    why: dict[str, float]
    text: str


class RecallInfo(TypedDict):
    """The explanation of a recall (`RecallContext.info`): what /v1/debug/context answers
    (with the route's ``recalled_summaries``) and the web context page shows."""

    system_prompt: str
    memory_block: str
    layout: str  # "system" | "cache"
    base_prompt: str
    tools_prompt: str  # added after the base prompt when nixx's tools are offered ("": never)
    intent: str | None
    recall_enabled: bool
    threshold: float | None
    row_floor: float | None
    word_floor: float
    budget_tokens: int
    considered: int
    query: str | None
    vector_query: str | None
    before_buffer_id: int | None
    recalled: list[RecalledInfo]


class RecalledBrief(TypedDict):
    """One recalled item as a chat answer reports it (`RecallAnswerInfo`'s ``recalled``)."""

    kind: str
    id: int
    score: float
    cosine: float | None
    buffer_ids: list[int]


class RecallAnswerInfo(TypedDict):
    """What a chat answer reports of its recall (`RecallContext.answer_info`): the start
    of the answer's ``nixx`` key (`nixx.server.shapes.turn_memory`, every dialect)."""

    recalled_summaries: list[int]
    recalled: list[RecalledBrief]


class RecalledRowMeta(TypedDict):
    """One recalled item as the answer's buffer row keeps it (``meta.recalled``, from
    `RecallContext.row_meta`; the web page shows it for a past answer)."""

    kind: str
    id: int
    score: float  # rounded to 6 places


@dataclass(frozen=True)
class Recalled:
    """One item of the recalled block, and why it is there."""

    kind: str  # "buffer" | "summary"
    id: int  # buffer id of the matching row, or summary id
    score: float  # fused score
    cosine: float | None
    created_at: str
    text: str  # as rendered in the prompt
    # the rows an excerpt shows; for a summary, the first and last buffer id it covers
    buffer_ids: list[int] = field(default_factory=list)
    # why it was chosen: the evidence its score is made of (`nixx.memory.search.Result.why`)
    why: dict[str, float] = field(default_factory=dict)
    sentence_cosine: float | None = None  # a row's best sentence's (`Result.sentence_cosine`)

    def info(self) -> RecalledInfo:
        return {
            "kind": self.kind,
            "id": self.id,
            "score": self.score,
            "cosine": self.cosine,
            "sentence_cosine": self.sentence_cosine,
            "created_at": self.created_at,
            "buffer_ids": self.buffer_ids,
            "why": self.why,
            "text": self.text,
        }


@dataclass(frozen=True)
class RecallContext:
    """What a turn adds to the conversation, broken out (served by /v1/debug/context)."""

    system_prompt: str  # the system message nixx sends (under the `system` layout, all of it)
    base_prompt: str
    intent: str | None
    hits: list[SummaryHit] = field(default_factory=list)  # the summaries among `recalled`
    threshold: float | None = None
    recall_enabled: bool = True
    query: str | None = None
    # the query as the vector rankers were asked it: without the store's common words
    # (`nixx.memory.search.vector_text`); None when nothing was embedded
    vector_query: str | None = None
    before_buffer_id: int | None = None
    recalled: list[Recalled] = field(default_factory=list)
    row_floor: float | None = None
    budget_tokens: int = 0
    considered: int = 0  # fused results looked at before the floor and the budget
    word_floor: float = 0.0  # the share of the question's term weight that recalls a row
    # `cache` layout: the intent and recalled sections, added to the latest user message
    # (`nixx.memory.turn`); "" under the `system` layout (they are in `system_prompt`)
    memory_block: str = ""
    layout: str = "system"
    # what follows the base prompt on a request that offers nixx's own tools (`TOOLS_PROMPT`;
    # "" under a NIXX_SYSTEM_PROMPT, which replaces both, or with NIXX_CHAT_TOOLS off)
    tools_prompt: str = ""

    def system_message(self, tools: bool) -> str:
        """The system message nixx sends: `system_prompt`, with `tools_prompt` right after
        the base prompt when `tools` (nixx's own tools are offered on this request). Its
        start is the same every turn of a conversation that keeps its tools (the prompt
        layout's prefix, docs/memory.md)."""
        if not tools or not self.tools_prompt:
            return self.system_prompt
        base = self.base_prompt.strip()
        return f"{base} {self.tools_prompt}{self.system_prompt[len(base):]}"

    def info(self) -> RecallInfo:
        """The explanation of this recall (/v1/debug/context; the web context page)."""
        return {
            "system_prompt": self.system_prompt,
            "memory_block": self.memory_block,
            "layout": self.layout,
            "base_prompt": self.base_prompt,
            "tools_prompt": self.tools_prompt,
            "intent": self.intent,
            "recall_enabled": self.recall_enabled,
            "threshold": self.threshold,
            "row_floor": self.row_floor,
            "word_floor": self.word_floor,
            "budget_tokens": self.budget_tokens,
            "considered": self.considered,
            "query": self.query,
            "vector_query": self.vector_query,
            "before_buffer_id": self.before_buffer_id,
            "recalled": [item.info() for item in self.recalled],
        }

    def answer_info(self) -> RecallAnswerInfo:
        """What a chat answer reports of its recall (the start of its ``nixx`` key)."""
        return {
            "recalled_summaries": [hit.summary.id for hit in self.hits],
            "recalled": [
                {"kind": item.kind, "id": item.id, "score": item.score, "cosine": item.cosine,
                 "buffer_ids": item.buffer_ids}
                for item in self.recalled
            ],
        }

    def row_meta(self) -> list[RecalledRowMeta]:
        """What the answer's buffer row keeps of it (``meta.recalled``: the web page
        shows it for a past answer)."""
        return [{"kind": r.kind, "id": r.id, "score": round(r.score, 6)} for r in self.recalled]


#: What the rankers answered for a turn's recall (`Recall.search`): the summary search is
#: `Recall._wide`'s (the best summaries above the threshold, the last summarised row id).
RecallParts = fused.Rankers[tuple[list[SummaryHit], int]]


class Recall:
    """The per-turn recall, whole: the fused search over the latest user message, the
    floors (`row_floor`, `threshold`), the token budget (``NIXX_RECALL_TOKENS``), what is
    left out because the client's history carries it, and the `RecallContext` that
    explains the pick. Its methods block (store and embedder calls): run them in a
    worker thread. `embed` is the service's embedding call (it binds the store to the
    embedder on first use); `model` names the embedding model the floors are
    calibrated for; `pool` gives the threads the rankers overlap on (the service's,
    shared with its search: `nixx.memory.search.run_rankers`); the rankers run marked
    busy in `foreground`, so background work waits them out (`nixx.priority`)."""

    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        episodic: Episodic,
        embed: Callable[[Sequence[str]], np.ndarray],
        model: str,
        pool: Callable[[], Executor],
        foreground: Foreground | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.episodic = episodic
        self._embed = embed
        self.model = model
        self._pool = pool
        self.foreground = foreground or Foreground()
        self.error: str | None = None  # why the last recall went without vectors

    @property
    def base_prompt(self) -> str:
        return self.settings.system_prompt or SYSTEM_PROMPT

    @property
    def tools_prompt(self) -> str:
        """What follows the base prompt when nixx's tools are offered (`TOOLS_PROMPT`): none
        after the user's own prompt, nor when the tools are never offered."""
        never = self.settings.system_prompt or self.settings.chat_tools == "off"
        return "" if never else TOOLS_PROMPT

    @property
    def threshold(self) -> float:
        """The cosine a summary needs (NIXX_RECALL_THRESHOLD, else calibrated)."""
        if self.settings.recall_threshold is not None:
            return self.settings.recall_threshold
        return default_threshold(self.model)

    @property
    def row_floor(self) -> float:
        """The cosine a buffer row needs (NIXX_RECALL_THRESHOLD, else calibrated)."""
        if self.settings.recall_threshold is not None:
            return self.settings.recall_threshold
        return default_row_floor(self.model)

    @property
    def params(self) -> fused.FusionParams:
        """The fusion search and recall share, on this embedding model's cosine scale."""
        return fused.params_for(self.model)

    def search(self, query: str | None) -> RecallParts | None:
        """The rankers' answers: full text, then the query (and a period anchor)
        embedded and the buffer-row and summary vectors searched. None when recall is
        off, the budget is 0 or there is no query; an embedder failure leaves full text
        only (`error` says why)."""
        if not self.episodic.recall_enabled() or self.settings.recall_tokens <= 0:
            return None
        if not query or not query.strip():
            return None
        wide = self.settings.recall_limit > 0
        with self.foreground.busy():
            return fused.run_rankers(
                self.store,
                query,
                self._embed_query,
                lambda vector: self._wide(vector) if wide else ([], 0),
                pool=self._pool(),
                piece_floor=self.params.piece_floor,
            )

    def finish(
        self,
        parts: RecallParts | None,
        *,
        intent: str | None,
        before_id: int | None,
        exclude_ids: Sequence[int] = (),
        query: str | None = None,
    ) -> RecallContext:
        """Fuse the rankers' answers, leaving out the history the client sent (rows from
        `before_id` on) and `exclude_ids`, and pick what the prompt recalls. `query` is
        reported when recall did not run."""
        enabled = parts is not None or self.episodic.recall_enabled()
        recalled: list[Recalled] = []
        summary_hits: list[SummaryHit] = []
        considered = 0
        if parts is not None:
            hits: list[SummaryHit] | None = []
            if parts.vector is not None and self.settings.recall_limit > 0:
                wide, last_summarised = parts.summaries or ([], 0)
                hits = self._pick(wide, last_summarised, before_id)
                if hits is None:
                    assert before_id is not None
                    hits = self._filtered(parts.vector, before_id)
            results = parts.combine(
                hits or [],
                store=self.store,
                limit=RECALL_CANDIDATES,
                before_id=before_id,
                exclude_ids=exclude_ids,
                context=0,
                params=self.params,
            )
            considered = len(results)
            # neighbours are read for the rows that can be recalled only
            fused.attach_context(
                self.store, [r for r in results if above_row_floor(r, self.row_floor)]
            )
            recalled = select(
                results,
                row_floor=self.row_floor,
                summary_threshold=self.threshold,
                budget_tokens=self.settings.recall_tokens,
                max_summaries=self.settings.recall_limit,
            )
            by_id = {r.summary.id: r.summary for r in results if r.summary is not None}
            summary_hits = [
                SummaryHit(by_id[item.id], float(item.cosine or 0.0))
                for item in recalled
                if item.kind == "summary"
            ]
        layout = self.settings.prompt_layout
        block = build_memory_block(intent, recalled)
        return RecallContext(
            system_prompt=(
                build_system_prompt(self.base_prompt, intent, recalled)
                if layout == "system"
                else self.base_prompt.strip()
            ),
            memory_block="" if layout == "system" else block,
            layout=layout,
            base_prompt=self.base_prompt,
            intent=intent,
            hits=summary_hits,
            threshold=self.threshold,
            recall_enabled=enabled,
            query=parts.query if parts is not None else query,
            vector_query=parts.vector_query if parts is not None else None,
            before_buffer_id=before_id,
            recalled=recalled,
            row_floor=self.row_floor,
            word_floor=WORD_FLOOR,
            budget_tokens=self.settings.recall_tokens,
            considered=considered,
            tools_prompt=self.tools_prompt,
        )

    def for_next_turn(
        self,
        query: str | None = None,
        *,
        history_messages: int | None = None,
        before_id: int | None = None,
    ) -> RecallContext:
        """What a turn would recall for `query`. With no `query`, the newest user message
        of the current session is used (what the next turn would recall against)."""
        exclude: list[int] = []
        if query is None:
            # the newest user message of the session; a client continuing the session
            # sends all of it, so nothing from the session start on is recalled
            start = self.episodic.session_start()
            rows = self.store.last_buffer_rows(20, after_id=start - 1)
            users = [r for r in rows if r.role == "user"]
            query = users[-1].content if users else None
            exclude = [users[-1].id] if users else []
            if before_id is None and history_messages is None:
                before_id = start
        if before_id is None:
            before_id = self.episodic.oldest_in_history(history_messages or 0)
        parts = self.search(query)
        intent = intent_state.text(self.store)
        return self.finish(
            parts, intent=intent, before_id=before_id, exclude_ids=exclude, query=query
        )

    # Filtering by buffer id inside the store costs far more than a plain vector search
    # (measured: bench/bench_turn.py), and the summaries it leaves out — those of the
    # history the client sent — are few. So recall runs a plain search for 4x the limit
    # (`_wide`), filters it here (`_pick`), and uses the store's filter only when that
    # left too few (`_filtered`).
    def _wide(self, query_vec: np.ndarray) -> tuple[list[SummaryHit], int]:
        """(the best 4 x limit summaries at or above the threshold, last summarised id)."""
        limit = self.settings.recall_limit
        wide = self.store.search_summaries(query_vec, limit=limit * 4, threshold=self.threshold)
        return wide, self.store.last_summarised_id()

    def _pick(
        self, wide: list[SummaryHit], last_summarised: int, before_id: int | None
    ) -> list[SummaryHit] | None:
        """The recalled summaries from `_wide`'s answer, or None when only the store's
        filtered search can tell."""
        limit = self.settings.recall_limit
        if before_id is None or before_id > last_summarised:
            return wide[:limit]
        kept = [h for h in wide if h.summary.end_buffer_id < before_id]
        if len(kept) >= limit or len(wide) < limit * 4:
            return kept[:limit]
        return None

    def _filtered(self, query_vec: np.ndarray, before_id: int) -> list[SummaryHit]:
        return self.store.search_summaries(
            query_vec,
            limit=self.settings.recall_limit,
            threshold=self.threshold,
            before_buffer_id=before_id,
        )

    def _embed_query(self, texts: Sequence[str]) -> np.ndarray | None:
        """The vectors of `texts` for recall, or None (the embedder failing: a turn goes
        on without vectors rather than fail; `error` says why)."""
        try:
            vectors = self._embed(list(texts))
        except NixxError as exc:
            self.error = exc.message
            log.warning("recall without vectors: %s", exc.message)
            return None
        self.error = None
        return vectors


def _clip(text: str, limit: int = EXCERPT_ROW_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def format_summary_bullet(hit: SummaryHit) -> str:
    text = " ".join(hit.summary.content.split())
    tags = f" (tags: {', '.join(hit.summary.tags)})" if hit.summary.tags else ""
    return f"- {text}{tags}"


def format_summary(result: Result) -> str:
    s = result.summary
    assert s is not None
    tags = f" (tags: {', '.join(s.tags)})" if s.tags else ""
    return (
        f"- summary of buffer #{s.start_buffer_id}-{s.end_buffer_id} ({s.created_at[:10]}): "
        f"{' '.join(s.content.split())}{tags}"
    )


def format_excerpt(rows: Sequence[BufferRow]) -> str:
    ids = f"#{rows[0].id}" if len(rows) == 1 else f"#{rows[0].id}-{rows[-1].id}"
    lines = [f"- {rows[0].created_at[:10]}, buffer {ids}:"]
    lines += [f"  {r.role}: {_clip(r.content)}" for r in rows]
    return "\n".join(lines)


def asks(text: str) -> bool:
    return text.rstrip().endswith("?")


def excerpt_rows(row: BufferRow, context: Sequence[BufferRow]) -> list[BufferRow]:
    """The row, with the question before it when the row is a short answer ("yes,
    Tuesday" after "did you book the dentist?"), and the short answer after it when the
    row is a question."""
    before = [r for r in context if r.id < row.id and r.role != "marker"]
    after = [r for r in context if r.id > row.id and r.role != "marker"]
    rows = [row]
    if before and len(row.content) < SHORT_ROW_CHARS and asks(before[-1].content):
        rows.insert(0, before[-1])
    if after and asks(row.content) and len(after[0].content) < SHORT_ROW_CHARS:
        rows.append(after[0])
    return rows


def _excerpt_rows(result: Result) -> list[BufferRow]:
    assert result.row is not None
    return excerpt_rows(result.row, result.context)


def tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


def above_row_floor(result: Result, row_floor: float) -> bool:
    """Whether `result` is a buffer row that may be recalled (and so needs its
    neighbouring rows): its cosine to the question as the vector ranker asked it (without
    the store's common words, `nixx.memory.search.vector_text`: a speaker's name is no
    evidence that a row is about the question) reaches the row floor, its best sentence's
    reaches `SENTENCE_MARGIN` over it, or it carries `WORD_FLOOR` of the question's term
    weight."""
    if result.kind != "buffer":
        return False
    return (
        (result.cosine or 0.0) >= row_floor
        or (result.sentence_cosine or 0.0) >= row_floor + SENTENCE_MARGIN
        or (result.bm25 or 0.0) >= WORD_FLOOR
    )


def select(
    results: Sequence[Result],
    *,
    row_floor: float,
    summary_threshold: float,
    budget_tokens: int,
    max_summaries: int,
) -> list[Recalled]:
    """The recalled items: results at or above their floor (a buffer row: its cosine
    against `row_floor`, its best sentence's against `row_floor + SENTENCE_MARGIN`, or
    `WORD_FLOOR` of the question's words; a summary: its cosine
    against `summary_threshold`), in search's order, within the budget (an item that does
    not fit is skipped, a smaller one after it may still fit). Rows next to an excerpt
    already taken join it."""
    picked: list[tuple[Result, list[BufferRow]]] = []  # buffer excerpts, in pick order
    summaries: list[Result] = []
    order: list[tuple[str, int]] = []  # ("buffer", index in picked) | ("summary", index)
    used = 0
    for result in results:
        if result.kind == "summary":
            if result.cosine is None or result.cosine < summary_threshold or len(summaries) >= max_summaries:
                continue
            cost = tokens(format_summary(result))
            if used + cost > budget_tokens:
                continue
            used += cost
            summaries.append(result)
            order.append(("summary", len(summaries) - 1))
            continue
        if not above_row_floor(result, row_floor):
            continue
        rows = _excerpt_rows(result)
        joined = False
        for i, (first, have) in enumerate(picked):
            ids = {r.id for r in have}
            if (
                any(r.id in ids for r in rows)
                or rows[0].id == have[-1].id + 1
                or (rows[-1].id == have[0].id - 1)
            ):
                merged = sorted({r.id: r for r in [*have, *rows]}.values(), key=lambda r: r.id)
                if any(b.id - a.id > 1 for a, b in zip(merged, merged[1:], strict=False)):
                    continue
                cost = tokens(format_excerpt(merged)) - tokens(format_excerpt(have))
                if used + cost <= budget_tokens:
                    used += cost
                    picked[i] = (first, merged)
                joined = True
                break
        if joined:
            continue
        cost = tokens(format_excerpt(rows))
        if used + cost > budget_tokens:
            continue
        used += cost
        picked.append((result, rows))
        order.append(("buffer", len(picked) - 1))
    return _as_recalled(order, summaries, picked)


def _as_recalled(
    order: list[tuple[str, int]],
    summaries: list[Result],
    picked: list[tuple[Result, list[BufferRow]]],
) -> list[Recalled]:
    """`select`'s picks as `Recalled` items, in pick order."""
    out: list[Recalled] = []
    for kind, index in order:
        if kind == "summary":
            r = summaries[index]
            assert r.summary is not None
            out.append(Recalled(
                "summary", r.summary.id, r.score, r.cosine, r.created_at, format_summary(r),
                [r.summary.start_buffer_id, r.summary.end_buffer_id], dict(r.why),
            ))
        else:
            first, rows = picked[index]
            assert first.row is not None
            out.append(Recalled(
                "buffer", first.row.id, first.score, first.cosine, first.created_at,
                format_excerpt(rows), [r.id for r in rows], dict(first.why),
                sentence_cosine=first.sentence_cosine,
            ))
    return out


def build_memory_block(intent: str | None, recalled: Sequence[Recalled]) -> str:
    """The turn's memory: ``## Current Intent`` and ``## Recalled Memories`` (each only
    when not empty); "" when there is neither."""
    parts = []
    if intent and intent.strip():  # framed as data, like the recalled memories
        parts.append(f"{INTENT_HEADING}\n{INTENT_FRAMING}\n\n{intent.strip()}")
    if recalled:
        items = "\n".join(item.text for item in recalled)
        parts.append(f"{RECALL_HEADING}\n{RECALL_FRAMING}\n\n{items}")
    return "\n\n".join(parts)


def build_system_prompt(base: str, intent: str | None, recalled: Sequence[Recalled]) -> str:
    """The seed's layout: the base prompt, then the memory block, in one system message."""
    block = build_memory_block(intent, recalled)
    return "\n\n".join([base.strip(), block] if block else [base.strip()])
