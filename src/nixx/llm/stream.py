"""Accumulate a streamed chat completion: content deltas and tool-call deltas.

OpenAI streams a tool call in pieces: the first delta for an ``index`` carries the
call's ``id`` and ``function.name``, later ones append to ``function.arguments``.
`StreamAccumulator` folds those pieces back into whole calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCallAccumulator:
    id: str = ""
    name: str = ""
    arguments: str = ""

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class StreamAccumulator:
    """Feed it chunks (`add`); read `content`, `tool_calls()`, `finish_reason`, `usage`."""

    parts: list[str] = field(default_factory=list)
    calls: dict[int, ToolCallAccumulator] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None

    def add(self, chunk: dict[str, Any]) -> str:
        """Fold one chunk in; return the content text it carried ('' if none)."""
        if chunk.get("model") and not self.model:
            self.model = str(chunk["model"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.parts.append(piece)
                text += piece
            for call in delta.get("tool_calls") or []:
                index = int(call.get("index", len(self.calls)))
                acc = self.calls.setdefault(index, ToolCallAccumulator())
                if call.get("id"):
                    acc.id = str(call["id"])
                fn = call.get("function") or {}
                if fn.get("name"):
                    acc.name += str(fn["name"]) if not acc.name else ""
                if fn.get("arguments"):
                    acc.arguments += str(fn["arguments"])
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return text

    @property
    def content(self) -> str:
        return "".join(self.parts)

    def tool_calls(self) -> list[dict[str, Any]]:
        calls = []
        for index in sorted(self.calls):
            acc = self.calls[index]
            if not acc.id:
                acc.id = f"call_{index}"
            calls.append(acc.to_message())
        return calls
