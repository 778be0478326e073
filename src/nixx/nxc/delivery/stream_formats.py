"""The machine-readable output of agent CLIs → normalised transcript entries.

One parser per format a runtime declares as its `transcript` (a preset sets it):

- ``stream-json`` — Claude Code (`nixx.nxc.delivery.stream_claude`);
- ``codex-json`` — `codex exec --json`, one event per line:

      {"type": "thread.started", "thread_id": "..."}
      {"type": "turn.started"}
      {"type": "item.started", "item": {"id": "item_0", "type": "command_execution",
                                        "command": "...", "status": "in_progress"}}
      {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution",
                                          "command": "...", "aggregated_output": "...",
                                          "exit_code": 0, "status": "completed"}}
      {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message",
                                          "text": "..."}}
      {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}}
      {"type": "turn.failed", "error": {"message": "..."}}   {"type": "error", "message": "..."}

  Items: `agent_message` (assistant), `reasoning` (thinking), `command_execution`,
  `mcp_tool_call`, `web_search`, `file_change` (tool_use + tool_result, keyed by the item
  id), `todo_list` (kept as its own kind), `error`.
- ``gemini-json`` — `gemini --output-format stream-json`, one event per line:

      {"type": "init", "session_id": "...", "model": "..."}
      {"type": "message", "role": "assistant", "content": "...", "delta": true}
      {"type": "tool_use", "tool_name": "...", "tool_id": "...", "parameters": {...}}
      {"type": "tool_result", "tool_id": "...", "status": "success", "output": "..."}
      {"type": "error", "severity": "warning", "message": "..."}
      {"type": "result", "status": "success", "stats": {...}}

  Streamed assistant chunks (`delta: true`) are joined into one `assistant` entry, closed
  by the next other event (or the end of the output).

Every parser yields entries of the transcript kinds (session_init | assistant | thinking |
tool_use | tool_result | result | error); an unknown event is kept with its type as the
kind and the raw object as data; a line that is not a JSON object is an `error` entry.
`session_init` carries the runtime's own id as `data.session_id` (bound to the nxc
session, so a resume can name it).
"""

from __future__ import annotations

import json

from nixx.nxc.delivery.stream_parser import LineParser

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.nxc.delivery.shapes import Entry

FORMATS = ("stream-json", "codex-json", "gemini-json", "nixx", "none")


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


class CodexJsonParser(LineParser):
    def __init__(self) -> None:
        self.started: set[str | None] = set()  # tool items whose tool_use entry was written

    def _tool_use(self, item: dict[str, Any]) -> Entry | None:
        kind = item.get("type") or item.get("item_type")
        given: dict[str, Any]
        if kind == "command_execution":
            name, given = "shell", {"command": item.get("command")}
        elif kind == "mcp_tool_call":
            name = f"{item.get('server') or 'mcp'}.{item.get('tool') or 'tool'}"
            arguments = item.get("arguments")
            given = arguments if isinstance(arguments, dict) else {}
        elif kind == "web_search":
            name, given = "web_search", {"query": item.get("query")}
        elif kind == "file_change":
            name = "apply_patch"
            given = {"changes": item.get("changes") if isinstance(item.get("changes"), list)
                     else []}
        else:
            return None
        return {"kind": "tool_use", "toolUseId": item.get("id"),
                "data": {"name": name, "input": given}}

    def parse(self, obj: dict[str, Any]) -> list[Entry]:
        kind = obj.get("type")
        if kind in ("thread.started", "thread.resumed"):
            return [{"kind": "session_init", "data": {"session_id": obj.get("thread_id")}}]
        if kind in ("item.started", "item.completed"):
            item = obj.get("item")
            if not isinstance(item, dict):
                return [{"kind": "error", "data": {"msg": f"{kind} without an item",
                                                   "raw": obj}}]
            return self._item(item, completed=kind == "item.completed")
        if kind == "turn.completed":
            return [{"kind": "result", "data": {"subtype": "success", "is_error": False,
                                                "usage": obj.get("usage") or {}}}]
        if kind == "turn.failed":
            raw = obj.get("error")
            error: dict[str, Any] = raw if isinstance(raw, dict) else {}
            return [{"kind": "error", "data": {"msg": _str(error.get("message") or error)}},
                    {"kind": "result", "data": {"subtype": "error", "is_error": True}}]
        if kind == "error":
            return [{"kind": "error", "data": {"msg": _str(obj.get("message"))}}]
        if kind in ("turn.started", "item.updated"):
            return []  # progress without content: the completed item carries it
        return [{"kind": str(kind or "unknown"), "data": obj}]

    def _item(self, item: dict[str, Any], *, completed: bool) -> list[Entry]:
        kind = item.get("type") or item.get("item_type")
        item_id = item.get("id")
        use = self._tool_use(item)
        if use is not None:
            out: list[Entry] = []
            if item_id not in self.started:
                self.started.add(item_id)
                out.append(use)
            if completed:
                if kind == "command_execution":
                    code = item.get("exit_code")
                    data = {"content": _str(item.get("aggregated_output")),
                            "is_error": code not in (0, None) or item.get("status") == "failed",
                            "exit_code": code}
                elif kind == "mcp_tool_call":
                    failed = item.get("status") == "failed" or bool(item.get("error"))
                    data = {"content": _str(item.get("error") if failed else item.get("result")),
                            "is_error": failed}
                elif kind == "file_change":
                    changes = use["data"]["input"]["changes"]
                    data = {"content": "\n".join(
                        f"{c.get('kind', 'update')} {c.get('path', '?')}" for c in changes
                        if isinstance(c, dict)), "is_error": item.get("status") == "failed"}
                else:
                    data = {"content": "", "is_error": False}
                out.append({"kind": "tool_result", "toolUseId": item_id, "data": data})
            return out
        if not completed:
            return []
        if kind in ("agent_message", "assistant_message"):
            return [{"kind": "assistant", "data": {"text": _str(item.get("text"))}}]
        if kind == "reasoning":
            return [{"kind": "thinking", "data": {"text": _str(item.get("text"))}}]
        if kind == "error":
            return [{"kind": "error", "data": {"msg": _str(item.get("message"))}}]
        return [{"kind": str(kind or "item"), "data": item}]


class GeminiJsonParser(LineParser):
    def __init__(self) -> None:
        self.pending: list[str] = []  # streamed assistant chunks not written yet

    def _flush(self) -> list[Entry]:
        if not self.pending:
            return []
        text, self.pending = "".join(self.pending), []
        return [{"kind": "assistant", "data": {"text": text}}]

    def finish(self) -> list[Entry]:
        return self._flush()

    def parse(self, obj: dict[str, Any]) -> list[Entry]:
        kind = obj.get("type")
        if kind == "message" and obj.get("role") in ("assistant", "model"):
            self.pending.append(_str(obj.get("content")))
            return [] if obj.get("delta") else self._flush()
        out = self._flush()
        if kind == "init":
            out.append({"kind": "session_init", "data": {
                k: obj[k] for k in ("session_id", "model") if k in obj}})
        elif kind == "message":
            out.append({"kind": "user", "data": {"text": _str(obj.get("content"))}})
        elif kind == "tool_use":
            params = obj.get("parameters")
            out.append({"kind": "tool_use", "toolUseId": obj.get("tool_id"), "data": {
                "name": obj.get("tool_name"), "input": params if isinstance(params, dict)
                else {}}})
        elif kind == "tool_result":
            error = obj.get("error")
            failed = obj.get("status") == "error"
            content = obj.get("output")
            if failed and content in (None, ""):
                content = error.get("message") if isinstance(error, dict) else error
            out.append({"kind": "tool_result", "toolUseId": obj.get("tool_id"),
                        "data": {"content": _str(content), "is_error": failed}})
        elif kind == "error":
            out.append({"kind": "error", "data": {"msg": _str(obj.get("message")),
                                                  "severity": obj.get("severity")}})
        elif kind == "result":
            status = obj.get("status")
            data = {"subtype": status, "is_error": status not in (None, "success"),
                    "stats": obj.get("stats") or {}}
            if isinstance(obj.get("error"), dict):
                data["error"] = obj["error"].get("message")
            out.append({"kind": "result", "data": data})
        else:
            out.append({"kind": str(kind or "unknown"), "data": obj})
        return out


def parser_for(fmt: str) -> LineParser | None:
    """A fresh parser for the transcript format `fmt` (stream-json, codex-json,
    gemini-json); None for `nixx` (already entries) and `none`."""
    if fmt == "stream-json":
        from nixx.nxc.delivery.stream_claude import StreamJsonParser

        return StreamJsonParser()
    if fmt == "codex-json":
        return CodexJsonParser()
    if fmt == "gemini-json":
        return GeminiJsonParser()
    return None
