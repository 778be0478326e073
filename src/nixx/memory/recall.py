"""Recall: the per-turn system prompt.

Order, as users of the original expect: the base prompt, then ``## Current Intent``
(when one is set), then ``## Recalled Memories`` — a framing paragraph, then the recalled
items best first: verbatim excerpts of earlier conversation (each with its date and
buffer ids) and summaries (with their tags).

The items come from the fused search (`nixx.memory.search`) over the latest user message,
leaving out what the client already sent in this turn's history (buffer rows from the
oldest row of that history on, summaries ending there or later) and the turn's own row.
A buffer row is recalled only when its cosine to the message reaches the row floor, a
summary when it reaches the summary threshold (both calibrated per embedding model:
`nixx.embed`), so an unrelated message recalls nothing; then items are taken best first
until the token budget (`NIXX_RECALL_TOKENS`) is spent. A short answer ("yes, Tuesday")
comes with the question before it, a question with the short answer after it, and rows
next to each other become one excerpt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nixx.memory.history import CHARS_PER_TOKEN
from nixx.memory.prompts import INTENT_HEADING, RECALL_FRAMING, RECALL_HEADING
from nixx.memory.search import Result
from nixx.store.records import BufferRow, SummaryHit

# A row shorter than this after a question is its answer: the two are shown together.
SHORT_ROW_CHARS = 80
# One excerpt row is cut to this many characters.
EXCERPT_ROW_CHARS = 600


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

    def info(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "score": self.score,
            "cosine": self.cosine,
            "created_at": self.created_at,
            "buffer_ids": self.buffer_ids,
            "text": self.text,
        }


@dataclass(frozen=True)
class RecallContext:
    """What a turn adds to the conversation, broken out (served by /v1/debug/context)."""

    system_prompt: str
    base_prompt: str
    intent: str | None
    hits: list[SummaryHit] = field(default_factory=list)  # the summaries among `recalled`
    threshold: float | None = None
    recall_enabled: bool = True
    query: str | None = None
    before_buffer_id: int | None = None
    recalled: list[Recalled] = field(default_factory=list)
    row_floor: float | None = None
    budget_tokens: int = 0
    considered: int = 0  # fused results looked at before the floor and the budget


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


def select(
    results: Sequence[Result],
    *,
    row_floor: float,
    summary_threshold: float,
    budget_tokens: int,
    max_summaries: int,
) -> list[Recalled]:
    """The recalled items: results at or above their floor, best first, within the
    budget (an item that does not fit is skipped, a smaller one after it may still fit).
    Rows next to an excerpt already taken join it."""
    picked: list[tuple[Result, list[BufferRow]]] = []  # buffer excerpts, in pick order
    summaries: list[Result] = []
    order: list[tuple[str, int]] = []  # ("buffer", index in picked) | ("summary", index)
    used = 0
    for result in results:
        if result.cosine is None:
            continue
        if result.kind == "summary":
            if result.cosine < summary_threshold or len(summaries) >= max_summaries:
                continue
            cost = tokens(format_summary(result))
            if used + cost > budget_tokens:
                continue
            used += cost
            summaries.append(result)
            order.append(("summary", len(summaries) - 1))
            continue
        if result.cosine < row_floor:
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
    out: list[Recalled] = []
    for kind, index in order:
        if kind == "summary":
            r = summaries[index]
            assert r.summary is not None
            out.append(
                Recalled(
                    "summary",
                    r.summary.id,
                    r.score,
                    r.cosine,
                    r.created_at,
                    format_summary(r),
                    [r.summary.start_buffer_id, r.summary.end_buffer_id],
                )
            )
        else:
            first, rows = picked[index]
            assert first.row is not None
            out.append(
                Recalled(
                    "buffer",
                    first.row.id,
                    first.score,
                    first.cosine,
                    first.created_at,
                    format_excerpt(rows),
                    [r.id for r in rows],
                )
            )
    return out


def build_system_prompt(base: str, intent: str | None, recalled: Sequence[Recalled]) -> str:
    parts = [base.strip()]
    if intent and intent.strip():
        parts.append(f"{INTENT_HEADING}\n{intent.strip()}")
    if recalled:
        items = "\n".join(item.text for item in recalled)
        parts.append(f"{RECALL_HEADING}\n{RECALL_FRAMING}\n\n{items}")
    return "\n\n".join(parts)
