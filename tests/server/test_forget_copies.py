"""A forget leaves no copy (issue 26): an assistant row's tool-call arguments and the
agent it ran for (`meta`), a source's name, meta and display summary, an intent typed by
hand, and the HNSW graph written when the store closes. Real server (TestClient over the
real app), real SQLite files, the embedded PostgreSQL for the pg_wal note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall

from .conftest import Nixx

SECRET = "quokkapass9931"


def _disk(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.parent.iterdir()
            if p.name.startswith(path.name) and p.is_file()}


def _forget(nixx: Nixx, query: str) -> dict[str, Any]:
    dry = nixx.client.post("/v1/forget", json={"query": query}).json()
    r = nixx.client.post("/v1/forget", json={"query": query, "dry_run": False,
                                             "ids": dry["ids"]})
    assert r.status_code == 200, r.text
    return {"dry": dry, "done": r.json()}


def _everywhere(nixx: Nixx) -> str:
    """What the API and the pages show: the transcript, sources, intent, the context."""
    c = nixx.client
    parts = [
        json.dumps(c.get("/v1/episodic/transcript", params={"start": 1, "limit": 1000}).json()),
        json.dumps(c.get("/v1/sources").json()),
        json.dumps(c.get("/v1/intent").json()),
        json.dumps(c.get("/v1/debug/context").json()),
        c.get("/ui/sources").text,
        c.get("/ui/settings").text,
    ]
    return "\n".join(parts)


def test_tool_arguments_and_agent_in_an_assistant_row_are_found_and_forgotten(
        nixx: Nixx, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("nothing here\n")
    llm.queue(Reply(tool_calls=[ToolCall("read_file", {"path": f"notes-{SECRET}.txt"},
                                         id="call_1")]))
    llm.queue(Reply(content="there is no such file"))
    r = nixx.chat("look for the file", headers={"X-Nixx-Agent": f"team/{SECRET}"})
    assert r.status_code == 200, r.text
    nixx.idle()
    rows = nixx.rows()
    assistant = next(row for row in rows if row["role"] == "assistant")
    assert SECRET in json.dumps(assistant["meta"])  # the arguments and the agent are kept
    found = _forget(nixx, SECRET)
    assert f"buffer:{assistant['id']}" in found["dry"]["ids"]
    path = nixx.service._store.path
    assert not any(SECRET.encode() in data for data in _disk(path).values())
    assert SECRET not in _everywhere(nixx)


def test_a_source_named_after_the_secret_is_found_and_forgotten(nixx: Nixx) -> None:
    r = nixx.client.post("/v1/ingest", json={"text": "ordinary notes about tides",
                                            "name": f"notes {SECRET}"})
    assert r.status_code == 200, r.text
    nixx.idle()
    found = _forget(nixx, SECRET)
    assert any(i.startswith("source:") for i in found["dry"]["ids"])
    assert nixx.client.get("/v1/sources").json()["sources"] == [] or SECRET not in json.dumps(
        nixx.client.get("/v1/sources").json())
    assert SECRET not in _everywhere(nixx)
    assert not any(SECRET.encode() in d for d in _disk(nixx.service._store.path).values())


def test_an_intent_typed_by_hand_holding_the_secret_is_found_and_forgotten(nixx: Nixx) -> None:
    assert nixx.client.post("/v1/intent", json={"intent": f"rotate {SECRET} today"}
                            ).status_code == 200
    found = _forget(nixx, SECRET)
    assert found["dry"]["intent"]["id"] == "intent:1"
    assert found["done"]["intent_cleared"] is True
    assert nixx.client.get("/v1/intent").json()["intent"] is None
    assert SECRET not in _everywhere(nixx)


def test_the_graph_saved_at_close_holds_no_forgotten_vector(tmp_path: Path) -> None:
    """Store level, as the issue measured: 1,200 memories in an HNSW graph, 1,000 of them
    forgotten, then the store closes. The graph it held still carried the forgotten
    vectors (usearch only marks a removed key), so it is not written: whatever sidecar
    exists afterwards was built from the 200 that remain."""
    from nixx.store.records import NewChunk
    from nixx.store.sqlite import SQLiteStore

    path = tmp_path / "nixx.db"
    sidecar = path.with_name(path.name + ".memories.hnsw")
    store = SQLiteStore(path, ann_threshold=100)
    store.migrate()
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1200, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.bind_embedder("fake", 32)
    src = store.add_source("many", "document", [
        NewChunk(f"chunk {i}", vectors[i], {"chunk": i}) for i in range(1200)])
    assert store.search_memories(vectors[0], limit=3)  # builds the graph and saves it
    assert sidecar.exists()
    full_size = sidecar.stat().st_size
    ids = [m.id for m in store.source_chunks(src.id)]
    store.forget("memory", memory_ids=ids[:1000])
    store.scrub()  # what every forget runs
    assert store.search_memories(vectors[1100], limit=3)  # the graph drops the 1,000 keys
    store.close()
    if sidecar.exists():  # only a graph of the 200 left may be on disk
        assert sidecar.stat().st_size < full_size / 2
    reopened = SQLiteStore(path, ann_threshold=100)
    try:
        hits = reopened.search_memories(vectors[3], limit=5)
        assert hits and all(h.memory.id not in ids[:1000] for h in hits)
    finally:
        reopened.close()


def test_a_source_whose_display_summary_and_meta_hold_the_secret_leaves_no_copy(
        nixx: Nixx, llm: FakeLLM, workspace: Path) -> None:
    """The issue's case: the secret is in a file's text, so its display summary (what the
    backend wrote) and its meta (the file's name) carry it too; forgetting the chunks left
    the source with 0 chunks and its name, meta and summary. Checked in the database file,
    the API and pages, and what `nixx export` writes (`export_records`)."""
    from nixx.ingest.summary import DOCUMENT_SUMMARY_PROMPT
    from nixx.memory.prompts import SOURCE_SUMMARY_PROMPT

    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] in (SOURCE_SUMMARY_PROMPT, DOCUMENT_SUMMARY_PROMPT):
            return Reply(content="About: " + body["messages"][1]["content"][:300])
        return Reply(content="noted")

    llm.responder = respond
    (workspace / f"vault-{SECRET}.txt").write_text(f"the door code is {SECRET}\n")
    r = nixx.client.post("/v1/ingest", json={"path": f"vault-{SECRET}.txt"})
    assert r.status_code == 200, r.text
    nixx.idle()
    store = nixx.service._store
    (source,) = store.list_sources()
    assert SECRET in (source.summary or "") and SECRET in json.dumps(source.meta) + source.name
    found = _forget(nixx, SECRET)
    assert f"source:{source.id}" in found["dry"]["ids"]
    assert SECRET not in _everywhere(nixx)
    assert SECRET not in json.dumps(list(store.export_records()), default=str)
    assert not any(SECRET.encode() in d for d in _disk(store.path).values())


def test_a_forgotten_intent_is_not_carried_into_later_requests(nixx: Nixx, llm: FakeLLM) -> None:
    """The `cache` prompt layout carries the memory each earlier user message was sent with
    (`memory.layout.MemoryTrail`, kept in the server's memory) into the conversation's
    later requests; a forget empties it, so the next request of the same conversation
    does not send the forgotten text to the backend again."""
    assert nixx.client.post("/v1/intent", json={"intent": f"rotate {SECRET} today"}
                            ).status_code == 200
    first = {"role": "user", "content": "what am I doing?"}
    assert nixx.chat(first["content"]).status_code == 200
    assert SECRET in json.dumps(llm.chat_requests[-1])  # the intent went with it
    answer = {"role": "assistant", "content": "ok"}
    nixx.idle()
    _forget(nixx, SECRET)
    before = len(llm.chat_requests)
    assert nixx.chat("and now?", history=[first, answer]).status_code == 200
    later = llm.chat_requests[before:]
    assert later and all(SECRET not in json.dumps(request) for request in later), [
        m for r in later for m in r["messages"] if SECRET in json.dumps(m)]
