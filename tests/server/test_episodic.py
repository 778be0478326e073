"""Episodic memory over HTTP: automatic and manual summaries, the tolerant summariser,
status and config (persisted), search, transcript, summaries."""

from __future__ import annotations

import json
import threading
from typing import Any

from fastapi.testclient import TestClient

from nixx.memory.prompts import SUMMARY_PROMPT, SUMMARY_RETRY
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx

GOOD = {
    "summary": "Chose SQLite with FTS5 for the buffer and HNSW for vectors.",
    "entities": {"tools": ["SQLite", "FTS5"], "concepts": ["HNSW"], "people": []},
    "tags": ["storage", "Search"],
}


def is_summary_request(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith(SUMMARY_PROMPT)


def summariser(answers: list[str]) -> Any:
    """A responder: summary requests get `answers` in turn (the last repeats); chat echoes."""
    state = {"n": 0}

    def respond(body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            i = min(state["n"], len(answers) - 1)
            state["n"] += 1
            return Reply(content=answers[i])
        last = body["messages"][-1]["content"]
        return Reply(content=f"echo: {last}")

    return respond


def talk(nixx: Nixx, n: int, words: int = 6) -> None:
    for i in range(n):
        r = nixx.chat(" ".join([f"message {i}", *["lorem"] * (words - 2)]))
        assert r.status_code == 200


def test_summary_after_interval_with_entities_and_range(nixx: Nixx, llm: FakeLLM) -> None:
    llm.responder = summariser([json.dumps(GOOD)])
    assert nixx.client.post("/v1/episodic/config", json={"interval": 20}).status_code == 200
    talk(nixx, 1)  # 6 + 8 words: not due
    nixx.idle()
    assert nixx.client.get("/v1/episodic/summaries").json()["total"] == 0
    talk(nixx, 1)  # 28 words: due
    nixx.idle()
    body = nixx.client.get("/v1/episodic/summaries").json()
    assert body["total"] == 1
    summary = body["summaries"][0]
    assert summary["content"] == GOOD["summary"]
    assert summary["entities"] == {"tools": ["SQLite", "FTS5"], "concepts": ["HNSW"]}
    assert summary["tags"] == ["storage", "search"]
    assert (summary["start_buffer_id"], summary["end_buffer_id"]) == (1, 4)
    # the summariser got the prompt, the transcript as ROLE: content, temperature 0.3
    request = [b for b in llm.chat_requests if is_summary_request(b)][0]
    assert request["temperature"] == 0.3
    lines = request["messages"][1]["content"].splitlines()
    assert lines[0] == "USER: message 0 lorem lorem lorem lorem"
    assert lines[1].startswith("ASSISTANT: echo: message 0")
    status = nixx.client.get("/v1/episodic/status").json()
    assert status["unsummarised_words"] == 0 and status["last_summarised_id"] == 4
    assert status["summaries"] == 1


def test_summary_runs_in_background_without_holding_the_turn(nixx: Nixx, llm: FakeLLM) -> None:
    release = threading.Event()

    def respond(body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            release.wait(30)
            return Reply(content=json.dumps(GOOD))
        return Reply(content="short answer")

    llm.responder = respond
    nixx.client.post("/v1/episodic/config", json={"interval": 5})
    r = nixx.chat("this message crosses the five word interval")
    # the turn answered while the summariser is still blocked
    assert r.status_code == 200
    assert nixx.client.get("/v1/episodic/status").json()["summary_running"] is True
    assert nixx.client.get("/v1/episodic/summaries").json()["total"] == 0
    release.set()
    nixx.idle()
    assert nixx.client.get("/v1/episodic/summaries").json()["total"] == 1


def test_tolerant_parse_fences_prose_trailing_commas(nixx: Nixx, llm: FakeLLM) -> None:
    messy = (
        "Sure! Here is the summary:\n```json\n"
        '{"summary": "Fixed the flaky test.", "entities": {"topics": ["testing",],}, "tags": ["ci",],}\n'
        "```\nHope that helps."
    )
    llm.responder = summariser([messy])
    nixx.client.post("/v1/episodic/config", json={"interval": 3})
    talk(nixx, 1)
    nixx.idle()
    summary = nixx.client.get("/v1/episodic/summaries").json()["summaries"][0]
    assert summary["content"] == "Fixed the flaky test."
    assert summary["entities"] == {"concepts": ["testing"]}
    assert summary["tags"] == ["ci"]


def test_malformed_summary_keeps_window_and_is_retried_later(nixx: Nixx, llm: FakeLLM) -> None:
    llm.responder = summariser(["not json at all", "still {broken", '{"summary": ""}'])
    nixx.client.post("/v1/episodic/config", json={"interval": 3})
    talk(nixx, 1)
    nixx.idle()
    attempts = [b for b in llm.chat_requests if is_summary_request(b)]
    assert len(attempts) == 3  # bounded retries
    # a retry is the original request, with SUMMARY_RETRY in its instructions: never the
    # failed answer (which made each retry longer, past a small model's context)
    assert [len(a["messages"]) for a in attempts] == [2, 2, 2]
    assert attempts[1]["messages"][1] == attempts[0]["messages"][1]
    assert attempts[1]["messages"][0]["content"] == f"{SUMMARY_PROMPT}\n\n{SUMMARY_RETRY}"
    assert all(a["max_tokens"] == 512 for a in attempts)  # bounded answers
    status = nixx.client.get("/v1/episodic/status").json()
    assert status["summaries"] == 0
    assert status["last_summarised_id"] == 0
    assert status["unsummarised_rows"] == 2
    assert "no usable summary" in status["summary_error"]
    # later the backend behaves: every window from row 1 on is summarised (windows of
    # at least `interval` words, so one row each here)
    llm.responder = summariser([json.dumps(GOOD)])
    talk(nixx, 1)
    nixx.idle()
    summaries = nixx.client.get("/v1/episodic/summaries").json()["summaries"]
    ranges = sorted((s["start_buffer_id"], s["end_buffer_id"]) for s in summaries)
    assert ranges == [(1, 1), (2, 2), (3, 3), (4, 4)]
    assert nixx.client.get("/v1/episodic/status").json()["summary_error"] is None


def test_manual_summary_keeps_user_tags_as_typed(nixx: Nixx, llm: FakeLLM) -> None:
    llm.responder = summariser([json.dumps(GOOD)])
    r = nixx.client.post("/v1/episodic/summary", json={"tags": ["x"]})
    assert r.status_code == 400 and "nothing to summarise" in r.json()["error"]["message"]
    talk(nixx, 2)
    r = nixx.client.post("/v1/episodic/summary", json={"tags": ["PostgreSQL", "Storage", " "]})
    assert r.status_code == 200, r.text
    summary = r.json()["summary"]
    assert summary["tags"] == ["PostgreSQL", "Storage", "search"]
    assert (summary["start_buffer_id"], summary["end_buffer_id"]) == (1, 4)
    r = nixx.client.post("/v1/episodic/summary")  # no body: allowed, nothing left
    assert r.status_code == 400


def test_manual_summary_backend_failure_stores_nothing(nixx: Nixx, llm: FakeLLM) -> None:
    talk(nixx, 1)
    llm.responder = lambda body: Reply(status=500, error="down for maintenance")
    r = nixx.client.post("/v1/episodic/summary", json={})
    assert r.status_code == 502
    assert nixx.client.get("/v1/episodic/status").json()["summaries"] == 0


def test_config_persists_across_restart(settings: Any, llm: FakeLLM) -> None:
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        r = client.post("/v1/episodic/config", json={"interval": 321, "recall": False})
        assert (r.json()["interval"], r.json()["recall"]) == (321, False)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        status = client.get("/v1/episodic/status").json()
        assert (status["interval"], status["recall"]) == (321, False)
        r = client.post("/v1/episodic/config", json={"recall": True})
        assert (r.json()["interval"], r.json()["recall"]) == (321, True)


def test_search_combines_fulltext_and_vectors(nixx: Nixx, llm: FakeLLM) -> None:
    llm.responder = summariser(
        [
            json.dumps(
                {"summary": "The espresso machine needs descaling monthly.", "tags": ["coffee"]}
            )
        ]
    )
    nixx.chat("how often should I descale the espresso machine")
    nixx.chat("and what about the grinder burrs")
    nixx.client.post("/v1/episodic/summary", json={"tags": []})
    r = nixx.client.post("/v1/episodic/search", json={"query": "espresso descale", "limit": 5})
    assert r.status_code == 200
    body = r.json()
    # the question and its echo both hold the words (their order is the backend's ranking)
    assert {h["id"] for h in body["buffer"][:2]} == {1, 2}
    assert all(h["score"] > 0 and "espresso" in h["content"] for h in body["buffer"][:2])
    assert body["summaries"][0]["content"] == "The espresso machine needs descaling monthly."
    assert body["summaries"][0]["start_buffer_id"] == 1 and body["summaries"][0]["score"] > 0


def test_transcript_with_and_without_end(nixx: Nixx) -> None:
    talk(nixx, 3)
    nixx.client.post("/v1/buffer/clear")
    r = nixx.client.get("/v1/episodic/transcript", params={"start": 2, "end": 3})
    assert [row["id"] for row in r.json()["rows"]] == [2, 3]
    r = nixx.client.get("/v1/episodic/transcript", params={"start": 5})
    assert [(row["id"], row["role"]) for row in r.json()["rows"]] == [
        (5, "user"),
        (6, "assistant"),
        (7, "marker"),
    ]
    r = nixx.client.get("/v1/episodic/transcript", params={"start": 1, "limit": 2})
    assert [row["id"] for row in r.json()["rows"]] == [1, 2]


def test_session_and_clear(nixx: Nixx) -> None:
    talk(nixx, 1)
    session = nixx.client.get("/v1/buffer/session").json()
    assert [r["role"] for r in session["rows"]] == ["user", "assistant"]
    r = nixx.client.post("/v1/buffer/clear", headers={"X-Nixx-Origin": "tui"})
    assert (
        r.json()["marker"]["role"] == "marker" and r.json()["marker"]["content"] == "session_clear"
    )
    assert r.json()["marker"]["origin"] == "tui"
    assert nixx.client.get("/v1/buffer/session").json()["rows"] == []
    talk(nixx, 1)
    session = nixx.client.get("/v1/buffer/session").json()
    assert session["session_start_id"] == 4
    assert [r["id"] for r in session["rows"]] == [4, 5]
    assert len(nixx.rows()) == 5  # nothing deleted


def test_failing_summaries_back_off_and_manual_still_tries(nixx: Nixx, llm: FakeLLM) -> None:
    llm.responder = summariser(["never json"])
    nixx.client.post("/v1/episodic/config", json={"interval": 2})

    def attempts() -> int:
        return len([b for b in llm.chat_requests if is_summary_request(b)])

    counts = []
    for _ in range(5):
        talk(nixx, 1)
        nixx.idle()
        counts.append(attempts())
    # turn 1 fails (3 attempts), turn 2 retries and fails, turn 3 is skipped,
    # turn 4 retries and fails, turns 5-7 are skipped
    assert counts == [3, 6, 6, 9, 9]
    llm.responder = summariser([json.dumps(GOOD)])
    r = nixx.client.post("/v1/episodic/summary", json={"tags": []})
    assert r.status_code == 200
    assert r.json()["summary"]["start_buffer_id"] == 1


def test_status_reports_the_context_length_the_tui_gauges_against(make_settings) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    with TestClient(base_url=LOCAL, app=create_app(make_settings(chat_context_length=4096))) as client:
        assert client.get("/v1/episodic/status").json()["context_length"] == 4096
