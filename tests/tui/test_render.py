"""Renderers show foreign text as typed: brackets are never read as markup."""

from __future__ import annotations

import io

from rich.console import Console

from nixx.tui import render
from nixx.tui.widgets import StatusInfo, help_renderable, render_status

HOSTILE = "a [/] b [bold]c[/bold] [link=http://x]d"


def text_of(renderable) -> str:
    console = Console(width=160, color_system=None, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_help_shows_usages_with_their_brackets():
    text = text_of(help_renderable())
    for usage in [
        "/summary [tag ...]",
        "/transcript <id> [end_id]",
        "/recall [on|off]",
        '/source "name" [start end]',
        "/intent [text | --clear | --derive]",
    ]:
        assert usage in text
    assert "Ctrl+C" in text and "Shift+Enter" in text


def test_search_results_show_hostile_text_verbatim():
    body = {
        "buffer": [{"id": 7, "role": "user", "content": HOSTILE, "score": 1.5}],
        "summaries": [
            {
                "content": HOSTILE,
                "tags": ["[x]"],
                "start_buffer_id": 1,
                "end_buffer_id": 9,
                "score": 0.61,
            }
        ],
    }
    text = text_of(render.search_results("[/]", body))
    assert text.count(HOSTILE) == 2
    assert "search [/] — 1 transcript row, 1 summary" in text
    assert "#[x]" in text and "0.61" in text and "1-9" in text


def test_fused_results_show_hostile_text_verbatim_best_first():
    body = {
        "results": [
            {
                "kind": "buffer",
                "id": 8,
                "role": "user",
                "content": "yes " + HOSTILE,
                "created_at": "2025-03-04T10:00:00Z",
                "score": 0.03,
                "context": [
                    {"id": 7, "role": "assistant", "content": "did you book it?"},
                    {"id": 9, "role": "user", "content": "unrelated"},
                ],
            },
            {
                "kind": "summary",
                "id": 2,
                "content": HOSTILE,
                "tags": ["[x]"],
                "start_buffer_id": 1,
                "end_buffer_id": 9,
                "created_at": "2025-03-05T10:00:00Z",
                "score": 0.01,
            },
        ],
        "buffer": [],
        "summaries": [],
    }
    text = text_of(render.search_results("[/]", body))
    assert "search [/] — 1 transcript row, 1 summary, best first" in text
    assert text.count(HOSTILE) == 2 and "#[x]" in text and "(1-9)" in text
    # a short answer is shown after its question; the unrelated next row is not
    assert text.index("did you book it?") < text.index("yes " + HOSTILE)
    assert "unrelated" not in text and "2025-03-04" in text
    assert text.index("buffer:8") < text.index("(1-9)")
    assert "nothing found" in text_of(render.search_results("q", {"results": []}))


def test_search_results_empty():
    assert "nothing found" in text_of(render.search_results("q", {"buffer": [], "summaries": []}))


def test_transcript_context_source_ingest_and_status():
    rows = [
        {"id": 1, "role": "user", "content": HOSTILE},
        {"id": 2, "role": "marker", "content": "session_clear"},
    ]
    text = text_of(render.transcript_rows(rows))
    assert HOSTILE in text and "session ended" in text
    ctx = {
        "intent": HOSTILE,
        "recall_enabled": True,
        "threshold": 0.3,
        "system_prompt": "base\n\n## Current Intent\n" + HOSTILE,
        "recalled": [{"kind": "buffer", "id": 4, "cosine": 0.5, "text": "- old talk " + HOSTILE}],
    }
    text = text_of(render.context_view(ctx))
    assert text.count(HOSTILE) == 3 and "recalled: 1" in text and "cosine 0.50" in text
    assert "buffer 4" in text
    src = {
        "source": {
            "id": 3,
            "name": HOSTILE,
            "start_id": 4,
            "end_id": 5,
            "chunk_count": 2,
            "summary": "sum [/]",
        }
    }
    text = text_of(render.source_view(src))
    assert HOSTILE in text and "rows 4-5, 2 chunks" in text and "sum [/]" in text
    ing = {
        "status": "created",
        "sources": [src["source"]],
        "files": 1,
        "chunks": 2,
        "summary_error": "backend [/] down",
    }
    text = text_of(render.ingest_view("[/]notes.md", ing))
    assert "[/]notes.md — created (1 files, 2 chunks)" in text and "backend [/] down" in text
    status = render_status(
        StatusInfo(
            server="s",
            connected=True,
            model="[m]",
            recall=False,
            intent=HOSTILE,
            words=5,
            interval=10,
        )
    )
    assert "[m]" in status.plain and HOSTILE in status.plain and "summary 5/10w" in status.plain
