"""`nixx mcp`: the MCP server over stdio that an agent host starts in its project.

Start-up is what the host waits on at every session (until `tools/list` answers), so
nothing slow happens before serving: settings are read, the SDK is imported and the
tools registered; the nixx server is reached (and started when none answers) only when
a memory tool is first called, the workspace log only when an nxc tool is.
"""

from __future__ import annotations

import os


def run_stdio(*, url: str | None = None, actor: str | None = None, db: str | None = None) -> None:
    import anyio

    from nixx.config import load_settings
    from nixx.mcp.chat import ChatTools
    from nixx.mcp.memory import MemoryAPI
    from nixx.mcp.tools import build_server
    from nixx.server.autostart import default_url

    settings = load_settings()
    base = (url or default_url(settings)).rstrip("/")

    def start() -> object:
        from nixx.server.autostart import ensure_server

        return ensure_server(base, settings, client="mcp")

    memory = MemoryAPI(base, api_key=settings.api_key, start_server=start)
    chat = ChatTools(cwd=os.getcwd(), actor=actor, db=db)
    server = build_server(memory=memory, chat=chat, path_base=os.getcwd())

    async def main() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await memory.aclose()

    anyio.run(main)
