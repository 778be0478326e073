"""`/mcp` on `nixx serve`: the same tools over MCP's streamable HTTP transport.

Memory tools call the app's own routes in process (an ASGI transport, no socket), so they
run the same service methods and return the same shapes as over HTTP and stdio. Agent-chat
tools are there when the server's workspace (`NIXX_WORKSPACE`) has a `.nxs/db.sqlite`;
they act as the server process's handle (`NXC_ACTOR`, else `$USER`). `/mcp` sits behind
the API key and the Host/Origin/JSON check like every other route (`nixx.server.auth`,
`nixx.server.guard`: the SDK's own DNS-rebinding check is off, since it covered only some
bound addresses). It runs stateless: every request stands alone, so there is no table of
sessions for clients to fill (the SDK's 10,000-session cap once locked every client out).
A request without the key gets a 401 whose body is a JSON-RPC error naming the header and
`NIXX_API_KEY`, and no OAuth challenge (`refuse_key`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from nixx.config import Settings

PATH = "/mcp"
KEY_ERROR = -32001  # JSON-RPC "server error" range: the request lacks the API key
MAX_PEEK = 64 * 1024  # bytes of a refused request read to answer with its id


async def refuse_key(receive: Any, send: Any, message: str) -> None:
    """401 for an `/mcp` request without the right key, as a JSON-RPC error naming the
    header and the setting (``error.data``), answering the request's id when its body
    says it. No ``WWW-Authenticate``: with one, MCP clients take the 401 for an OAuth
    server (Codex's rmcp reports "auth required" and suggests `codex mcp login`, dropping
    the body; a ``resource_metadata`` parameter starts OAuth discovery, MCP
    authorization spec); without it they show this error (docs/mcp.md, "Security")."""
    from nixx.server.errors import send_response

    body, more = b"", True
    while more and len(body) <= MAX_PEEK:
        event = await receive()
        if event["type"] != "http.request":
            break
        body += event.get("body", b"")
        more = event.get("more_body", False)
    try:
        request = json.loads(body) if len(body) <= MAX_PEEK else None
    except ValueError:
        request = None
    rid = request.get("id") if isinstance(request, dict) else None
    error = {"code": KEY_ERROR, "message": f"nixx: {message}; set it in the client's entry "
             "for this server (headers), see docs/mcp.md",
             "data": {"type": "invalid_api_key", "header": "Authorization: Bearer <key>",
                      "setting": "NIXX_API_KEY"}}
    out = json.dumps({"jsonrpc": "2.0", "id": rid if isinstance(rid, (str, int)) else None,
                      "error": error}).encode()
    await send_response(send, 401, out, [(b"content-type", b"application/json")])
INTERNAL_URL = "http://127.0.0.1"  # in process (an ASGI transport): a loopback Host


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


class _LazyMCP:
    """Builds the MCP server and starts its session manager on the first `/mcp` request
    (so an app that is never asked over MCP pays nothing: not the SDK's import, not the
    tools' schemas), inside the task group the lifespan holds open."""

    def __init__(self, app: Any, settings: Settings, tg: Any) -> None:
        import anyio

        self.app, self.settings, self.tg = app, settings, tg
        self.lock = anyio.Lock()
        self.stop = anyio.Event()
        self.handler: Any = None
        self.memory: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.handler is None:
            async with self.lock:
                if self.handler is None:
                    await self.tg.start(self._run)
        await self.handler(scope, receive, send)

    async def _run(self, *, task_status: Any) -> None:
        import httpx
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

        from nixx.mcp.chat import ChatTools
        from nixx.mcp.memory import MemoryAPI
        from nixx.mcp.tools import build_server

        settings = self.settings
        self.memory = MemoryAPI(INTERNAL_URL, api_key=settings.api_key,
                                transport=httpx.ASGITransport(app=self.app))
        db = workspace_log(settings)
        chat = ChatTools(db=db, cwd=str(settings.workspace)) if db else None
        server = build_server(memory=self.memory, chat=chat)
        from mcp.server.transport_security import TransportSecuritySettings

        server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = server.session_manager
        try:
            async with manager.run():
                self.handler = StreamableHTTPASGIApp(manager)
                task_status.started()
                await self.stop.wait()
        finally:
            await self.memory.aclose()


@contextlib.asynccontextmanager
async def run_mcp(app: Any, settings: Settings) -> AsyncIterator[None]:
    """Serve `/mcp` while the app runs (the MCP server itself starts on first use)."""
    import anyio

    async with anyio.create_task_group() as tg:
        lazy = _LazyMCP(app, settings, tg)
        app.state.mcp_http = lazy
        try:
            yield
        finally:
            app.state.mcp_http = None
            lazy.stop.set()
