"""`NixxApp`, the terminal chat, and `make_app()`, the factory the CLI and tests share.

The app holds the conversation history in process (`_history`, sent in full every turn,
as the seed says) and talks to the server only through `NixxClient`. Network calls run
in workers so the input never freezes: the answer stream in the exclusive `chat` group
(Ctrl+C cancels it), slash commands in the `command` group.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Footer

from nixx.config import Settings
from nixx.errors import NixxError
from nixx.local_server import default_url
from nixx.tui import render
from nixx.tui.client import NixxClient
from nixx.tui.commands import Command, CommandError, parse, unescape_message
from nixx.tui.widgets import (
    AssistantMessage,
    Conversation,
    ForgetScreen,
    HelpScreen,
    Notice,
    ProgressPanel,
    PromptInput,
    StatusBar,
    TagsScreen,
    ToolLine,
    UserMessage,
    failing_text,
    stalled_text,
)

STATUS_EVERY = 10.0  # seconds between two looks at the server's status while idle

CSS = """
Screen { layout: vertical; }
Conversation { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
.message { height: auto; margin: 1 0 0 0; padding: 0 1; border: round $panel-lighten-2; }
.message.user { border: round $primary; margin-left: 8; }
.message.assistant { border: round $success; margin-right: 4; }
.message.assistant.incomplete { border: round $warning; }
.message.user.unanswered { border: round $warning; }
.message Markdown { margin: 0; padding: 0; }
.message Markdown > MarkdownBlock:last-child { margin-bottom: 0; }
.tool { height: auto; padding: 0 2; }
.notice { height: auto; margin: 1 0 0 0; padding: 0 1; border: round $secondary; }
.notice.error { border: round $error; color: $error; }
.progress { height: 3; margin: 1 0 0 0; }
.progress LoadingIndicator { height: 1; }
.progress Label { padding: 0 2; color: $text-muted; }
#prompt { height: auto; max-height: 10; min-height: 3; border: round $primary; padding: 0 1; }
#status { height: 1; padding: 0 1; background: $panel; }
HelpScreen, TagsScreen, ForgetScreen { align: center middle; }
#forget { width: 100; max-width: 100%; height: auto; max-height: 100%;
          border: round $error; padding: 0 1; background: $surface; }
#help { width: 96; max-width: 100%; height: auto; max-height: 100%; border: round $primary;
        padding: 0 1; background: $surface; }
#tags { width: 60; height: auto; border: round $primary; padding: 0 1; background: $surface; }
"""


class NixxApp(App[None]):
    """The nixx terminal chat."""

    TITLE = "nixx chat"
    CSS = CSS
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Cancel/Quit", priority=True),
        Binding("ctrl+l", "clear_session", "Clear"),
        Binding("ctrl+r", "toggle_recall", "Recall"),
        Binding("f1", "help", "Help"),
        Binding("pageup", "scroll_conversation(-1)", "Scroll up", show=False),
        Binding("pagedown", "scroll_conversation(1)", "Scroll down", show=False),
    ]

    def __init__(
        self, client: NixxClient, *, server_label: str | None = None, model: str | None = None
    ) -> None:
        super().__init__()
        self.client = client
        self.server_label = server_label or client.base_url
        self.model = model
        self._history: list[dict[str, Any]] = []
        self._quit_armed = False
        self.turns_completed = 0  # for tests and the exit report
        self._session_ready: asyncio.Event | None = None  # set once the session is restored

    def notify(  # type: ignore[override]
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's notify, but plain text by default: messages quote what the user
        typed and what the server said, which must never be read as markup."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # ---- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Conversation(id="conversation")
        yield PromptInput()
        yield StatusBar()
        yield Footer()

    @property
    def conversation(self) -> Conversation:
        return self.query_one(Conversation)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    async def on_mount(self) -> None:
        self._session_ready = asyncio.Event()
        self.status.set(server=self.server_label)
        self.prompt.focus()
        self.startup()
        # while the user reads: background work held up shows without a turn (`stalls`)
        self.set_interval(STATUS_EVERY, self.refresh_status_later)

    async def on_unmount(self) -> None:
        await self.client.aclose()

    async def show(self, widget: Widget) -> Widget:
        await self.conversation.mount(widget)
        self.conversation.scroll_end(animate=False)
        return widget

    async def show_error(self, message: str) -> None:
        await self.show(Notice(Text(message), title="error", error=True))

    # ---- start-up ------------------------------------------------------------------
    @work(exclusive=True, group="startup")
    async def startup(self) -> None:
        """Check the server, learn the model and status, restore the current session."""
        try:
            await self._startup()
        finally:
            if self._session_ready is not None:
                self._session_ready.set()

    async def _startup(self) -> None:
        try:
            await self.client.health()
        except NixxError as err:
            self.status.set(connected=False)
            await self.show_error(err.message)
            return
        self.status.set(connected=True)
        if not self.model:
            try:
                models = await self.client.models()
            except NixxError as err:
                models = []
                self.notify(err.message, title="models", severity="warning")
            self.model = models[0] if models else None
        self.status.set(model=self.model or "")
        try:
            rows = await self.client.session()
        except NixxError as err:
            await self.show_error(f"could not restore the session: {err.message}")
            rows = []
        plan = restore_plan(rows)
        for item in plan.shown:
            widget: Widget
            if item.role == "user":
                widget = UserMessage(item.content, note=item.note)
            else:
                widget = AssistantMessage(item.content, note=item.note)
            await self.conversation.mount(widget)
        self._history.extend(plan.history)
        if plan.other_clients:
            self.notify(
                f"{plan.other_clients} rows of this session came from other clients and are "
                "not restored here; /transcript shows everything",
                title="session",
            )
        self.conversation.scroll_end(animate=False)
        await self.refresh_status()

    async def refresh_status(self) -> None:
        try:
            status = await self.client.status()
            intent = await self.client.intent()
        except NixxError:
            return
        self.status.set(
            recall=status.get("recall") if isinstance(status.get("recall"), bool) else None,
            words=_int(status.get("unsummarised_words", status.get("words"))),
            interval=_int(status.get("interval")),
            context_length=_int(status.get("context_length")) or self.status.info.context_length,
            intent=intent.text if intent else None,
            intent_source=intent.source if intent else None,
            failing=failing_text(status),
            stalled=stalled_text(status),
        )

    @work(group="status")
    async def refresh_status_later(self) -> None:
        await self.refresh_status()

    # ---- input ---------------------------------------------------------------------
    async def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        self._quit_armed = False
        line = event.text
        try:
            command = parse(line)
        except CommandError as err:
            self.notify(str(err), title="command", severity="warning")
            return
        self.prompt.clear()
        self.prompt.remember(line)
        if command is None:
            await self.send(unescape_message(line).strip("\n"))
        else:
            await self.run_slash(command)

    async def send(self, text: str) -> None:
        if self.is_streaming:
            self.notify("an answer is still streaming: Ctrl+C cancels it", severity="warning")
            self.prompt.load_text(text)
            return
        user = UserMessage(text)
        await self.show(user)
        self.stream_answer(text, user)

    @property
    def is_streaming(self) -> bool:
        return any(w.group == "chat" and w.is_running for w in self.workers)

    @work(exclusive=True, group="chat")
    async def stream_answer(self, text: str, user_widget: UserMessage) -> None:
        message = {"role": "user", "content": text}
        if self._session_ready is not None:
            await (
                self._session_ready.wait()
            )  # a turn sent during start-up follows the restored history
        bubble = AssistantMessage(streaming=True)
        await self.show(bubble)
        self.status.set(busy="answering")
        counted = False
        try:
            async for event in self.client.stream_chat([*self._history, message], model=self.model):
                if event.kind == "delta":
                    bubble.append(event.text)
                    self.conversation.scroll_end(animate=False)
                elif event.kind == "tool":
                    await self.conversation.mount(ToolLine(event.text), before=bubble)
                elif event.kind == "usage":
                    counted = True
                    self.status.set(prompt_tokens=_int(event.data.get("prompt_tokens")))
            if not counted:  # the backend reports no token counts: no gauge, not a stale one
                self.status.set(prompt_tokens=None)
        except asyncio.CancelledError:
            self._history.append(message)
            if bubble.body_text:
                self._history.append({"role": "assistant", "content": bubble.body_text})
            await bubble.finish("interrupted")
            self.status.set(busy="")
            raise
        except NixxError as err:
            self.status.set(busy="")
            if bubble.body_text:  # part of an answer arrived: keep it, marked
                self._history += [message, {"role": "assistant", "content": bubble.body_text}]
                await bubble.finish("incomplete")
                await self.show_error(err.message)
            else:  # nothing arrived: undo the turn and give the prompt back
                await bubble.remove()
                await user_widget.remove()
                await self.show_error(err.message)
                if not self.prompt.text.strip():
                    self.prompt.load_text(text)
                    self.prompt.move_cursor(self.prompt.document.end)
            self.status.set(connected=not err.details.get("server_down", False))
            return
        self._history += [message, {"role": "assistant", "content": bubble.body_text}]
        await bubble.finish()
        self.conversation.scroll_end(animate=False)
        self.status.set(busy="", connected=True)
        self.turns_completed += 1
        self.refresh_status_later()

    # ---- key actions ---------------------------------------------------------------
    def action_interrupt(self) -> None:
        if self.is_streaming:
            self.workers.cancel_group(self, "chat")
            self.notify("answer cancelled")
            return
        if self._quit_armed:
            self.exit()
            return
        self._quit_armed = True
        self.notify("press Ctrl+C again to quit (or type /quit)")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_clear_session(self) -> None:
        await self.run_slash(Command("clear"))

    async def action_toggle_recall(self) -> None:
        await self.run_slash(Command("recall", {"on": None}))

    def action_scroll_conversation(self, direction: int) -> None:
        if direction < 0:
            self.conversation.scroll_page_up()
        else:
            self.conversation.scroll_page_down()

    # ---- slash commands ------------------------------------------------------------
    async def run_slash(self, command: Command) -> None:
        if command.name == "quit":
            self.exit()
        elif command.name == "help":
            self.action_help()
        elif command.name == "summary" and command.args.get("tags") is None:
            self.push_screen(TagsScreen(), self._tags_given)
        elif command.name == "search" and not command.args.get("query"):
            last = next((m["content"] for m in reversed(self._history) if m["role"] == "user"), "")
            if not last:
                self.notify("usage: /search [client:NAME] [query] (no message to search for yet)")
                return
            self.command_worker(Command("search", {**command.args, "query": last}))
        else:
            self.command_worker(command)

    def _tags_given(self, tags: list[str] | None) -> None:
        if tags is None:
            self.notify("summary cancelled")
            return
        self.command_worker(Command("summary", {"tags": tags}))

    @work(group="command")
    async def command_worker(self, command: Command) -> None:
        handler = getattr(self, f"_cmd_{command.name}")
        progress: ProgressPanel | None = None
        if command.name in ("summary", "ingest", "source"):
            label = {
                "summary": "summarising the conversation",
                "ingest": f"ingesting {command.args.get('target', '')}",
                "source": f"storing source {command.args.get('name', '')}",
            }[command.name]
            progress = ProgressPanel(label)
            await self.show(progress)
            self.status.set(busy=label)
        try:
            await handler(**command.args)
        except NixxError as err:
            await self.show_error(f"/{command.name.split('_')[0]}: {err.message}")
        finally:
            if progress is not None:
                await progress.remove()
                self.status.set(busy="")

    async def _cmd_context(self) -> None:
        body = await self.client.debug_context()
        await self.show(Notice(render.context_view(body), title="context"))

    async def _cmd_summary(self, tags: list[str]) -> None:
        body = await self.client.summarise(tags)
        summary = body.get("summary") if isinstance(body, dict) else None
        if isinstance(summary, dict):
            text = Text(str(summary.get("content", "")))
            span = f"rows {summary.get('start_buffer_id')}-{summary.get('end_buffer_id')}"
            text.append(f"\n{span}", style="dim")
            if summary.get("tags"):
                text.append("  " + " ".join(f"#{t}" for t in summary["tags"]), style="cyan")
            await self.show(Notice(text, title="summary"))
        else:
            message = body.get("message") if isinstance(body, dict) else None
            await self.show(Notice(Text(str(message or "nothing to summarise")), title="summary"))
        await self.refresh_status()

    async def _cmd_search(self, query: str, client: str | None = None) -> None:
        body = await self.client.search(query, client=client)
        await self.show(Notice(render.search_results(query, body, client), title="search"))

    async def _cmd_transcript(self, start: int, end: int | None) -> None:
        rows, truncated = await self.client.transcript(start, end)
        title = f"transcript {start}-{end}" if end else f"transcript from {start}"
        view = render.transcript_rows(rows)
        if truncated and rows:
            note = Text(f"stopped after {len(rows)} rows: /transcript {rows[-1].get('id', 0) + 1}")
            note.append(f" {end}" if end else "")
            note.append(" shows more", style="dim")
            view = Group(view, note)
        await self.show(Notice(view, title=title))

    async def _cmd_clear(self) -> None:
        if self.is_streaming:
            self.workers.cancel_group(self, "chat")
        await self.client.clear_session()
        self._history.clear()
        await self.conversation.remove_children()
        await self.show(Notice(Text("session cleared: new conversation", style="dim")))
        self.status.set(prompt_tokens=None)
        await self.refresh_status()

    async def _cmd_interval(self, n: int | None) -> None:
        if n is not None:
            await self.client.configure(interval=n)
        status = await self.client.status()
        words = status.get("unsummarised_words", status.get("words"))
        text = Text(f"summary interval: {status.get('interval')} words")
        if words is not None:
            text.append(f" ({words} unsummarised)", style="dim")
        await self.show(Notice(text, title="interval"))
        await self.refresh_status()

    async def _cmd_recall(self, on: bool | None) -> None:
        if on is None:
            current = (await self.client.status()).get("recall")
            on = not bool(current)
        await self.client.configure(recall=on)
        self.status.set(recall=on)
        self.notify(f"recall {'on' if on else 'off'}")

    async def _cmd_intent(self, action: str, text: str | None = None) -> None:
        if action == "set" and text:
            intent = await self.client.set_intent(text)
        elif action == "clear":
            await self.client.clear_intent()
            intent = None
        elif action == "derive":
            intent = await self.client.derive_intent()
        else:
            intent = await self.client.intent()
        self.status.set(
            intent=intent.text if intent else None, intent_source=intent.source if intent else None
        )
        shown = f"{intent.text}\n({intent.provenance})" if intent else "(no intent set)"
        await self.show(Notice(Text(shown), title="intent"))

    async def _cmd_approvals(self, all: bool) -> None:
        rows = await self.client.approvals(include_decided=all)
        await self.show(Notice(render.approvals_view(rows, all), title="approvals"))

    async def _cmd_approve(self, approval: str, note: str) -> None:
        body = await self.client.decide(approval, "approve", note)
        await self.show(Notice(render.decision_view(body), title="approved"))

    async def _cmd_deny(self, approval: str, note: str) -> None:
        body = await self.client.decide(approval, "deny", note)
        await self.show(Notice(render.decision_view(body), title="denied"))

    async def _cmd_source(self, name: str, start: int | None, end: int | None) -> None:
        if start is None:
            rows = [r for r in await self.client.session() if isinstance(r.get("id"), int)]
            if not rows:
                raise CommandUsage("the current session is empty: give start and end ids")
            start, end = rows[0]["id"], rows[-1]["id"]
        body = await self.client.create_source(name, start, end)
        await self.show(Notice(render.source_view(body), title="source"))

    async def _cmd_ingest(self, target: str) -> None:
        if not target.startswith(("http://", "https://")):
            local = Path(target).expanduser()
            if local.exists():  # a path the user typed is relative to where they are
                target = str(local.resolve())
        body = await self.client.ingest(target)
        await self.show(Notice(render.ingest_view(target, body), title="ingest"))

    async def _cmd_forget(self, query: str | None, ids: list[str] | None) -> None:
        """List what would go, then ask (`ForgetScreen`); nothing is deleted before."""
        if query is not None:
            found = await self.client.forget_matches(query)
            refs = [str(i) for i in found.get("ids") or []]
            if not refs:
                await self.show(
                    Notice(Text(f"nothing in memory matches {query!r}"), title="forget")
                )
                return
            listing = render.forget_matches(found)
        else:
            refs = list(ids or [])
            listing = render.forget_refs(refs)

        def answered(ok: bool | None) -> None:
            if not ok:
                self.notify("nothing forgotten")
                return
            self.command_worker(Command("forget_do", {"query": query, "ids": refs}))

        self.push_screen(ForgetScreen(listing, len(refs)), answered)

    async def _cmd_forget_do(self, query: str | None, ids: list[str]) -> None:
        if query is not None:
            body = await self.client.forget_query(query, ids)
        else:
            body = await self.client.forget_ids(ids)
        await self.show(Notice(render.forget_done(body), title="forget"))
        await self.refresh_status()


class CommandUsage(NixxError):
    kind = "usage"


@dataclass(frozen=True)
class Shown:
    role: str
    content: str
    note: str | None = None  # "unanswered", "incomplete": shown, not sent to the LLM


@dataclass
class RestorePlan:
    shown: list[Shown] = field(default_factory=list)
    history: list[dict[str, str]] = field(default_factory=list)
    other_clients: int = 0


def restore_plan(rows: list[dict[str, Any]]) -> RestorePlan:
    """What the TUI restores from the server's session: only its own rows (origin
    `tui`), and a history it can send — user and assistant alternating, each user
    message with the last answer it got. A message that got no answer is shown as
    `unanswered` and an answer superseded by a retry as `incomplete`; neither is sent,
    so the LLM never gets two user messages in a row."""
    plan = RestorePlan()
    turns: list[tuple[str, list[tuple[str, bool]]]] = []  # (user text, its answers)
    for row in rows:
        role, content = row.get("role"), row.get("content")
        if role not in ("user", "assistant") or not isinstance(content, str):
            continue
        if row.get("origin") != "tui":
            plan.other_clients += 1
            continue
        incomplete = bool((row.get("meta") or {}).get("incomplete"))
        if role == "user":
            turns.append((content, []))
        elif turns:
            turns[-1][1].append((content, incomplete))
        # an answer with no user message of ours before it cannot be sent: skipped
    for user, answers in turns:
        if not answers:
            plan.shown.append(Shown("user", user, "unanswered"))
            continue
        plan.shown.append(Shown("user", user))
        *earlier, (last, last_incomplete) = answers
        plan.shown.extend(Shown("assistant", text, "incomplete") for text, _ in earlier)
        plan.shown.append(Shown("assistant", last, "incomplete" if last_incomplete else None))
        plan.history += [
            {"role": "user", "content": user},
            {"role": "assistant", "content": last},
        ]
    return plan


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def make_app(
    settings: Settings | None = None,
    *,
    url: str | None = None,
    server_label: str | None = None,
    model: str | None = None,
) -> NixxApp:
    """The chat app for `url` (default: the server these settings describe)."""
    from nixx.config import load_settings

    settings = settings or load_settings()
    base = (url or default_url(settings)).rstrip("/")
    client = NixxClient(base, api_key=settings.api_key)
    return NixxApp(client, server_label=server_label, model=model)
