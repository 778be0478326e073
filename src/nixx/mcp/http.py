"""`/mcp` on `nixx serve`: the same tools over MCP's streamable HTTP transport.

Memory tools call the app's own routes in process (an ASGI transport, no socket), so they
run the same service methods and return the same shapes as over HTTP and stdio. Agent-chat
tools are there when the server's workspace (`NIXX_WORKSPACE`) has a `.nxs/db.sqlite`;
they act as the server process's handle (`NXC_ACTOR`, else `$USER`). `/mcp` sits behind
the API key like every other route (`nixx.server.auth`); on loopback the SDK also checks
the `Host` and `Origin` headers (DNS-rebinding protection).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from nixx.config import Settings

PATH = "/mcp"
INTERNAL_URL = "http://nixx.internal"


class MCPEndpoint:
    """The ASGI endpoint mounted at `/mcp`; the session manager is started by the lifespan."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        handler = getattr(scope["app"].state, "mcp_http", None)
        if handler is None:
            body = json.dumps({"error": {"message": "the MCP endpoint is not running (the "
                               "server is starting or stopping)", "type": "unavailable",
                               "param": None, "code": None}}).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await handler(scope, receive, send)


def workspace_log(settings: Settings) -> str | None:
    from nixx.log.workspace import DB_NAME, NXS_DIR

    path = settings.workspace / NXS_DIR / DB_NAME
    return str(path) if path.is_file() else None


@contextlib.asynccontextmanager
async def run_mcp(app: Any, settings: Settings) -> AsyncIterator[None]:
    """Build the MCP server for `app` and run its session manager while the app runs."""
    import httpx
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

    from nixx.mcp.chat import ChatTools
    from nixx.mcp.memory import MemoryAPI
    from nixx.mcp.tools import build_server

    memory = MemoryAPI(INTERNAL_URL, api_key=settings.api_key,
                       transport=httpx.ASGITransport(app=app))
    db = workspace_log(settings)
    chat = ChatTools(db=db, cwd=str(settings.workspace)) if db else None
    server = build_server(memory=memory, chat=chat)
    server.streamable_http_app(streamable_http_path=PATH, host=settings.host)
    manager = server.session_manager
    async with manager.run():
        app.state.mcp_http = StreamableHTTPASGIApp(manager)
        try:
            yield
        finally:
            app.state.mcp_http = None
            await memory.aclose()
