"""The contract of a transcript format's parser: an agent CLI's output, one JSON object
per line, → normalised transcript entries. Each format implements it
(`nixx.nxc.delivery.stream_claude` for Claude Code, `nixx.nxc.delivery.stream_formats` for the others, whose
`parser_for` picks one by name).
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.nxc.delivery.shapes import Entry


class LineParser:
    """One JSON object per line → entries; subclasses implement `parse`."""

    def parse_line(self, line: str) -> list[Entry]:
        line = line.strip()
        if not line:
            return []
        try:
            obj = json.loads(line)
        except ValueError:
            return [{"kind": "error", "data": {"msg": "not a JSON line", "raw": line}}]
        if not isinstance(obj, dict):
            return [{"kind": "error", "data": {"msg": "not a JSON object", "raw": line}}]
        return self.parse(obj)

    def parse(self, obj: dict[str, Any]) -> list[Entry]:
        raise NotImplementedError

    def finish(self) -> list[Entry]:
        """Entries still held when the output ends."""
        return []
