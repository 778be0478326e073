"""The prompt layout: where a turn's memory (intent, recalled memories) goes in the request.

Local backends (llama.cpp, Ollama, vLLM) keep the evaluated prefix of the last request
and evaluate a new one only from where it differs. A request that changes at position 0
— the seed's layout, memory in the system message — is evaluated whole, every turn.
Under the ``cache`` layout (``prompt_layout``, the default):

1. The system message is the base prompt (and the client's own leading system messages):
   the same every turn.
2. The turn's memory goes into the latest user message, after the user's words, behind
   `MEMORY_NOTE` (`place_memory`).
3. It stays there. The next request re-sends that message (the client's history); nixx
   finds the memory it added to it (`MemoryTrail`, keyed by a hash of the conversation up
   to that message, as the client sent it) and adds it again, word for word. So each
   request begins with the whole of the previous one; the backend evaluates only the
   answer and the new message. The model keeps seeing what an earlier answer was
   given, so that answer's "as we discussed on 4 March" still has its source.
4. What a carried memory already holds is not added again: the intent when it has not
   changed, a recalled item already in the conversation (`dedupe`).

The trail lives in the server's memory (the newest `TRAIL_SIZE` placements): after a
restart, an old message comes without its memory once, and the backend evaluates that
request whole. Under ``system`` (the seed's layout) none of this runs.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nixx.memory.history import text_of
from nixx.memory.prompts import INTENT_FRAMING, INTENT_HEADING, MEMORY_NOTE

if TYPE_CHECKING:
    from nixx.memory.recall import Recalled

TRAIL_SIZE = 2048  # placements remembered (each a few KB at most)


def memory_text(block: str) -> str:
    """What is added after the user's words: the note, then the memory block."""
    return f"{MEMORY_NOTE}\n\n{block}" if block else ""


def _with_memory(message: dict[str, Any], memory: str) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):  # parts (an image): the memory is one more text part
        added: Any = [*content, {"type": "text", "text": "\n\n" + memory}]
    else:
        added = f"{text_of(content)}\n\n{memory}"
    return {**message, "content": added}


def place_memory(history: list[dict[str, Any]], memory: str) -> list[dict[str, Any]]:
    """`history` with `memory` added after the text of its latest user message (a copy;
    the client's history is left as it is). Unchanged when there is no user message."""
    if not memory:
        return history
    for i in range(len(history) - 1, -1, -1):
        if history[i].get("role") == "user":
            return [*history[:i], _with_memory(history[i], memory), *history[i + 1 :]]
    return history


class MemoryTrail:
    """The memory nixx added to each user message it sent, by the conversation up to that
    message (thread-safe; the newest `size` kept)."""

    def __init__(self, size: int = TRAIL_SIZE) -> None:
        self.size = size
        self._placed: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def keys(leading: Sequence[dict[str, Any]], history: Sequence[dict[str, Any]]) -> list[bytes]:
        """One key per message of `history`: a hash of the conversation up to and
        including it (the client's leading system messages first), as the client sent it."""
        digest = hashlib.blake2b(digest_size=16)
        for message in leading:
            digest.update(_message_bytes(message))
        out = []
        for message in history:
            digest.update(_message_bytes(message))
            out.append(digest.copy().digest())
        return out

    def carry(
        self, history: list[dict[str, Any]], keys: Sequence[bytes]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """`history` with the memory each earlier user message was sent with added back
        (not the last user message: it gets this turn's); and those memories."""
        last_user = max((i for i, m in enumerate(history) if m.get("role") == "user"), default=-1)
        out = list(history)
        carried: list[str] = []
        with self._lock:
            for i, message in enumerate(history):
                if i == last_user or message.get("role") != "user":
                    continue
                memory = self._placed.get(keys[i])
                if memory:
                    self._placed.move_to_end(keys[i])
                    out[i] = _with_memory(message, memory)
                    carried.append(memory)
        return out, carried

    def forget(self) -> None:
        """Drop every memory kept (a forget or a summary edit: what was carried may say
        what is gone; the conversations' next requests are sent without it)."""
        with self._lock:
            self._placed.clear()

    def remember(self, key: bytes, memory: str) -> None:
        if not memory:
            return
        with self._lock:
            self._placed[key] = memory
            self._placed.move_to_end(key)
            while len(self._placed) > self.size:
                self._placed.popitem(last=False)


def _message_bytes(message: dict[str, Any]) -> bytes:
    calls = message.get("tool_calls")
    return json.dumps(
        [message.get("role"), text_of(message.get("content")), calls or None],
        ensure_ascii=False,
    ).encode() + b"\x1e"


def dedupe(
    intent: str | None, recalled: Sequence[Recalled], carried: Sequence[str]
) -> tuple[str | None, list[Recalled]]:
    """The intent and the recalled items a carried memory does not already hold."""
    if not carried:
        return intent, list(recalled)
    joined = "\n".join(carried)
    for memory in reversed(carried):  # the newest intent the conversation carries
        _, heading, rest = memory.partition(f"{INTENT_HEADING}\n")
        if heading:
            # the section is the framing paragraph, then the intent (`recall.build_memory_block`)
            if rest.startswith(INTENT_FRAMING):
                rest = rest[len(INTENT_FRAMING) :].lstrip("\n")
            if intent and rest.split("\n\n", 1)[0].strip() == intent.strip():
                intent = None
            break
    return intent, [item for item in recalled if item.text not in joined]
