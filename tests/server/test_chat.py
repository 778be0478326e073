"""POST /v1/chat/completions in process: the prompt the backend receives, the buffer
written once per turn, content forms, client tools, history trimming."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from nixx.memory.prompts import INTENT_FRAMING, MEMORY_NOTE, RECALL_FRAMING, SYSTEM_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LOCAL

from .conftest import Nixx, offered_prompt, sent_prompt

INTENT_BLOCK = "## Current Intent\n" + INTENT_FRAMING + "\n\n"


def sse_chunks(text: str) -> list[Any]:
    out = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def add_summary(nixx: Nixx, text: str, tags: list[str], start: int, end: int) -> Any:
    store = nixx.service._store
    vec = FakeLLM.embedding_of(text, 384)
    store.bind_embedder("fake-embed", 384)
    return store.add_summary(
        text, vec, tags=tags, entities={}, start_buffer_id=start, end_buffer_id=end
    )


def test_non_streaming_turn_answers_openai_shape_and_writes_buffer_once(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="Hello there."))
    r = nixx.chat("hi nixx", headers={"X-Nixx-Origin": "tui"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello there."}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] > 0
    assert llm.chat_requests[-1]["stream"] is True  # nixx always streams from the backend
    assert llm.chat_requests[-1]["stream_options"] == {"include_usage": True}
    rows = nixx.rows()
    assert [(r["role"], r["content"], r["origin"]) for r in rows] == [
        ("user", "hi nixx", "tui"),
        ("assistant", "Hello there.", "tui"),
    ]
    # the backend got nixx's system prompt first, then the user's message
    sent = llm.chat_requests[-1]["messages"]
    # (the tools sentence too: nixx's tools are offered, the client sent none)
    assert sent[0] == {"role": "system", "content": offered_prompt()}
    assert sent[1:] == [{"role": "user", "content": "hi nixx"}]


def test_history_resent_each_turn_is_not_reappended(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    history: list[dict[str, Any]] = []
    for text in ("first", "second", "third"):
        r = nixx.chat(text, history=history)
        answer = r.json()["choices"][0]["message"]["content"]
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
    rows = nixx.rows()
    assert [(r["role"], r["content"], r["origin"]) for r in rows] == [
        ("user", "first", "api"),
        ("assistant", "one", "api"),
        ("user", "second", "api"),
        ("assistant", "two", "api"),
        ("user", "third", "api"),
        ("assistant", "three", "api"),
    ]
    # the backend received the whole history on the last turn
    assert [m["content"] for m in llm.chat_requests[-1]["messages"][1:]] == [
        "first",
        "one",
        "second",
        "two",
        "third",
    ]


def test_streaming_turn_strict_chunks(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content="streamed answer here"))
    r = nixx.chat("stream please", stream=True, stream_options={"include_usage": True})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks = sse_chunks(r.text)
    assert chunks[-1] == "[DONE]"
    objects = chunks[:-1]
    assert all("choices" in c and c["object"] == "chat.completion.chunk" for c in objects)
    assert objects[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in objects if c["choices"])
    assert text == "streamed answer here"
    finals = [c for c in objects if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "stop"
    assert objects[-1]["choices"] == [] and objects[-1]["usage"]["total_tokens"] > 0
    assert {c["id"] for c in objects} == {objects[0]["id"]}
    assert [r["content"] for r in nixx.rows()] == ["stream please", "streamed answer here"]


def test_content_as_parts_and_null_and_client_system_message(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content="ok"))
    messages = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": None},
        {"role": "assistant", "content": None, "tool_calls": []},
        {
            "role": "user",
            "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}],
        },
    ]
    r = nixx.client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert r.status_code == 200, r.text
    sent = llm.chat_requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": offered_prompt() + "\n\nAnswer in French."}
    assert sent[-1] == {"role": "user", "content": "part one\npart two"}
    assert nixx.rows()[0]["content"] == "part one\npart two"


def test_intent_and_recalled_summaries_in_exact_order(nixx: Nixx, llm: FakeLLM) -> None:
    # an old session: three rows, then a clear
    for text in ("we tuned the hnsw index of postgres", "ok", "unrelated cooking recipe"):
        nixx.service._store.append_buffer("user", text)
    nixx.client.post("/v1/buffer/clear")
    add_summary(
        nixx, "Tuned the postgres hnsw index: m=16, ef_search=64.", ["postgres", "hnsw"], 1, 2
    )
    add_summary(nixx, "A recipe for bread with rye flour.", ["cooking"], 3, 3)
    assert (
        nixx.client.post("/v1/intent", json={"intent": "Speed up vector search."}).status_code
        == 200
    )

    nixx.service._row_vectors.drain()  # the background queue's work, done now
    llm.queue(Reply(content="Use ef_search."))
    query = "how did we tune the postgres hnsw index"
    r = nixx.chat(query)
    assert r.status_code == 200
    system = sent_prompt(llm.chat_requests[-1])
    day = nixx.rows()[0]["created_at"][:10]
    summary_day = nixx.service._store.list_summaries()[-1].created_at[:10]
    # best first: the row itself (full text and vectors agree), then the summary of it
    assert system == (
        offered_prompt()
        + "\n\n" + INTENT_BLOCK + "Speed up vector search."
        + "\n\n## Recalled Memories\n"
        + RECALL_FRAMING
        + f"\n\n- {day}, buffer #1:\n  user: we tuned the hnsw index of postgres"
        + f"\n- summary of buffer #1-2 ({summary_day}): Tuned the postgres hnsw index: "
        "m=16, ef_search=64. (tags: postgres, hnsw)"
    )
    # where (the `cache` layout): the base prompt alone is the system message, the memory
    # follows the user's words in their message
    sent = llm.chat_requests[-1]["messages"]
    # (the tools sentence too: nixx's tools are offered, the client sent none)
    assert sent[0] == {"role": "system", "content": offered_prompt()}
    memory = system.removeprefix(offered_prompt() + "\n\n")
    assert sent[-1] == {"role": "user", "content": f"{query}\n\n{MEMORY_NOTE}\n\n{memory}"}
    assert nixx.rows()[-2]["content"] == query  # the buffer keeps the user's words only
    assert r.json()["nixx"]["recalled_summaries"] == [1]
    assert [(x["kind"], x["id"]) for x in r.json()["nixx"]["recalled"]] == [
        ("buffer", 1),
        ("summary", 1),
    ]


def test_threshold_is_respected(make_settings: Any, llm: FakeLLM, tmp_path: Any) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    summary = "Tuned the postgres hnsw index: m=16, ef_search=64."
    query = "how did we tune the postgres hnsw index"
    cosine = float(np.dot(FakeLLM.embedding_of(summary), FakeLLM.embedding_of(query)))
    assert 0.2 < cosine < 0.9
    for n, (threshold, recalled) in enumerate(((cosine - 0.01, True), (cosine + 0.01, False))):
        settings = make_settings(recall_threshold=threshold, db_url=f"sqlite:///{tmp_path}/{n}.db")
        with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
            nixx = Nixx(client)
            nixx.service._store.append_buffer("user", "old message")
            client.post("/v1/buffer/clear")
            add_summary(nixx, summary, [], 1, 1)
            llm.queue(Reply(content="x"))
            nixx.chat(query)
            system = sent_prompt(llm.chat_requests[-1])
            assert ("## Recalled Memories" in system) is recalled


def test_summaries_of_the_history_in_this_turn_are_not_recalled(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content="first answer about postgres hnsw"))
    history = [{"role": "user", "content": "tell me about postgres hnsw index"}]
    nixx.chat("tell me about postgres hnsw index")
    add_summary(nixx, "postgres hnsw index discussion", [], 1, 2)
    history.append({"role": "assistant", "content": "first answer about postgres hnsw"})
    # the client re-sends rows 1-2: their summary must not be recalled
    llm.queue(Reply(content="ok"))
    nixx.chat("more on postgres hnsw index", history=history)
    assert "## Recalled Memories" not in sent_prompt(llm.chat_requests[-1])
    # a client that sends only the new message gets the summary recalled
    llm.queue(Reply(content="ok"))
    nixx.chat("more on postgres hnsw index")
    assert "postgres hnsw index discussion" in sent_prompt(llm.chat_requests[-1])


def test_recall_can_be_switched_off(nixx: Nixx, llm: FakeLLM) -> None:
    nixx.service._store.append_buffer("user", "x")
    nixx.client.post("/v1/buffer/clear")
    add_summary(nixx, "postgres hnsw index", [], 1, 1)
    assert nixx.client.post("/v1/episodic/config", json={"recall": False}).json()["recall"] is False
    nixx.chat("postgres hnsw index")
    assert "## Recalled Memories" not in sent_prompt(llm.chat_requests[-1])
    nixx.client.post("/v1/episodic/config", json={"recall": True})
    nixx.chat("postgres hnsw index")
    assert "## Recalled Memories" in sent_prompt(llm.chat_requests[-1])


def test_retried_request_does_not_duplicate_the_user_row(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(status=500, error="overloaded"), Reply(content="fine now"))
    assert nixx.chat("please answer").status_code == 502
    assert nixx.chat("please answer").status_code == 200
    assert [(r["role"], r["content"]) for r in nixx.rows()] == [
        ("user", "please answer"),
        ("assistant", "fine now"),
    ]


def test_client_tools_pass_through_and_calls_return_to_client(nixx: Nixx, llm: FakeLLM) -> None:
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    llm.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="call_w")]))
    r = nixx.chat("weather in Oslo?", tools=[weather])
    body = r.json()
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    call = body["choices"][0]["message"]["tool_calls"][0]
    assert call["id"] == "call_w" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    offered = [t["function"]["name"] for t in llm.chat_requests[-1]["tools"]]
    # a client that brings its own tools gets none of nixx's (`chat_tools = "auto"`)
    assert offered == ["get_weather"]
    # the client answers the call: no new user row, the tool result reaches the backend
    llm.queue(Reply(content="It is sunny in Oslo."))
    messages = [
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21C"},
    ]
    r = nixx.client.post(
        "/v1/chat/completions", json={"model": "m", "messages": messages, "tools": [weather]}
    )
    assert r.json()["choices"][0]["message"]["content"] == "It is sunny in Oslo."
    assert llm.chat_requests[-1]["messages"][-1]["content"] == "sunny, 21C"
    roles = [(r["role"], r["content"]) for r in nixx.rows()]
    assert roles == [
        ("user", "weather in Oslo?"),
        ("assistant", ""),
        ("assistant", "It is sunny in Oslo."),
    ]
    assert nixx.rows()[1]["meta"]["tool_calls"][0]["name"] == "get_weather"


def test_streamed_client_tool_call(nixx: Nixx, llm: FakeLLM) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    llm.queue(Reply(tool_calls=[ToolCall("lookup", {"q": "x"}, id="call_1")]))
    r = nixx.chat("look it up", tools=[tool], stream=True)
    chunks = sse_chunks(r.text)[:-1]
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert calls == [
        [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "x"}'},
            }
        ]
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_history_is_trimmed_newest_first_keeping_system(make_settings: Any, llm: FakeLLM) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    with TestClient(base_url=LOCAL, app=create_app(make_settings(chat_context_length=1200))) as client:
        nixx = Nixx(client)
        history = []
        for i in range(20):
            history.append({"role": "user", "content": f"question {i} " + "word " * 40})
            history.append({"role": "assistant", "content": f"answer {i} " + "word " * 40})
        r = nixx.chat("the newest question", history=history, max_tokens=100)
        assert r.status_code == 200
        sent = llm.chat_requests[-1]["messages"]
        assert sent[0]["role"] == "system" and sent[0]["content"].startswith(SYSTEM_PROMPT)
        assert sent[-1]["content"] == "the newest question"
        assert 2 < len(sent) < 41
        kept = [m["content"].split()[1] for m in sent[1:-1]]
        assert kept[-1] == "19"  # the newest history survives, the oldest went first
        assert r.json()["nixx"]["trimmed_messages"] == 41 - (len(sent) - 1)


def test_older_summary_recalled_past_many_summaries_of_the_history(
    make_settings: Any, llm: FakeLLM
) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    with TestClient(base_url=LOCAL, app=create_app(make_settings(recall_limit=1))) as client:
        nixx = Nixx(client)
        store = nixx.service._store
        store.append_buffer("user", "old talk")  # row 1: an older session
        client.post("/v1/buffer/clear")  # row 2
        history: list[dict[str, Any]] = []
        for i in range(6):  # rows 3..14: the session the client re-sends
            text = f"kubernetes ingress controller question {i}"
            store.append_buffer("user", text)
            store.append_buffer("assistant", "answer")
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "answer"},
            ]
        # six summaries of the history (very similar to the query), one of the old session
        for i in range(6):
            add_summary(nixx, "kubernetes ingress controller setup", [], 3 + 2 * i, 4 + 2 * i)
        add_summary(nixx, "kubernetes ingress basics from last week", ["old"], 1, 1)
        llm.queue(Reply(content="ok"))
        r = nixx.chat("kubernetes ingress controller", history=history)
        system = sent_prompt(llm.chat_requests[-1])
        assert "kubernetes ingress basics from last week (tags: old)" in system
        assert "kubernetes ingress controller setup" not in system
        assert r.json()["nixx"]["recalled_summaries"] == [7]


def test_developer_message_merged_and_tool_choice_none(nixx: Nixx, llm: FakeLLM) -> None:
    messages = [
        {"role": "developer", "content": "Be terse."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "mid-conversation note"},
        {"role": "user", "content": "again"},
    ]
    r = nixx.client.post(
        "/v1/chat/completions", json={"model": "m", "messages": messages, "tool_choice": "none"}
    )
    assert r.status_code == 200
    sent = llm.chat_requests[-1]
    # no tools offered, none named: the base prompt without the tools sentence
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT + "\n\nBe terse."}
    assert sent["messages"][1:] == messages[1:]  # a later system message stays where it was
    assert "tools" not in sent and "tool_choice" not in sent
    assert [r["content"] for r in nixx.rows()] == ["again", "echo: again"]


def test_a_turn_for_an_nxc_persona_is_tagged_and_offers_no_server_tools(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="reviewed"))
    own = [{"type": "function", "function": {"name": "nxc_reply", "parameters": {}}}]
    r = nixx.chat("review this", tools=own, headers={"X-Nixx-Agent": "ab12/reviewer"})
    assert r.status_code == 200, r.text
    assert [t["function"]["name"] for t in llm.chat_requests[-1]["tools"]] == ["nxc_reply"]
    rows = nixx.rows()
    assert [(r["role"], r["meta"].get("agent")) for r in rows] == [
        ("user", "ab12/reviewer"), ("assistant", "ab12/reviewer")]
    bad = nixx.chat("x", headers={"X-Nixx-Agent": "a" * 201})
    assert bad.status_code == 400 and "X-Nixx-Agent" in bad.json()["error"]["message"]


def test_a_failed_user_write_ends_the_turn_and_frees_its_recall_thread(settings: Any) -> None:
    """The recall thread waits for the user-row write to learn what the history holds: a
    write that fails must end the turn with its error, and that thread too (not leave it
    waiting for a result that never comes)."""
    import asyncio
    import dataclasses
    import sys
    import time
    import traceback

    from nixx.errors import StoreError
    from nixx.memory.episodic import Sender
    from nixx.memory.service import open_service
    from nixx.memory.turn import run_turn
    from nixx.memory.turn_events import TurnInput

    def waiting_recall_threads() -> int:
        return sum(
            1
            for frame in sys._current_frames().values()
            for f, _ in traceback.walk_stack(frame)
            if f.f_code.co_name == "recall_prompt"
        )

    def store_gone() -> str | None:
        raise StoreError("the store went away")

    async def turn() -> None:
        async with open_service(settings) as service:
            service._store.append_buffer("user", "the boathouse key is under the pot", origin="api")
            parts = dataclasses.replace(service._turn_parts, intent=store_gone)
            body = {"model": "m", "messages": [{"role": "user", "content": "where is the key?"}]}
            try:
                async for _ in run_turn(parts, TurnInput(body), Sender()):
                    pass
            finally:
                deadline = time.monotonic() + 10
                while waiting_recall_threads() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                assert waiting_recall_threads() == 0

    try:
        asyncio.run(turn())
    except StoreError as exc:
        assert "went away" in str(exc)
    else:
        raise AssertionError("the turn did not fail")
