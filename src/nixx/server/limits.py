"""The request-body limits: a plain ASGI middleware that refuses a body larger than
``NIXX_MAX_REQUEST_BYTES`` with 413, one that has not arrived whole within
``NIXX_REQUEST_TIMEOUT`` seconds of its headers (a slow-loris client holding a
connection and a task by trickling bytes) with 408, and a body that would take the bytes
of all requests being served past ``NIXX_MAX_INFLIGHT_BYTES`` with 503 and
``Retry-After`` (concurrent large requests: each costs memory while it is served, so
their sum is what bounds the server's size), all with the OpenAI error envelope. One
request alone is always admitted, so a budget smaller than one body never locks out.

It is enforced while the body is read, never after buffering it: a declared
``Content-Length`` over the limit is refused without keeping a byte of the body (one of at
most `LINGER_BYTES` is read and dropped first, so the client can read the answer; a larger
one is refused before a byte is read), and a
body without one (chunked) is counted as it arrives and refused the moment it passes the
limit; the route then sees the client as gone. The connection is closed after a 413 (the
rest of the body is not read). A body refused for the in-flight budget is read and dropped
before the 503 (it is within the size limit and nothing of it is kept): closing with it
unread would reset the connection, and the client would never see the answer telling it to
retry. Responses are not buffered, so streaming is untouched; the
time limit ends with the body (a streaming answer may take as long as it takes).

Two more bounds on what a request costs once it is parsed:

- a JSON body holding more than ``NIXX_MAX_JSON_ITEMS`` objects and arrays is answered
  400 ``too_many_items`` before the app parses it: 15 MiB of empty content blocks is
  600,000 objects, several hundred MB as Python dicts and more again once validated and
  translated (2.6 GB measured on ``/v1/messages``). The braces are counted as the body
  arrives (a count of ``{`` and ``[`` bytes, C speed); only a body whose count passes the
  limit is counted again without the braces inside strings (`json_items`), once whole;
- a route that expands a small request into more (a Responses continuation loads the
  stored conversation it continues) holds those bytes in the same in-flight budget as the
  bodies: `hold_bytes` (``scope["nixx.hold"]``) takes them or says no, and they are given
  back when the request ends.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import anyio

from nixx.server.errors import send_error

if TYPE_CHECKING:
    from starlette.types import Message  # an ASGI message

# A body declared over the size limit but at most this large is read and dropped (for at
# most LINGER_SECONDS) before the 413, so the client reads the answer instead of a reset
# connection; a larger one is answered at once, before a byte of it is read.
LINGER_BYTES = 64 * 1024 * 1024
LINGER_SECONDS = 5.0
HOLD_KEY = "nixx.hold"  # the scope key of a request's `hold_bytes`
# a JSON string, escapes included (unrolled: no backtracking)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def json_items(body: bytes, stop: int | None = None) -> int:
    """The objects and arrays in a JSON `body`: its ``{`` and ``[`` outside strings,
    counted between its strings in place (a copy without them took 433 MiB for 15 MiB of
    empty blocks: issue 39's bench), up to `stop` (past it, the count so far)."""
    count = pos = 0
    for string in _JSON_STRING.finditer(body):
        count += body.count(b"{", pos, string.start()) + body.count(b"[", pos, string.start())
        if stop is not None and count > stop:
            return count
        pos = string.end()
    return count + body.count(b"{", pos) + body.count(b"[", pos)


def hold_bytes(scope: MutableMapping[str, Any]) -> Callable[[int], bool]:
    """The request's way to hold `n` more bytes in the in-flight budget until it ends:
    True when they fit (or the request is alone), False when the budget is full. Without
    the middleware (an app built for a test) every hold fits."""
    hold = scope.get(HOLD_KEY)
    return hold if callable(hold) else (lambda n: True)


class RequestSizeLimit:
    def __init__(self, app: Any, max_bytes: int, body_timeout: float = 60.0,
                 max_inflight: int | None = None, max_items: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout
        self.max_inflight = max_inflight if max_inflight is not None else 4 * max_bytes
        self.max_items = max_items
        # body bytes of the requests being served (declared or seen), and what routes hold
        # besides (`hold_bytes`; from worker threads too, hence the lock)
        self.inflight = 0
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = 0
        for name, value in scope.get("headers") or []:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    if declared <= LINGER_BYTES:  # read and dropped, so the 413 is read
                        await self._drain(receive, time.monotonic() + LINGER_SECONDS,
                                          cap=LINGER_BYTES)
                    await self._refuse(send, scope)
                    return
                break
        if not self._admit(max(declared, 0)):
            # read and drop the body first (its size is within the limit, and nothing is
            # kept): closing with it unread resets the connection, and the client would
            # see "connection reset" instead of being told to retry
            await self._drain(receive, time.monotonic() + self.body_timeout, cap=self.max_bytes)
            await self._busy(send, scope)
            return
        served = _Served(self, scope, receive, send, max(declared, 0))
        scope[HOLD_KEY] = served.hold
        try:
            await self.app(scope, served.receive, served.send)
        finally:
            served.release()

    def _take(self, n: int, mine: int) -> bool:
        """Add `n` bytes to the in-flight sum when they fit, or when the request holding
        `mine` is the only one served."""
        with self._lock:
            if self.inflight + n > self.max_inflight and self.inflight > mine:
                return False
            self.inflight += n
            return True

    async def _drain(self, receive: Any, deadline: float, *, cap: int) -> None:
        """Read a refused request's body to its end and drop it: at most `cap` bytes, until
        `deadline`."""
        seen = 0
        while seen <= cap:
            message = None
            with anyio.move_on_after(max(deadline - time.monotonic(), 0)):
                message = await receive()
            if message is None or message["type"] != "http.request":
                return
            seen += len(message.get("body") or b"")
            if not message.get("more_body"):
                return

    def _admit(self, size: int) -> bool:
        with self._lock:
            if self.inflight == 0 or self.inflight + size <= self.max_inflight:
                self.inflight += size
                return True
            return False

    async def _refuse(self, send: Any, scope: dict[str, Any]) -> None:
        message = (
            f"the request body is larger than {self.max_bytes} bytes, the server's limit "
            "(NIXX_MAX_REQUEST_BYTES); send less"
        )
        await send_error(
            send, message, 413, code="request_too_large", headers=[(b"connection", b"close")],
            path=scope.get("path") or "",
        )

    async def _busy(self, send: Any, scope: dict[str, Any]) -> None:
        message = (
            f"the server is busy with {self.inflight} bytes of other requests' bodies, its "
            f"limit is {self.max_inflight} (NIXX_MAX_INFLIGHT_BYTES); retry in a moment"
        )
        await send_error(
            send, message, 503, code="server_busy",
            headers=[(b"connection", b"close")],  # Retry-After: `retry_headers`
            path=scope.get("path") or "",
        )

    async def _too_slow(self, send: Any, scope: dict[str, Any]) -> None:
        message = (
            f"the request body did not arrive within {self.body_timeout:g} s "
            "(NIXX_REQUEST_TIMEOUT); send it at once"
        )
        await send_error(
            send, message, 408, code="request_timeout", headers=[(b"connection", b"close")],
            path=scope.get("path") or "",
        )

    async def _too_many(self, send: Any, scope: dict[str, Any]) -> None:
        message = (
            f"the request body holds more than {self.max_items} JSON objects and arrays "
            "(content blocks, parts, items, messages: NIXX_MAX_JSON_ITEMS); send fewer, or "
            "join empty or small blocks into one"
        )
        await send_error(send, message, 400, code="too_many_items",
                         path=scope.get("path") or "")


class _Served:
    """One admitted request's body as it arrives: its bytes counted against the size,
    time and in-flight limits, its braces against the items limit, and what the route
    holds besides (`hold`)."""

    def __init__(self, limit: RequestSizeLimit, scope: dict[str, Any], receive: Any,
                 send: Any, declared: int) -> None:
        self.limit, self.scope, self._receive, self._send = limit, scope, receive, send
        self.seen = 0
        self.held = declared  # taken from the budget already (`_admit`)
        self.started = self.refused = self.whole = False
        self.deadline = time.monotonic() + limit.body_timeout
        self.json = limit.max_items is not None and any(
            name == b"content-type" and b"json" in value.lower()
            for name, value in scope.get("headers") or [])
        self.braces = 0
        self.chunks: list[bytes] = []  # the body so far (the app holds them too) until whole

    def hold(self, n: int) -> bool:
        if n <= 0:
            return True
        if not self.limit._take(n, self.held):
            return False
        self.held += n
        return True

    def release(self) -> None:
        with self.limit._lock:
            self.limit.inflight -= self.held

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        if self.whole:
            return await self._receive()  # after the body: waiting for a disconnect is fine
        message = None
        with anyio.move_on_after(max(self.deadline - time.monotonic(), 0)):
            message = await self._receive()
        if message is None:
            return await self.refuse(self.limit._too_slow)
        if message["type"] != "http.request":
            return message
        body = message.get("body") or b""
        self.whole = not message.get("more_body")
        self.seen += len(body)
        if self.seen > self.limit.max_bytes:
            return await self.refuse(self.limit._refuse)
        if self.seen > self.held and not self.hold(self.seen - self.held):  # chunked
            return await self.refuse(self.limit._busy)
        if self.json and self._too_many(body):
            return await self.refuse(self.limit._too_many)
        return message

    def _too_many(self, body: bytes) -> bool:
        """Whether the body passes the items limit, known once it is whole: braces are
        counted as it arrives; past the limit the whole body is counted again without
        those inside strings (`json_items`)."""
        self.chunks.append(body)
        self.braces += body.count(b"{") + body.count(b"[")
        if not self.whole:
            return False
        chunks, self.chunks = self.chunks, []
        limit = self.limit.max_items or 0
        return self.braces > limit and json_items(b"".join(chunks), stop=limit) > limit

    async def refuse(self, answer: Any) -> Message:
        self.refused = True
        if not self.started:
            self.started = True
            await answer(self._send, self.scope)
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.refused:
            return  # the refusal went out already: whatever the route answers is dropped
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)
