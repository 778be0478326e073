"""The intent says where it came from, and a manual intent is not replaced by an
automatic derivation (docs/memory.md, "Intent")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.memory.prompts import INTENT_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx, SettingsFactory


@pytest.fixture
def every_turn(make_settings: SettingsFactory, llm: FakeLLM) -> Iterator[Nixx]:
    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == INTENT_PROMPT:
            return Reply(content="Planning a trip.")
        return Reply(content="ok")

    llm.responder = respond
    with TestClient(base_url=LOCAL, app=create_app(make_settings(intent_interval=2))) as client:
        yield Nixx(client)


def intent_calls(llm: FakeLLM) -> int:
    return sum(1 for b in llm.chat_requests if b["messages"][0]["content"] == INTENT_PROMPT)


def test_manual_intent_is_not_replaced_by_automatic_derivation(
    every_turn: Nixx, llm: FakeLLM
) -> None:
    nixx = every_turn
    set_ = nixx.client.post("/v1/intent", json={"intent": "Writing the tax return."}).json()
    assert set_["source"] == "manual" and set_["updated_at"]
    for n in range(4):
        assert nixx.chat(f"message {n} about the trip").status_code == 200
        nixx.idle()
    got = nixx.client.get("/v1/intent").json()
    assert (got["intent"], got["source"]) == ("Writing the tax return.", "manual")
    assert intent_calls(llm) == 0
    # derived on request: replaces it, and the schedule resumes
    derived = nixx.client.post("/v1/intent/derive").json()
    assert (derived["intent"], derived["source"]) == ("Planning a trip.", "derived")
    nixx.client.post("/v1/intent", json={"intent": "Back to taxes."})
    nixx.client.delete("/v1/intent")
    for n in range(2):
        nixx.chat(f"later {n}: the trip")
        nixx.idle()
    got = nixx.client.get("/v1/intent").json()
    assert (got["intent"], got["source"]) == ("Planning a trip.", "derived")
