"""`nixx mcp`: the MCP server over stdio that an agent host starts in its project.

Start-up is what the host waits on at every session (until `tools/list` answers), so
nothing slow happens before serving: the SDK is imported and the tools registered. The
settings and httpx are loaded, and the nixx server reached (and started when none
answers), only when a memory tool is first called; the workspace log is opened only when
an nxc tool is.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import SecretStr


def configure(url: str | None) -> tuple[str, SecretStr | None, Callable[[], Any]]:
    """(server URL, API key, how to start a server): read on the first memory call."""
    from nixx.config import load_settings
    from nixx.local_server import default_url, ensure_server

    settings = load_settings()
    base = (url or default_url(settings)).rstrip("/")
    return base, settings.api_key, lambda: ensure_server(base, settings, client="mcp")


def run_stdio(*, url: str | None = None, actor: str | None = None, db: str | None = None) -> None:
    import anyio

    from nixx.mcp.chat import ChatTools
    from nixx.mcp.memory import MemoryAPI
    from nixx.mcp.tools import build_server

    memory = MemoryAPI(configure=lambda: configure(url))
    chat = ChatTools(cwd=os.getcwd(), actor=actor, db=db)
    server = build_server(memory=memory, chat=chat, path_base=os.getcwd())

    async def main() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await memory.aclose()

    def terminated(signum: int, frame: object) -> None:
        # A host that ends the session with SIGTERM must not leave a nixx server behind (it
        # runs in its own session, so the host's signal does not reach it). Exit at once
        # after: the SDK reads stdin in a worker thread that a still-open stdin would block
        # an orderly shutdown on; every answer is already written.
        if memory.started is not None:
            memory.started.stop()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    anyio.run(main)
