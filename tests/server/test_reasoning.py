"""Reasoning across the dialects, with the official `openai` and `anthropic` SDKs against
nixx under a real uvicorn and the scripted backend: the effort asked for reaches the
backend as chat's ``reasoning_effort``, and the thinking a reasoning backend streams apart
from its answer is shown in each dialect's own shape, and not stored."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service.store.get_buffer, 1))


def test_responses_reasoning_effort_reaches_the_backend(
    oai: openai.OpenAI, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="Paris."))
    oai.responses.create(model="fake-model", input="capital of France?",
                         reasoning={"effort": "low", "summary": "auto"})
    sent = llm.chat_requests[-1]
    assert sent["reasoning_effort"] == "low"
    assert "reasoning" not in sent


def test_chat_reasoning_effort_passes_through(oai: openai.OpenAI, llm: FakeLLM) -> None:
    llm.queue(Reply(content="Paris."))
    oai.chat.completions.create(model="fake-model", reasoning_effort="high",
                                messages=[{"role": "user", "content": "capital of France?"}])
    assert llm.chat_requests[-1]["reasoning_effort"] == "high"


THOUGHT = "The user asks for a capital. France's is Paris."


def test_chat_shows_the_backends_reasoning(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    answer = oai.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "capital of France?"}])
    message = answer.choices[0].message
    assert message.content == "Paris."
    assert (message.model_extra or {})["reasoning_content"] == THOUGHT
    # the backend's count of thinking tokens is passed on, inside the output's
    assert answer.usage is not None and answer.usage.completion_tokens_details is not None
    assert answer.usage.completion_tokens_details.reasoning_tokens == len(THOUGHT.split())
    assert answer.usage.completion_tokens == len(THOUGHT.split()) + 1

    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    chunks = list(oai.chat.completions.create(
        model="fake-model", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "capital of France?"}]))
    counted = [c.usage for c in chunks if c.usage is not None]
    assert len(counted) == 1 and counted[0].completion_tokens_details is not None
    assert counted[0].completion_tokens_details.reasoning_tokens == len(THOUGHT.split())
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thought = "".join((d.model_extra or {}).get("reasoning_content", "") for d in deltas)
    assert thought == THOUGHT
    assert "".join(d.content or "" for d in deltas) == "Paris."
    first_text = next(i for i, d in enumerate(deltas) if d.content)
    last_thought = max(i for i, d in enumerate(deltas)
                       if (d.model_extra or {}).get("reasoning_content"))
    assert last_thought < first_text
    # the buffer keeps the answer, not the thinking
    answers = [r for r in rows(live) if r.role == "assistant"]
    assert [r.content for r in answers] == ["Paris.", "Paris."]
    assert all(THOUGHT not in json.dumps(r.meta) for r in answers)


def test_responses_shows_the_backends_reasoning(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    response = oai.responses.create(model="fake-model", input="capital of France?")
    assert [item.type for item in response.output] == ["reasoning", "message"]
    thought = response.output[0]
    assert thought.type == "reasoning" and thought.summary == []
    assert [(c.type, c.text) for c in thought.content or []] == [("reasoning_text", THOUGHT)]
    assert response.output_text == "Paris."
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == len(THOUGHT.split())

    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    events = list(oai.responses.create(model="fake-model", input="capital of France?",
                                       stream=True))
    kinds = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert kinds.count("response.output_item.added") == 2
    assert kinds.index("response.reasoning_text.done") < kinds.index(
        "response.output_text.delta")
    thought_text = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought_text == THOUGHT
    added = [e for e in events if e.type == "response.content_part.added"]
    assert [e.part.type for e in added] == ["reasoning_text", "output_text"]
    final = events[-1].response
    assert events[-1].type == "response.completed"
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output_text == "Paris."
    # kept: the answer; the thinking is not, so the stored response has no reasoning item
    stored = oai.responses.retrieve(final.id)
    assert [item.type for item in stored.output] == ["message"]
    answers = [r for r in rows(live) if r.role == "assistant"]
    assert [r.content for r in answers] == ["Paris.", "Paris."]
    assert all(THOUGHT not in json.dumps(r.meta) for r in answers)


@pytest.fixture
def claude(live: LiveServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=live.base_url, api_key="unused", max_retries=0)


def test_messages_shows_the_backends_reasoning_as_thinking(
    claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer
) -> None:
    asked: Any = {"type": "enabled", "budget_tokens": 1024}
    question: Any = [{"role": "user", "content": "capital of France?"}]
    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    message = claude.messages.create(model="fake-model", max_tokens=2048, thinking=asked,
                                     messages=question)
    assert [b.type for b in message.content] == ["thinking", "text"]
    block = message.content[0]
    assert block.type == "thinking" and block.thinking == THOUGHT and block.signature == ""

    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    with claude.messages.stream(model="fake-model", max_tokens=2048, thinking=asked,
                                messages=question) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    first = final.content[0]
    assert first.type == "thinking" and first.thinking == THOUGHT
    second = final.content[1]
    assert second.type == "text" and second.text == "Paris."
    starts = [e for e in events if e.type == "content_block_start"]
    assert [(e.index, e.content_block.type) for e in starts] == [(0, "thinking"), (1, "text")]

    # not asked for: left out, as Anthropic answers
    llm.queue(Reply(content="Paris.", reasoning=THOUGHT))
    plain = claude.messages.create(model="fake-model", max_tokens=64, messages=question)
    assert [b.type for b in plain.content] == ["text"]
    answers = [r for r in rows(live) if r.role == "assistant"]
    assert [r.content for r in answers] == ["Paris.", "Paris.", "Paris."]
    assert all(THOUGHT not in json.dumps(r.meta) for r in answers)


def _stopped_on(stop: Any) -> str:
    """vLLM's last chunk: which stop string (or token id) ended the answer."""
    return json.dumps({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                       "model": "fake-model", "choices": [{"index": 0, "delta": {},
                       "finish_reason": "stop", "stop_reason": stop}]})


def test_messages_stop_sequence_when_the_backend_says_which(
    claude: anthropic.Anthropic, llm: FakeLLM
) -> None:
    question: Any = [{"role": "user", "content": "count"}]
    llm.queue(Reply(content="1, 2, 3", raw_chunks=[_stopped_on("END")]))
    message = claude.messages.create(model="fake-model", max_tokens=64, messages=question,
                                     stop_sequences=["END", "STOP"])
    assert llm.chat_requests[-1]["stop"] == ["END", "STOP"]
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")

    llm.queue(Reply(content="1, 2, 3", raw_chunks=[_stopped_on("STOP")]))
    with claude.messages.stream(model="fake-model", max_tokens=64, messages=question,
                                stop_sequences=["END", "STOP"]) as stream:
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "STOP")

    # not said (llama.cpp, Ollama), a token id, or a string not asked for: end_turn
    for stop in (None, 2, "other"):
        llm.queue(Reply(content="1, 2, 3", raw_chunks=[_stopped_on(stop)]))
        message = claude.messages.create(model="fake-model", max_tokens=64, messages=question,
                                         stop_sequences=["END"])
        assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)


def test_accumulator_reads_either_reasoning_field_once() -> None:
    from nixx.llm.stream import StreamAccumulator

    acc = StreamAccumulator()
    for delta in ({"reasoning": "a "}, {"reasoning_content": "b ", "reasoning": "b "},
                  {"reasoning": {"not": "text"}}, {"content": "c"}):
        acc.add({"choices": [{"index": 0, "delta": delta}]})
    assert acc.take_reasoning() == "a b "
    assert acc.take_reasoning() == ""
    assert acc.content == "c"
