"""The current intent: one or two sentences on what the user is working on.

Kept in the store's state (key ``intent``) so it survives a restart. Derived by the
LLM every `intent_interval` buffer rows of the current session, from its last
`intent_lookback` rows (each cut to `ROW_CHARS` characters), its answer bounded
(`MAX_TOKENS`; kept to its first two sentences within `DERIVED_CHARS` characters: it is
added to every turn); also set and cleared by hand. The position of the last derivation is kept too (``intent.derived_at``), so the
schedule carries across restarts.

The value says where it came from: ``source`` is ``manual`` (set by hand) or ``derived``
(by the LLM), with ``updated_at``. A manual intent is never replaced by an automatic
derivation: it stays until it is cleared or re-derived on request
(`POST /v1/intent/derive`, `/intent --derive`), after which the schedule resumes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NotRequired, TypedDict, cast

from nixx.errors import BackendError, ValidationError
from nixx.llm.slot import TASK_NOTE
from nixx.memory.prompts import INTENT_PROMPT
from nixx.store.base import MemoryStore
from nixx.store.records import BufferRow

KEY = "intent"
MAX_TOKENS = 100  # the derivation's answer: one or two sentences
DERIVED_CHARS = 300  # a derived intent is cut to this (at a sentence end when it can be)
DERIVED_AT_KEY = "intent.derived_at"  # buffer id of the newest row the last derivation saw
ROW_CHARS = 500
MAX_CHARS = 1000
TEMPERATURE = 0.2


class IntentValue(TypedDict):
    """The current intent as the store's state keeps it (key ``intent``)."""

    text: str
    source: str  # "manual" | "derived"
    updated_at: str  # ISO 8601, seconds
    rows: NotRequired[list[int]]  # a derived one: the (first, last) buffer ids it saw


def get(store: MemoryStore) -> IntentValue | None:
    value = store.get_state(KEY)
    return cast(IntentValue, value) if isinstance(value, dict) and value.get("text") else None


def text(store: MemoryStore) -> str | None:
    value = get(store)
    return str(value["text"]) if value else None


def set_intent(
    store: MemoryStore,
    intent: str,
    *,
    source: str = "manual",
    rows: tuple[int, int] | None = None,
) -> IntentValue:
    """Store the intent; a derived one keeps the (first, last) buffer ids it was derived
    from, so forgetting one of those rows clears it (`nixx.memory.forget`).

    The text enters every system prompt (framed as data: `nixx.memory.prompts`), so
    control characters are not taken: a NUL, a bidirectional control (U+202A-U+202E,
    U+2066-U+2069, U+200E, U+200F, U+061C: text that reads differently from what it
    holds) or another C0/C1 control in a manual intent is a `ValidationError`; from a
    derivation (the LLM's answer) they are stripped. Whitespace runs become one space."""
    bad = _unsafe(str(intent))
    if bad and source == "manual":
        raise ValidationError(
            f"intent contains a control character (U+{ord(bad[0]):04X}): NUL, "
            "bidirectional controls and other control characters are not accepted",
            param="intent")
    intent = "".join(ch for ch in str(intent) if ch not in bad)
    intent = " ".join(intent.split())
    if not intent:
        raise ValidationError(
            "intent must be non-empty text (use DELETE /v1/intent to clear it)", param="intent"
        )
    if len(intent) > MAX_CHARS:
        raise ValidationError(
            f"intent is {len(intent)} characters; keep it under {MAX_CHARS}", param="intent"
        )
    value: IntentValue = {
        "text": intent,
        "source": source,
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if rows is not None:
        value["rows"] = [int(rows[0]), int(rows[1])]
    store.set_state(KEY, value)
    return value


_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def _unsafe(text: str) -> list[str]:
    """The characters of `text` an intent does not keep (see `set_intent`)."""
    return [ch for ch in text if ch in _BIDI or (
        (ord(ch) < 32 or 0x7f <= ord(ch) < 0xa0) and ch not in "\t\n\r")]


def clear(store: MemoryStore) -> None:
    store.delete_state(KEY)


def due(store: MemoryStore, *, session_start: int, interval: int) -> bool:
    """True when `interval` rows of the current session were written since the last
    derivation."""
    after = max(int(store.get_state(DERIVED_AT_KEY, 0) or 0), session_start - 1)
    newest = store.last_buffer_rows(1, after_id=after)
    if not newest or newest[0].id - after < interval:
        return False  # not enough ids for `interval` rows: no need to read them
    return len(store.last_buffer_rows(interval, after_id=after)) >= interval


def mark_derived(store: MemoryStore, buffer_id: int) -> None:
    store.set_state(DERIVED_AT_KEY, buffer_id)


def newest_that_fit(rows: Sequence[BufferRow], chars: int) -> list[BufferRow]:
    """The newest of `rows` whose transcript lines (`intent_messages`) fit `chars`, oldest
    first (none when not even the newest does)."""
    kept: list[BufferRow] = []
    used = 0
    for row in reversed(rows):
        used += min(len(row.content), ROW_CHARS) + len("Assistant: …\n")
        if used > chars:
            break
        kept.append(row)
    return kept[::-1]


def intent_messages(rows: Sequence[BufferRow]) -> list[dict[str, str]]:
    lines = []
    for row in rows:
        label = "User" if row.role == "user" else "Assistant"
        content = " ".join(row.content.split())
        if len(content) > ROW_CHARS:
            content = content[:ROW_CHARS] + "…"
        lines.append(f"{label}: {content}")
    return [
        {"role": "system", "content": INTENT_PROMPT},
        {"role": "user", "content": "\n".join(lines)},
    ]


# words that say nothing of what a conversation is about (with the prompt's own words,
# they do not count as sharing something with the messages: `check_grounded`)
_COMMON_WORDS = """
about after again also because been before being between both could does doing done each even
every from have having here into just like make making many more most much need needs next
only other over same should some such than that their them then there these they this those
through under very want wants were what when where which while will with would your yours
user users assistant
"""
_COMMON = frozenset(_COMMON_WORDS.split())
_WORD = re.compile(r"[^\W\d_]{4,}")


def _stems(text: str) -> set[str]:
    """The words of `text` that can say what it is about, cut to five letters (so that
    "beekeeping" and "beekeepers", "planning" and "planned" meet)."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _COMMON}


def check_grounded(text: str, rows: Sequence[BufferRow]) -> None:
    """Refuse a derived intent that did not come from the conversation: one that says
    nothing the prompt did not (it repeats the instructions), or shares no word with the
    messages it was derived from (a model answering with an example, or another
    conversation). `BackendError` (code ``intent_refused``): nothing is stored, the job's
    error says why (the status, the TUI's status line, /ui)."""
    own = _stems(text) - _stems(INTENT_PROMPT) - _stems(TASK_NOTE)
    why = ""
    if not own:
        why = "it only repeats the instructions"
    elif not own & _stems(" ".join(row.content for row in rows)):
        why = "it shares no word with the messages it was derived from"
    if why:
        raise BackendError(
            f"the backend's intent {text[:160]!r} was refused: {why}; the intent stays as it "
            "was and is derived again after the next messages",
            code="intent_refused")


def clean_answer(answer: str) -> str:
    """The intent sentences from a backend answer (quotes and a label stripped)."""
    text = " ".join((answer or "").split()).strip().strip('"').strip()
    for prefix in ("Intent:", "Current intent:", "The user is currently working on:"):
        if text.lower().startswith(prefix.lower()):
            text = text[len(prefix) :].strip()
    if not text:
        raise BackendError("the backend answered an empty intent")
    return bound(text)


def bound(text: str, limit: int = DERIVED_CHARS) -> str:
    """`text` within `limit` characters: its first two sentences when they fit, else cut
    at a sentence end, else at a word, with an ellipsis."""
    sentences = re.findall(r"[^.!?]+[.!?]+(?:\s|$)|[^.!?]+$", text)
    two = "".join(sentences[:2]).strip()
    if two and len(two) <= limit:
        return two
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    if end >= limit // 3:
        return cut[: end + 1]
    return cut.rsplit(" ", 1)[0].rstrip(",;:") + "…"
