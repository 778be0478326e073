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


def trim_history(
    history: Sequence[dict[str, Any]], budget_tokens: int
) -> tuple[list[dict[str, Any]], int]:
    """Keep the newest messages that fit `budget_tokens` (the last message always).
    A kept history never starts with tool results whose call was dropped.
    Returns (kept, number dropped)."""
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(history):
        cost = estimate_tokens(message)
        if kept and used + cost > budget_tokens:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    while len(kept) > 1 and kept[0].get("role") == "tool":
        kept.pop(0)
    return kept, len(history) - len(kept)
