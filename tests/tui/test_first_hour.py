"""The TUI's first hour: what it restores, what the gauge shows, what a small terminal
keeps in view (pilot against a live nixx server backed by the scripted LLM)."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from nixx.memory.prompts import MEMORY_NOTE
from nixx.testing.fake_llm import Reply
from nixx.tui.widgets import AssistantMessage, UserMessage

from .drive import SIZE, make, notice_text, notices, settle, submit

pytestmark = pytest.mark.anyio


async def test_gauge_is_hidden_when_the_backend_reports_no_usage(live_server):
    live_server.llm.queue(Reply(content="counted"), Reply(content="not counted", usage=False))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "one")
        assert isinstance(app.status.info.prompt_tokens, int)
        assert app.status.info.prompt_tokens > 0
        await submit(pilot, "two")
        assert app.status.info.prompt_tokens is None  # not 0, not the previous turn's


async def test_intent_shows_where_it_came_from(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/intent writing the tax return")
        assert app.status.info.intent_source == "manual"
        assert "intent (manual): writing the tax return" in app.status.render().plain
        await submit(pilot, "/intent")
        [notice] = [n for n in notices(app) if "writing the tax return" in notice_text(n)][-1:]
        assert "(manual, " in notice_text(notice) and " UTC)" in notice_text(notice)


def _turn(live_server, text: str, answer: Reply, origin: str) -> None:
    def respond(body):  # by content: background intent calls must not take a reply
        if str(body["messages"][-1].get("content")).startswith(text):  # (+ its memory)
            return answer
        return Reply(content="Talking to nixx.")

    live_server.llm.responder = respond
    # a scripted failure raises: the rows it left are what this is about
    with contextlib.suppress(httpx.HTTPError):
        live_server.post(
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": text}]},
            origin=origin,
        )


async def test_restores_only_what_it_can_send(live_server):
    _turn(live_server, "sdk question", Reply(content="sdk answer"), "api")
    _turn(live_server, "first, answered", Reply(content="answer one"), "tui")
    _turn(live_server, "failed turn", Reply(status=500, error="down"), "tui")  # unanswered
    _turn(live_server, "cut turn", Reply(content="half of it", cut_after=2), "tui")
    _turn(live_server, "cut turn", Reply(content="all of it"), "tui")  # the retry
    _turn(live_server, "vscode question", Reply(content="vscode answer"), "vscode")
    _turn(live_server, "last, unanswered", Reply(status=500, error="down"), "tui")
    live_server.llm.responder = lambda body: Reply(content="fresh answer")
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        shown = [
            (type(w).__name__, w.body_text, str(w.border_subtitle or ""))
            for w in app.conversation.children
            if isinstance(w, (UserMessage, AssistantMessage))
        ]
        assert shown == [
            ("UserMessage", "first, answered", ""),
            ("AssistantMessage", "answer one", ""),
            ("UserMessage", "failed turn", "unanswered"),
            ("UserMessage", "cut turn", ""),
            ("AssistantMessage", "half of ", "incomplete"),
            ("AssistantMessage", "all of it", ""),
            ("UserMessage", "last, unanswered", "unanswered"),
        ]
        await submit(pilot, "next")
    # the user's words (the `cache` prompt layout adds nixx's memory after them)
    turn = [b for b in live_server.llm.chat_requests  # not nixx's own calls after it
            if str(b["messages"][-1]["content"]).startswith("next")][-1]
    sent = [
        (m["role"], m["content"].split(f"\n\n{MEMORY_NOTE}")[0])
        for m in turn["messages"]
        if m["role"] != "system"
    ]
    assert sent == [
        ("user", "first, answered"),
        ("assistant", "answer one"),
        ("user", "cut turn"),
        ("assistant", "all of it"),
        ("user", "next"),
    ]
    roles = [r for r, _ in sent]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # alternating, never user twice


async def test_newest_message_stays_in_view_after_a_resize(live_server):
    live_server.llm.responder = lambda body: Reply(content="a line\n\n" * 6 + "the newest end")
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for n in range(4):
            await submit(pilot, f"message {n}")
        await pilot.resize_terminal(50, 18)
        await settle(pilot)
        conversation = app.conversation
        last = list(conversation.query(AssistantMessage))[-1]
        visible = conversation.content_region
        assert last.region.bottom <= visible.bottom + 1
        assert last.region.bottom > visible.y
        assert conversation.scroll_y == conversation.max_scroll_y
