"""API-key check: with NIXX_API_KEY set, every request but ``/health`` must carry
``Authorization: Bearer <key>`` or ``x-api-key: <key>`` (Anthropic's header, which its
SDK and Claude Code send); others get 401 with the error envelope of the path
(`nixx.server.errors.envelope_for`); on ``/mcp`` a JSON-RPC error an MCP client shows,
without the OAuth challenge (`nixx.mcp.http.refuse_key`).
The web page (``/`` and ``/ui/...``) also accepts a signed-in browser's session cookie
(`nixx.web.security.Sessions`), and sends a browser without one to the sign-in form.
A plain ASGI middleware (it does not buffer responses, so streaming is untouched)."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from nixx.secret import reveal
from nixx.server.errors import send_error, send_response

if TYPE_CHECKING:
    from pydantic import SecretStr

    from nixx.web.security import Sessions

OPEN_PATHS = frozenset({"/health"})
MIN_KEY_LENGTH = 16  # characters; a shorter NIXX_API_KEY stops `nixx serve` at start-up


class APIKeyMiddleware:
    def __init__(self, app: Any, api_key: SecretStr | str, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions
        self._api_key = api_key  # revealed only to compare (hmac.compare_digest)
        self._key = (reveal(api_key) or "").encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = b""
        cookie = b""
        api_key: bytes | None = None
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                header = value
            elif name == b"cookie":
                cookie = value
            elif name == b"x-api-key":
                api_key = value
        scheme, _, token = header.partition(b" ")
        if (scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key)) or (
            api_key is not None and hmac.compare_digest(api_key.strip(), self._key)
        ):
            await self.app(scope, receive, send)
            return
        path = scope.get("path") or ""
        if path == "/" or path == "/ui" or path.startswith("/ui/"):
            await self._page(scope, receive, send, path, cookie)
            return
        message = (
            "missing API key: send Authorization: Bearer <NIXX_API_KEY> (or x-api-key)"
            if not header and api_key is None
            else "wrong API key: send Authorization: Bearer <NIXX_API_KEY> (or x-api-key)"
        )
        if path == "/mcp" or path.startswith("/mcp/"):
            from nixx.mcp.http import refuse_key

            await refuse_key(receive, send, message)
            return
        await send_error(
            send, message, 401, code="invalid_api_key",
            headers=[(b"www-authenticate", b"Bearer")], path=path,
        )

    async def _page(self, scope: dict[str, Any], receive: Any, send: Any, path: str,
                    cookie: bytes) -> None:
        from nixx.web.security import LOGIN_PATH, ONCE_PATH, OPEN_UI_PATHS

        if (path in OPEN_UI_PATHS or path.startswith(ONCE_PATH)
                or self.sessions.from_cookies(cookie.decode("latin-1"))):
            await self.app(scope, receive, send)
            return
        await send_response(send, 303, b"", [(b"location", LOGIN_PATH.encode())])

