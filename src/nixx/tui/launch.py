"""`run_chat()`: what `nixx chat` does — find or start a server, run the app, clean up."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from nixx.config import Settings

if TYPE_CHECKING:
    from nixx.tui.app import NixxApp


class ChatRun(TypedDict):
    """What a `nixx chat` run did (its ``--json``)."""

    url: str  # the server it talked to
    autostarted: bool  # started by this run (and stopped at its end)
    server_exit_code: int | None  # that server's, when it was started here
    turns: int  # turns completed


def run_chat(
    settings: Settings,
    *,
    url: str | None = None,
    runner: Callable[[NixxApp], object] | None = None,
) -> ChatRun:
    """Run the chat until the user quits. Returns what happened (for `--json`).

    `runner` runs the app (default `app.run()` in the terminal); tests pass one that
    runs it headless with a pilot script.
    """
    import sys

    from nixx.local_server import default_url, ensure_server
    from nixx.tui.app import make_app

    base = (url or default_url(settings)).rstrip("/")

    def starting() -> None:  # the wait is seconds: say what it is, not a blank screen
        sys.stderr.write(
            f"nixx chat: no server answers at {base}; starting one "
            f"(log: {settings.home / 'logs' / 'chat-server.log'}) ...\n"
        )
        sys.stderr.flush()

    server = ensure_server(base, settings, on_start=starting)
    try:
        app = make_app(settings, url=base)
        if runner is None:
            app.run()
        else:
            runner(app)
    finally:
        code = server.stop() if server is not None else None
    return {
        "url": base,
        "autostarted": server is not None,
        "server_exit_code": code,
        "turns": app.turns_completed,
    }
