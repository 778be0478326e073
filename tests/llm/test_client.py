"""`ChatClient` against a real HTTP backend (FakeLLM) and against nothing at all."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from nixx.errors import BackendError, BackendUnavailable
from nixx.llm import ChatClient, StreamAccumulator
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def collect(client: ChatClient, body: dict[str, Any]) -> StreamAccumulator:
    acc = StreamAccumulator()
    try:
        async for chunk in client.stream(body):
            acc.add(chunk)
    finally:
        await client.aclose()
    return acc


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_stream_accumulates_content_and_tool_calls() -> None:
    with FakeLLM() as llm:
        llm.queue(
            Reply(
                content="let me see",
                tool_calls=[
                    ToolCall("read_file", {"path": "a b.txt"}, id="c1"),
                    ToolCall("list_dir", {}),
                ],
            )
        )
        acc = run(collect(ChatClient(llm.base_url), BODY))
        assert acc.content == "let me see"
        assert acc.finish_reason == "tool_calls"
        assert acc.tool_calls() == [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a b.txt"}'},
            },
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "list_dir", "arguments": "{}"},
            },
        ]
        assert acc.usage and acc.usage["total_tokens"] > 0
        assert llm.chat_requests[-1]["stream"] is True


def test_create_and_models() -> None:
    with FakeLLM() as llm:
        llm.queue(Reply(content="answer"))

        async def go() -> tuple[Any, Any]:
            client = ChatClient(llm.base_url, api_key="k")
            try:
                return await client.create(BODY), await client.list_models()
            finally:
                await client.aclose()

        data, models = run(go())
        assert data["choices"][0]["message"]["content"] == "answer"
        assert [m["id"] for m in models["data"]] == ["fake-model"]
        assert llm.requests[0].headers["Authorization"] == "Bearer k"


def test_unreachable_backend_names_url_and_variable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(BackendUnavailable) as info:
        run(collect(ChatClient(url), BODY))
    assert url in info.value.message and "NIXX_CHAT_BASE_URL" in info.value.message

    async def models() -> Any:
        client = ChatClient(url)
        try:
            return await client.list_models()
        finally:
            await client.aclose()

    with pytest.raises(BackendUnavailable):
        run(models())


def test_http_error_carries_backend_message() -> None:
    with FakeLLM() as llm:
        llm.queue(Reply(status=429, error="slow down please"))
        with pytest.raises(BackendError, match="HTTP 429: slow down please"):
            run(collect(ChatClient(llm.base_url), BODY))


def test_cut_stream_raises_after_yielding_what_came() -> None:
    with FakeLLM() as llm:
        llm.queue(Reply(content="one two three", cut_after=2))
        got: list[str] = []

        async def go() -> None:
            client = ChatClient(llm.base_url)
            acc = StreamAccumulator()
            try:
                async for chunk in client.stream(BODY):
                    got.append(acc.add(chunk))
            finally:
                await client.aclose()

        with pytest.raises(BackendError) as info:
            run(go())
        assert "".join(got) == "one two "
        assert info.value.details.get("code") == "stream_interrupted"


def test_malformed_json_answer() -> None:
    with FakeLLM() as llm:
        llm.queue(Reply(raw_body="{not json"))

        async def go() -> Any:
            client = ChatClient(llm.base_url)
            try:
                return await client.create(BODY)
            finally:
                await client.aclose()

        with pytest.raises(BackendError, match="not JSON"):
            run(go())


# ---- SyncChatClient: the blocking twin, the same errors ---------------------------------


def test_sync_client_lists_models_and_completes() -> None:
    from nixx.llm import SyncChatClient

    with FakeLLM(model="served-model") as llm:
        llm.queue(Reply(content="hello back"))
        with SyncChatClient(llm.base_url, headers={"X-Test": "1"}) as client:
            assert [m["id"] for m in client.list_models()["data"]] == ["served-model"]
            out = client.create(BODY)
        assert out["choices"][0]["message"]["content"] == "hello back"
        assert llm.chat_requests[-1]["stream"] is False


def test_sync_client_maps_failures_like_the_async_one() -> None:
    from nixx.llm import SyncChatClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    hint = "NIXX_CHAT_BASE_URL (or `chat_base_url` in x.toml)"
    with SyncChatClient(dead, env_var=hint) as c, pytest.raises(BackendUnavailable) as err:
        c.create(BODY)
    assert dead in err.value.message and "`chat_base_url` in x.toml" in err.value.message
    with FakeLLM() as llm:
        llm.queue(Reply(status=429, error="slow down"))
        with SyncChatClient(llm.base_url) as client, pytest.raises(BackendError) as err:
            client.create(BODY)
        assert err.value.details["status"] == 429 and "slow down" in err.value.message
