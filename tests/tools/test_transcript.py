"""search_transcript and view_transcript over a real SQLite store."""

from __future__ import annotations

import json

from nixx.tools import transcript


def _fill(store, n: int) -> list[int]:
    ids = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        ids.append(store.append_buffer(role, f"row {i} talks about topic{i % 3}").id)
    return ids


def test_search_transcript_finds_rows_with_ids(make_registry, store):
    store.append_buffer("user", "we chose apsw because it can load sqlite extensions")
    store.append_buffer("assistant", "the weather is fine today")
    out = make_registry().execute("search_transcript", json.dumps({"query": "apsw extensions"}))
    assert "1 rows match" in out
    assert "[1] user" in out and "apsw" in out
    assert "weather" not in out


def test_search_transcript_respects_limit_and_no_match(make_registry, store):
    _fill(store, 12)
    reg = make_registry()
    out = reg.execute("search_transcript", json.dumps({"query": "talks", "limit": 4}))
    assert out.splitlines()[0].startswith("4 rows match")
    assert len(out.splitlines()) == 5
    assert reg.execute("search_transcript", '{"query": "zebra"}') == (
        "no transcript rows match 'zebra'"
    )


def test_search_transcript_clips_long_rows(store):
    store.append_buffer("user", "needle " + "x" * 2000)
    out = transcript.search_transcript(store, "needle")
    assert "more characters]" in out
    assert len(out) < 1000


def test_view_transcript_range_and_open_end(make_registry, store):
    ids = _fill(store, 5)
    reg = make_registry()
    out = reg.execute("view_transcript", json.dumps({"start": ids[1], "end": ids[2]}))
    assert out.splitlines()[0].startswith(f"[{ids[1]}] assistant")
    assert "row 1 " in out and "row 2 " in out and "row 3 " not in out
    out = reg.execute("view_transcript", json.dumps({"start": ids[3]}))
    assert "row 3 " in out and "row 4 " in out and "stopped" not in out


def test_view_transcript_caps_rows_and_says_how_to_continue(store):
    ids = _fill(store, transcript.VIEW_MAX_ROWS + 10)
    out = transcript.view_transcript(store, ids[0])
    lines = out.splitlines()
    assert len(lines) == transcript.VIEW_MAX_ROWS + 1
    assert f"start={ids[transcript.VIEW_MAX_ROWS]}" in lines[-1]
    out = transcript.view_transcript(store, ids[0], ids[-1])
    assert len(out.splitlines()) == transcript.VIEW_MAX_ROWS + 1


def test_view_transcript_past_the_end_and_incomplete_flag(store):
    row = store.append_buffer("assistant", "half an answ")
    store.update_buffer_meta(row.id, {"incomplete": True})
    assert "(incomplete)" in transcript.view_transcript(store, row.id)
    assert transcript.view_transcript(store, row.id + 10) == (
        f"no transcript rows from id {row.id + 10} (the newest row is {row.id})"
    )
