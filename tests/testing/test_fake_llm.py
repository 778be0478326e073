"""The scripted backend must speak the protocol the official client expects."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall


def client(llm: FakeLLM) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=0)


def test_json_and_default_echo(fake_llm: FakeLLM) -> None:
    out = client(fake_llm).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello there"}]
    )
    assert out.choices[0].message.content == "echo: hello there"
    assert fake_llm.chat_requests[-1]["messages"][0]["content"] == "hello there"


def test_default_echo_leaves_out_the_memory_nixx_added(fake_llm: FakeLLM) -> None:
    from nixx.memory.layout import memory_text, place_memory

    messages = place_memory([{"role": "user", "content": "hello\n\nthere"}],
                            memory_text("## Current Intent\nWrite the docs."))
    assert "Write the docs." in messages[0]["content"]
    out = client(fake_llm).chat.completions.create(model="m", messages=messages)
    assert out.choices[0].message.content == "echo: hello\n\nthere"


def test_stream_with_tool_calls(fake_llm: FakeLLM) -> None:
    fake_llm.queue(Reply(content="let me look", tool_calls=[ToolCall("read_file", {"path": "a.txt"})]))
    stream = client(fake_llm).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    text, args, finish = "", "", None
    for ev in stream:
        choice = ev.choices[0]
        text += choice.delta.content or ""
        for tc in choice.delta.tool_calls or []:
            args += tc.function.arguments or ""
        finish = choice.finish_reason or finish
    assert text == "let me look"
    assert args == '{"path": "a.txt"}'
    assert finish == "tool_calls"


def test_cut_stream_raises_in_client(fake_llm: FakeLLM) -> None:
    fake_llm.queue(Reply(content="one two three four", cut_after=2))
    stream = client(fake_llm).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    got = ""
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for ev in stream:
            got += ev.choices[0].delta.content or ""
    assert got == "one two "


def test_error_status_and_models(fake_llm: FakeLLM) -> None:
    fake_llm.queue(Reply(status=503, error="overloaded"))
    with pytest.raises(openai.APIStatusError, match="overloaded"):
        client(fake_llm).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert [m.id for m in client(fake_llm).models.list()] == ["fake-model"]


def test_embeddings_are_deterministic_and_share_words(fake_llm: FakeLLM) -> None:
    out = client(fake_llm).embeddings.create(model="e", input=["red apple pie", "apple pie", "stock market"])
    vecs = np.array([d.embedding for d in out.data], dtype=np.float32)
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]
    assert np.allclose(vecs[1], FakeLLM.embedding_of("apple pie"), atol=1e-6)
    fake_llm.fail_next_embeddings = 1
    with pytest.raises(openai.APIStatusError):
        client(fake_llm).embeddings.create(model="e", input="x")
    assert client(fake_llm).embeddings.create(model="e", input="x").data


def test_done_after_ends_a_stream_without_a_finish_reason(fake_llm: FakeLLM) -> None:
    fake_llm.queue(Reply(content="one two three", done_after=1))
    with httpx.stream(
        "POST",
        f"{fake_llm.base_url}/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    ) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["", "one "]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)


def _stream_text(llm: FakeLLM, text: str) -> tuple[str, str | None]:
    with httpx.stream(
        "POST",
        f"{llm.base_url}/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]},
        timeout=30,
    ) as r:
        got, finish = "", None
        for line in r.iter_lines():
            if line.startswith("data: {"):
                choice = json.loads(line[6:])["choices"][0]
                got += choice["delta"].get("content") or ""
                finish = choice["finish_reason"] or finish
    return got, finish


@pytest.mark.parametrize("interrupt", [False, True])
def test_one_slot_serves_one_request_at_a_time_and_can_interrupt(interrupt: bool) -> None:
    with FakeLLM(slots=1, interrupt=interrupt) as llm:
        calls: list[str] = []

        def responder(body: dict[str, Any]) -> Reply:
            calls.append(body["messages"][-1]["content"])
            if len(calls) == 1:
                # the first answer starts only once the second request waits
                while llm.in_flight < 2:
                    threading.Event().wait(0.01)
            return Reply(content="a b c d")

        llm.responder = responder
        results: list[tuple[str, str | None]] = []
        first = threading.Thread(target=lambda: results.append(_stream_text(llm, "one")))
        first.start()
        while not calls:
            threading.Event().wait(0.01)
        second = _stream_text(llm, "two")
        first.join(30)
        assert calls == ["one", "two"]
        assert llm.peak_serving == 1 and llm.peak_in_flight == 2
        assert second == ("a b c d", "stop")
        if interrupt:
            # the waiting request ended the running stream after its first chunk
            assert llm.interrupted == 1
            assert results == [("", None)]
        else:
            assert results == [("a b c d", "stop")]
