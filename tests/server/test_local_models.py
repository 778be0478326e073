"""nixx against a backend as local servers really are (issue 27): streams that end with
``[DONE]`` before a finish reason, empty answers, one slot, a small context, a prefix
cache. The backend is `FakeLLM`, told to behave as llama.cpp / llama-cpp-python do."""

from __future__ import annotations

import json
from typing import Any

from nixx.memory.history import text_of
from nixx.memory.prompts import INTENT_PROMPT, SUMMARY_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import Nixx, sent_prompt
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


# ---- the prompt layout a prefix cache can keep -----------------------------------------

ANSWER_WORDS = 80

TOPICS = [
    "postgres hnsw index tuning with ef_search and m",
    "deploying nixx behind caddy with tls certificates",
    "a sourdough bread recipe with rye flour",
    "the rust borrow checker and lifetimes in structs",
    "planning a ferry trip along the norwegian fjords",
    "writing pytest fixtures for an embedded postgres",
]


def _answer(question: str, n: int) -> str:
    """A plausible answer of ~70 words about the question (deterministic)."""
    words = question.split()
    body = " ".join(words[(i * 3) % len(words)] for i in range(ANSWER_WORDS))
    return f"Answer {n}: about {question}, here is what matters. {body}."


def _background(body: dict[str, Any]) -> bool:
    first = str(body["messages"][0]["content"])
    return first in (SUMMARY_PROMPT, INTENT_PROMPT)


def _serialised(body: dict[str, Any]) -> str:
    """The request as the backend's template would see it: each message's role and text."""
    return "".join(
        f"<|{m['role']}|>{text_of(m.get('content'))}<|end|>" for m in body["messages"]
    )


def _shared(earlier: str, later: str) -> float:
    """How much of `earlier` the prefix it shares with `later` covers."""
    n = 0
    for a, b in zip(earlier, later, strict=False):
        if a != b:
            break
        n += 1
    return n / len(earlier)


def _conversation(make_settings: Any, llm: FakeLLM, layout: str, tmp: Any) -> list[float]:
    """24 turns of one conversation (the client re-sends the whole history), over a store
    that holds an earlier session on the same topics, with summaries and the intent derived
    in the background; the shares of consecutive turn requests."""
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    def responder(body: dict[str, Any]) -> Reply:
        first = str(body["messages"][0]["content"])
        if first == SUMMARY_PROMPT:
            return Reply(content=json.dumps({"summary": "Talked about " + body["messages"][1]
                                             ["content"][:80], "tags": ["talk"]}))
        if first == INTENT_PROMPT:
            last = body["messages"][1]["content"].splitlines()[-1]
            return Reply(content="Working on " + last[:60])
        return Reply(content=_answer(text_of(body["messages"][-1]["content"]).split("\n\n")[0],
                                     len(body["messages"])))

    llm.responder = responder
    settings = make_settings(
        prompt_layout=layout,
        intent_interval=6,
        summary_interval=400,
        db_url=f"sqlite:///{tmp}/{layout}.db",
    )
    with TestClient(create_app(settings)) as client:
        nixx = Nixx(client)
        # an earlier session about the same topics: what recall finds
        for n, topic in enumerate(TOPICS * 2):
            nixx.chat(f"earlier question {n} on {topic}")
            nixx.idle()
        client.post("/v1/buffer/clear")
        llm.requests.clear()
        history: list[dict[str, Any]] = []
        for turn in range(24):
            question = f"Turn {turn}: tell me more on {TOPICS[turn % len(TOPICS)]}"
            r = nixx.chat(question, history=history)
            assert r.status_code == 200, r.text
            history += [
                {"role": "user", "content": question},
                {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]},
            ]
            nixx.idle()
        turns = [b for b in llm.chat_requests if not _background(b)]
        assert len(turns) == 24
        recalled = sum("## Recalled Memories" in sent_prompt(b) for b in turns)
        intents = {sent_prompt(b).partition("## Current Intent\n")[2][:40] for b in turns}
        print("recalled in", recalled, "turns; intents", len(intents))
        assert recalled >= 6 and len(intents) >= 3  # memory changed from turn to turn
        texts = [_serialised(b) for b in turns]
        return [_shared(a, b) for a, b in zip(texts, texts[1:], strict=False)]


def test_consecutive_requests_share_their_prefix(
    make_settings: Any, llm: FakeLLM, tmp_path: Any
) -> None:
    shares = _conversation(make_settings, llm, "cache", tmp_path)
    kept = sum(s >= 0.7 for s in shares)
    assert kept >= 0.9 * len(shares), [round(s, 2) for s in shares]
    # the seed's layout (everything in the system message) loses the prefix whenever
    # recall or the intent change: the same conversation fails the bar
    seed = _conversation(make_settings, llm, "system", tmp_path)
    assert sum(s >= 0.7 for s in seed) < 0.9 * len(seed), [round(s, 2) for s in seed]
    print("cache layout shares:", [round(s, 2) for s in shares])
    print("system layout shares:", [round(s, 2) for s in seed])
