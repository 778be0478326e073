"""The TUI's first hour: what it restores, what the gauge shows, what a small terminal
keeps in view (pilot against a live nixx server backed by the scripted LLM)."""

from __future__ import annotations

import pytest

from nixx.testing.fake_llm import Reply

from .drive import SIZE, make, settle, submit

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
