"""The summariser: turns a window of buffer rows into a summary, entities and tags.

The backend is asked for a JSON object only (prompt in `prompts.SUMMARY_PROMPT`,
temperature 0.3). Its answer is parsed tolerantly — code fences, prose before or after
the object, trailing commas, a category named ``topics`` — and when it still is not a
usable object the request is repeated — the original request, with `SUMMARY_RETRY`
added to its instructions, never the failed answer — at most `ATTEMPTS` times in all;
each answer is bounded (`MAX_TOKENS`, the time budget) and a window the backend refuses
as too long is sent again shortened. When every
attempt fails `SummaryFailed` is raised and nothing is stored: the window stays
unsummarised and is tried again later. There is never a placeholder summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nixx.errors import BackendError, BackendUnavailable
from nixx.llm.facts import context_from_error, is_overflow
from nixx.memory.prompts import SUMMARY_PROMPT, SUMMARY_RETRY
from nixx.store.records import ENTITY_KINDS, BufferRow

ATTEMPTS = 3
TEMPERATURE = 0.3
MAX_TOKENS = 512  # a summary's answer: 2-3 sentences and a few entities fit well within it
PROMPT_TOKENS = 400  # SUMMARY_PROMPT (and SUMMARY_RETRY) with a margin
_ALIASES = {
    "topics": "concepts",
    "concept": "concepts",
    "tool": "tools",
    "person": "people",
    "file": "files",
    "url": "urls",
    "links": "urls",
}
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class SummaryFailed(BackendError):
    """The backend never produced a usable summary for the window."""


@dataclass(frozen=True)
class SummaryDraft:
    summary: str
    entities: dict[str, list[str]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


def transcript(rows: Sequence[BufferRow], *, max_chars: int | None = None) -> str:
    """``ROLE: content`` lines, oldest first."""
    text = "\n".join(f"{row.role.upper()}: {row.content}" for row in rows if row.role != "marker")
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars]
    return text


def select_window(
    rows: Sequence[BufferRow], *, min_words: int | None, max_chars: int
) -> list[BufferRow]:
    """The oldest rows to summarise together: up to `min_words` words (all rows when
    None), never more than `max_chars` of transcript (always at least one row)."""
    window: list[BufferRow] = []
    words = 0
    chars = 0
    for row in rows:
        if row.role == "marker":
            continue
        size = len(row.content) + len(row.role) + 3
        if window and chars + size > max_chars:
            break
        window.append(row)
        words += row.words
        chars += size
        if min_words is not None and words >= min_words:
            break
    return window


def summary_messages(
    rows: Sequence[BufferRow], *, max_chars: int, retry: bool = False
) -> list[dict[str, str]]:
    system = f"{SUMMARY_PROMPT}\n\n{SUMMARY_RETRY}" if retry else SUMMARY_PROMPT
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": transcript(rows, max_chars=max_chars)},
    ]


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        found.append(text[start : end + 1])
    found.append(text)
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for item in value:
        if isinstance(item, (str, int, float)) and str(item).strip():
            text = str(item).strip()
            if text not in out:
                out.append(text)
    return out


def parse_summary(text: str) -> SummaryDraft | None:
    """The summary in a backend answer, or None when there is no usable one."""
    for candidate in _candidates(text or ""):
        candidate = _TRAILING_COMMA.sub(r"\1", candidate.strip())
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        summary = data.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            continue
        entities: dict[str, list[str]] = {}
        raw = data.get("entities")
        if isinstance(raw, dict):
            for key, value in raw.items():
                kind = _ALIASES.get(str(key).lower(), str(key).lower())
                if kind in ENTITY_KINDS:
                    values = _strings(value)
                    if values:
                        entities.setdefault(kind, [])
                        entities[kind] += [v for v in values if v not in entities[kind]]
        tags = []
        for tag in _strings(data.get("tags")):
            tag = tag.lower()
            if tag not in tags:
                tags.append(tag)
        return SummaryDraft(summary.strip(), entities, tags[:8])
    return None


def merge_tags(user_tags: Sequence[str], model_tags: Sequence[str]) -> list[str]:
    """The user's tags as typed, then the model's that do not repeat one of them."""
    out: list[str] = []
    seen: set[str] = set()
    for tag in [*user_tags, *model_tags]:
        tag = tag.strip()
        if tag and tag.lower() not in seen:
            seen.add(tag.lower())
            out.append(tag)
    return out


async def summarise(
    llm: Any, model: str, rows: Sequence[BufferRow], *, max_chars: int, budget: float,
    context: int | None = None,
) -> tuple[SummaryDraft, list[BufferRow]]:
    """Ask the backend for a summary of `rows` (as one of nixx's own calls: bounded by
    `MAX_TOKENS` and `budget` seconds, yielding to users' turns: `ChatClient.background`),
    with bounded retries (`context`: the model's context length, for the layout of an
    own call on a one-slot backend: `ChatClient.background`). Returns the draft and the rows it covers: a backend that refuses
    the request for its length gets it again shortened (the first half of the rows, or a
    shorter transcript of one row); a retry is always the original request (with
    `SUMMARY_RETRY` after an unusable answer), never the failed answer.

    Raises `BackendUnavailable` at once when no backend answers, `SummaryFailed` when
    no attempt gave a usable answer."""
    rows = list(rows)
    retry = False
    last_problem = "no answer"
    for _attempt in range(ATTEMPTS):
        body = {
            "model": model,
            "messages": summary_messages(rows, max_chars=max_chars, retry=retry),
            "temperature": TEMPERATURE,
            "max_tokens": MAX_TOKENS,
        }
        try:
            data = await llm.background(body, budget=budget, what="a summary", context=context)
        except BackendUnavailable:
            raise
        except BackendError as exc:
            last_problem = exc.message
            if is_overflow(exc.message):
                learned = context_from_error(exc.message)
                if learned:
                    llm.learn_context(model, learned, "the backend's refusal")
                    context = min(context or learned, learned)
                if len(rows) > 1:
                    rows = rows[: max(1, len(rows) // 2)]
                else:
                    max_chars = max(500, max_chars // 2)
            continue
        answer = (data["choices"][0].get("message") or {}).get("content") or ""
        draft = parse_summary(answer)
        if draft is not None:
            return draft, rows
        last_problem = f"unusable answer {answer[:120]!r}"
        retry = True
    raise SummaryFailed(
        f"the backend gave no usable summary after {ATTEMPTS} attempts ({last_problem}); "
        "the window stays unsummarised and will be tried again"
    )
