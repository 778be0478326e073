"""Stored responses (the Responses API): what lets a client continue one
(``previous_response_id``), read it back (``GET /v1/responses/{id}``, its input items)
and delete it.

A stored response is a pointer (state key ``response:<id>``) to its answer's buffer row
with what the answer said of itself (``status``, ``model``, ``usage``); the row's
``meta.response`` (written by the turn) holds ``id``, ``previous`` (the response it
continued), ``input`` (the chat messages the request added), ``start`` (nixx's estimate,
in tokens, of the chain before it) and ``left_out`` (how many of the request's messages
were not kept). The text lives only in buffer rows, so forgetting a row forgets the
response with it.

Bounds (issue 39): a 15 MiB tool output before a small user message was kept whole in the
answer's meta (the store grew 315 MB in 20 requests), and a continuation loaded its whole
chain, however long, from a body of 200 bytes (1.5 GB, unseen by the in-flight budget):

- a record keeps the newest of the request's messages that fit the model's context window
  by nixx's estimate (`bounded_input`; an image by its URL's length): older ones could
  never be sent again, since trimming keeps the newest messages and a continuation only
  adds newer ones;
- a continuation walks back only as far as trimming could reach (`StoredResponses.walk`):
  to twice the window, the start cut at a multiple of half the window counted from the
  chain's beginning (``start``), so consecutive turns begin at the same message and a
  backend's prefix cache keeps them; every record loaded is held in the in-flight budget
  (``NIXX_MAX_INFLIGHT_BYTES``) first, and a full budget is a 503 ``server_busy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nixx.errors import NotFound, ServerBusy
from nixx.memory.history import CHARS_PER_TOKEN, estimate_tokens

if TYPE_CHECKING:
    from nixx.store.base import MemoryStore
    from nixx.store.records import BufferRow

RESPONSE_KEY = "response:"  # state key prefix: a stored response id -> its answer row
MAX_RESPONSE_CHAIN = 10_000  # previous_response_id links walked at most
WALK_WINDOWS = 2  # a continuation loads at most about this many context windows


def stored_tokens(message: dict[str, Any]) -> int:
    """nixx's estimate of a stored message (`estimate_tokens`), images by their URL."""
    size = estimate_tokens(message)
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            image = part.get("image_url") if isinstance(part, dict) else None
            if isinstance(image, dict) and isinstance(image.get("url"), str):
                size += len(image["url"]) // CHARS_PER_TOKEN
    return size


def bounded_input(
    messages: list[dict[str, Any]], window: int
) -> tuple[list[dict[str, Any]], int]:
    """(the newest of `messages` that fit `window` tokens together, how many older ones
    were left out)."""
    used, start = 0, len(messages)
    while start > 0 and used + stored_tokens(messages[start - 1]) <= window:
        start -= 1
        used += stored_tokens(messages[start])
    return messages[start:], start


@dataclass
class Chain:
    """A continuation's stored conversation: its chat messages (oldest first), where the
    next record starts (``start``) and the estimated tokens loaded."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    next_start: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class StoredResponse:
    """One stored response as read back: its answer row, the row's record, and what the
    pointer says of the answer (``status``, ``model``, ``usage``)."""

    row: BufferRow
    record: dict[str, Any]
    said: dict[str, Any]


def _answer(row: BufferRow) -> dict[str, Any]:
    calls = [
        {"id": c.get("id"), "type": "function",
         "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
        for c in row.meta.get("tool_calls") or []
    ]
    answer: dict[str, Any] = {"role": "assistant", "content": row.content or None}
    if calls:
        answer["tool_calls"] = calls
    return answer


class StoredResponses:
    """The stored responses of one store; every method blocks (run it in a thread)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def save(self, response_id: str, row_id: int, said: dict[str, Any]) -> None:
        """Let `response_id` be continued and read: a pointer to its answer row."""
        self.store.set_state(RESPONSE_KEY + response_id, {"row": row_id, **said})

    def find(self, response_id: str) -> StoredResponse | None:
        value = self.store.get_state(RESPONSE_KEY + response_id)
        said = value if isinstance(value, dict) else {"row": value}
        row_id = said.get("row")
        rows = self.store.get_buffer(row_id, row_id) if isinstance(row_id, int) else []
        record = rows[0].meta.get("response") if rows else None
        if not isinstance(record, dict) or record.get("id") != response_id:
            return None
        return StoredResponse(rows[0], record, said)

    def get(self, response_id: str, param: str | None = None) -> StoredResponse:
        found = self.find(response_id)
        if found is None:
            raise NotFound(
                f"no stored response {response_id!r}: it was never stored (store: false, "
                "or another server), or it was deleted or forgotten", param=param,
            )
        return found

    def delete(self, response_id: str) -> None:
        """Forget the response: its pointer, and its record in the answer's row (the
        messages the request added). The buffer rows the turn wrote stay in memory
        (`POST /v1/forget` forgets those)."""
        found = self.get(response_id)
        self.store.delete_state(RESPONSE_KEY + response_id)
        self.store.update_buffer_meta(found.row.id, {"response": None})

    def walk(self, response_id: str, window: int, hold: Callable[[int], bool]) -> Chain:
        """The conversation up to and including `response_id`, as far back as trimming to
        a `window`-token context could reach (the module's docstring); each record loaded
        is held first (`hold`: its size in bytes; False is `ServerBusy`). An older link
        that was forgotten ends the walk there (what is forgotten stays forgotten)."""
        limit, page = WALK_WINDOWS * window, max(window // 2, 1)
        chain, parts = Chain(), []
        cut: int | None = None
        rid: str | None = response_id
        seen: set[str] = set()
        while rid and rid not in seen and len(seen) < MAX_RESPONSE_CHAIN:
            seen.add(rid)
            found = self.find(rid)
            if found is None:
                break
            messages = [*(found.record.get("input") or []), _answer(found.row)]
            size = sum(stored_tokens(m) for m in messages)
            if not hold(size * CHARS_PER_TOKEN):
                raise ServerBusy(
                    "the server is busy with other requests (NIXX_MAX_INFLIGHT_BYTES): the "
                    f"conversation response {response_id!r} continues does not fit beside "
                    "them now; retry in a moment")
            start = found.record.get("start")
            if not seen - {response_id}:  # the newest: where the chain ends
                chain.next_start = (start if isinstance(start, int) else 0) + size
                if isinstance(start, int):
                    cut = max(0, (chain.next_start - limit) // page * page)
            parts.append(messages)
            chain.tokens += size
            if cut is not None and isinstance(start, int) and start <= cut:
                break  # this record reaches the cut: older ones would be trimmed
            if (cut is None or not isinstance(start, int)) and chain.tokens > limit:
                break
            rid = found.record.get("previous")
        if not parts:
            self.get(response_id, "previous_response_id")  # says why
        chain.messages = [m for part in reversed(parts) for m in part]
        return chain
