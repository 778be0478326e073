"""What a stored response keeps, and what a continuation loads, are bounded (issue 39):
a large tool output before a small user message is not kept whole in the answer's meta,
a continuation loads only as much of its chain as trimming could send, holds it in the
in-flight budget (a 503 ``server_busy`` when it is full), and begins at the same message
turn after turn. Real uvicorn, the official `openai` SDK, the scripted backend."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from nixx.errors import ServerBusy
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer

WINDOW = 8192


@pytest.fixture
def served(make_settings: Any) -> Iterator[LiveServer]:
    # no summary or intent: the scripted answers are the turns' (sizes the test counts)
    settings = make_settings(chat_context_length=WINDOW, summary_interval=10**9,
                             intent_interval=10**9)
    with LiveServer(create_app(settings)) as live:
        yield live


def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0)


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service._store.get_buffer, 1))


def test_a_large_tool_output_is_not_kept_whole(served: LiveServer, llm: FakeLLM) -> None:
    """2 MiB of tool output before a small user message (15 MiB was kept whole in every
    answer's meta): the turn is served, its record keeps what fits the context window and
    counts the rest as left out, and a continuation still works."""
    oai = client(served)
    big = "x" * (2 * 1024 * 1024)
    llm.queue(Reply(content="done"))
    first = oai.responses.create(model="fake-model", input=[
        {"type": "function_call", "call_id": "c1", "name": "cat", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": big},
        {"role": "user", "content": "what did the file say?"},
    ])
    assert first.output_text == "done"
    answer = rows(served)[-1]
    assert len(json.dumps(answer.meta)) < 4 * WINDOW * 4 // 3  # the window's ~32 KiB at most
    record = answer.meta["response"]
    assert record["left_out"] == 2  # the call and its output
    assert record["input"] == [{"role": "user", "content": "what did the file say?"}]
    llm.queue(Reply(content="again"))
    second = oai.responses.create(model="fake-model", input="and then?",
                                  previous_response_id=first.id)
    assert second.output_text == "again"
    sent = [m["content"] for m in llm.chat_requests[-1]["messages"][1:]]
    assert sent[:2] == ["what did the file say?", "done"]
    assert sent[-1].startswith("and then?")


def _chain(oai: openai.OpenAI, llm: FakeLLM, links: int, words: int) -> list[str]:
    ids: list[str] = []
    for i in range(links):
        llm.queue(Reply(content=f"answer {i}"))
        ids.append(oai.responses.create(
            model="fake-model", input=f"turn {i} " + "word " * words,
            previous_response_id=ids[-1] if ids else None).id)
    return ids


def test_a_continuation_loads_what_trimming_could_send_and_holds_it(
    served: LiveServer, llm: FakeLLM
) -> None:
    """A chain of 30 links of ~130 tokens each, continued with a 1,024-token window
    (3,900 tokens: nearly four windows): a continuation loads two to three windows of it,
    each record held in the budget first; a full budget is `ServerBusy`; consecutive
    continuations begin at the same message until the cut moves by half a window, so the
    backend's prefix cache keeps them."""
    ids = _chain(client(served), llm, 30, 100)
    stored = served.service._responses
    held: list[int] = []

    def hold(n: int) -> bool:
        held.append(n)
        return True

    def walk(rid: str, allow: Any = hold) -> Any:
        return served.call(lambda: served.service.run(stored.walk, rid, 1024, allow))

    chain = walk(ids[-1])
    assert 2 * 1024 <= chain.tokens <= 3 * 1024, chain.tokens
    assert sum(held) == chain.tokens * 4 and len(held) < 30
    assert chain.messages[-1]["content"] == "answer 29"
    assert chain.next_start > 3_500  # the whole chain's tokens, counted from its start
    firsts = [walk(rid).messages[0]["content"][:8] for rid in ids[-4:]]
    assert len(set(firsts)) <= 2, firsts  # four turns of ~130 tokens: one step at most
    with pytest.raises(ServerBusy):
        walk(ids[-1], lambda n: False)


def test_a_continuation_past_the_inflight_budget_is_told_to_retry(
    make_settings: Any, llm: FakeLLM
) -> None:
    """A continuation's body is 200 bytes, but what it loads is not: while another body
    holds most of NIXX_MAX_INFLIGHT_BYTES, a continuation of a 30 KB chain is a 503
    server_busy with Retry-After; alone, it is served."""
    settings = make_settings(chat_context_length=WINDOW, max_inflight_bytes=60_000,
                             summary_interval=10**9, intent_interval=10**9)
    with LiveServer(create_app(settings)) as live:
        oai = client(live)
        ids = _chain(oai, llm, 3, 2_000)
        body = json.dumps({"model": "m", "messages": [
            {"role": "user", "content": "z" * 40_000}]}).encode()
        with socket.create_connection(("127.0.0.1", live.port)) as other:
            other.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:100])
            busy = None
            for _ in range(100):  # once the server has read the other's headers
                busy = httpx.post(live.base_url + "/v1/responses", timeout=30, json={
                    "model": "m", "input": "go on", "previous_response_id": ids[-1]})
                if busy.status_code == 503:
                    break
            assert busy is not None and busy.status_code == 503, busy.text
            assert busy.json()["error"]["code"] == "server_busy"
            assert busy.headers["retry-after"] == "1"
            assert "NIXX_MAX_INFLIGHT_BYTES" in busy.json()["error"]["message"]
        alone = oai.responses.create(model="m", input="go on", previous_response_id=ids[-1])
        assert alone.status == "completed" and alone.output_text
