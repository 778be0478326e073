"""API-key check: with NIXX_API_KEY set, every request but ``/health`` must carry
``Authorization: Bearer <key>``; others get 401 with the OpenAI error envelope.
A plain ASGI middleware (it does not buffer responses, so streaming is untouched)."""

from __future__ import annotations

import hmac
from typing import Any

from nixx.server.errors import send_error

OPEN_PATHS = frozenset({"/health"})


class APIKeyMiddleware:
    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self._key = api_key.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = b""
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                header = value
                break
        scheme, _, token = header.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key):
            await self.app(scope, receive, send)
            return
        message = (
            "missing API key: send Authorization: Bearer <NIXX_API_KEY>"
            if not header
            else "wrong API key: send Authorization: Bearer <NIXX_API_KEY>"
        )
        await send_error(
            send, message, 401, code="invalid_api_key", headers=[(b"www-authenticate", b"Bearer")]
        )
