"""Server-sent events: turn a stream of lines into events.

One parser for both directions: the LLM client reading a backend (`nixx.llm.client`)
and the terminal chat reading nixx (`nixx.tui.client`). Follows the WHATWG rules: `data:` lines
accumulate (joined by newlines) until a blank line dispatches the event, `event:` names it,
lines starting with `:` are comments (keep-alives), a `[DONE]` payload ends the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

DONE = "[DONE]"


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"

    @property
    def done(self) -> bool:
        return self.data.strip() == DONE


class SSEParser:
    """Incremental parser: feed it lines (without their newline), get events back."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = "message"

    def feed(self, line: str) -> SSEEvent | None:
        line = line.rstrip("\r")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value or "message"
        return None  # `id`, `retry` and unknown fields are ignored

    def flush(self) -> SSEEvent | None:
        """The last event when the stream ends without a blank line."""
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = "message"
            return None
        event = SSEEvent("\n".join(self._data), self._event)
        self._data = []
        self._event = "message"
        return event


def parse_lines(lines: Iterable[str]) -> Iterator[SSEEvent]:
    parser = SSEParser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event
    last = parser.flush()
    if last is not None:
        yield last


async def aparse_lines(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    parser = SSEParser()
    async for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event
    last = parser.flush()
    if last is not None:
        yield last
