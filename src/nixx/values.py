"""Bounds on values that come from outside (HTTP bodies, tool arguments the model
writes): the 64-bit integer range of the stores, and JSON values no store or backend can
take — NaN/±Infinity and lone UTF-16 surrogates. Used by `nixx.server.edge` (every
request) and `nixx.tools.registry` (every tool call)."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_ID = 2**63 - 1  # SQLite INTEGER and PostgreSQL BIGINT

_SURROGATE = re.compile("[\ud800-\udfff]")


def bad_json_value(value: Any, path: str = "") -> tuple[str, str] | None:
    """(param, problem) for the first NaN/Infinity or lone surrogate in `value`, or None."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return where, f"{item!r} is not a JSON number"
        elif isinstance(item, str):
            if _SURROGATE.search(item):
                return where, "contains a lone UTF-16 surrogate (not valid Unicode text)"
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                at = f"{where}.{key}" if where else str(key)
                if _SURROGATE.search(str(key)):
                    return at, "the key contains a lone UTF-16 surrogate"
                stack.append((sub, at))
        elif isinstance(item, list):
            for i in range(len(item) - 1, -1, -1):
                stack.append((item[i], f"{where}.{i}" if where else str(i)))
    return None
