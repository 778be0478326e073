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
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from nixx.server.errors import send_error

# A body declared over the size limit but at most this large is read and dropped (for at
# most LINGER_SECONDS) before the 413, so the client reads the answer instead of a reset
# connection; a larger one is answered at once, before a byte of it is read.
LINGER_BYTES = 64 * 1024 * 1024
LINGER_SECONDS = 5.0


class RequestSizeLimit:
    def __init__(self, app: Any, max_bytes: int, body_timeout: float = 60.0,
                 max_inflight: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout
        self.max_inflight = max_inflight if max_inflight is not None else 4 * max_bytes
        self.inflight = 0  # body bytes of the requests being served (declared or seen)

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
        state = {"seen": 0, "held": max(declared, 0), "started": False, "refused": False,
                 "whole": False}
        self.inflight += state["held"]
        deadline = time.monotonic() + self.body_timeout

        async def limited_receive() -> dict[str, Any]:
            if state["refused"]:
                return {"type": "http.disconnect"}
            if state["whole"]:
                return await receive()  # after the body: waiting for a disconnect is fine
            message = None
            with anyio.move_on_after(max(deadline - time.monotonic(), 0)):
                message = await receive()
            if message is None:
                await refuse(self._too_slow)
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                if not message.get("more_body"):
                    state["whole"] = True
                state["seen"] += len(message.get("body") or b"")
                if state["seen"] > self.max_bytes:
                    await refuse(self._refuse)
                    return {"type": "http.disconnect"}
                if state["seen"] > state["held"]:  # a chunked body: held as it arrives
                    grown = state["seen"] - state["held"]
                    if self.inflight + grown > self.max_inflight and self.inflight > state["held"]:
                        await refuse(self._busy)
                        return {"type": "http.disconnect"}
                    self.inflight += grown
                    state["held"] = state["seen"]
            return message

        async def refuse(answer: Any) -> None:
            state["refused"] = True
            if not state["started"]:
                state["started"] = True
                await answer(send, scope)

        async def tracked_send(message: dict[str, Any]) -> None:
            if state["refused"]:
                return  # the refusal went out already: whatever the route answers is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        finally:
            self.inflight -= state["held"]

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
        return self.inflight == 0 or self.inflight + size <= self.max_inflight

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
            headers=[(b"retry-after", b"1"), (b"connection", b"close")],
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
