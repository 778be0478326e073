"""Claude Code's `--output-format stream-json` (JSON lines) → normalised transcript entries.

The format, one JSON object per line (`claude -p ... --output-format stream-json --verbose`):

    {"type": "system", "subtype": "init", "session_id": "...", "model": "...", "tools": [...]}
    {"type": "assistant", "message": {"content": [
        {"type": "text", "text": "..."},
        {"type": "thinking", "thinking": "..."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {...}}]},
     "parent_tool_use_id": null, "session_id": "..."}
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "..." | [{"type": "text",
         "text": "..."}], "is_error": false}]}, "parent_tool_use_id": null}
    {"type": "result", "subtype": "success", "is_error": false, "result": "...",
     "session_id": "...", "num_turns": 3, "total_cost_usd": 0.01}

A sub-agent spawned by the `Task` tool writes its own assistant/user lines with
`parent_tool_use_id` set to the id of that Task call; the parser carries it as
`parentToolUseId` and names the sub-agent from the Task call's `subagent_type`.

Each content block becomes one entry: kind session_init | assistant | thinking | tool_use |
tool_result | result | error; any other line type is kept with its type as the kind and
the raw object as data. A line that is not JSON becomes an `error` entry holding it.
Caps (thinking 4,000, tool results 8,000 characters) are applied by the store.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from nixx.nxc.delivery.stream_parser import LineParser

if TYPE_CHECKING:
    from nixx.nxc.delivery.shapes import Entry, EntryFields


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                else:
                    parts.append(json.dumps(block, ensure_ascii=False))
            else:
                parts.append(str(block))
        return "\n".join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)


class StreamJsonParser(LineParser):
    """Stateful: remembers Task calls so their sub-agent's entries can be named."""

    def __init__(self) -> None:
        self.subagents: dict[str, str] = {}
        self.session_id: str | None = None

    def parse(self, obj: dict[str, Any]) -> list[Entry]:
        kind = obj.get("type")
        parent = obj.get("parent_tool_use_id") or None
        base: EntryFields = {}
        if parent:
            base["parentToolUseId"] = parent
            if parent in self.subagents:
                base["subagentType"] = self.subagents[parent]
        if kind == "system" and obj.get("subtype") == "init":
            self.session_id = obj.get("session_id") or self.session_id
            data: dict[str, Any] = {k: obj[k] for k in ("session_id", "model", "cwd", "tools") if k in obj}
            return [{"kind": "session_init", **base, "data": data}]
        if kind in ("assistant", "user"):
            message = obj.get("message") or {}
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list):
                return [{"kind": kind, **base, "data": obj}]
            out: list[Entry] = []
            for block in content:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text":
                    if kind == "assistant":
                        out.append({"kind": "assistant", **base,
                                    "data": {"text": block.get("text", "")}})
                    else:
                        out.append({"kind": "user", **base, "data": {"text": block.get("text", "")}})
                elif btype in ("thinking", "redacted_thinking"):
                    out.append({"kind": "thinking", **base,
                                "data": {"text": block.get("thinking") or block.get("data") or ""}})
                elif btype == "tool_use":
                    tool_id = block.get("id")
                    tool_input = block.get("input") or {}
                    if (block.get("name") in ("Task", "Agent") and isinstance(tool_id, str)
                            and isinstance(tool_input, dict)):
                        self.subagents[tool_id] = str(tool_input.get("subagent_type") or "task")
                    out.append({"kind": "tool_use", **base, "toolUseId": tool_id,
                                "data": {"name": block.get("name"), "input": tool_input}})
                elif btype == "tool_result":
                    out.append({"kind": "tool_result", **base, "toolUseId": block.get("tool_use_id"),
                                "data": {"content": _text_of(block.get("content")),
                                         "is_error": bool(block.get("is_error", False))}})
                else:
                    out.append({"kind": str(btype or kind), **base, "data": block})
            return out
        if kind == "result":
            data = {k: obj[k] for k in ("subtype", "is_error", "num_turns", "duration_ms",
                                         "total_cost_usd", "session_id") if k in obj}
            data["text"] = _text_of(obj.get("result"))
            return [{"kind": "result", **base, "data": data}]
        return [{"kind": str(kind or "unknown"), **base, "data": obj}]
