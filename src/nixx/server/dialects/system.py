"""System messages inside a conversation: where a dialect puts them, and the harness text
the turn keeps out of the user's buffer row.

Clients send instructions as messages, not only as a request field: Claude Code (from
2.1.154; 2.1.197 is what npm installs on Node 20) puts a ``{"role": "system"}`` message
in ``messages`` (MCP servers' instructions, reminders), Codex sends ``developer`` items
in the Responses API's ``input``. `place_system` gives each a stable place in the chat
request the turn takes:

- one that comes **before** the conversation's first user or assistant message stays
  there: the turn joins the leading system messages, in order, after nixx's prompt and
  the request's own ``system``/``instructions`` (`nixx.memory.turn`), so the backend
  gets one leading system message that begins the same way every turn;
- one that comes **later** stays where it stands in the conversation, as a
  ``<system-reminder>`` span on the user's side: appended to the user or tool message
  just before it; after an assistant message, put before the user or tool message that
  follows; with none following, a user message of its own.

Why not hoist a later one into the system message, as some gateways do: the request's
start would change the turn it arrives, and a backend's prefix cache would lose the whole
conversation; the messages before it must read as they did. Why not send it as a system
message in place: the chat templates of many local models refuse a system message that
is not first (Qwen's "System message must be at the beginning", templates that require
user/assistant to alternate). ``<system-reminder>`` is the form Claude Code used for this
text before it sent system messages, so models tuned for it read it as instructions, and
`remembered` keeps such spans out of the user's buffer row and of recall's query. The
same history is placed the same way every turn, so the prefix stays stable.
"""

from __future__ import annotations

import re
from typing import Any

from nixx.memory.history import text_of

SYSTEM_ROLES = ("system", "developer")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.S)
_USER_SIDE = ("user", "tool")


def remembered(text: str) -> str:
    """The user's text without the client's ``<system-reminder>`` spans."""
    return _REMINDER.sub("", text).strip()


def reminder(text: str) -> str:
    """`text` as one ``<system-reminder>`` span (text that already is one is kept)."""
    stripped = text.strip()
    if stripped.startswith("<system-reminder>") and not remembered(stripped):
        return stripped
    return f"<system-reminder>\n{stripped}\n</system-reminder>"


def _with(content: Any, span: str, *, before: bool) -> Any:
    """`content` (a string, parts or null) with `span` added after it (or before)."""
    if isinstance(content, list):
        part = {"type": "text", "text": span}
        return [part, *content] if before else [*content, part]
    base = content if isinstance(content, str) else ""
    if not base:
        return span
    return f"{span}\n\n{base}" if before else f"{base}\n\n{span}"


def place_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (chat form) with every system or developer message that comes after
    the conversation began placed on the user's side (the module's rule); the leading
    ones, and everything else, unchanged. Empty ones are left out."""
    out: list[dict[str, Any]] = []
    waiting: list[str] = []  # spans after an assistant message, for the next user side
    for message in messages:
        role = message.get("role")
        if role in SYSTEM_ROLES:
            text = text_of(message.get("content"))
            if not text.strip():
                continue
            if all(m.get("role") in SYSTEM_ROLES for m in out):
                out.append(message)  # leading: part of the system prompt
            elif out[-1].get("role") in _USER_SIDE and not waiting:
                out[-1] = {**out[-1], "content": _with(out[-1].get("content"),
                                                       reminder(text), before=False)}
            else:
                waiting.append(reminder(text))
            continue
        if waiting and role in _USER_SIDE:
            message = {**message, "content": _with(message.get("content"),
                                                   "\n\n".join(waiting), before=True)}
            waiting = []
        elif waiting:
            out.append({"role": "user", "content": "\n\n".join(waiting)})
            waiting = []
        out.append(message)
    if waiting:
        out.append({"role": "user", "content": "\n\n".join(waiting)})
    return out
