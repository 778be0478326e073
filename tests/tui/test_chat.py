"""The chat against a live nixx server backed by the scripted LLM."""

from __future__ import annotations

import pytest

from nixx.testing.fake_llm import Reply

from .drive import SIZE, assistants, make, notice_text, notices, settle, submit, users
from .live import ThreadedServer, llm_settings

pytestmark = pytest.mark.anyio

HOSTILE = "look: [/] and [bold]not bold[/bold] and [link=x]y"


async def test_streamed_answer_appears_and_is_stored_with_origin_tui(live_server):
    live_server.llm.queue(Reply(content="Hello **world**. Markup stays text: [/] [red]x[/red]"))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, HOSTILE)
        assert [u.body_text for u in users(app)] == [HOSTILE]
        [answer] = assistants(app)
        assert answer.body_text == "Hello **world**. Markup stays text: [/] [red]x[/red]"
        assert not answer.streaming
        assert app._history == [
            {"role": "user", "content": HOSTILE},
            {"role": "assistant", "content": answer.body_text},
        ]
        assert app.prompt.text == ""
    sent = live_server.llm.chat_requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": HOSTILE}
    rows = live_server.get("/v1/buffer/session")
    rows = rows if isinstance(rows, list) else rows.get("rows", rows.get("data"))
    assert [(r["role"], r["content"], r["origin"]) for r in rows] == [
        ("user", HOSTILE, "tui"),
        ("assistant", answer.body_text, "tui"),
    ]


async def test_history_is_sent_in_full_every_turn(live_server):
    live_server.llm.queue(Reply(content="first answer"), Reply(content="second answer"))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "one")
        await submit(pilot, "two")
    messages = live_server.llm.chat_requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in messages if m["role"] != "system"] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]


async def test_backend_failure_shows_error_and_restores_prompt(live_server):
    live_server.llm.queue(Reply(status=500, error="the model exploded"))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "please [/] answer")
        assert app.prompt.text == "please [/] answer"
        assert users(app) == [] and assistants(app) == []
        assert app._history == []
        [error] = notices(app)
        assert "error" in error.classes
        assert "the model exploded" in notice_text(error)


async def test_backend_down_says_what_to_set(tmp_path, fake_llm):
    settings = llm_settings(tmp_path, "http://127.0.0.1:9/v1", fake_llm.base_url)
    with ThreadedServer(settings) as url:
        app = make(url)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await submit(pilot, "hello?")
            assert app.prompt.text == "hello?"
            [error] = notices(app)
            text = notice_text(error)
            assert "127.0.0.1:9" in text and "NIXX_CHAT_BASE_URL" in text


async def test_stream_cut_keeps_partial_answer_marked(live_server):
    live_server.llm.queue(Reply(content="one two three four five six", cut_after=2))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "tell me")
        [answer] = assistants(app)
        assert answer.body_text and "six" not in answer.body_text
        assert "incomplete" in answer.classes
        assert any("error" in n.classes for n in notices(app))
        assert app.prompt.text == ""


async def test_ctrl_c_cancels_stream_then_twice_quits(live_server):
    live_server.llm.queue(Reply(content="a b c d e f g h i j k l m n o p", delay=0.3))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.prompt.load_text("go slowly")
        await pilot.press("enter")
        while not (assistants(app) and assistants(app)[0].body_text):
            await pilot.pause(0.05)
        await pilot.press("ctrl+c")
        await settle(pilot)
        [answer] = assistants(app)
        assert answer.border_subtitle == "interrupted"
        assert app.is_running and not app.is_streaming
        assert app._history[0] == {"role": "user", "content": "go slowly"}
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0


async def test_session_is_restored_at_start(live_server):
    live_server.llm.queue(Reply(content="remembered answer"))
    live_server.post(
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "remember [/] me"}]},
        origin="tui",  # the TUI restores its own rows (tests/tui/test_first_hour.py)
    )
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert [u.body_text for u in users(app)] == ["remember [/] me"]
        assert [a.body_text for a in assistants(app)] == ["remembered answer"]
        assert app._history == [
            {"role": "user", "content": "remember [/] me"},
            {"role": "assistant", "content": "remembered answer"},
        ]
        assert app.status.info.model == "fake-model"


async def test_typed_keys_reach_the_prompt(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(*"hi [x]")
        await pilot.press("shift+enter")
        await pilot.press(*"there")
        assert app.prompt.text == "hi [x]\nthere"


async def test_server_tools_show_as_dim_lines(live_server):
    from nixx.testing.fake_llm import ToolCall

    (live_server.settings.workspace / "plan.md").write_text("the plan")
    live_server.llm.queue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "plan.md"})]),
        Reply(content="The plan says: the plan"),
    )
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "what is the plan?")
        from nixx.tui.widgets import ToolLine

        [line] = app.query(ToolLine)
        assert str(line.content.plain) == "▸ read_file"
        assert assistants(app)[0].body_text == "The plan says: the plan"
    tool_msg = live_server.llm.chat_requests[-1]["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"] == "the plan"


async def test_long_operation_shows_progress_and_input_stays_usable(live_server):
    import json

    from nixx.tui.widgets import ProgressPanel

    live_server.llm.queue(Reply(content="hello"))
    live_server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    live_server.llm.queue(Reply(content=json.dumps({"summary": "Greetings."}), delay=1.0))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.prompt.load_text("/summary greeting")
        await pilot.press("enter")
        while not app.query(ProgressPanel):
            await pilot.pause(0.02)
        assert "summarising" in app.status.info.busy
        await pilot.press(*"still typing")
        assert app.prompt.text == "still typing"
        await settle(pilot)
        assert not app.query(ProgressPanel) and app.status.info.busy == ""
        assert "Greetings." in notice_text(notices(app)[-1])


async def test_no_server_at_start_is_shown_and_the_prompt_kept():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        app = make(url)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.status.info.connected is False
            assert "no nixx server answers" in notice_text(notices(app)[0])
            await submit(pilot, "anyone there?")
            assert app.prompt.text == "anyone there?"
            assert "nixx serve" in notice_text(notices(app)[-1])


async def test_up_and_down_recall_sent_lines(live_server):
    live_server.llm.queue(Reply(content="a"), Reply(content="b"))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "first line")
        await submit(pilot, "/interval")
        await submit(pilot, "second\nwith two lines")
        await pilot.press("up")
        assert app.prompt.text == "second\nwith two lines"
        await pilot.press("up")  # the cursor is on the last line: moves up within the text
        await pilot.press("up")
        assert app.prompt.text == "/interval"
        await pilot.press("up")
        assert app.prompt.text == "first line"
        await pilot.press("down", "down")
        assert app.prompt.text == "second\nwith two lines"
        await pilot.press("down")
        assert app.prompt.text == ""
