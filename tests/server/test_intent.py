"""Intent over HTTP: set/get/clear, derive now, derived on schedule in the background,
kept across a restart, injected into the system prompt."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient

from nixx.memory.prompts import INTENT_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx


def is_intent_request(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == INTENT_PROMPT


def responder(intent: str = "Building the nixx memory server.") -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        if is_intent_request(body):
            return Reply(content=f'"{intent}"')
        return Reply(content="noted")

    return respond


def test_set_get_clear(nixx: Nixx, llm: FakeLLM) -> None:
    assert nixx.client.get("/v1/intent").json() == {
        "intent": None,
        "source": None,
        "updated_at": None,
    }
    r = nixx.client.post("/v1/intent", json={"intent": "  Write the   API docs. "})
    assert r.json()["intent"] == "Write the API docs." and r.json()["source"] == "manual"
    assert nixx.client.get("/v1/intent").json()["intent"] == "Write the API docs."
    nixx.chat("hello")
    assert (
        "## Current Intent\nWrite the API docs." in llm.chat_requests[-1]["messages"][0]["content"]
    )
    assert nixx.client.delete("/v1/intent").json()["intent"] is None
    nixx.chat("hello again")
    assert "## Current Intent" not in llm.chat_requests[-1]["messages"][0]["content"]


def test_derive_now_uses_last_rows_of_session_cut_to_500_chars(
    make_settings: Any, llm: FakeLLM
) -> None:
    with TestClient(base_url=LOCAL, app=create_app(make_settings(intent_lookback=3, intent_interval=100))) as client:
        nixx = Nixx(client)
        r = client.post("/v1/intent/derive")
        assert r.status_code == 400  # no messages yet
        llm.responder = responder()
        nixx.chat("old session message")
        client.post("/v1/buffer/clear")
        nixx.chat("x" * 2000)
        nixx.chat("second")
        r = client.post("/v1/intent/derive")
        assert r.status_code == 200, r.text
        assert r.json() == {
            **r.json(),
            "intent": "Building the nixx memory server.",
            "source": "derived",
        }
        request = [b for b in llm.chat_requests if is_intent_request(b)][-1]
        lines = request["messages"][1]["content"].splitlines()
        assert lines == ["Assistant: noted", "User: second", "Assistant: noted"]  # last 3 rows
        assert "old session" not in request["messages"][1]["content"]
        nixx.chat("y" * 2000)
        client.post("/v1/intent/derive")
        request = [b for b in llm.chat_requests if is_intent_request(b)][-1]
        lines = request["messages"][1]["content"].splitlines()
        assert lines[1] == "User: " + "y" * 500 + "…"


def test_derived_on_schedule_and_after_restart(make_settings: Any, llm: FakeLLM) -> None:
    settings = make_settings(intent_interval=4, intent_lookback=4)
    llm.responder = responder("Planning a trip to Norway.")
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        nixx.chat("first")  # 2 rows
        nixx.idle()
        assert client.get("/v1/intent").json()["intent"] is None
        nixx.chat("second")  # 4 rows: due
        nixx.idle()
        assert client.get("/v1/intent").json()["intent"] == "Planning a trip to Norway."
        assert len([b for b in llm.chat_requests if is_intent_request(b)]) == 1
        nixx.chat("third")  # 2 rows since the derivation: not due
        nixx.idle()
        assert len([b for b in llm.chat_requests if is_intent_request(b)]) == 1
    llm.responder = responder("Booking ferries in Norway.")
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        # the intent survived the restart and is in the prompt
        assert client.get("/v1/intent").json()["intent"] == "Planning a trip to Norway."
        nixx.chat("fourth")
        assert (
            "## Current Intent\nPlanning a trip to Norway."
            in [b for b in llm.chat_requests if not is_intent_request(b)][-1]["messages"][0][
                "content"
            ]
        )
        nixx.idle()
        # the schedule carried over: rows 5-8 since the derivation at row 4
        assert client.get("/v1/intent").json()["intent"] == "Booking ferries in Norway."


def test_intent_derivation_does_not_hold_the_turn(make_settings: Any, llm: FakeLLM) -> None:
    release = threading.Event()

    def respond(body: dict[str, Any]) -> Reply:
        if is_intent_request(body):
            release.wait(30)
            return Reply(content="Testing.")
        return Reply(content="answer")

    llm.responder = respond
    with TestClient(base_url=LOCAL, app=create_app(make_settings(intent_interval=2))) as client:
        nixx = Nixx(client)
        r = nixx.chat("go", stream=True)
        assert r.status_code == 200 and "[DONE]" in r.text
        assert client.get("/v1/intent").json()["intent"] is None
        release.set()
        nixx.idle()
        assert client.get("/v1/intent").json()["intent"] == "Testing."
