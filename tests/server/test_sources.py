"""Sources over HTTP: mark a buffer range, chunks embedded, search, default ranges."""

from __future__ import annotations

from typing import Any

from nixx.memory.prompts import SOURCE_SUMMARY_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import Nixx


def respond(body: dict[str, Any]) -> Reply:
    if body["messages"][0]["content"] == SOURCE_SUMMARY_PROMPT:
        return Reply(content="How to brew pour-over coffee.")
    return Reply(content="answer: " + body["messages"][-1]["content"])


def test_source_from_buffer_range(nixx: Nixx, llm: FakeLLM) -> None:
    llm.responder = respond
    long = "Pour-over coffee needs a gooseneck kettle and a 1:16 ratio. " * 30
    nixx.chat(long)
    nixx.chat("what grind size?")
    r = nixx.client.post("/v1/sources", json={"name": "coffee notes"})
    assert r.status_code == 200, r.text
    source = r.json()["source"]
    assert (source["name"], source["type"], source["start_id"], source["end_id"]) == (
        "coffee notes",
        "buffer",
        1,
        4,
    )
    assert source["summary"] == "How to brew pour-over coffee."
    assert source["chunk_count"] >= 3 and r.json()["summary_error"] is None
    chunks = nixx.client.get(f"/v1/sources/{source['id']}/chunks").json()["chunks"]
    assert [c["metadata"]["chunk"] for c in chunks] == list(range(len(chunks)))
    assert {c["metadata"]["total_chunks"] for c in chunks} == {len(chunks)}
    assert all(len(c["content"]) <= 900 for c in chunks)
    assert chunks[0]["content"].startswith("USER: Pour-over coffee")
    assert nixx.client.get(f"/v1/sources/{source['id']}").json()["source"]["id"] == source["id"]
    assert [s["name"] for s in nixx.client.get("/v1/sources").json()["sources"]] == ["coffee notes"]

    hits = nixx.client.post(
        "/v1/sources/search", json={"query": "what grind size", "limit": 2}
    ).json()
    assert hits["results"][0]["source_name"] == "coffee notes"
    assert "grind size" in hits["results"][0]["content"]
    assert hits["results"][0]["score"] >= hits["results"][-1]["score"]

    # the next source starts after the previous one's end
    nixx.chat("now about tea")
    r = nixx.client.post("/v1/sources", json={"name": "tea"})
    assert (r.json()["source"]["start_id"], r.json()["source"]["end_id"]) == (5, 6)
    # an explicit range
    r = nixx.client.post("/v1/sources", json={"name": "just one", "start_id": 3, "end_id": 3})
    assert r.json()["source"]["chunk_count"] == 1
    # nothing new to mark
    r = nixx.client.post("/v1/sources", json={"name": "empty"})
    assert r.status_code == 400


def test_source_kept_without_summary_when_backend_fails(nixx: Nixx, llm: FakeLLM) -> None:
    nixx.chat("remember this")
    llm.responder = lambda body: Reply(status=500, error="busy")
    r = nixx.client.post("/v1/sources", json={"name": "kept"})
    assert r.status_code == 200
    assert r.json()["source"]["summary"] is None
    assert "busy" in r.json()["summary_error"]
    assert r.json()["source"]["chunk_count"] == 1


def test_source_embedding_failure_stores_nothing(nixx: Nixx, llm: FakeLLM) -> None:
    nixx.chat("remember this too")
    llm.fail_embeddings = True
    r = nixx.client.post("/v1/sources", json={"name": "lost?"})
    assert r.status_code in (502, 503)
    assert nixx.client.get("/v1/sources").json()["sources"] == []
