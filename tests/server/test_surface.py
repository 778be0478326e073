"""The API surface: every endpoint of the issue in /openapi.json, /health, /v1/models,
/v1/embeddings, /v1/debug/context."""

from __future__ import annotations

import json
from typing import Any

from nixx import __version__
from nixx.memory.prompts import INTENT_FRAMING, SYSTEM_PROMPT, TOOLS_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx, offered_prompt, sent_memory
from .test_chat import add_summary

ENDPOINTS = {
    ("get", "/health"),
    ("get", "/v1/models"),
    ("post", "/v1/chat/completions"),
    ("post", "/v1/embeddings"),
    ("get", "/v1/buffer/session"),
    ("post", "/v1/buffer/clear"),
    ("get", "/v1/episodic/status"),
    ("post", "/v1/episodic/config"),
    ("post", "/v1/episodic/summary"),
    ("post", "/v1/episodic/search"),
    ("get", "/v1/episodic/transcript"),
    ("get", "/v1/episodic/summaries"),
    ("get", "/v1/intent"),
    ("post", "/v1/intent"),
    ("delete", "/v1/intent"),
    ("post", "/v1/intent/derive"),
    ("post", "/v1/sources"),
    ("get", "/v1/sources"),
    ("get", "/v1/sources/{source_id}"),
    ("get", "/v1/sources/{source_id}/chunks"),
    ("post", "/v1/sources/search"),
    ("get", "/v1/debug/context"),
}


def test_openapi_lists_every_endpoint(nixx: Nixx) -> None:
    doc = nixx.client.get("/openapi.json").json()
    present = {(method, path) for path, item in doc["paths"].items() for method in item}
    assert present >= ENDPOINTS
    # request bodies are documented, not opaque
    chat = doc["paths"]["/v1/chat/completions"]["post"]
    assert "requestBody" in chat
    assert any(p["name"].lower() == "x-nixx-origin" for p in chat["parameters"])


def test_api_docs_cover_every_endpoint() -> None:
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    for method, path in ENDPOINTS:
        assert f"{method.upper()} {path.replace('{source_id}', '{id}')}" in text, (method, path)


def test_health(nixx: Nixx) -> None:
    assert nixx.client.get("/health").json() == {"status": "ok", "version": __version__}


def test_models_pass_through(nixx: Nixx, llm: FakeLLM) -> None:
    llm.models = ["a", "b"]
    body = nixx.client.get("/v1/models").json()
    assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["a", "b"]


def test_model_defaults_to_the_backends_first(nixx: Nixx, llm: FakeLLM) -> None:
    llm.models = ["first-model", "second"]
    r = nixx.client.post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert r.status_code == 200
    assert llm.chat_requests[-1]["model"] == "first-model"
    assert r.json()["model"] == "first-model"


def test_configured_model_wins(make_settings: Any, llm: FakeLLM) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    with TestClient(base_url=LOCAL, app=create_app(make_settings(chat_model="pinned"))) as client:
        Nixx(client).chat("hi")
        assert llm.chat_requests[-1]["model"] == "pinned"


def test_embeddings_dimension_mismatch_is_400(nixx: Nixx) -> None:
    r = nixx.client.post("/v1/embeddings", json={"input": "x", "dimensions": 7})
    assert r.status_code == 400 and r.json()["error"]["param"] == "dimensions"
    r = nixx.client.post("/v1/embeddings", json={"input": "x", "dimensions": 384})
    assert len(r.json()["data"][0]["embedding"]) == 384


def test_debug_context_is_what_the_next_turn_sends(nixx: Nixx, llm: FakeLLM) -> None:
    nixx.service._store.append_buffer("user", "old")
    nixx.client.post("/v1/buffer/clear")
    add_summary(nixx, "Deployed nixx behind caddy with TLS.", ["deploy"], 1, 1)
    nixx.client.post("/v1/intent", json={"intent": "Ship the release."})
    llm.queue(Reply(content="ok"))
    nixx.chat("how did we deploy nixx behind caddy")
    request = llm.chat_requests[-1]
    ctx = nixx.client.get("/v1/debug/context").json()
    # the `cache` layout: the system message, and the memory after the user's words
    assert ctx["layout"] == "cache"
    assert ctx["system_prompt"] == SYSTEM_PROMPT
    # the request offered nixx's tools (the client sent none): the sentence naming them
    # follows the base prompt; the next turn's depends on its request (`tools_prompt`)
    assert request["messages"][0]["content"] == offered_prompt()
    assert ctx["tools_prompt"] == TOOLS_PROMPT
    sent = sent_memory(request)
    intent = "## Current Intent\n" + INTENT_FRAMING + "\n\nShip the release."
    assert ctx["memory_block"] == sent and intent in sent
    assert ctx["base_prompt"] == SYSTEM_PROMPT
    assert ctx["intent"] == "Ship the release."
    assert ctx["query"] == "how did we deploy nixx behind caddy"
    assert [h["content"] for h in ctx["recalled_summaries"]] == [
        "Deployed nixx behind caddy with TLS."
    ]
    assert [(h["kind"], h["id"]) for h in ctx["recalled"]] == [("summary", 1)]
    assert ctx["recalled"][0]["cosine"] >= ctx["threshold"]
    assert ctx["recalled"][0]["text"] in sent
    other = nixx.client.get("/v1/debug/context", params={"query": "bread"}).json()
    assert other["recalled"] == [] and "## Recalled Memories" not in other["memory_block"]


def test_openapi_advertises_the_400_envelope_not_422(nixx: Nixx) -> None:
    doc = nixx.client.get("/openapi.json").json()
    text = json.dumps(doc)
    assert '"422"' not in text and "HTTPValidationError" not in text
    error = doc["components"]["schemas"]["Error"]
    assert error["properties"]["error"]["required"] == ["message", "type", "param", "code"]
    chat = doc["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert chat["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert "413" in chat
    # and what it advertises is what a bad request really gets
    r = nixx.client.get("/v1/episodic/transcript?start=abc")
    assert r.status_code == 400 and set(r.json()["error"]) == set(
        error["properties"]["error"]["required"]
    )
