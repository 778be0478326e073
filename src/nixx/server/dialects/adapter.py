"""One shape for every wire dialect of a turn, and one way to answer with any of them.

A dialect (OpenAI chat completions, OpenAI Responses, Anthropic Messages) is an `Adapter`
with the same parts:

- the request in: `given`, the turn's typed input (`nixx.memory.turn_events.TurnInput`:
  the body in chat completions' shape, more keys for the answer's row, what of the
  user's text is remembered), made when the adapter is made — a request the dialect
  cannot translate is refused then, before anything runs; `streams`, whether the client
  asked for an event stream;
- the typed turn events out (`nixx.memory.turn_events.TurnEvent`), as its wire stream:
  `opening` (the stream's first events, once the turn has begun and named its model),
  one handler per event type (`delta`, `reasoning`, `tool_run`, `client_calls`, `finished`) and
  `closing` (what ends every stream, even a failed one); or, not streamed, `answer`, the
  finished turn as its JSON answer;
- errors in its envelope: `failed`, a `NixxError` raised after the stream began as the
  dialect's error event(s). An error before the stream begins is raised, and the
  server's handlers answer it in the envelope of the request's path
  (`nixx.server.errors.envelope_for`).

`Adapter.wire` is the one streaming path every dialect runs through: the opening, each
event through its handler, the error events on a failure, the closing — and the turn's
events closed at the end, whatever happened. `answer_turn` is the one route helper: it
runs the turn on the adapter's input, awaits the first event before any byte is sent (a
backend that fails before answering is a plain HTTP error in the dialect's envelope, not
a broken stream), then streams (`wire`) or drains to `Finished` (`answer`), with the
turn's headers (`nixx.server.shapes.turn_headers`). The routes are thin: parse, make the
adapter, `answer_turn`.

An adapter is translation only: no I/O but what its maker hands it (the Responses
API's `save` callback, which keeps the response before the stream's last event).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from nixx.errors import NixxError
from nixx.memory.turn_events import (
    ClientToolCalls,
    Delta,
    Finished,
    Reasoning,
    ToolRun,
    TurnEvent,
    TurnInfo,
    TurnInput,
)

if TYPE_CHECKING:
    from fastapi import Response

    from nixx.memory.episodic import Sender
    from nixx.memory.service import NixxService

#: the parts every dialect's adapter defines itself (`tests/test_architecture.py`)
PARTS = ("given", "streams", "opening", "delta", "finished", "failed", "answer")


class Adapter(ABC):
    """One dialect's translation of a turn (the module docstring): `given` and `streams`
    are set by the dialect's constructor from its request."""

    given: TurnInput
    streams: bool

    # ---- the wire stream ----------------------------------------------------------------
    @abstractmethod
    def opening(self, info: TurnInfo) -> list[bytes]:
        """The stream's first events; `info` has the turn's ``model`` by now."""

    @abstractmethod
    def delta(self, event: Delta) -> list[bytes]:
        """Answer text."""

    def reasoning(self, event: Reasoning) -> list[bytes]:
        """The model's thinking (left out unless the dialect shows it)."""
        return []

    def tool_run(self, event: ToolRun) -> list[bytes]:
        """One of nixx's own tools ran (left out unless the dialect shows it)."""
        return []

    def client_calls(self, event: ClientToolCalls) -> list[bytes]:
        """The client's tools called: the turn ends after this, for the client to run them."""
        return []

    @abstractmethod
    async def finished(self, done: Finished) -> list[bytes]:
        """The turn's end: the stop reason, the usage, nixx's memory details."""

    @abstractmethod
    def failed(self, exc: NixxError) -> list[bytes]:
        """A failure after the stream began, in the dialect's own error event(s)."""

    def closing(self) -> list[bytes]:
        """What ends every stream, finished or failed (OpenAI chat's ``[DONE]``)."""
        return []

    # ---- the JSON answer ------------------------------------------------------------------
    @abstractmethod
    async def answer(self, done: Finished) -> dict[str, Any]:
        """The finished turn as the dialect's JSON answer (not streamed)."""

    # ---- the one streaming path -----------------------------------------------------------
    async def encode(self, event: TurnEvent) -> list[bytes]:
        """One turn event as the dialect's wire events (its handler's)."""
        if isinstance(event, Delta):
            return self.delta(event)
        if isinstance(event, Reasoning):
            return self.reasoning(event)
        if isinstance(event, ToolRun):
            return self.tool_run(event)
        if isinstance(event, ClientToolCalls):
            return self.client_calls(event)
        return await self.finished(event)

    async def wire(
        self, events: AsyncGenerator[TurnEvent, None], first: TurnEvent, info: TurnInfo
    ) -> AsyncIterator[bytes]:
        """The turn's events as the dialect's stream, starting with `first` (awaited by
        the route before any byte was sent); `events` is closed at the end."""
        try:
            for chunk in self.opening(info):
                yield chunk
            event = first
            while True:
                for chunk in await self.encode(event):
                    yield chunk
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
        except NixxError as exc:
            for chunk in self.failed(exc):
                yield chunk
        finally:
            await events.aclose()
        for chunk in self.closing():
            yield chunk


async def answer_turn(
    service: NixxService, adapter: Adapter, sender: Sender, response: Response
) -> Any:
    """Run the turn `adapter` gives and answer it in its dialect: its event stream when
    the request asked for one, else its JSON answer (`response` gets the turn's headers)."""
    from fastapi.responses import StreamingResponse

    from nixx.server.shapes import turn_headers

    info: TurnInfo = {}
    events = service.turn(adapter.given, sender, info)
    if adapter.streams:
        try:
            first = await events.__anext__()
        except BaseException:
            await events.aclose()
            raise
        return StreamingResponse(
            adapter.wire(events, first, info),
            media_type="text/event-stream",
            headers=turn_headers(info, stream=True),
        )
    done: Finished | None = None
    async for event in events:
        if isinstance(event, Finished):
            done = event
    assert done is not None
    response.headers.update(turn_headers(info))
    return await adapter.answer(done)
