"""Snapshots of the chat (pytest-textual-snapshot) against a live server.

Deterministic by construction: fixed terminal size, a fixed server label instead of the
URL (whose port is random), scripted answers, and the one screen with dates
(search) shows rows redated to a fixed day. Update with
`pytest tests/tui/test_snapshots.py --snapshot-update` after looking at the report.
"""

from __future__ import annotations

import json

from nixx.testing.fake_llm import Reply

from .drive import make, settle, submit

SIZE = (100, 32)

ANSWER = """Here is the plan, with a snippet:

```python
def greet(name: str) -> str:
    return f"hello {name}"
```

- markup in text stays text: [/] and [bold]this[/bold]
- **bold** comes from Markdown only
"""


def _chat(server, text: str, answer: str) -> None:
    server.llm.queue(Reply(content=answer))
    server.post(
        "/v1/chat/completions", {"messages": [{"role": "user", "content": text}]}, origin="tui"
    )


def test_main_screen(snap_compare, live_server):
    live_server.llm.queue(Reply(content=ANSWER))

    async def run_before(pilot):
        await settle(pilot)
        await submit(pilot, "show me [/] a [bold]plan[/bold]")

    assert snap_compare(make(live_server.url), terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare, live_server):
    async def run_before(pilot):
        await settle(pilot)
        await submit(pilot, "/help")

    assert snap_compare(make(live_server.url), terminal_size=SIZE, run_before=run_before)


def test_search_result(snap_compare, live_server):
    _chat(live_server, "we picked apsw because it loads sqlite extensions", "apsw bundles FTS5")
    _chat(live_server, "the weather is nice today", "indeed it is")
    _chat(live_server, "does apsw work with [/] brackets?", "yes, text is text")
    summary = {"summary": "apsw was chosen to load SQLite extensions.", "tags": ["storage"]}
    live_server.llm.queue(Reply(content=json.dumps(summary)))
    live_server.post("/v1/episodic/summary", {"tags": ["apsw"]})
    live_server.embedded()
    live_server.redate("2026-01-15")  # the hits show their date

    async def run_before(pilot):
        await settle(pilot)
        await submit(pilot, "/clear")
        await submit(pilot, "/search apsw")

    assert snap_compare(make(live_server.url), terminal_size=SIZE, run_before=run_before)
