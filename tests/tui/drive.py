"""Helpers to drive the chat app with Textual's pilot."""

from __future__ import annotations

from textual.pilot import Pilot

from nixx.tui.app import NixxApp
from nixx.tui.client import NixxClient
from nixx.tui.widgets import AssistantMessage, Notice, UserMessage

SIZE = (100, 32)


def make(url: str, **kw) -> NixxApp:
    return NixxApp(NixxClient(url), server_label="nixx-test", **kw)


async def settle(pilot: Pilot) -> None:
    """Wait until every worker (stream, command, status refresh) is done."""
    pilot.app.prompt.cursor_blink = False  # a blinking cursor makes screenshots differ
    await pilot.pause()
    for _ in range(5):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def submit(pilot: Pilot, text: str) -> None:
    app = pilot.app
    app.prompt.load_text(text)
    await pilot.press("enter")
    await settle(pilot)


def assistants(app: NixxApp) -> list[AssistantMessage]:
    return list(app.query(AssistantMessage))


def users(app: NixxApp) -> list[UserMessage]:
    return list(app.query(UserMessage))


def notices(app: NixxApp) -> list[Notice]:
    return list(app.query(Notice))


def notice_text(notice: Notice) -> str:
    """The plain text a Notice shows (its renderable, printed without styles)."""
    import io

    from rich.console import Console

    console = Console(width=200, color_system=None, record=True, file=io.StringIO())
    console.print(notice.content)
    return console.export_text()


def notifications(app: NixxApp) -> list[str]:
    return [n.message for n in app._notifications]


def screen_text(app: NixxApp) -> str:
    """The screen as plain text (what a terminal shows, without colours)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(
            full=True, screen_stack=app._background_screens, simplify=True
        )
    )
    return console.export_text(styles=False)
