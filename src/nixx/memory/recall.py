"""Recall: the per-turn system prompt.

Order, as users of the original expect: the base prompt, then ``## Current Intent``
(when one is set), then ``## Recalled Memories`` — a framing paragraph and one bullet
per recalled summary with its tags. Summaries are recalled by cosine similarity to the
latest user message, at or above the threshold, at most `recall_limit`, leaving out
summaries of messages the client already sent in this turn's history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nixx.memory.prompts import INTENT_HEADING, RECALL_FRAMING, RECALL_HEADING
from nixx.store.records import SummaryHit


def default_threshold(model: str) -> float:
    """The recall threshold calibrated for an embedding model (0.4 for mxbai-embed-large,
    0.3 for all-MiniLM-L6-v2 and models without a calibration): `nixx.embed`'s table."""
    from nixx.embed import default_recall_threshold

    return float(default_recall_threshold(model))


@dataclass(frozen=True)
class RecallContext:
    """What a turn adds to the conversation, broken out (served by /v1/debug/context)."""

    system_prompt: str
    base_prompt: str
    intent: str | None
    hits: list[SummaryHit] = field(default_factory=list)
    threshold: float | None = None
    recall_enabled: bool = True
    query: str | None = None
    before_buffer_id: int | None = None


def format_summary_bullet(hit: SummaryHit) -> str:
    text = " ".join(hit.summary.content.split())
    tags = f" (tags: {', '.join(hit.summary.tags)})" if hit.summary.tags else ""
    return f"- {text}{tags}"


def build_system_prompt(base: str, intent: str | None, hits: Sequence[SummaryHit]) -> str:
    parts = [base.strip()]
    if intent and intent.strip():
        parts.append(f"{INTENT_HEADING}\n{intent.strip()}")
    if hits:
        bullets = "\n".join(format_summary_bullet(hit) for hit in hits)
        parts.append(f"{RECALL_HEADING}\n{RECALL_FRAMING}\n\n{bullets}")
    return "\n\n".join(parts)
