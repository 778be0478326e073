"""Every slash command against a live server, checked through the server's API."""

from __future__ import annotations

import json

import pytest

from nixx.testing.fake_llm import Reply
from nixx.tui.widgets import HelpScreen, TagsScreen

from .drive import (
    SIZE,
    assistants,
    make,
    notice_text,
    notices,
    notifications,
    settle,
    submit,
    users,
)

pytestmark = pytest.mark.anyio


def _chat(server, text: str, answer: str) -> None:
    """A turn sent by another client, so the buffer has something in it."""
    server.llm.queue(Reply(content=answer))
    server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": text}]})


def _last_notice(app) -> str:
    return notice_text(notices(app)[-1])


async def test_help_opens_and_escape_closes(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/help")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
    assert live_server.llm.chat_requests == []  # handled locally


async def test_unknown_command_and_bad_args_give_a_usage_hint(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await submit(pilot, "/frobnicate [/]")
        await submit(pilot, "/transcript abc")
        got = notifications(app)
        assert any("unknown command /frobnicate" in n for n in got)
        assert any("usage: /transcript <id> [end_id]" in n for n in got)
        assert app.prompt.text == "/transcript abc"  # kept, so it can be fixed
        assert users(app) == []
    assert live_server.llm.chat_requests == []


async def test_interval_shows_and_sets(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/interval 250")
        assert "summary interval: 250 words" in _last_notice(app)
        assert app.status.info.interval == 250
    assert live_server.get("/v1/episodic/status")["interval"] == 250


async def test_recall_toggles(live_server):
    assert live_server.get("/v1/episodic/status")["recall"] is True
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/recall")
        assert live_server.get("/v1/episodic/status")["recall"] is False
        assert app.status.info.recall is False
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert live_server.get("/v1/episodic/status")["recall"] is True
        await submit(pilot, "/recall off")
    assert live_server.get("/v1/episodic/status")["recall"] is False


async def test_intent_set_show_clear_derive(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/intent ship the [/] chat")
        assert live_server.get("/v1/intent")["intent"] == "ship the [/] chat"
        assert app.status.info.intent == "ship the [/] chat"
        await submit(pilot, "/intent")
        assert "ship the [/] chat" in _last_notice(app)
        await submit(pilot, "/intent --clear")
        assert live_server.get("/v1/intent")["intent"] is None
        _chat(live_server, "I am writing the terminal client", "ok")
        live_server.llm.queue(Reply(content="Building the nixx terminal client."))
        await submit(pilot, "/intent --derive")
        assert app.status.info.intent == "Building the nixx terminal client."
    assert live_server.get("/v1/intent")["intent"] == "Building the nixx terminal client."


async def test_clear_ends_the_session(live_server):
    live_server.llm.queue(Reply(content="answer before"))
    live_server.post(
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "before the clear"}]},
        origin="tui",  # restored: the TUI shows its own rows
    )
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(users(app)) == 1
        await submit(pilot, "/clear")
        assert users(app) == [] and assistants(app) == [] and app._history == []
        assert "session cleared" in _last_notice(app)
    assert live_server.get("/v1/buffer/session")["rows"] == []
    rows = live_server.get("/v1/episodic/transcript", params={"start": 1})["rows"]
    assert [r["role"] for r in rows] == ["user", "assistant", "marker"]  # nothing deleted


async def test_search_and_transcript(live_server):
    _chat(live_server, "we picked apsw for sqlite extensions", "apsw bundles FTS5")
    _chat(live_server, "the weather is nice", "indeed")
    live_server.embedded()
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/search apsw")
        text = _last_notice(app)
        assert "we picked apsw for sqlite extensions" in text
        # best first: the rows that say apsw, then at most weak neighbours in meaning
        assert text.index("apsw bundles FTS5") < text.find("weather") or "weather" not in text
        await submit(pilot, "/transcript 3 4")
        text = _last_notice(app)
        assert "the weather is nice" in text and "indeed" in text and "apsw" not in text
        await submit(pilot, "/search")  # no query: the last user message
        assert "the weather is nice" in _last_notice(app)
    assert live_server.llm.chat_requests[-1]["messages"][-1]["content"] == "the weather is nice"


async def test_search_finds_one_clients_rows(live_server):
    """`/search client:NAME` finds only the rows that client's turns wrote (its name sent
    as X-Nixx-Origin), and an unfiltered search shows each row's client."""
    live_server.llm.queue(Reply(content="the kettle is on the shelf"))
    live_server.post("/v1/chat/completions",
                     {"messages": [{"role": "user", "content": "where is the kettle?"}]},
                     origin="my-script")
    _chat(live_server, "is the kettle clean?", "the kettle is clean")
    live_server.embedded()
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/search client:my-script kettle")
        text = _last_notice(app)
        assert "from my-script" in text
        assert "where is the kettle?" in text and "on the shelf" in text
        assert "clean" not in text
        await submit(pilot, "/search kettle")
        text = _last_notice(app)
        assert "clean" in text and "my-script" in text
        await submit(pilot, "/search client:Not!A!Name kettle")  # the server's 400
        text = _last_notice(app)
        assert text.startswith("/search:") and "client" in text, text


async def test_summary_asks_for_tags_then_summarises(live_server):
    _chat(live_server, "we chose SQLite with FTS5 for the buffer", "a good choice")
    live_server.llm.queue(
        Reply(
            content=json.dumps(
                {
                    "summary": "SQLite with FTS5 stores the buffer.",
                    "entities": {"tools": ["sqlite"]},
                    "tags": ["storage"],
                }
            )
        )
    )
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/summary")
        assert isinstance(app.screen, TagsScreen)
        await pilot.press(*"design, db")
        await pilot.press("enter")
        await settle(pilot)
        assert "SQLite with FTS5 stores the buffer." in _last_notice(app)
    [summary] = live_server.get("/v1/episodic/summaries")["summaries"]
    assert summary["content"] == "SQLite with FTS5 stores the buffer."
    assert {"design", "db"} <= set(summary["tags"])
    assert (summary["start_buffer_id"], summary["end_buffer_id"]) == (1, 2)


async def test_summary_with_inline_tags_and_escape_cancels(live_server):
    _chat(live_server, "notes about the design", "fine")
    live_server.llm.queue(Reply(content=json.dumps({"summary": "Design notes.", "tags": []})))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/summary")
        await pilot.press("escape")
        await settle(pilot)
        assert live_server.get("/v1/episodic/summaries")["summaries"] == []
        await submit(pilot, "/summary design")
    [summary] = live_server.get("/v1/episodic/summaries")["summaries"]
    assert "design" in summary["tags"]


async def test_context_shows_the_system_prompt(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/intent test the context [/]")
        await submit(pilot, "/context")
        text = _last_notice(app)
    expected = live_server.get("/v1/debug/context")
    assert "test the context [/]" in text
    assert "## Current Intent" in expected["memory_block"]
    assert "## Current Intent" in text
    assert expected["system_prompt"].splitlines()[0][:60] in text


async def test_source_defaults_to_the_current_session(live_server):
    _chat(live_server, "old session talk", "old")
    live_server.post("/v1/buffer/clear")
    _chat(live_server, "the plan for the TUI", "widgets and workers")
    live_server.llm.responder = lambda body: Reply(content="A plan for the TUI.")
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, '/source "tui plan"')
        assert "tui plan" in _last_notice(app)
        await submit(pilot, "/source first 1 2")
    sources = {s["name"]: s for s in live_server.get("/v1/sources")["sources"]}
    assert (sources["tui plan"]["start_id"], sources["tui plan"]["end_id"]) == (4, 5)
    assert (sources["first"]["start_id"], sources["first"]["end_id"]) == (1, 2)


async def test_ingest_a_file(live_server):
    doc = live_server.settings.workspace / "notes.md"
    doc.write_text("# Notes\n\nThe chat client streams answers over SSE.\n")
    live_server.llm.responder = lambda body: Reply(content="Notes on the chat client.")
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, f"/ingest {doc}")
        assert "notes.md" in _last_notice(app)
    names = [s["name"] for s in live_server.get("/v1/sources")["sources"]]
    assert len(names) == 1 and "notes" in names[0]


async def test_ingest_failure_is_shown_not_raised(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/ingest /definitely/not/here.md")
        [error] = notices(app)
        assert "error" in error.classes and "/ingest" in notice_text(error)
        assert app.is_running


async def test_quit_exits(live_server):
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/quit")
    assert app.return_code == 0


async def test_double_slash_sends_a_slash_message(live_server):
    live_server.llm.queue(Reply(content="ok"))
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "//etc/hosts is a file")
    assert live_server.llm.chat_requests[-1]["messages"][-1]["content"] == "/etc/hosts is a file"


async def test_approvals_are_listed_approved_and_denied_from_the_chat(live_server, tmp_path):
    """`/approvals`, `/approve`, `/deny` (issue 43): two sends to a persona declaring
    `approve: [start]` wait in the server's workspace; the person lists them, approves
    one with a note (its runtime runs: the step is held on this clone) and denies the
    other; the decisions are what `nxc approvals --all` shows."""
    import os
    import subprocess
    import sys

    import anyio
    import yaml

    from nixx.log.workspace import init_workspace

    workspace = live_server.settings.workspace
    init_workspace(workspace, replica="ab12")
    (workspace / ".nxs-personas").mkdir()
    started = tmp_path / "started"
    (workspace / ".nxs-personas" / "deployer.yaml").write_text(yaml.safe_dump({
        "handle": "deployer", "system_prompt": "You deploy.", "approve": ["start"],
        "runtime": {"start": [sys.executable, "-c", f"open({str(started)!r}, 'a').write('x')",
                              "{prompt}"]}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}

    def nxc(*args: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", *args, "--json"],
                              cwd=workspace, env={**env, "NXC_ACTOR": "lead"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    first = nxc("send", "--to", "deployer", "deploy to staging")["approval"]
    second = nxc("send", "--to", "deployer", "deploy to production")["approval"]
    app = make(live_server.url)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await submit(pilot, "/approvals")
        shown = _last_notice(app)
        assert first in shown and second in shown and "start ab12/deployer" in shown
        await submit(pilot, f"/approve {first} staging is fine")
        shown = _last_notice(app)
        assert "approved by" in shown and "staging is fine" in shown
        assert "start approved in thread" in shown
        await submit(pilot, f"/deny {second} not before the review")
        assert "denied by" in _last_notice(app)
        await submit(pilot, "/approvals")
        assert "nothing waits for your approval" in _last_notice(app)
    decided = {a["id"]: a for a in nxc("approvals", "--all")["approvals"]}
    assert (decided[first]["state"], decided[first]["note"]) == ("approved", "staging is fine")
    assert decided[second]["state"] == "denied"
    for _ in range(600):  # the approved start's runtime runs detached
        if started.exists():
            break
        await anyio.sleep(0.1)
    assert started.read_text() == "x"  # one start: the approved one
