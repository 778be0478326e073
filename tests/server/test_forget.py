"""Forgetting over HTTP: deleting buffer rows, summaries and sources, correcting a summary,
the forget query (dry run, confirm), the log — and what a deletion takes with it: the
summary that covered the row (summarised again from what remains, asserted on the exact
prompt), a buffer source's chunks, a derived intent; concurrent turns lose nothing."""

from __future__ import annotations

import json
import threading
from typing import Any

from nixx.memory.prompts import INTENT_PROMPT, SOURCE_SUMMARY_PROMPT, SUMMARY_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx

SECRET = "zebrapass4711"


def is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_PROMPT


def responder(body: dict[str, Any]) -> Reply:
    """Summaries, intents and source summaries repeat the text they were given (so a leak
    would show); chat answers "noted"."""
    first = body["messages"][0]["content"]
    if first == SUMMARY_PROMPT:
        text = body["messages"][1]["content"]
        return Reply(content=json.dumps({"summary": f"Summary of: {text}", "tags": ["t"]}))
    if first == INTENT_PROMPT:
        return Reply(content="Working on: " + body["messages"][1]["content"][:200])
    if first == SOURCE_SUMMARY_PROMPT:
        return Reply(content="About: " + body["messages"][1]["content"][:200])
    return Reply(content="noted")


def setup_talk(nixx: Nixx, llm: FakeLLM, *texts: str) -> list[dict[str, Any]]:
    llm.responder = responder
    for text in texts:
        assert nixx.chat(text).status_code == 200
    nixx.idle()
    return nixx.rows()


def error_of(r: Any) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}, body
    return body["error"]


def test_delete_buffer_row_resummarises_its_window_from_the_rest(nixx: Nixx, llm: FakeLLM) -> None:
    rows = setup_talk(nixx, llm, "plan the trip to Oslo", f"my password is {SECRET}", "book it")
    assert nixx.client.post("/v1/episodic/summary", json={"tags": ["mine"]}).status_code == 200
    [old] = nixx.client.get("/v1/episodic/summaries").json()["summaries"]
    assert SECRET in old["content"]
    secret_row = next(r for r in rows if SECRET in r["content"] and r["role"] == "user")
    llm.requests.clear()

    r = nixx.client.delete(f"/v1/buffer/{secret_row['id']}")
    assert r.status_code == 200, r.text
    done = r.json()["forgotten"]
    assert done["buffer_ids"] == [secret_row["id"]]
    assert done["summary_ids"] == [old["id"]]
    assert done["resummarise"] == [[old["start_buffer_id"], old["end_buffer_id"]]]
    nixx.idle()

    [request] = [b for b in llm.chat_requests if is_summary(b)]
    transcript = request["messages"][1]["content"]
    assert SECRET not in transcript
    remaining = [r for r in rows if r["id"] != secret_row["id"]]
    assert transcript.splitlines() == [f"{r['role'].upper()}: {r['content']}" for r in remaining]
    [new] = nixx.client.get("/v1/episodic/summaries").json()["summaries"]
    assert new["id"] != old["id"] and SECRET not in new["content"]
    assert (new["start_buffer_id"], new["end_buffer_id"]) == (rows[0]["id"], rows[-1]["id"])
    assert SECRET not in json.dumps(nixx.rows())
    search = nixx.client.post("/v1/episodic/search", json={"query": SECRET}).json()
    assert search["buffer"] == []
    assert all(SECRET not in h["content"] for h in search["summaries"])


def test_unknown_ids_are_404_and_bad_input_400(nixx: Nixx, llm: FakeLLM) -> None:
    setup_talk(nixx, llm, "hello")
    for method, path, body in (
        ("DELETE", "/v1/buffer/999", None),
        ("DELETE", "/v1/episodic/summaries/5", None),
        ("PATCH", "/v1/episodic/summaries/5", {"tags": ["x"]}),
        ("DELETE", "/v1/sources/3", None),
        ("POST", "/v1/buffer/delete", {"start_id": 500, "end_id": 600}),
    ):
        r = nixx.client.request(method, path, json=body)
        assert r.status_code == 404, (path, r.text)
        assert error_of(r)["type"] == "not_found_error" or error_of(r)["message"]
    for method, path, body in (
        ("DELETE", "/v1/buffer/zero", None),
        ("DELETE", "/v1/buffer/0", None),
        ("POST", "/v1/buffer/delete", {"start_id": 2, "end_id": 1}),
        ("POST", "/v1/buffer/delete", {"start_id": "1", "end_id": 2}),
        ("POST", "/v1/buffer/delete", {"start_id": 1}),
        ("PATCH", "/v1/episodic/summaries/1", {}),
        ("PATCH", "/v1/episodic/summaries/1", {"content": "x", "colour": "red"}),
        ("POST", "/v1/forget", {"query": "   "}),
        ("POST", "/v1/forget", {"query": "hello", "dry_run": False}),
        ("POST", "/v1/forget", {"query": "hello", "dry_run": False, "ids": ["row:1"]}),
        ("POST", "/v1/forget/ids", {"ids": ["buffer:x"]}),
    ):
        r = nixx.client.request(method, path, json=body)
        assert r.status_code in (400, 422), (path, body, r.text)
        assert error_of(r)["message"]
    assert len(nixx.rows()) == 2  # nothing was deleted


def test_buffer_range_delete_and_the_log(nixx: Nixx, llm: FakeLLM) -> None:
    rows = setup_talk(nixx, llm, "one", "two", "three")
    ids = [r["id"] for r in rows]
    r = nixx.client.post("/v1/buffer/delete", json={"start_id": ids[1], "end_id": ids[3]})
    assert r.status_code == 200, r.text
    assert r.json()["forgotten"]["buffer_ids"] == ids[1:4]
    assert [r["id"] for r in nixx.rows()] == [ids[0], *ids[4:]]
    [entry] = nixx.client.get("/v1/forget/log").json()["log"]
    assert entry["kind"] == "buffer" and entry["ids"]["buffer"] == ids[1:4]
    assert entry["counts"]["buffer"] == 3
    assert "two" not in json.dumps(entry)


def test_edit_summary_is_re_embedded_and_delete_summary(nixx: Nixx, llm: FakeLLM) -> None:
    setup_talk(nixx, llm, "Ann prefers tea in the morning")
    summary = nixx.client.post("/v1/episodic/summary", json={}).json()["summary"]
    r = nixx.client.patch(
        f"/v1/episodic/summaries/{summary['id']}",
        json={"content": "Ann prefers coffee", "tags": ["drinks"], "entities": {"people": ["Ann"]}},
    )
    assert r.status_code == 200, r.text
    edited = r.json()["summary"]
    assert edited["content"] == "Ann prefers coffee" and edited["tags"] == ["drinks"]
    assert edited["entities"] == {"people": ["Ann"]}
    assert [e["input"] for e in llm.embed_requests][-1] == ["Ann prefers coffee"]
    hits = nixx.client.post("/v1/episodic/search", json={"query": "Ann prefers coffee"}).json()
    assert hits["summaries"][0]["id"] == summary["id"]
    assert hits["summaries"][0]["score"] > 0.99
    r = nixx.client.delete(f"/v1/episodic/summaries/{summary['id']}")
    assert r.status_code == 200 and r.json()["forgotten"]["summary_ids"] == [summary["id"]]
    assert nixx.client.get("/v1/episodic/summaries").json()["total"] == 0
    assert len(nixx.rows()) == 2  # the rows stay
    kinds = [e["kind"] for e in nixx.client.get("/v1/forget/log").json()["log"]]
    assert kinds == ["summary", "summary_edit"]


def test_delete_source_and_filter_by_name(nixx: Nixx, llm: FakeLLM) -> None:
    setup_talk(nixx, llm, "notes about the garden", "more garden notes")
    a = nixx.client.post("/v1/sources", json={"name": "Garden plan"}).json()["source"]
    setup_talk(nixx, llm, "kitchen ideas")
    b = nixx.client.post("/v1/sources", json={"name": "Kitchen"}).json()["source"]

    def names(**params: str) -> list[str]:
        body = nixx.client.get("/v1/sources", params=params).json()
        return [s["name"] for s in body["sources"]]

    assert names() == ["Kitchen", "Garden plan"]
    assert names(name="garden") == ["Garden plan"]
    assert names(name="nothing") == []
    r = nixx.client.delete(f"/v1/sources/{a['id']}")
    assert r.status_code == 200, r.text
    assert r.json()["forgotten"]["memories_removed"] == a["chunk_count"]
    assert names() == ["Kitchen"]
    assert nixx.client.get(f"/v1/sources/{a['id']}").status_code == 404
    hits = nixx.client.post("/v1/sources/search", json={"query": "garden notes"}).json()
    assert all(h["source_id"] == b["id"] for h in hits["results"])


def test_forget_row_rebuilds_the_buffer_source_that_held_it(nixx: Nixx, llm: FakeLLM) -> None:
    rows = setup_talk(nixx, llm, "the plan has three parts", f"the key is {SECRET}", "done")
    src = nixx.client.post("/v1/sources", json={"name": "plan"}).json()["source"]
    chunks = nixx.client.get(f"/v1/sources/{src['id']}/chunks").json()["chunks"]
    assert any(SECRET in c["content"] for c in chunks)
    secret_row = next(r for r in rows if r["role"] == "user" and SECRET in r["content"])
    r = nixx.client.post("/v1/forget/ids", json={"ids": [f"buffer:{secret_row['id']}"]})
    assert r.status_code == 200, r.text
    assert r.json()["forgotten"]["rebuild_source_ids"] == [src["id"]]
    nixx.idle()
    after = nixx.client.get(f"/v1/sources/{src['id']}").json()["source"]
    assert after["chunk_count"] >= 1 and SECRET not in (after["summary"] or "")
    assert after["summary"].startswith("About: ")
    chunks = nixx.client.get(f"/v1/sources/{src['id']}/chunks").json()["chunks"]
    text = "\n".join(c["content"] for c in chunks)
    assert SECRET not in text and "three parts" in text and "USER: done" in text


def test_derived_intent_from_a_deleted_row_is_derived_again(
    make_settings: Any, llm: FakeLLM
) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    with TestClient(base_url=LOCAL, app=create_app(make_settings(intent_interval=2))) as client:
        nixx = Nixx(client)
        rows = setup_talk(nixx, llm, f"I am hiding {SECRET}")
        intent = client.get("/v1/intent").json()
        assert intent["source"] == "derived" and SECRET in intent["intent"]
        llm.requests.clear()
        r = client.delete(f"/v1/buffer/{rows[0]['id']}")
        assert r.json()["intent_cleared"] is True
        nixx.idle()
        [request] = [b for b in llm.chat_requests if b["messages"][0]["content"] == INTENT_PROMPT]
        assert SECRET not in request["messages"][1]["content"]
        assert request["messages"][1]["content"] == "Assistant: noted"
        # forgetting the answer too leaves no message to derive from
        client.delete(f"/v1/buffer/{rows[1]['id']}")
        nixx.idle()
        assert client.get("/v1/intent").json()["intent"] is None
        # an intent typed by hand is the user's own and stays
        setup_talk(nixx, llm, "another")
        assert client.post("/v1/intent", json={"intent": "Write docs."}).status_code == 200
        gone = client.delete(f"/v1/buffer/{nixx.rows()[0]['id']}")
        assert gone.json()["intent_cleared"] is False
        assert client.get("/v1/intent").json()["intent"] == "Write docs."


def test_forget_query_dry_run_then_exactly_the_listed_ids(nixx: Nixx, llm: FakeLLM) -> None:
    rows = setup_talk(nixx, llm, f"Bob's PIN is {SECRET}", f"again: pin {SECRET}")
    summary = nixx.client.post("/v1/episodic/summary", json={}).json()["summary"]
    dry = nixx.client.post("/v1/forget", json={"query": f"pin {SECRET.upper()}"}).json()
    assert dry["dry_run"] is True
    user, again = rows[0]["id"], rows[2]["id"]
    assert dry["ids"] == [f"buffer:{user}", f"buffer:{again}", f"summary:{summary['id']}"]
    assert dry["buffer"][0]["snippet"] == f"Bob's PIN is {SECRET}"
    assert dry["summaries"][0]["snippet"].startswith("Summary of: USER: Bob's PIN")
    assert len(nixx.rows()) == 4  # a dry run deletes nothing
    # ids the query does not match are refused, and nothing is deleted
    bad = nixx.client.post(
        "/v1/forget",
        json={"query": f"pin {SECRET}", "dry_run": False, "ids": [f"buffer:{rows[1]['id']}"]},
    )
    assert bad.status_code == 400 and "no longer match" in error_of(bad)["message"]
    # the user keeps the second message out of the deletion: exactly the listed ids go
    r = nixx.client.post(
        "/v1/forget",
        json={"query": f"pin {SECRET}", "dry_run": False, "ids": [f"buffer:{user}", f"summary:{summary['id']}"]},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    done = r.json()["forgotten"]
    assert done["buffer_ids"] == [user] and done["summary_ids"] == [summary["id"]]
    # the summary covered a deleted row: the rest of its window is summarised again
    assert done["resummarise"] == [[summary["start_buffer_id"], summary["end_buffer_id"]]]
    nixx.idle()
    [again_summary] = nixx.client.get("/v1/episodic/summaries").json()["summaries"]
    assert f"Bob's PIN is {SECRET}" not in again_summary["content"]
    assert f"again: pin {SECRET}" in again_summary["content"]  # the user kept that one
    assert [r["id"] for r in nixx.rows()] == [rows[1]["id"], again, rows[3]["id"]]
    [entry] = nixx.client.get("/v1/forget/log").json()["log"]
    assert entry["kind"] == "query" and SECRET not in json.dumps(entry)
    assert entry["counts"] == {"buffer": 1, "summaries": 1, "sources": 0, "memories": 0,
                               "rebuilt_sources": 0, "memories_removed": 0}  # fmt: skip


def test_concurrent_turns_while_deleting_lose_nothing_else(nixx: Nixx, llm: FakeLLM) -> None:
    setup_talk(nixx, llm, *[f"old message {i}" for i in range(10)])
    doomed = [r["id"] for r in nixx.rows()]
    errors: list[str] = []

    def turns(worker: int) -> None:
        for i in range(8):
            r = nixx.chat(f"worker {worker} turn {i}")
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=turns, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for row_id in doomed:
        assert nixx.client.delete(f"/v1/buffer/{row_id}").status_code == 200
    for t in threads:
        t.join()
    nixx.idle()
    assert errors == []
    rows = nixx.rows()
    assert not any(r["content"].startswith("old message") for r in rows)
    users = sorted(r["content"] for r in rows if r["role"] == "user")
    assert users == sorted(f"worker {w} turn {i}" for w in range(3) for i in range(8))
    assert len(rows) == 48


def _disk_bytes(db_path: Any) -> dict[str, bytes]:
    """The SQLite file, its WAL and every sidecar next to it, by name."""
    return {
        p.name: p.read_bytes()
        for p in db_path.parent.iterdir()
        if p.name.startswith(db_path.name) and p.is_file()
    }


def _wal_salts(wal: bytes) -> bytes:
    """The two salts of a SQLite WAL header (bytes 16-24): new each time the WAL starts
    again (salt-1 incremented and salt-2 random after a checkpoint reset, both random
    when the file was truncated to nothing), so frames of an earlier generation are
    never replayed. Empty for an empty WAL."""
    return wal[16:24] if len(wal) >= 32 else b""


def test_forgotten_secret_is_gone_from_the_sqlite_file_and_wal(
    make_settings: Any, llm: FakeLLM
) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    settings = make_settings(intent_interval=2)
    if not settings.database_url.startswith("sqlite"):
        return  # the PostgreSQL run of the suite: docs/storage.md says what VACUUM does
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        setup_talk(nixx, llm, "the weather is fine", f"remember {SECRET} for me", "thanks")
        assert client.post("/v1/episodic/summary", json={}).status_code == 200
        assert client.post("/v1/sources", json={"name": "chat"}).status_code == 200
        nixx.idle()
        path = nixx.service._store.path
        secret = SECRET.encode()
        before = _disk_bytes(path)
        assert any(secret in data for data in before.values())  # it was on disk
        dry = client.post("/v1/forget", json={"query": SECRET}).json()
        # the chat source's display summary and the derived intent say it too
        assert {i.split(":")[0] for i in dry["ids"]} == {
            "buffer", "summary", "memory", "source", "intent"}
        r = client.post("/v1/forget", json={"query": SECRET, "dry_run": False, "ids": dry["ids"]})
        assert r.status_code == 200, r.text
        after = _disk_bytes(path)
        assert {name: secret in data for name, data in after.items()} == dict.fromkeys(after, False)
        # checkpointed and truncated: the WAL is empty, or (the forget's repairs run in the
        # background and may have written since) one started again after the forget
        wal = path.name + "-wal"
        assert after.get(wal, b"") == b"" or _wal_salts(after[wal]) != _wal_salts(
            before.get(wal, b"")
        )
        nixx.idle()  # the re-summary, the source rebuild and the intent, from what remains
        for _ in range(3):  # and after more turns, summaries and checkpoints
            assert nixx.chat("more chat").status_code == 200
        nixx.idle()
        client.post("/v1/episodic/summary", json={})
        assert not any(secret in data for data in _disk_bytes(path).values())
        assert client.get("/v1/episodic/summaries").json()["total"] >= 1
    assert not any(secret in data for data in _disk_bytes(path).values())


def test_forgotten_row_loses_its_vector_and_vector_search_skips_it(
    nixx: Nixx, llm: FakeLLM
) -> None:
    rows = setup_talk(nixx, llm, f"the code is {SECRET}", "something else")
    flush = nixx.service._row_vectors.flush
    assert nixx.client.portal.call(flush)["embedded"] == 4
    store = nixx.service._store
    query = FakeLLM.embedding_of(f"the code is {SECRET}")
    assert store.search_buffer_vectors(query, limit=1)[0].row.id == rows[0]["id"]
    assert nixx.client.delete(f"/v1/buffer/{rows[0]['id']}").status_code == 200
    assert store.buffer_vector_stats() == {"embedded": 3, "pending": 0}
    hits = store.search_buffer_vectors(query, limit=10)
    assert rows[0]["id"] not in [h.row.id for h in hits] and len(hits) == 3
    search = nixx.client.post("/v1/episodic/search", json={"query": SECRET}).json()
    assert all(SECRET not in json.dumps(h) for h in search["buffer"])


def test_ids_past_64_bits_are_refused_not_a_500(nixx) -> None:
    big = 2**63
    for method, path, body in [
        ("POST", "/v1/buffer/delete", {"start_id": 1, "end_id": big}),
        ("DELETE", f"/v1/buffer/{big}", None),
        ("DELETE", f"/v1/episodic/summaries/{big}", None),
        ("DELETE", f"/v1/sources/{big}", None),
        ("POST", "/v1/forget/ids", {"ids": [f"buffer:{big}"]}),
    ]:
        r = nixx.client.request(method, path, json=body)
        assert r.status_code == 400, (path, r.status_code, r.text)
        assert r.json()["error"]["type"] == "invalid_request_error"
