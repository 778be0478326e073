"""`nixx.llm.slot`: the slices an own call's prompt is sent in, and its continuation of the
conversation — pure functions, checked over generated conversations."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nixx.llm.slot import TASK_NOTE, SliceSize, Slot, shared, slices, text_of

words = st.lists(st.sampled_from(["bees", "hive", "Ghent", "the", "a", "wax", "queen\n", "é"]),
                 max_size=60).map(" ".join)
message = st.builds(lambda role, text: {"role": role, "content": text},
                    st.sampled_from(["system", "user", "assistant"]), words)
conversation = st.lists(message, min_size=1, max_size=8)


def _chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(text_of(m)) for m in messages)


@settings(max_examples=300, deadline=None)
@given(conversation, conversation, st.integers(min_value=1, max_value=200))
def test_slices_are_growing_prefixes_each_at_most_a_slice_more(
    held: list[dict[str, Any]], target: list[dict[str, Any]], size: int
) -> None:
    cut = slices(held, target, size)
    m, c = shared(held, target)
    before = _chars(target[:m]) + c
    for prefix in cut:
        *whole, last = prefix
        assert whole == target[: len(whole)]
        source = target[len(whole)]
        assert last["role"] == source["role"]
        assert text_of(source).startswith(text_of(last))
        now = _chars(prefix)
        assert before < now <= before + size
        before = now
    assert _chars(target) - before <= size  # the call itself evaluates the rest


def test_a_text_is_cut_before_a_space() -> None:
    target = [{"role": "user", "content": "one two three four five six"}]
    cut = slices([], target, 10)
    assert [p[0]["content"] for p in cut] == ["one two", "one two three",
                                             "one two three four five"]


def test_what_the_backend_holds_is_not_sent_again() -> None:
    convo = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "hello there"}]
    task = {"role": "user", "content": "x " * 40}
    assert shared(convo, [*convo, task]) == (3, 0)
    cut = slices(convo, [*convo, task], 30)
    assert all(p[:3] == convo for p in cut) and len(cut) == 2


def test_a_slice_follows_the_backends_speed() -> None:
    size = SliceSize(1024)
    size.observe(2000, 4.0)  # 500 characters a second
    assert size.chars == (1024 + 3 * 250) // 4  # half a second's worth, three quarters on
    size.observe(10, 1.0)  # too little to measure
    assert size.chars == (1024 + 3 * 250) // 4


def test_an_own_call_continues_the_conversation_only_when_it_fits() -> None:
    slot = Slot()
    own = {"model": "mine", "max_tokens": 100, "temperature": 0.2,
           "messages": [{"role": "system", "content": "Summarise."},
                        {"role": "user", "content": "USER: hi"}]}
    assert slot.continuation(own, 4096) is None  # no conversation yet
    slot.keep({"model": "theirs", "messages": [{"role": "user", "content": "hi"}],
               "tools": [{"type": "function", "function": {"name": "f"}}],
               "tool_choice": "required", "stream_options": {"include_usage": True}},
              "hello")
    body = slot.continuation(own, 4096)
    assert body is not None
    assert body["model"] == "theirs" and body["max_tokens"] == 100
    assert body["messages"][:2] == [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": "hello"}]
    assert body["messages"][2]["content"] == f"{TASK_NOTE}\n\nSummarise.\n\nUSER: hi"
    assert body["tools"] and body["tool_choice"] == "auto" and "stream_options" not in body
    assert slot.continuation(own, 120) is None  # would not fit with its answer
