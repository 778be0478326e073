"""The official `openai` Python client against nixx under a real uvicorn (loopback)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import openai
import pytest

from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LiveServer

from .conftest import offered_prompt


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service._store.get_buffer, 1))


def test_non_streaming_turn(oai: openai.OpenAI, llm: FakeLLM, live: LiveServer) -> None:
    llm.queue(Reply(content="Paris."))
    reply = oai.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "capital of France?"}],
        extra_headers={"X-Nixx-Origin": "vscode"},
    )
    assert reply.choices[0].message.content == "Paris."
    assert reply.choices[0].finish_reason == "stop"
    assert llm.chat_requests[-1]["messages"][0] == {"role": "system", "content": offered_prompt()}
    assert [(r.role, r.content, r.origin) for r in rows(live)] == [
        ("user", "capital of France?", "vscode"),
        ("assistant", "Paris.", "vscode"),
    ]


def test_streaming_turn(oai: openai.OpenAI, llm: FakeLLM, live: LiveServer) -> None:
    llm.queue(Reply(content="a streamed reply in pieces"))
    stream = oai.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "stream it"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert text == "a streamed reply in pieces"
    assert finish == "stop"
    assert usage is not None and usage.total_tokens > 0
    assert [r.content for r in rows(live)] == ["stream it", "a streamed reply in pieces"]


def test_stream_cut_raises_in_the_client_and_keeps_partial(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="first second third fourth", cut_after=2))
    stream = oai.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "go on"}], stream=True
    )
    received = ""
    with pytest.raises(openai.APIError, match="stream"):
        for chunk in stream:
            for choice in chunk.choices:
                received += choice.delta.content or ""
    assert received == "first second "
    last = rows(live)[-1]
    assert (last.role, last.content, last.meta["incomplete"]) == (
        "assistant",
        "first second ",
        True,
    )


def test_client_tools_round_trip(oai: openai.OpenAI, llm: FakeLLM) -> None:
    tools: Any = [
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "the time",
                "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
            },
        }
    ]
    llm.queue(Reply(tool_calls=[ToolCall("get_time", {"tz": "UTC"}, id="call_t")]))
    for stream in (False, True):
        if stream:
            llm.queue(Reply(tool_calls=[ToolCall("get_time", {"tz": "UTC"}, id="call_t")]))
            chunks = list(
                oai.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "time?"}],
                    tools=tools,
                    stream=True,
                )
            )
            deltas = [
                c.choices[0].delta.tool_calls
                for c in chunks
                if c.choices and c.choices[0].delta.tool_calls
            ]
            assert deltas[0][0].function.name == "get_time"
            assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
        else:
            reply = oai.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "time?"}], tools=tools
            )
            call = reply.choices[0].message.tool_calls[0]
            assert reply.choices[0].finish_reason == "tool_calls"
            assert call.id == "call_t" and json.loads(call.function.arguments) == {"tz": "UTC"}


def test_backend_down(make_settings: Any) -> None:
    import socket

    from nixx.server.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with LiveServer(create_app(make_settings(chat_base_url=url))) as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 503
        assert "NIXX_CHAT_BASE_URL" in str(info.value) and url in str(info.value)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )


def test_models_and_embeddings(oai: openai.OpenAI, llm: FakeLLM) -> None:
    llm.models = ["fake-model", "other-model"]
    assert [m.id for m in oai.models.list()] == ["fake-model", "other-model"]
    texts = ["vector search in postgres", "bread recipe"]
    for fmt in ("float", "base64"):
        result = oai.embeddings.create(model="anything", input=texts, encoding_format=fmt)  # type: ignore[arg-type]
        vectors = [d.embedding for d in result.data]
        if fmt == "base64":
            vectors = [
                list(np.frombuffer(__import__("base64").b64decode(v), dtype="<f4")) for v in vectors
            ]  # type: ignore[arg-type]
        for text, vec in zip(texts, vectors, strict=True):
            np.testing.assert_allclose(vec, FakeLLM.embedding_of(text), atol=1e-6)
    # the default (the SDK asks for base64 and decodes it)
    result = oai.embeddings.create(model="anything", input="bread recipe")
    np.testing.assert_allclose(
        result.data[0].embedding, FakeLLM.embedding_of("bread recipe"), atol=1e-6
    )


def test_api_key(make_settings: Any, llm: FakeLLM) -> None:
    from nixx.server.app import create_app

    with LiveServer(create_app(make_settings(api_key="k-123"))) as server:
        bad = openai.OpenAI(base_url=server.base_url + "/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=server.base_url + "/v1", api_key="k-123", max_retries=0)
        llm.queue(Reply(content="authorised"))
        reply = good.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "authorised"


def test_client_disconnect_mid_stream_keeps_partial_answer(llm: FakeLLM, live: LiveServer) -> None:
    import time

    import httpx

    llm.queue(Reply(content=" ".join(f"word{i}" for i in range(200)), delay=0.02))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "long answer"}]}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", live.base_url + "/v1/chat/completions", json=body) as r,
    ):
        lines = r.iter_lines()
        seen = [line for _, line in zip(range(12), lines, strict=False)]
        assert any("word" in line for line in seen)
    # the client hung up after a few words; nixx keeps what was produced, marked incomplete
    deadline = time.monotonic() + 30
    while True:
        found = [r for r in rows(live) if r.role == "assistant"]
        if found:
            break
        assert time.monotonic() < deadline, "no assistant row written"
        time.sleep(0.05)
    answer = found[0]
    assert answer.meta["incomplete"] is True
    assert answer.content.startswith("word0 word1")
    assert len(answer.content.split()) < 200
