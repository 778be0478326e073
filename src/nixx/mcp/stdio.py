"""`nixx mcp`: the MCP server over stdio that an agent host starts in its project.

Start-up is what the host waits on at every session (until `tools/list` answers), so
nothing slow happens before serving: the SDK is imported and the tools registered. The
settings and httpx are loaded, and the nixx server reached (and started when none
answers), only when a memory tool is first called; the workspace log is opened only when
an nxc tool is.

Which server: `--url`, else `NIXX_MCP_URL` (or `mcp_url` in `$NIXX_HOME/config.toml`;
`nixx mcp install` writes it, with `NIXX_HOME`, into each client's entry) — told where the
user's server is, `nixx mcp` connects there or fails naming it, and never starts a server
of its own: an agent host that passes only part of the environment (Codex passes HOME,
LANG, PATH, PWD, SHELL, TERM) would otherwise get a fresh server on an empty store, and
empty answers, in silence. Told nothing, it reaches `http://NIXX_HOST:NIXX_PORT` and
starts a server there when none answers; the tools' results then name the store that
server reads (`MemoryAPI.annotate`).
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.mcp.memory import Target

KEY_VARIABLE = "NIXX_API_KEY"


def _unset_unexpanded_key() -> None:
    """An empty `NIXX_API_KEY`, or one still reading ``${NIXX_API_KEY}`` (a client that
    forwards the variable by name writes that when the variable is unset in its own
    environment), counts as unset, so the key in ``$NIXX_HOME/config.toml`` applies."""
    value = os.environ.get(KEY_VARIABLE)
    if value is None:
        return
    if not value.strip() or value.strip() in (f"${KEY_VARIABLE}", f"${{{KEY_VARIABLE}}}",
                                               f"${{env:{KEY_VARIABLE}}}"):
        del os.environ[KEY_VARIABLE]


def store_label(settings: Settings) -> str:
    """The store a server with these settings reads, for a tool result: the SQLite file,
    or the PostgreSQL URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    url = settings.database_url
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///").split("?", 1)[0]
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        url = urlunsplit(parts._replace(netloc=netloc))
    return url


def configure(url: str | None) -> Target:
    """Where the memory tools go, read on the first memory call (`MemoryAPI`)."""
    from nixx.config import load_settings
    from nixx.local_server import default_url, ensure_server
    from nixx.mcp.memory import Target

    _unset_unexpanded_key()
    settings = load_settings()
    home = str(settings.home)
    if url or settings.mcp_url:
        told = "--url" if url else ("NIXX_MCP_URL" if "NIXX_MCP_URL" in os.environ
                                    else f"mcp_url in {settings.home / 'config.toml'}")
        return Target((url or settings.mcp_url).rstrip("/"), settings.api_key, None,
                      told=told, home=home)
    base = default_url(settings).rstrip("/")
    return Target(base, settings.api_key, lambda: ensure_server(base, settings, client="mcp"),
                  told=None, home=home, store=store_label(settings))


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
