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
from hypothesis import given, settings
from hypothesis import strategies as st

from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service._store.get_buffer, 1))


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


def test_messages_stop_sequence_on_any_backend(
    claude: anthropic.Anthropic, oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    """nixx finds the stop strings itself (the backend is sent none: only vLLM would say
    which one it stopped on), so ``stop_sequence`` is right on every backend, the answer
    ends before it, and what is stored is what the client was shown."""
    question: Any = [{"role": "user", "content": "count"}]
    llm.queue(Reply(content="1, 2, 3 END 4, 5 STOP 6"))
    message = claude.messages.create(model="fake-model", max_tokens=64, messages=question,
                                     stop_sequences=["STOP", "END"])
    assert "stop" not in llm.chat_requests[-1]
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")
    assert message.content[0].text == "1, 2, 3 "  # type: ignore[union-attr]

    # streamed, the stop string split over the backend's chunks
    llm.queue(Reply(content="one two thr ee STOP four"))
    with claude.messages.stream(model="fake-model", max_tokens=64, messages=question,
                                stop_sequences=["three", "ee ST"]) as stream:
        shown = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "ee ST")
    assert shown == "one two thr "

    # no stop string in the answer: end_turn, and the tail held back is sent
    llm.queue(Reply(content="1, 2, 3 EN"))
    with claude.messages.stream(model="fake-model", max_tokens=64, messages=question,
                                stop_sequences=["END"]) as stream:
        shown = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence, shown) == ("end_turn", None, "1, 2, 3 EN")

    # the chat route too: cut at the stop, finish_reason stop
    llm.queue(Reply(content="alpha beta ### gamma"))
    answer = oai.chat.completions.create(model="fake-model", stop=["###"],
                                         messages=[{"role": "user", "content": "greek"}])
    assert answer.choices[0].message.content == "alpha beta "
    assert answer.choices[0].finish_reason == "stop"
    stored = [r.content for r in rows(live) if r.role == "assistant"]
    assert stored == ["1, 2, 3 ", "one two thr ", "1, 2, 3 EN", "alpha beta "]


def test_a_stop_string_closes_the_backends_stream(
    claude: anthropic.Anthropic, oai: openai.OpenAI, llm: FakeLLM
) -> None:
    """nixx stops reading at the stop string and hangs up on the backend, so a local
    server stops generating: the scripted backend holds its stream open after the stop
    string and answers only when nixx closes it (were nixx to read on, the answer would
    come when the hold ran out, with no hang-up counted)."""
    question: Any = [{"role": "user", "content": "count"}]
    llm.queue(Reply(content="1, 2, 3 END 4, 5", hold=60))
    message = claude.messages.create(model="fake-model", max_tokens=64, messages=question,
                                     stop_sequences=["END"])
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")
    assert llm.wait_hung_up(1)
    llm.queue(Reply(content="alpha beta ### gamma", hold=60))
    shown = "".join(
        c.choices[0].delta.content or "" for c in oai.chat.completions.create(
            model="fake-model", stop="###", stream=True,
            messages=[{"role": "user", "content": "greek"}]) if c.choices)
    assert shown == "alpha beta "
    assert llm.wait_hung_up(2)
    # no stop string: the held stream is read to its end, and no hang-up is counted
    llm.queue(Reply(content="one two", hold=0.2))
    plain = claude.messages.create(model="fake-model", max_tokens=64, messages=question)
    assert plain.content[0].text == "one two"  # type: ignore[union-attr]
    assert llm.hung_up == 2


def test_stop_strings_past_the_bounds_are_refused_naming_them(
    claude: anthropic.Anthropic, oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    """nixx searches every piece of the answer for every stop string, so a request gives
    at most MAX_STOPS of at most MAX_STOP_CHARS characters: past that a 400 in the
    dialect's envelope naming the field and the bounds, before anything is stored or
    sent; at the bounds the turn runs."""
    from nixx.llm.stream import MAX_STOP_CHARS, MAX_STOPS

    question: Any = [{"role": "user", "content": "count"}]
    asked = len(llm.chat_requests)
    for stops in (["x"] * (MAX_STOPS + 1), ["y" * (MAX_STOP_CHARS + 1)]):
        with pytest.raises(anthropic.BadRequestError, match="stop_sequences takes at most"):
            claude.messages.create(model="fake-model", max_tokens=64, messages=question,
                                   stop_sequences=stops)
        with pytest.raises(openai.BadRequestError, match="stop takes at most") as info:
            oai.chat.completions.create(model="fake-model", stop=stops, messages=question)
        assert isinstance(info.value.body, dict) and info.value.body["param"] == "stop"
    assert len(llm.chat_requests) == asked and rows(live) == []
    llm.queue(Reply(content="1 2 3"))
    edge = [f"{i:0{MAX_STOP_CHARS}d}" for i in range(MAX_STOPS)]
    message = claude.messages.create(model="fake-model", max_tokens=64, messages=question,
                                     stop_sequences=edge)
    assert message.content[0].text == "1 2 3"  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="abc ", max_size=40),
       cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=8),
       stops=st.lists(st.text(alphabet="abc", min_size=1, max_size=4), max_size=3))
def test_stop_watch_cuts_at_the_first_stop_however_the_text_is_split(
    text: str, cuts: list[int], stops: list[str]
) -> None:
    from nixx.llm.stream import StopWatch

    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    watch = StopWatch(stops)
    shown = ""
    for piece in pieces:
        shown += watch.feed(piece)
        if watch.matched:
            break
    else:
        shown += watch.flush()
    found = [(text.find(s) + len(s), text.find(s), s) for s in stops if s in text]
    if found:
        _, at, first = min(found)
        assert (shown, watch.matched) == (text[:at], first)
    else:
        assert (shown, watch.matched) == (text, None)


def test_accumulator_reads_either_reasoning_field_once() -> None:
    from nixx.llm.stream import StreamAccumulator

    acc = StreamAccumulator()
    for delta in ({"reasoning": "a "}, {"reasoning_content": "b ", "reasoning": "b "},
                  {"reasoning": {"not": "text"}}, {"content": "c"}):
        acc.add({"choices": [{"index": 0, "delta": delta}]})
    assert acc.take_reasoning() == "a b "
    assert acc.take_reasoning() == ""
    assert acc.content == "c"
