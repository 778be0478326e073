"""Retries are idempotent: the official `openai` SDK with its default retries against a
backend that cuts the stream stores the user's message once and a partial answer once;
ten clients sending the same new message at once give one user row (the check and the
append are one store transaction)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer


def rows(live: LiveServer) -> list[tuple[str, str, bool]]:
    got = live.service._episodic.session_rows()  # the store is thread-safe
    return [(r.role, r.content, bool(r.meta.get("incomplete"))) for r in got]


def sdk(live: LiveServer) -> openai.OpenAI:
    client = openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused")
    assert client.max_retries == 2  # the SDK's default
    return client


def test_sdk_retry_after_a_cut_stream_reuses_the_user_row(llm: FakeLLM, live: LiveServer) -> None:
    llm.queue(Reply(content="one two three four", cut_after=2), Reply(content="all of it"))
    reply = sdk(live).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "tell me"}]
    )
    assert reply.choices[0].message.content == "all of it"
    assert len(llm.chat_requests) == 2  # the SDK retried once
    assert rows(live) == [
        ("user", "tell me", False),
        ("assistant", "one two ", True),
        ("assistant", "all of it", False),
    ]


def test_sdk_retries_that_all_fail_store_one_user_row_and_one_partial(
    llm: FakeLLM, live: LiveServer
) -> None:
    llm.responder = lambda body: Reply(content="one two three four", cut_after=2)
    with pytest.raises(openai.APIStatusError):
        sdk(live).chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "tell me"}]
        )
    assert len(llm.chat_requests) == 3  # the first try and the SDK's two retries
    assert rows(live) == [("user", "tell me", False), ("assistant", "one two ", True)]


def test_a_message_sent_again_after_a_complete_answer_is_a_new_row(
    llm: FakeLLM, live: LiveServer
) -> None:
    client = sdk(live)
    for _ in range(2):
        client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "yes"}]
        )
    assert [r[0] for r in rows(live)] == ["user", "assistant", "user", "assistant"]


def test_ten_concurrent_identical_new_messages_give_one_user_row(
    llm: FakeLLM, live: LiveServer
) -> None:
    # every backend call waits until all ten turns have written (or reused) their user
    # row, which each does before it calls the backend: no timing involved
    barrier = threading.Barrier(10, timeout=60)

    def respond(body: dict[str, Any]) -> Reply:
        barrier.wait()
        return Reply(content="answer")

    llm.responder = respond
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "same thing"}]}

    def send(_: int) -> int:
        with httpx.Client(timeout=120) as client:
            return client.post(live.base_url + "/v1/chat/completions", json=body).status_code

    with ThreadPoolExecutor(10) as pool:
        assert list(pool.map(send, range(10))) == [200] * 10
    got = rows(live)
    assert [r for r in got if r[0] == "user"] == [("user", "same thing", False)]
    assert len([r for r in got if r[0] == "assistant"]) == 10
