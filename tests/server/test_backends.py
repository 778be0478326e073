"""One end-to-end scenario on each store backend (SQLite file, embedded PostgreSQL +
pgvector), and once with the local MiniLM embedder: turns, an automatic summary, recall
into a later session, intent, search, a source, and a restart that keeps it all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.memory.prompts import INTENT_FRAMING, INTENT_PROMPT, SUMMARY_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL
from nixx.testing.pg_fixtures import *  # noqa: F403 - pg_server / pg_url fixtures

from .conftest import Nixx, sent_prompt

INTENT_BLOCK = "## Current Intent\n" + INTENT_FRAMING + "\n\n"

SUMMARY = {
    "summary": "We chose PostgreSQL with the pgvector extension to store embeddings.",
    "entities": {"tools": ["PostgreSQL", "pgvector"]},
    "tags": ["database", "vectors"],
}


def respond(body: dict[str, Any]) -> Reply:
    first = body["messages"][0]["content"]
    if first == SUMMARY_PROMPT:
        return Reply(content=json.dumps(SUMMARY))
    if first == INTENT_PROMPT:
        return Reply(content="Choosing a vector database.")
    return Reply(content="noted: " + str(body["messages"][-1]["content"]))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/scenario.db"
    else:
        yield request.getfixturevalue("pg_url")


def scenario(settings: Any, llm: FakeLLM, query: str) -> None:
    llm.responder = respond
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        client.post("/v1/episodic/config", json={"interval": 30})
        history: list[dict[str, Any]] = []
        for text in (
            "which database should hold our embeddings",
            "let us go with postgresql and the pgvector extension",
        ):
            r = nixx.chat(text, history=history, stream=text.startswith("let"))
            assert r.status_code == 200
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "noted"},
            ]
        nixx.idle()
        status = client.get("/v1/episodic/status").json()
        assert status["summaries"] == 1 and status["intent_error"] is None
        summary = client.get("/v1/episodic/summaries").json()["summaries"][0]
        assert (summary["start_buffer_id"], summary["end_buffer_id"]) == (1, 4)
        assert summary["entities"] == {"tools": ["PostgreSQL", "pgvector"]}
        assert client.get("/v1/intent").json()["intent"] == "Choosing a vector database."
        source = client.post("/v1/sources", json={"name": "db decision"}).json()["source"]
        assert source["chunk_count"] >= 1
        client.post("/v1/buffer/clear")

    # restart: everything is still there, and the new session recalls the summary
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        assert client.get("/v1/intent").json()["intent"] == "Choosing a vector database."
        assert client.get("/v1/episodic/status").json()["interval"] == 30
        r = nixx.chat(query)
        assert r.status_code == 200
        system = sent_prompt([
            b
            for b in llm.chat_requests
            if b["messages"][0]["content"] not in (SUMMARY_PROMPT, INTENT_PROMPT)
        ][-1])
        assert INTENT_BLOCK + "Choosing a vector database." in system
        assert ": " + SUMMARY["summary"] + " (tags: database, vectors)" in system
        assert "- summary of buffer #1-4" in system
        # the fused list has the summary and the rows that said it
        results = client.post(
            "/v1/episodic/search", json={"query": "pgvector extension"}
        ).json()["results"]
        assert {r["kind"] for r in results} == {"buffer", "summary"}
        hits = client.post("/v1/episodic/search", json={"query": "pgvector extension"}).json()
        assert any("pgvector" in h["content"] for h in hits["buffer"])
        assert hits["summaries"][0]["id"] == summary["id"]
        found = client.post("/v1/sources/search", json={"query": "pgvector extension"}).json()
        assert found["results"][0]["source_name"] == "db decision"
        rows = client.get("/v1/episodic/transcript", params={"start": 1}).json()["rows"]
        assert [r["role"] for r in rows] == ["user", "assistant"] * 2 + [
            "marker",
            "user",
            "assistant",
        ]


def test_scenario_on_each_backend(make_settings: Any, llm: FakeLLM, db_url: str) -> None:
    settings = make_settings(db_url=db_url, intent_interval=4)
    scenario(settings, llm, "what did we decide about postgresql and pgvector embeddings")


def test_scenario_with_the_local_embedder(make_settings: Any, llm: FakeLLM, tmp_path: Any) -> None:
    settings = make_settings(
        db_url=f"sqlite:///{tmp_path}/local.db",
        embed_provider="local",
        embed_model="",
        recall_threshold=None,  # the calibrated default for all-MiniLM-L6-v2
        intent_interval=4,
    )
    # a paraphrase: few shared words, the meaning carries the recall
    scenario(settings, llm, "Which vector store did we settle on for embeddings?")
    assert not llm.embed_requests  # the local embedder never calls the backend
