"""Widgets of the terminal chat.

Rule of this module: text that is not ours (what the user typed, what the server or the
model said) is never parsed as Rich markup. It goes into `rich.text.Text` objects or the
`Markdown` widget (which reads Markdown, not markup), so `[/]` or `[bold]` in a message
is shown as typed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Label, LoadingIndicator, Markdown, Static, TextArea

from nixx.tui.commands import COMMANDS

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter", "send the message (or run the /command)"),
    ("Shift+Enter / Ctrl+J", "new line in the message"),
    ("Up / Down", "your earlier / later messages (on the first / last line)"),
    ("Ctrl+C", "cancel the streaming answer; press again to quit"),
    ("Ctrl+L", "clear the session (same as /clear)"),
    ("Ctrl+R", "toggle episodic recall (same as /recall)"),
    ("F1", "this help (same as /help)"),
    ("Escape", "close this help, or cancel the tags prompt"),
    ("PageUp / PageDown", "scroll the conversation"),
)


class UserMessage(Static):
    """What the user sent, as plain text."""

    def __init__(self, content: str, *, note: str | None = None) -> None:
        super().__init__(Text(content), classes="message user")
        self.body_text = content
        self.border_title = "you"
        if note:  # e.g. "unanswered": restored, but not part of what is sent
            self.border_subtitle = note
            self.add_class("unanswered")


class AssistantMessage(Vertical):
    """The answer: plain text while it streams, Markdown once it is complete."""

    def __init__(
        self, content: str = "", *, streaming: bool = False, note: str | None = None
    ) -> None:
        super().__init__(classes="message assistant")
        self.body_text = content
        self.streaming = streaming
        self.border_title = "nixx"
        if note:
            self.border_subtitle = note
            self.add_class("incomplete")

    def compose(self) -> ComposeResult:
        if self.streaming:
            yield Static(Text(self.body_text), classes="stream")
        else:
            yield Markdown(self.body_text)

    def append(self, delta: str) -> None:
        self.body_text += delta
        self.query_one(".stream", Static).update(Text(self.body_text))

    async def finish(self, note: str | None = None) -> None:
        """Re-render as Markdown; `note` (e.g. "interrupted") goes in the border."""
        self.streaming = False
        if note:
            self.border_subtitle = note
            self.add_class("incomplete")
        await self.remove_children()
        await self.mount(Markdown(self.body_text or "*(no answer)*"))


class ToolLine(Static):
    """A tool the server ran during the answer: a dim `▸ name` line."""

    def __init__(self, name: str) -> None:
        super().__init__(Text(f"▸ {name}", style="dim"), classes="tool")


class Notice(Static):
    """Output of a slash command: any Rich renderable built from escaped text."""

    def __init__(self, renderable: RenderableType, *, title: str = "", error: bool = False) -> None:
        super().__init__(renderable, classes="notice error" if error else "notice")
        if title:
            self.border_title = title


class ProgressPanel(Vertical):
    """A long operation under way (summary, ingest): a spinner and what it is doing."""

    def __init__(self, label: str) -> None:
        super().__init__(classes="progress")
        self.label = label

    def compose(self) -> ComposeResult:
        yield LoadingIndicator()
        yield Label(Text(self.label))


class Conversation(VerticalScroll):
    """The scrollable list of messages. A resize scrolls it to its (new) end, so the
    newest message stays in view in a smaller terminal."""

    can_focus = False

    def on_resize(self) -> None:
        self.call_after_refresh(self.scroll_end, animate=False)


@dataclass
class StatusInfo:
    server: str = ""
    connected: bool | None = None  # None: not known yet
    model: str = ""
    recall: bool | None = None
    intent: str | None = None
    intent_source: str | None = None  # manual | derived
    words: int | None = None
    interval: int | None = None
    prompt_tokens: int | None = None
    context_length: int | None = None
    busy: str = ""
    failing: str = ""  # background work that keeps failing, with its reason
    stalled: str = ""  # background work held up (the server's ``stalls``)


def failing_text(status: dict[str, object]) -> str:
    """What of the background work keeps failing, with why (the server's status:
    ``summary_error``, ``intent_error``), for the status line; "" when nothing does."""
    parts = []
    for kind in ("summary", "intent"):
        error = status.get(f"{kind}_error")
        if isinstance(error, str) and error:
            count = status.get(f"{kind}_failures")
            times = f" ({count}x)" if isinstance(count, int) and count > 1 else ""
            parts.append(f"{kind} failing{times}: {error}")
    return "; ".join(parts)


def stalled_text(status: dict[str, object]) -> str:
    """What holds the background work up (the server's ``stalls``), for the status line."""
    stalls = status.get("stalls")
    return "; ".join(str(s) for s in stalls) if isinstance(stalls, list) else ""


class StatusBar(Static):
    """One line: server, model, recall, gauges, intent."""

    def __init__(self) -> None:
        super().__init__("", id="status")
        self.info = StatusInfo()

    def set(self, **changes: object) -> None:
        for key, value in changes.items():
            setattr(self.info, key, value)
        self.update(render_status(self.info))


def render_status(info: StatusInfo) -> Text:
    text = Text()
    dot_style = {True: "green", False: "red", None: "yellow"}[info.connected]
    text.append("● ", style=dot_style)
    text.append(info.server or "?")
    text.append("  ")
    text.append(info.model or "no model", style="bold")
    text.append("  recall ")
    text.append(
        {True: "on", False: "off", None: "?"}[info.recall],
        style={True: "green", False: "red", None: "dim"}[info.recall],
    )
    if info.words is not None and info.interval:
        text.append(f"  summary {info.words}/{info.interval}w")
    if info.prompt_tokens is not None:
        ctx = f"/{info.context_length}" if info.context_length else ""
        text.append(f"  ctx {info.prompt_tokens}{ctx}t")
    if info.busy:
        text.append(f"  {info.busy}…", style="italic")
    if info.failing:
        text.append(f"  ⚠ {info.failing}", style="bold red")
    if info.stalled:
        text.append(f"  ⏳ {info.stalled}", style="yellow")
    text.append(
        "  intent"
        + (f" ({info.intent_source})" if info.intent and info.intent_source else "")
        + ": ",
        style="dim",
    )
    text.append(info.intent or "(none)", style="italic" if info.intent else "dim")
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


class PromptInput(TextArea):
    """The message editor: Enter sends, Shift+Enter or Ctrl+J starts a new line."""

    @dataclass
    class Submitted(Message):
        text: str

    def __init__(self) -> None:
        super().__init__(
            id="prompt",
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            compact=True,
            placeholder="Message nixx — /help for commands",
        )
        self._past: list[str] = []
        self._browse = 0

    def remember(self, line: str) -> None:
        """Add a sent line to the input history (Up/Down on the first/last line)."""
        if line.strip() and (not self._past or self._past[-1] != line):
            self._past.append(line)
        self._browse = len(self._past)

    def _recall(self, step: int) -> bool:
        if not self._past:
            return False
        index = self._browse + step
        if index < 0 or index > len(self._past):
            return False
        self._browse = index
        self.load_text(self._past[index] if index < len(self._past) else "")
        self.move_cursor(self.document.end)
        return True

    async def _on_key(self, event: events.Key) -> None:
        row, _ = self.cursor_location
        if event.key == "up" and row == 0 and self._recall(-1):
            event.stop()
            event.prevent_default()
            return
        if event.key == "down" and row == self.document.line_count - 1 and self._recall(1):
            event.stop()
            event.prevent_default()
            return
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text
            if text.strip():
                self.post_message(self.Submitted(text))
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)


def help_renderable() -> Group:
    commands = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    commands.add_column(style="bold cyan", no_wrap=True)
    commands.add_column()
    for spec in COMMANDS:
        commands.add_row(Text(spec.usage), Text(spec.help))  # `[tag ...]` is not markup
    keys = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    keys.add_column(style="bold magenta", no_wrap=True)
    keys.add_column()
    for key, what in KEYS:
        keys.add_row(Text(key), Text(what))
    return Group(
        Text("Commands", style="bold underline"),
        commands,
        Text(""),
        Text("Keys", style="bold underline"),
        keys,
        Text(""),
        Text("Start a message with // to send a line that begins with /.", style="dim"),
    )


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss_help", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_renderable())

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "nixx chat — help"
        self.query_one("#help").border_subtitle = "Escape closes"

    def action_dismiss_help(self) -> None:
        self.dismiss(None)


class TagsScreen(ModalScreen[list[str] | None]):
    """Asks for the tags of a summary; Enter confirms (empty: automatic), Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="tags"):
            yield Label(Text("Tags for this summary (comma or space separated)."))
            yield Label(Text("Leave empty to let the model choose; Escape cancels.", style="dim"))
            yield Input(placeholder="e.g. design, storage", id="tags-input")

    def on_mount(self) -> None:
        self.query_one("#tags").border_title = "/summary"
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        tags = [t.strip().lower() for t in event.value.replace(",", " ").split() if t.strip()]
        self.dismiss(tags)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ForgetScreen(ModalScreen[bool]):
    """Shows what a /forget would delete; y or Enter deletes, n or Escape keeps it all."""

    BINDINGS = [
        Binding("escape", "cancel", "Keep"),
        Binding("n", "cancel", "Keep"),
        Binding("y", "confirm", "Forget"),
        Binding("enter", "confirm", "Forget"),
    ]

    def __init__(self, listing: RenderableType, count: int) -> None:
        super().__init__()
        self._listing = listing
        self.count = count

    def compose(self) -> ComposeResult:
        with Vertical(id="forget"):
            yield Static(self._listing)
            yield Label(
                Text(
                    f"Forget these {self.count} items? y or Enter deletes them (summaries "
                    "that covered them are made again from the rest); n or Escape keeps them.",
                    style="bold",
                )
            )

    def on_mount(self) -> None:
        self.query_one("#forget").border_title = "/forget"

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
