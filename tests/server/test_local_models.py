"""nixx against a backend as local servers really are (issue 27): streams that end with
``[DONE]`` before a finish reason, empty answers, one slot, a small context, a prefix
cache. The backend is `FakeLLM`, told to behave as llama.cpp / llama-cpp-python do."""

from __future__ import annotations

from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import Nixx
from .test_chat import sse_chunks
from .test_failures import assert_envelope


def test_stream_ending_done_without_finish_reason_is_incomplete(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="one two three four", done_after=2))
    r = nixx.chat("four words please", stream=True)
    chunks = sse_chunks(r.text)
    assert chunks[-1] == "[DONE]"
    error = chunks[-2]["error"]
    assert error["code"] == "backend" and "no finish reason" in error["message"]
    finishes = [c["choices"][0].get("finish_reason") for c in chunks[:-2] if c["choices"]]
    assert "stop" not in finishes  # never told "stop"
    row = nixx.rows()[-1]
    assert (row["role"], row["content"]) == ("assistant", "one two ")
    assert row["meta"]["incomplete"] is True and "no finish reason" in row["meta"]["error"]

    # a plain (non-streamed) client gets the 502, the partial answer kept the same way
    llm.queue(Reply(content="alpha beta gamma", done_after=1))
    r = nixx.chat("three words please")
    assert r.status_code == 502
    assert "no finish reason" in assert_envelope(r.json(), "backend")["message"]
    assert nixx.rows()[-1]["content"] == "alpha "
    assert nixx.rows()[-1]["meta"]["incomplete"] is True


def test_stream_interrupted_at_once_is_an_error_never_an_empty_success(
    nixx: Nixx, llm: FakeLLM
) -> None:
    # what llama-cpp-python sent when a background call waited: the role chunk, [DONE]
    for stream in (True, False):
        llm.queue(Reply(content="never sent", done_after=0))
        r = nixx.chat(f"hello {stream}", stream=stream)
        # nothing was streamed yet: the error is the HTTP answer, streamed or not
        assert r.status_code == 502, r.text
        assert "no finish reason" in assert_envelope(r.json(), "backend")["message"]
    assert [row["role"] for row in nixx.rows()] == ["user", "user"]


def test_an_empty_answer_is_never_reported_as_success(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content=""), Reply(content="   "))
    r = nixx.chat("say nothing")
    assert r.status_code == 502
    assert "empty" in assert_envelope(r.json(), "backend")["message"]
    r = nixx.chat("say nothing again", stream=True)  # blanks were streamed: then the error
    chunks = sse_chunks(r.text)
    assert "empty" in chunks[-2]["error"]["message"]
    assert "stop" not in [c["choices"][0].get("finish_reason") for c in chunks if c != "[DONE]" and c["choices"]]
    assert [row["role"] for row in nixx.rows()] == ["user", "user"]
