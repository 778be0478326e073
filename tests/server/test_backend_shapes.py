"""Wrongly shaped backend answers: one validation (`nixx.llm.stream.check_chunk` /
`check_completion`) turns each into a 502 `backend` error — an error event in a stream, a
502 envelope for JSON clients — with the partial answer stored marked incomplete; summary
and intent calls answer 502 too. A property test feeds generated chunks through it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nixx.errors import BackendError
from nixx.llm.stream import StreamAccumulator, check_chunk, check_completion
from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import Nixx
from .test_chat import sse_chunks
from .test_failures import assert_envelope

BAD_CHUNKS = [
    '{"choices": ["x"]}',
    '{"choices": [{"index": 0, "delta": "oops"}]}',
    '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "one", "id": "c"}]}}]}',
    '{"choices": [{"index": 0, "delta": {"content": 42}}]}',
    '{"choices": {"0": {}}}',
    '["not", "an", "object"]',
    '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]}',
]


@pytest.mark.parametrize("raw", BAD_CHUNKS)
def test_a_malformed_chunk_is_an_error_event_and_the_partial_answer_is_kept(
    nixx: Nixx, llm: FakeLLM, raw: str
) -> None:
    llm.queue(Reply(content="partial words", raw_chunks=[raw]))
    r = nixx.chat("go", stream=True)
    assert r.status_code == 200
    chunks = sse_chunks(r.text)
    assert chunks[-1] == "[DONE]"
    err = chunks[-2]["error"]
    assert err["code"] == "backend" and "malformed stream chunk" in err["message"]
    row = nixx.rows()[-1]
    assert row["role"] == "assistant" and row["content"] == "partial words"
    assert row["meta"]["incomplete"] is True and "malformed" in row["meta"]["error"]


@pytest.mark.parametrize("raw", BAD_CHUNKS[:3])
def test_a_malformed_chunk_is_a_502_for_json_clients(nixx: Nixx, llm: FakeLLM, raw: str) -> None:
    llm.queue(Reply(content="partial", raw_chunks=[raw]))
    r = nixx.chat("go")
    assert r.status_code == 502
    assert "malformed" in assert_envelope(r.json(), "backend")["message"]
    assert nixx.rows()[-1]["meta"]["incomplete"] is True


BAD_COMPLETIONS = [
    '{"choices": ["x"]}',
    '{"choices": [{"message": "oops"}]}',
    '{"choices": [{"message": {"content": ["a"]}}]}',
    '{"choices": []}',
    "[1, 2]",
]


@pytest.mark.parametrize("raw", BAD_COMPLETIONS)
def test_summary_and_intent_calls_answer_502_for_a_malformed_answer(
    nixx: Nixx, llm: FakeLLM, raw: str
) -> None:
    # nixx's own calls are streamed (`ChatClient.background`): the malformed value comes
    # as a chunk of their stream
    nixx.chat("we talk about gardening tomatoes and peppers")
    llm.queue(Reply(raw_chunks=[raw]))
    r = nixx.client.post("/v1/episodic/summary", json={})
    assert r.status_code == 502, r.text
    assert_envelope(r.json(), "backend")
    llm.queue(Reply(raw_chunks=[raw]))
    r = nixx.client.post("/v1/intent/derive", json={})
    assert r.status_code == 502, r.text
    assert_envelope(r.json(), "backend")


# ---- property: any JSON value either passes the check and folds, or is a BackendError ----

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
SCALAR = (
    st.none() | st.booleans() | st.integers(-2, 3) | st.text(max_size=4) | st.just([]) | st.just({})
)
TOOL_CALL = st.fixed_dictionaries(
    {},
    optional={
        "index": SCALAR,
        "id": SCALAR,
        "function": SCALAR
        | st.fixed_dictionaries({}, optional={"name": SCALAR, "arguments": SCALAR}),
    },
)
DELTA = SCALAR | st.fixed_dictionaries(
    {},
    optional={
        "content": SCALAR,
        "role": SCALAR,
        "tool_calls": SCALAR | st.lists(TOOL_CALL | SCALAR, max_size=3),
    },
)
CHOICE = SCALAR | st.fixed_dictionaries(
    {}, optional={"index": SCALAR, "delta": DELTA, "finish_reason": SCALAR}
)
CHUNK = JSON | st.fixed_dictionaries(
    {},
    optional={
        "choices": SCALAR | st.lists(CHOICE, max_size=3),
        "usage": SCALAR,
        "model": SCALAR,
    },
)


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(CHUNK, min_size=1, max_size=5))
def test_any_chunk_is_either_refused_as_backend_error_or_folds_cleanly(chunks: list[Any]) -> None:
    acc = StreamAccumulator()
    for chunk in chunks:
        chunk = json.loads(json.dumps(chunk))  # exactly what a backend could send
        try:
            check_chunk(chunk)
        except BackendError as exc:
            assert exc.http_status == 502 and "malformed stream chunk" in exc.message
            return
        text = acc.add(chunk)
        assert isinstance(text, str)
    for call in acc.tool_calls():
        assert isinstance(call["function"]["name"], str)
        assert isinstance(call["function"]["arguments"], str)


@settings(max_examples=200, deadline=None)
@given(
    data=JSON
    | st.fixed_dictionaries(
        {
            "choices": SCALAR
            | st.lists(SCALAR | st.fixed_dictionaries({}, optional={"message": DELTA}), max_size=2)
        }
    )
)
def test_any_completion_is_either_refused_or_readable(data: Any) -> None:
    try:
        checked = check_completion(json.loads(json.dumps(data)))
    except BackendError as exc:
        assert exc.http_status == 502
        return
    message = checked["choices"][0].get("message") or {}
    assert isinstance(message.get("content") or "", str)
