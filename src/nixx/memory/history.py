"""The conversation a client sends: normalising messages, finding the turn's new user
message, and trimming the history to the backend's context budget.

Clients re-send the whole history every turn. The *new* message of a turn is the last
message when it is a user message; a request that ends with a tool result or an
assistant message (a client-side tool round, a prefill) adds no user message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

CHARS_PER_TOKEN = 4  # a cheap estimate; real tokenisers give ~3.5-4.5 for English
MESSAGE_OVERHEAD = 4  # role and separators per message


def text_of(content: Any) -> str:
    """The text of an OpenAI `content`: a string, an array of parts (text parts joined
    with newlines, other parts ignored), or null."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type", "text") == "text":
                texts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return str(content)


def normalise(message: dict[str, Any]) -> dict[str, Any]:
    """A message as sent to the backend: text-only part arrays become plain strings
    (every backend understands those); image and other parts are passed through."""
    out = {k: v for k, v in message.items() if v is not None or k == "content"}
    content = out.get("content")
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type", "text") == "text" for p in content
    ):
        out["content"] = text_of(content)
    return out


def new_user_text(messages: Sequence[dict[str, Any]]) -> str | None:
    """The text of the turn's new user message, or None when the request adds none."""
    if messages and messages[-1].get("role") == "user":
        return text_of(messages[-1].get("content"))
    return None


def latest_user_text(messages: Sequence[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    return None


def estimate_tokens(message: dict[str, Any]) -> int:
    size = len(text_of(message.get("content")))
    if message.get("tool_calls"):
        size += len(json.dumps(message["tool_calls"]))
    return size // CHARS_PER_TOKEN + MESSAGE_OVERHEAD


def split_leading_system(
    messages: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the leading system/developer messages, the rest)."""
    i = 0
    while i < len(messages) and messages[i].get("role") in ("system", "developer"):
        i += 1
    return list(messages[:i]), list(messages[i:])


#: History is dropped in pages of this share of the budget (see `trim_history`).
TRIM_PAGE_SHARE = 0.25


def trim_history(
    history: Sequence[dict[str, Any]], budget_tokens: int
) -> tuple[list[dict[str, Any]], int]:
    """Keep the newest messages that fit `budget_tokens` (the last message always).
    A kept history never starts with tool results whose call was dropped.
    Returns (kept, number dropped).

    The oldest messages are dropped in pages of about a quarter of the budget, cut where
    the sizes summed from the oldest message first pass a multiple of the page. Those cut
    points do not move as the conversation grows (its start does not change), so
    consecutive turns drop the same messages until the next page must go: the request
    keeps beginning the same way, and a backend's prefix cache keeps it, instead of
    losing it on every turn to one more message dropped."""
    costs = [estimate_tokens(m) for m in history]
    total = sum(costs)
    start = 0
    if total > budget_tokens and history:
        page = max(1, int(budget_tokens * TRIM_PAGE_SHARE))
        dropped = 0
        boundary = page
        for i, cost in enumerate(costs[:-1]):
            dropped += cost
            if dropped >= boundary:
                boundary = (dropped // page + 1) * page
                if total - dropped <= budget_tokens:
                    start = i + 1
                    break
        else:
            start = len(history) - 1
        # the newest that fit when a page cut is not enough (one huge message)
        used = sum(costs[start:])
        while start < len(history) - 1 and used > budget_tokens:
            used -= costs[start]
            start += 1
    kept = list(history[start:])
    while len(kept) > 1 and kept[0].get("role") == "tool":
        kept.pop(0)
    return kept, len(history) - len(kept)
