"""One shape for every wire dialect of a turn, and one way to answer with any of them.

A dialect (OpenAI chat completions, OpenAI Responses, Anthropic Messages) is an `Adapter`
with the same parts:

- `given`: the request as the turn's typed input (`nixx.memory.turn.TurnInput`: the body
  in chat completions' shape, more keys for the answer's row, what of the user's text is
  remembered);
- `stream(events, first, info)`: the turn's typed events (`TurnEvent`) as its wire stream,
  an error after the stream began in its own error event;
- `answer(done)`: the finished turn as its JSON answer.

Errors before a stream begins are raised and answered in the dialect's envelope by the
path (`nixx.server.errors.envelope_for`). `answer_turn` is the one route helper: it runs
the turn, awaits the first event before any byte is sent (a backend that fails before
answering is a plain HTTP error, not a broken stream), streams or drains to `Finished`,
and sets the turn's headers (`nixx.server.shapes.turn_headers`). The routes are thin:
parse, build the adapter, `answer_turn`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from nixx.memory.turn_events import Finished, TurnEvent, TurnInfo, TurnInput

if TYPE_CHECKING:
    from fastapi import Response

    from nixx.memory.episodic import Sender
    from nixx.memory.service import NixxService


class Adapter(Protocol):
    """One dialect's translation of a turn (the module docstring)."""

    @property
    def given(self) -> TurnInput: ...

    @property
    def streams(self) -> bool: ...

    def stream(
        self, events: AsyncGenerator[TurnEvent, None], first: TurnEvent, info: TurnInfo
    ) -> AsyncIterator[bytes]: ...

    async def answer(self, done: Finished) -> dict[str, Any]: ...


async def answer_turn(
    service: NixxService, adapter: Adapter, sender: Sender, response: Response
) -> Any:
    """Run the turn `adapter` gives and answer it in its dialect: an event stream when the
    request asked for one, else its JSON answer (`response` gets the turn's headers)."""
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
            adapter.stream(events, first, info),
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

