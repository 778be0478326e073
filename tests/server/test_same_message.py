"""The rule for the same new message sent by many clients at once (docs/memory.md, "A
turn"), over real HTTP against a real uvicorn: copies that arrive while the message is
unanswered share its row; a copy that arrives after an answer to it was stored is a new
message (nixx cannot tell it from the same message sent again). The backend is held at a
barrier, so which requests arrived before an answer is decided by the test, not by speed."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer

MESSAGE = {"model": "m", "messages": [{"role": "user", "content": "the same new message"}]}


def _send(live: LiveServer, n: int) -> list[int]:
    def one(_: int) -> int:
        return httpx.post(live.base_url + "/v1/chat/completions", json=MESSAGE,
                          timeout=60).status_code

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def _roles(live: LiveServer) -> list[str]:
    rows = httpx.get(live.base_url + "/v1/episodic/transcript",
                     params={"start": 1, "limit": 100}).json()["rows"]
    return [r["role"] for r in rows]


def _held(llm: FakeLLM, parties: int) -> None:
    """Every answer waits until `parties` backend calls came in: each of those requests
    had written (or reused) its user row before any answer is stored."""
    barrier = threading.Barrier(parties, timeout=30)

    def respond(body: dict[str, Any]) -> Reply:
        barrier.wait()
        return Reply(content="answer")

    llm.responder = respond


def test_ten_copies_before_any_answer_share_one_row(make_settings: Any, llm: FakeLLM) -> None:
    _held(llm, 10)
    with LiveServer(create_app(make_settings())) as live:
        assert _send(live, 10) == [200] * 10
        roles = _roles(live)
    assert roles.count("user") == 1 and roles.count("assistant") == 10


def test_a_copy_after_a_stored_answer_is_a_new_message(make_settings: Any, llm: FakeLLM) -> None:
    with LiveServer(create_app(make_settings())) as live:
        llm.responder = lambda body: Reply(content="answer")
        assert _send(live, 1) == [200]  # answered and stored
        _held(llm, 9)
        assert _send(live, 9) == [200] * 9  # nine copies at once, after that answer
        roles = _roles(live)
    assert roles.count("user") == 2 and roles.count("assistant") == 10
