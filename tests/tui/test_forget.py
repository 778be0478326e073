"""/forget through Textual's pilot against a live server: the confirmation screen lists
what would go, Escape keeps everything, y deletes exactly that; a search hit is deleted
by its id."""

from __future__ import annotations

import pytest

from nixx.testing.fake_llm import Reply
from nixx.tui.commands import CommandError, parse
from nixx.tui.widgets import ForgetScreen

from .drive import SIZE, make, notice_text, notices, notifications, settle, submit

pytestmark = pytest.mark.anyio


def _chat(server, text: str) -> None:
    server.llm.queue(Reply(content="ok"))
    server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": text}]})


def _buffer(server) -> list[str]:
    rows = server.get("/v1/episodic/transcript?start=1")["rows"]
    return [r["content"] for r in rows]


async def test_forget_query_asks_first_and_deletes_what_it_showed(live_server):
    _chat(live_server, "my locker code is 4711 okapi")
    _chat(live_server, "the weather is nice")
    app = make(live_server.url)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await submit(pilot, "/forget okapi")
        assert isinstance(app.screen, ForgetScreen) and app.screen.count == 1
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ForgetScreen)
        assert "nothing forgotten" in notifications(app)
        assert "my locker code is 4711 okapi" in _buffer(live_server)

        await submit(pilot, "/forget OKAPI 4711")
        assert isinstance(app.screen, ForgetScreen)
        await pilot.press("y")
        await settle(pilot)
        assert "forgot 1 transcript row" in notice_text(notices(app)[-1])
        await submit(pilot, "/forget okapi")
        assert "nothing in memory matches 'okapi'" in notice_text(notices(app)[-1])
    assert _buffer(live_server) == ["ok", "the weather is nice", "ok"]
    [entry] = live_server.get("/v1/forget/log")["log"]
    assert entry["kind"] == "query" and entry["counts"]["buffer"] == 1


async def test_a_search_hit_is_deleted_by_its_id(live_server):
    _chat(live_server, "delete this zucchini line")
    app = make(live_server.url)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await submit(pilot, "/search zucchini")
        shown = notice_text(notices(app)[-1])
        assert "/forget buffer:ID" in shown
        await submit(pilot, "/forget buffer:1")
        assert isinstance(app.screen, ForgetScreen)
        await pilot.press("enter")
        await settle(pilot)
        await submit(pilot, "/forget buffer:1")
        await pilot.press("y")
        await settle(pilot)
        assert any("/forget: buffer row 1 does not exist" in notice_text(n) for n in notices(app))
    assert _buffer(live_server) == ["ok"]


def test_forget_parses_queries_and_ids():
    assert parse("/forget my old address").args == {"query": "my old address", "ids": None}
    assert parse("/forget buffer:12 Summary:3").args == {
        "query": None,
        "ids": ["buffer:12", "summary:3"],
    }
    for bad in ("/forget", "/forget buffer:1 and words"):
        with pytest.raises(CommandError, match="usage: /forget"):
            parse(bad)
