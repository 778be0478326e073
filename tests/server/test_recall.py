"""Per-turn recall from the fused search: what reaches the model's system prompt.

FakeLLM's embeddings are bag-of-words (texts sharing words are close); the paraphrase
and unrelated-question cases need meaning, so they run the real local embedder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.memory.prompts import RECALL_FRAMING, RECALL_HEADING
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL
from nixx.testing.pg_fixtures import *  # noqa: F403 - pg_server / pg_url fixtures

from .conftest import Nixx, offered_prompt, sent_prompt

BOATHOUSE = "the spare key to the boathouse is hidden under the blue flowerpot"


def system_of(llm: FakeLLM) -> str:
    # the system message and the memory the `cache` layout added to the latest user message
    return sent_prompt(llm.chat_requests[-1])


def say(nixx: Nixx, llm: FakeLLM, text: str, answer: str, **kw: Any) -> Any:
    llm.queue(Reply(content=answer))
    r = nixx.chat(text, **kw)
    assert r.status_code == 200, r.text
    return r


def embedded(nixx: Nixx) -> None:
    """Do the background work now (tests never wait on timing): the summary a clear
    started, then the row vectors."""
    nixx.idle()
    nixx.service._row_vectors.drain()
    assert nixx.service._store.buffer_vector_stats()["pending"] == 0


def test_boathouse_key_after_clear_reaches_the_model(nixx: Nixx, llm: FakeLLM) -> None:
    say(nixx, llm, BOATHOUSE, "Noted.")  # rows 1, 2
    say(nixx, llm, "what should I cook tonight", "Pasta.")  # rows 3, 4
    nixx.client.post("/v1/buffer/clear")  # row 5
    embedded(nixx)
    r = say(nixx, llm, "where did I say the boathouse key is hidden?", "Under the flowerpot.")
    day = nixx.rows()[0]["created_at"][:10]
    assert system_of(llm) == (
        offered_prompt()
        + f"\n\n{RECALL_HEADING}\n{RECALL_FRAMING}\n\n"
        + f"- {day}, buffer #1:\n  user: {BOATHOUSE}"
    )
    info = r.json()["nixx"]
    assert [(x["kind"], x["id"], x["buffer_ids"]) for x in info["recalled"]] == [("buffer", 1, [1])]
    assert info["recalled"][0]["score"] > 0 and info["recalled"][0]["cosine"] >= 0.3
    # what was recalled is kept with the answer
    answer = nixx.rows()[-1]
    assert answer["meta"]["recalled"] == [
        {"kind": "buffer", "id": 1, "score": round(info["recalled"][0]["score"], 6)}
    ]
    # /v1/debug/context says the same, and why
    ctx = nixx.client.get(
        "/v1/debug/context", params={"query": "where did I say the boathouse key is hidden?"}
    ).json()
    assert [(x["kind"], x["id"]) for x in ctx["recalled"]] == [("buffer", 1)]
    assert ctx["row_floor"] == 0.3 and ctx["budget_tokens"] == 600 and ctx["considered"] >= 1


def test_the_history_sent_and_the_query_row_are_not_recalled(nixx: Nixx, llm: FakeLLM) -> None:
    say(nixx, llm, BOATHOUSE, "Noted.")
    embedded(nixx)
    history = [
        {"role": "user", "content": BOATHOUSE},
        {"role": "assistant", "content": "Noted."},
    ]
    # the client sends the row itself: it is in the history, so not recalled
    say(nixx, llm, "where is the boathouse key hidden", "ok", history=history)
    assert RECALL_HEADING not in system_of(llm)
    # asked again with only the new message: the earlier question is an exact repeat of
    # the query (not a result), the turn's own new row is excluded, the fact is recalled
    embedded(nixx)
    say(nixx, llm, "where is the boathouse key hidden", "ok")
    system = system_of(llm)
    assert BOATHOUSE in system
    assert "user: where is the boathouse key hidden" not in system


def test_budget_and_best_first(make_settings: Any, llm: FakeLLM) -> None:
    facts = [f"the garden shed code number {i} is {1000 + i} for the shed door" for i in range(12)]
    with TestClient(base_url=LOCAL, app=create_app(make_settings(recall_tokens=60))) as client:
        nixx = Nixx(client)
        for fact in facts:
            nixx.service._store.append_buffer("user", fact)
        nixx.service._store.append_buffer("assistant", "ok")
        client.post("/v1/buffer/clear")
        embedded(nixx)
        r = say(nixx, llm, "what is the garden shed code for the shed door", "ok")
        system = system_of(llm)
        block = system.split(RECALL_FRAMING, 1)[1]
        recalled = r.json()["nixx"]["recalled"]
        assert recalled, "something fits in 60 tokens"
        assert len(block) // 4 <= 60 + 2 * len(recalled)  # the estimate nixx uses
        assert len(recalled) < len(facts)
        scores = [x["score"] for x in recalled]
        assert scores == sorted(scores, reverse=True)
        ctx = client.get("/v1/debug/context", params={"query": "garden shed code"}).json()
        assert ctx["budget_tokens"] == 60
    with TestClient(base_url=LOCAL, app=create_app(make_settings(recall_tokens=0))) as client:
        nixx = Nixx(client)
        say(nixx, llm, "what is the garden shed code for the shed door", "ok")
        assert RECALL_HEADING not in system_of(llm)


def test_a_short_answer_comes_with_its_question(nixx: Nixx, llm: FakeLLM) -> None:
    store = nixx.service._store
    store.append_buffer("assistant", "Did you manage to book the dentist appointment?")
    store.append_buffer("user", "yes, Tuesday at 4")
    store.append_buffer("user", "random other thing about the weather")
    nixx.client.post("/v1/buffer/clear")
    embedded(nixx)
    say(nixx, llm, "which day did I book the dentist appointment for", "Tuesday.")
    system = system_of(llm)
    assert (
        "buffer #1-2:\n  assistant: Did you manage to book the dentist appointment?\n"
        "  user: yes, Tuesday at 4"
    ) in system
    assert "weather" not in system


# ---- with the real local embedder: meaning, not words ------------------------------------
@pytest.fixture
def local(make_settings: Any) -> Iterator[Nixx]:
    settings = make_settings(
        embed_provider="local", embed_model="all-MiniLM-L6-v2", recall_threshold=None
    )
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        yield Nixx(client)


def test_paraphrase_reaches_the_model_and_unrelated_injects_nothing(
    local: Nixx, llm: FakeLLM
) -> None:
    say(local, llm, "my daughter started violin lessons this week", "Lovely!")
    say(local, llm, "can you suggest a podcast for my commute", "Try The Rest Is History.")
    local.client.post("/v1/buffer/clear")
    embedded(local)
    say(local, llm, "which instrument is my kid learning?", "The violin.")
    day = local.rows()[0]["created_at"][:10]
    assert system_of(llm) == (
        offered_prompt()
        + f"\n\n{RECALL_HEADING}\n{RECALL_FRAMING}\n\n"
        + f"- {day}, buffer #1:\n  user: my daughter started violin lessons this week"
    )
    # an unrelated question: nothing clears the calibrated floor, nothing is injected
    say(local, llm, "what is the boiling point of liquid nitrogen?", "-196 °C.")
    assert system_of(llm) == offered_prompt()
    ctx = local.client.get("/v1/debug/context", params={"query": "how do bees make honey?"}).json()
    assert ctx["recalled"] == [] and ctx["considered"] > 0 and ctx["row_floor"] == 0.4



def test_a_turn_recalls_a_row_by_the_sentence_that_answers(local: Nixx, llm: FakeLLM) -> None:
    """A turn of small talk around one fact: the whole row is under the row floor for a
    question about the fact, its sentence about it well over floor + margin
    (`recall.SENTENCE_MARGIN`), so the turn recalls the row and says why."""
    from nixx.memory.recall import SENTENCE_MARGIN

    row = (
        "Ugh, Mondays. Traffic was awful and I spilled coffee on my shirt. My sister adopted "
        "a retired greyhound from the racing rescue. Have you eaten yet?"
    )
    say(local, llm, row, "Not yet!")
    say(local, llm, "can you suggest a podcast for my commute", "Try The Rest Is History.")
    local.client.post("/v1/buffer/clear")
    embedded(local)
    question = "What kind of dog did her sibling take home?"  # no word of the row
    ctx = local.client.get("/v1/debug/context", params={"query": question}).json()
    [item] = [x for x in ctx["recalled"] if x["id"] == 1]
    assert item["cosine"] < ctx["row_floor"], item
    assert item["sentence_cosine"] >= ctx["row_floor"] + SENTENCE_MARGIN, item
    found = local.client.post("/v1/episodic/search", json={"query": question, "limit": 3}).json()
    assert found["results"][0]["id"] == 1
    assert found["results"][0]["sentence_cosine"] == pytest.approx(item["sentence_cosine"])
    say(local, llm, question, "A greyhound.")
    assert "greyhound from the racing rescue" in system_of(llm)

# ---- the fused search, on both store backends ---------------------------------------------
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def both(request: pytest.FixtureRequest, make_settings: Any, tmp_path: Any) -> Iterator[Nixx]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/fused.db"
    else:
        url = request.getfixturevalue("pg_url")
    with TestClient(base_url=LOCAL, app=create_app(make_settings(db_url=url))) as client:
        yield Nixx(client)


def test_fused_search_order_kinds_and_context(both: Nixx, llm: FakeLLM) -> None:
    store = both.service._store
    store.append_buffer("user", "we picked apsw for the sqlite bindings")  # 1: words + meaning
    store.append_buffer("assistant", "apsw bundles FTS5 and can load extensions")  # 2: words
    store.append_buffer("user", "thanks")  # 3
    both.client.post("/v1/buffer/clear")  # 4
    store.append_buffer("user", "the weather is nice today")  # 5: unrelated
    store.bind_embedder("fake-embed", 384)
    store.add_summary(
        "Chose apsw for the sqlite bindings.",
        FakeLLM.embedding_of("Chose apsw for the sqlite bindings."),
        tags=["sqlite"],
        entities={},
        start_buffer_id=1,
        end_buffer_id=3,
    )
    embedded(both)
    body = both.client.post(
        "/v1/episodic/search", json={"query": "which apsw sqlite bindings did we pick", "limit": 5}
    ).json()
    results = body["results"]
    kinds = [(r["kind"], r["id"]) for r in results]
    assert kinds[0] == ("buffer", 1)  # matched by full text and by its vector
    assert ("summary", 1) in kinds
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    first = results[0]
    assert first["buffer_id"] == 1 and first["ranks"]["fts"] == 1 and first["ranks"]["vec"] == 1
    assert first["created_at"] and first["cosine"] > 0.3 and first["bm25"] > 0
    assert [c["id"] for c in first["context"]] == [2]  # row 0 does not exist
    second = next(r for r in results if r["kind"] == "buffer" and r["id"] == 2)
    assert [c["id"] for c in second["context"]] == [1, 3]
    summary = next(r for r in results if r["kind"] == "summary")
    assert summary["summary_id"] == 1 and summary["start_buffer_id"] == 1
    # the lists of before stay
    assert [h["id"] for h in body["buffer"]][:1] == [1]
    assert [h["id"] for h in body["summaries"]] == [1]
    # an exact repeat of the query is not a result
    store.append_buffer("user", "which sqlite bindings did we pick")
    embedded(both)
    again = both.client.post(
        "/v1/episodic/search", json={"query": "Which sqlite  bindings did we pick", "limit": 5}
    ).json()
    assert all(r.get("content") != "which sqlite bindings did we pick" for r in again["results"])


def test_recall_follows_search_and_says_why(both: Nixx, llm: FakeLLM) -> None:
    store = both.service._store
    # a row carrying the question's rare word among many others: its bag-of-words cosine
    # (~0.15) is under the row floor (0.3), its words are the whole question's
    biscuit = store.append_buffer(
        "user",
        "Biscuit chewed through the garden hose again yesterday while we were all out "
        "shopping downtown for shoes",
    )
    store.append_buffer("assistant", "Oh no, was anything else damaged?")
    store.append_buffer("user", "the garden looks great after the rain")
    store.append_buffer("assistant", "rain is good for the roses and the hose can rest")
    both.client.post("/v1/buffer/clear")
    embedded(both)
    question = "what did Biscuit chew?"
    found = both.client.post("/v1/episodic/search", json={"query": question, "limit": 10}).json()
    ctx = both.client.get("/v1/debug/context", params={"query": question}).json()
    assert ctx["recalled"], ctx
    first = ctx["recalled"][0]
    assert first["id"] == biscuit.id and first["cosine"] < ctx["row_floor"]
    assert ctx["word_floor"] == 0.6 and first["why"]["words"] > 0
    # recall takes search's order: the recalled rows are search's rows above the floors
    above = [
        r["id"]
        for r in found["results"]
        if r["kind"] == "buffer"
        and (
            (r["cosine"] or 0) >= ctx["row_floor"]
            or (r["bm25"] or 0) >= ctx["word_floor"]
        )
    ]
    recalled = {x["id"] for x in ctx["recalled"]}
    assert [x["id"] for x in ctx["recalled"]] == [i for i in above if i in recalled]
    assert above[0] == biscuit.id
    # and the turn itself recalls it
    r = say(both, llm, question, "A garden hose.")
    assert biscuit.id in [x["id"] for x in r.json()["nixx"]["recalled"]]
    turn = next(b for b in reversed(llm.chat_requests) if question in json.dumps(b))
    assert "Biscuit chewed through the garden hose" in json.dumps(turn)


# ---- source search: vectors re-ranked by words ------------------------------------------
@pytest.mark.slow
def test_source_search_finds_the_read_cursor_passage(
    make_settings: Any, llm: FakeLLM, workspace: Any
) -> None:
    """Issue 15's case: after ingesting the docs, "how do replicas agree on the read
    cursor?" must return the passage that answers it (docs/nxc.md, "Read state": a max
    register). By vectors alone it was 6th (the default limit is 5)."""
    import shutil
    from pathlib import Path

    docs = Path(__file__).parents[2] / "docs"
    (workspace / "docs").mkdir()
    for name in ("nxc.md", "oplog.md", "sync.md", "channels.md"):
        shutil.copy(docs / name, workspace / "docs" / name)
    settings = make_settings(embed_provider="local", embed_model="all-MiniLM-L6-v2")
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        llm.responder = lambda body: Reply(content="A summary.")
        assert client.post("/v1/ingest", json={"path": "docs"}).status_code == 200
        query = "how do replicas agree on the read cursor?"
        results = client.post("/v1/sources/search", json={"query": query}).json()["results"]
        assert len(results) == 5
        assert any("max register" in r["content"] and "Read state" in r["content"] for r in results)
        # the order changed, the scores are still the cosines
        service = client.app.state.service  # type: ignore[attr-defined]
        vector = service._embedder.embed_one(query)
        nearest = service._store.search_memories(vector, limit=5)
        assert not any("Read state" in h.memory.content for h in nearest)
        for r in results:
            assert 0 < r["score"] <= 1


# ---- a chat between two people: the speakers' names are not evidence ------------------
CHATTER = [
    "How's work?",
    "Ha, same here",
    "Good morning!",
    "Talk soon",
    "That sounds lovely",
    "How was your weekend?",
    "Not much, you?",
    "So true",
    "Miss you!",
    "Haha yes",
]


@pytest.fixture(params=["sqlite", "postgres"])
def local_both(request: pytest.FixtureRequest, make_settings: Any, tmp_path: Any) -> Iterator[Nixx]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/chat.db"
    else:
        url = request.getfixturevalue("pg_url")
    settings = make_settings(
        db_url=url, embed_provider="local", embed_model="all-MiniLM-L6-v2", recall_threshold=None
    )
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        yield Nixx(client)


def test_a_speakers_name_does_not_pull_their_small_talk_first(
    local_both: Nixx, llm: FakeLLM
) -> None:
    """Every row of a chat starts with its speaker's name, so a short row of that person
    ("Melanie: Talk soon") is near any question naming them by the name alone; embedded
    whole, the question below ranked two such rows above its answer. The name is in half
    the rows, so the vector rankers are asked without it (`vector_query`)."""
    store = local_both.service._store
    for i in range(120):
        who = "Caroline" if i % 2 else "Melanie"
        store.append_buffer("user", f"{who}: {CHATTER[(i // 2) % len(CHATTER)]}")
    answer = store.append_buffer(
        "user", "Melanie: Did my first 10k two days ago, raising money for the children's hospital"
    )
    for line in CHATTER:
        store.append_buffer("user", f"Caroline: {line}")
    embedded(local_both)
    question = "What does Melanie do to give back to the community?"
    found = local_both.client.post(
        "/v1/episodic/search", json={"query": question, "limit": 5}
    ).json()
    assert found["results"][0]["id"] == answer.id, found["results"][:3]
    ctx = local_both.client.get("/v1/debug/context", params={"query": question}).json()
    assert ctx["vector_query"] == "What does do to give back to the community?"
    # the turn recalls none of her small talk (the answer shares no word and its cosine
    # to the question without the name is under the floor); asked with a word of it,
    # the answer is recalled first
    assert not {x["id"] for x in ctx["recalled"]} - {answer.id}, ctx["recalled"]
    ctx = local_both.client.get(
        "/v1/debug/context", params={"query": "How did Melanie's 10k go?"}
    ).json()
    assert ctx["recalled"] and ctx["recalled"][0]["id"] == answer.id, ctx["recalled"]
    # a question naming nobody is asked whole
    ctx = local_both.client.get("/v1/debug/context", params={"query": "who ran a 10k?"}).json()
    assert ctx["vector_query"] == "who ran a 10k?"
    # nor does the name let a question on something never said recall that person's
    # rows: embedded whole, "Melanie" put every row of hers over the row floor
    for unsaid in ("When did Melanie go skydiving?", "What did Melanie think of the opera?"):
        ctx = local_both.client.get("/v1/debug/context", params={"query": unsaid}).json()
        assert ctx["recalled"] == [], (unsaid, ctx["recalled"])
