"""The official `anthropic` SDK's `client.messages.*` against nixx under a real uvicorn, with
the scripted backend: what the backend received (the translated chat request), the buffer
rows stored, and errors in Anthropic's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from nixx.config import Settings
from nixx.memory.prompts import SYSTEM_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LiveServer

from .conftest import SettingsFactory

WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}


@pytest.fixture
def claude(live: LiveServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=live.base_url, api_key="unused", max_retries=0)


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service._store.get_buffer, 1))


def test_plain_message_is_one_remembered_turn(
    claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="Paris."))
    message = claude.messages.create(
        model="fake-model", max_tokens=64, stop_sequences=["\n\n"], extra_body={"temperature": 0.5},
        system=[{"type": "text", "text": "Answer in one word.",
                 "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "capital of France?"}],
    )
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Paris."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.role == "assistant"
    assert message.usage.output_tokens > 0
    sent = llm.chat_requests[-1]
    assert sent["messages"][0]["content"].startswith(SYSTEM_PROMPT)
    assert sent["messages"][0]["content"].endswith("Answer in one word.")
    assert sent["messages"][1:] == [{"role": "user", "content": "capital of France?"}]
    assert (sent["max_tokens"], sent["temperature"]) == (64, 0.5)
    assert "stop" not in sent  # nixx finds stop sequences itself (test_reasoning.py)
    assert [(r.role, r.content, r.origin) for r in rows(live)] == [
        ("user", "capital of France?", "anthropic"),
        ("assistant", "Paris.", "anthropic"),
    ]


def test_streamed_message_events(
    claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="a streamed reply in pieces"))
    with claude.messages.stream(model="fake-model", max_tokens=64,
                                messages=[{"role": "user", "content": "stream it"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "a streamed reply in pieces"
    assert final.content[0].text == text  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    raw = list(claude.messages.create(model="fake-model", max_tokens=8, stream=True,
                                      messages=[{"role": "user", "content": "again"}]))
    kinds = [e.type for e in raw]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert {"content_block_start", "content_block_delta", "content_block_stop"} <= set(kinds)
    assert [r.content for r in rows(live)][:2] == ["stream it", "a streamed reply in pieces"]


def test_tool_use_round_trip(claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer) -> None:
    llm.queue(Reply(content="Let me check.",
                    tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="toolu_1")]))
    question = {"role": "user", "content": "weather in Oslo?"}
    first = claude.messages.create(model="fake-model", max_tokens=64, tools=[WEATHER],
                                   tool_choice={"type": "any"}, messages=[question])  # type: ignore[list-item]
    assert first.stop_reason == "tool_use"
    use = first.content[-1]
    assert (use.type, use.name, use.input, use.id) == (  # type: ignore[union-attr]
        "tool_use", "get_weather", {"city": "Oslo"}, "toolu_1")
    sent = llm.chat_requests[-1]
    assert sent["tools"][0] == {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": WEATHER["input_schema"]}}
    assert sent["tool_choice"] == "required"

    llm.queue(Reply(content="Sunny, 21C."))
    second = claude.messages.create(
        model="fake-model", max_tokens=64, tools=[WEATHER],
        messages=[question,  # type: ignore[list-item]
                  {"role": "assistant", "content": first.content},  # type: ignore[typeddict-item]
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21C"}]}],
    )
    assert second.content[0].text == "Sunny, 21C."  # type: ignore[union-attr]
    assert llm.chat_requests[-1]["messages"][1:] == [
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny, 21C"},
    ]
    stored = rows(live)
    assert [(r.role, r.content) for r in stored] == [
        ("user", "weather in Oslo?"), ("assistant", "Let me check."),
        ("assistant", "Sunny, 21C.")]  # the tool result added no user row
    assert stored[1].meta["tool_calls"][0]["name"] == "get_weather"


def test_streamed_tool_use(claude: anthropic.Anthropic, llm: FakeLLM) -> None:
    llm.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Rome"}, id="toolu_r")]))
    with claude.messages.stream(model="fake-model", max_tokens=64, tools=[WEATHER],
                                messages=[{"role": "user", "content": "Rome?"}]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].input == {"city": "Rome"}  # type: ignore[union-attr]


def test_server_tools_and_thinking_are_dropped(claude: anthropic.Anthropic, llm: FakeLLM) -> None:
    llm.queue(Reply(content="ok"))
    claude.messages.create(
        model="fake-model", max_tokens=64,
        tools=[{"type": "web_search_20250305", "name": "web_search"}, WEATHER],  # type: ignore[list-item]
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "hello"}]},
            {"role": "user", "content": [{"type": "text", "text": "again"}]}],
    )
    sent = llm.chat_requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]][:1] == ["get_weather"]
    assert "web_search" not in [t["function"]["name"] for t in sent["tools"]]
    assert sent["messages"][1:] == [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": "hello"},
                                    {"role": "user", "content": "again"}]


def test_count_tokens(claude: anthropic.Anthropic, llm: FakeLLM) -> None:
    counted = claude.messages.count_tokens(
        model="fake-model", messages=[{"role": "user", "content": "x" * 400}])
    assert 100 <= counted.input_tokens <= 110
    assert llm.chat_requests == []


def test_errors_are_in_anthropic_shape(claude: anthropic.Anthropic, live: LiveServer,
                                       llm: FakeLLM) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model="fake-model", max_tokens=0,
                               messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    answer = httpx.post(live.base_url + "/v1/messages/nope", json={})
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "not_found_error"
    llm.queue(Reply(status=503, error="down"), Reply(status=503, error="down"),
              Reply(status=503, error="down"))
    with pytest.raises(anthropic.APIStatusError) as failed:
        claude.messages.create(model="fake-model", max_tokens=8,
                               messages=[{"role": "user", "content": "hi"}])
    assert failed.value.body["type"] == "error"  # type: ignore[index]
    assert set(failed.value.body["error"]) == {"type", "message"}  # type: ignore[index]


def test_stream_failure_ends_with_an_error_event(
    claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="first second third fourth", cut_after=2))
    received = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        for event in claude.messages.create(model="fake-model", max_tokens=8, stream=True,
                                            messages=[{"role": "user", "content": "go"}]):
            received.append(event.type)
    assert received[0] == "message_start"
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert rows(live)[-1].meta["incomplete"] is True


@pytest.fixture
def keyed(make_settings: SettingsFactory) -> Iterator[LiveServer]:
    settings: Settings = make_settings(api_key="s3cret")
    with LiveServer(create_app(settings)) as server:
        yield server


def test_x_api_key_is_accepted_and_a_wrong_key_is_refused_in_anthropic_shape(
    keyed: LiveServer, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="hi there"))
    good = anthropic.Anthropic(base_url=keyed.base_url, api_key="s3cret", max_retries=0)
    reply = good.messages.create(model="fake-model", max_tokens=8,
                                 messages=[{"role": "user", "content": "hi"}])
    assert reply.content[0].text == "hi there"  # type: ignore[union-attr]
    bearer = anthropic.Anthropic(base_url=keyed.base_url, auth_token="s3cret", max_retries=0)
    assert bearer.messages.count_tokens(model="m", messages=[
        {"role": "user", "content": "hi"}]).input_tokens > 0
    bad = anthropic.Anthropic(base_url=keyed.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        bad.messages.create(model="fake-model", max_tokens=8,
                            messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body == {"type": "error", "error": {  # type: ignore[comparison-overlap]
        "type": "authentication_error",
        "message": "wrong API key: send Authorization: Bearer <NIXX_API_KEY> (or x-api-key)"}}
    other = httpx.get(keyed.base_url + "/v1/models", headers={"x-api-key": "wrong"})
    assert other.status_code == 401 and other.json()["error"]["code"] == "invalid_api_key"
    assert json.loads(httpx.get(keyed.base_url + "/v1/models",
                                headers={"x-api-key": "s3cret"}).text)["data"]


def test_system_reminders_go_to_the_backend_but_are_not_remembered(
    claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer
) -> None:
    reminder = "<system-reminder>\nToday's date is 2026-12-02. cwd: /work\n</system-reminder>"
    llm.queue(Reply(content="Tuesday."), Reply(content="noted"))
    claude.messages.create(model="fake-model", max_tokens=64, messages=[{"role": "user", "content": [
        {"type": "text", "text": reminder}, {"type": "text", "text": "which day is the demo?"}]}])
    assert llm.chat_requests[-1]["messages"][-1] == {
        "role": "user", "content": reminder + "\nwhich day is the demo?"}
    claude.messages.create(model="fake-model", max_tokens=64, messages=[
        {"role": "user", "content": reminder}])  # only a reminder: kept whole
    assert [(r.role, r.content) for r in rows(live)] == [
        ("user", "which day is the demo?"), ("assistant", "Tuesday."),
        ("user", reminder), ("assistant", "noted")]


def test_usage_carries_cached_tokens_and_is_estimated_without_counts(
    claude: anthropic.Anthropic, llm: FakeLLM
) -> None:
    """The backend's `prompt_tokens_details.cached_tokens` is Anthropic's
    `cache_read_input_tokens` (and out of `input_tokens`, as Anthropic counts them),
    streamed or not; a backend that counts nothing gets nixx's estimate, marked."""
    llm.queue(Reply(content="cached", cached_tokens=5))
    reply = claude.messages.create(model="fake-model", max_tokens=50,
                                   messages=[{"role": "user", "content": "hello there"}])
    sent = llm.chat_requests[-1]
    prompt = sum(len(str(m["content"]).split()) for m in sent["messages"])  # FakeLLM's count
    assert reply.usage.cache_read_input_tokens == 5
    assert reply.usage.input_tokens == prompt - 5
    llm.queue(Reply(content="streamed cached", cached_tokens=3))
    with claude.messages.stream(model="fake-model", max_tokens=50,
                                messages=[{"role": "user", "content": "again"}]) as stream:
        final = stream.get_final_message()
    assert final.usage.cache_read_input_tokens == 3
    llm.queue(Reply(content="no counts", usage=False))
    guessed = claude.messages.create(model="fake-model", max_tokens=50,
                                     messages=[{"role": "user", "content": "count"}])
    assert guessed.usage.input_tokens > 10 and guessed.usage.output_tokens == 3
    assert guessed.usage.model_dump()["estimated"] is True


def test_document_blocks_are_text_or_refused(claude: anthropic.Anthropic, llm: FakeLLM) -> None:
    """A plain-text `document` block reaches the backend as text (it was dropped in
    silence); a base64 PDF is a 400 naming what is taken, before the backend is called."""
    llm.queue(Reply(content="read it"))
    claude.messages.create(model="fake-model", max_tokens=50, messages=[{"role": "user", "content": [
        {"type": "document", "title": "notes.txt",
         "source": {"type": "text", "media_type": "text/plain", "data": "the key is under the mat"}},
        {"type": "text", "text": "where is the key?"}]}])
    sent = llm.chat_requests[-1]["messages"][-1]["content"]
    assert sent.startswith("notes.txt\n\nthe key is under the mat\nwhere is the key?")
    calls = len(llm.chat_requests)
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model="fake-model", max_tokens=50, messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                            "data": "JVBERi0xLjQK"}},
            {"type": "text", "text": "summarise"}]}])
    assert "document" in str(info.value) and "plain text" in str(info.value)
    assert len(llm.chat_requests) == calls
