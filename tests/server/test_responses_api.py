"""The official `openai` SDK's `client.responses.*` against nixx under a real uvicorn, with
the scripted backend: what the backend received (the translated chat request) and the
buffer rows the turn stored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from nixx.memory.prompts import SYSTEM_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LiveServer

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service._store.get_buffer, 1))


def test_plain_response_is_one_remembered_turn(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="Paris."))
    response = oai.responses.create(
        model="fake-model", instructions="Answer in one word.", input="capital of France?",
        max_output_tokens=50, temperature=0.2,
    )
    assert response.output_text == "Paris."
    assert response.status == "completed"
    assert response.id.startswith("resp_") and response.model == "fake-model"
    assert response.usage is not None and response.usage.total_tokens > 0
    sent = llm.chat_requests[-1]
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].startswith(SYSTEM_PROMPT)
    assert sent["messages"][0]["content"].endswith("Answer in one word.")
    assert sent["messages"][1:] == [{"role": "user", "content": "capital of France?"}]
    assert (sent["max_tokens"], sent["temperature"]) == (50, 0.2)
    stored = rows(live)
    assert [(r.role, r.content, r.origin) for r in stored] == [
        ("user", "capital of France?", "responses"),
        ("assistant", "Paris.", "responses"),
    ]
    assert stored[1].meta["response"]["id"] == response.id


def test_streamed_response_events(oai: openai.OpenAI, llm: FakeLLM, live: LiveServer) -> None:
    llm.queue(Reply(content="a streamed reply in pieces"))
    stream = oai.responses.create(model="fake-model", input="stream it", stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == 1
    assert "response.output_item.done" in kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "a streamed reply in pieces"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.output_text == "a streamed reply in pieces"
    assert final.id == events[0].response.id
    assert [r.content for r in rows(live)] == ["stream it", "a streamed reply in pieces"]


def test_function_tool_round_trip_and_previous_response_id(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="call_w1")]))
    first = oai.responses.create(model="fake-model", input="weather in Oslo?", tools=[WEATHER],
                                 tool_choice="auto")
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments), c.call_id) for c in calls] == [
        ("get_weather", {"city": "Oslo"}, "call_w1")]
    sent = llm.chat_requests[-1]
    offered = [t["function"]["name"] for t in sent["tools"]]
    assert offered[0] == "get_weather"
    assert sent["tools"][0]["function"]["parameters"] == WEATHER["parameters"]

    llm.queue(Reply(content="It is sunny in Oslo."))
    second = oai.responses.create(
        model="fake-model", previous_response_id=first.id, tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": "call_w1", "output": "sunny, 21C"}],
    )
    assert second.output_text == "It is sunny in Oslo."
    assert second.previous_response_id == first.id
    convo = llm.chat_requests[-1]["messages"][1:]
    assert convo == [
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_w1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21C"},
    ]

    llm.queue(Reply(content="Bring sunglasses."))
    third = oai.responses.create(model="fake-model", previous_response_id=second.id,
                                 input="what should I bring?")
    assert third.output_text == "Bring sunglasses."
    convo = llm.chat_requests[-1]["messages"][1:]
    assert [m["role"] for m in convo] == ["user", "assistant", "tool", "assistant", "user"]
    assert convo[3] == {"role": "assistant", "content": "It is sunny in Oslo."}
    stored = rows(live)
    assert [(r.role, r.content) for r in stored] == [
        ("user", "weather in Oslo?"),
        ("assistant", ""),
        ("assistant", "It is sunny in Oslo."),
        ("user", "what should I bring?"),
        ("assistant", "Bring sunglasses."),
    ]
    assert stored[1].meta["tool_calls"][0]["id"] == "call_w1"
    assert {r.origin for r in stored} == {"responses"}


def test_streamed_function_call_events(oai: openai.OpenAI, llm: FakeLLM) -> None:
    llm.queue(Reply(content="Checking.", tool_calls=[ToolCall("get_weather", {"city": "Rome"},
                                                              id="call_r")]))
    events = list(oai.responses.create(model="fake-model", input="Rome?", tools=[WEATHER],
                                       stream=True))
    kinds = [e.type for e in events]
    assert kinds.count("response.output_item.added") == 2
    args = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert json.loads("".join(args)) == {"city": "Rome"}
    final = events[-1].response
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert final.output[1].call_id == "call_r"  # type: ignore[union-attr]


def test_unknown_previous_response_is_a_404_in_openai_shape(
    oai: openai.OpenAI, llm: FakeLLM
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oai.responses.create(model="fake-model", previous_response_id="resp_nope", input="hi")
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert "no stored response" in caught.value.message
    assert llm.chat_requests == []


def test_store_false_is_remembered_but_cannot_be_continued(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="ok"))
    response = oai.responses.create(model="fake-model", input="private", store=False)
    assert [r.content for r in rows(live)] == ["private", "ok"]
    assert "response" not in rows(live)[1].meta
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model="fake-model", previous_response_id=response.id, input="more")


def test_unserved_fields_are_dropped_not_sent(
    oai: openai.OpenAI, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="done"))
    oai.responses.create(
        model="fake-model",
        input=[
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "look it up"}]},
        ],
        tools=[{"type": "web_search"}, WEATHER],
        reasoning={"effort": "high"},
        include=["reasoning.encrypted_content"],
        metadata={"k": "v"},
        text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
    )
    sent = llm.chat_requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]][:1] == ["get_weather"]
    assert all(t["type"] == "function" for t in sent["tools"])
    for key in ("reasoning", "include", "metadata", "text", "input"):
        assert key not in sent
    assert sent["response_format"]["json_schema"]["name"] == "x"
    assert sent["messages"][0]["content"].endswith("be brief")  # a leading developer message
    assert sent["messages"][1:] == [{"role": "user", "content": "look it up"}]


def test_stream_failure_ends_with_response_failed(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="first second third fourth", cut_after=2))
    events = list(oai.responses.create(model="fake-model", input="go on", stream=True))
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["error", "response.failed"]
    assert events[-1].response.error is not None
    assert rows(live)[-1].meta["incomplete"] is True


def test_bad_input_is_a_400_in_openai_shape(live: LiveServer) -> None:
    answer = httpx.post(live.base_url + "/v1/responses",
                        json={"input": [{"role": "robot", "content": "x"}]})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "input.0.role"
    answer = httpx.post(live.base_url + "/v1/responses", json={"background": True, "input": "x"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "background"


def test_a_forgotten_response_cannot_be_continued(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="the secret is 42"))
    response = oai.responses.create(model="fake-model", input="remember the secret")
    answer_row = rows(live)[-1]
    assert answer_row.meta["response"]["id"] == response.id
    forgot = httpx.delete(f"{live.base_url}/v1/buffer/{answer_row.id}")
    assert forgot.status_code == 200, forgot.text
    with pytest.raises(openai.NotFoundError, match="forgotten"):
        oai.responses.create(model="fake-model", previous_response_id=response.id,
                             input="what was it?")


def test_usage_carries_cached_tokens_and_is_estimated_without_counts(
    oai: openai.OpenAI, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="cached", cached_tokens=4))
    response = oai.responses.create(model="fake-model", input="hello")
    assert response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 4
    llm.queue(Reply(content="no counts", usage=False))
    stream = oai.responses.create(model="fake-model", input="again", stream=True)
    final = [e for e in stream if e.type == "response.completed"][0].response
    assert final.usage is not None and final.usage.input_tokens > 10
    assert final.usage.output_tokens == 3
    assert final.usage.model_dump()["estimated"] is True


def test_a_stored_response_is_read_listed_and_deleted(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    """`client.responses.retrieve`, `.input_items.list` and `.delete` on a stored response
    (404 before: the routes did not exist); after the delete it is a 404 and cannot be
    continued, and the turn's buffer rows stay."""
    llm.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="call_r1")],
                    cached_tokens=2))
    first = oai.responses.create(model="fake-model", tools=[WEATHER], input=[
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "weather in Oslo?"}])
    got = oai.responses.retrieve(first.id)
    assert got.id == first.id and got.status == "completed" and got.model == "fake-model"
    assert [(o.type, o.call_id) for o in got.output] == [("function_call", "call_r1")]
    assert got.usage is not None and got.usage.input_tokens_details.cached_tokens == 2
    llm.queue(Reply(content="Sunny."))
    second = oai.responses.create(model="fake-model", previous_response_id=first.id, input=[
        {"type": "function_call_output", "call_id": "call_r1", "output": "sunny, 20 C"}])
    assert oai.responses.retrieve(second.id).output_text == "Sunny."
    items = oai.responses.input_items.list(first.id, order="asc")
    assert [i.type for i in items.data] == ["message", "message"]
    assert [i.role for i in items.data] == ["developer", "user"]  # type: ignore[union-attr]
    assert items.data[1].content[0].text == "weather in Oslo?"  # type: ignore[union-attr]
    newest = oai.responses.input_items.list(second.id)
    assert newest.data[0].type == "function_call_output"
    assert newest.data[0].output == "sunny, 20 C"  # type: ignore[union-attr]
    oai.responses.delete(first.id)
    for call in (lambda: oai.responses.retrieve(first.id),
                 lambda: oai.responses.input_items.list(first.id),
                 lambda: oai.responses.create(model="fake-model", input="more",
                                              previous_response_id=first.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert "weather in Oslo?" in [r.content for r in rows(live)]
