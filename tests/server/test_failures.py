"""Failures: backend down, backend errors, streams cut, bad input, unknown routes, auth."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx
from .test_chat import sse_chunks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_envelope(body: Any, kind: str | None = None) -> dict[str, Any]:
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    if kind:
        assert err["code"] == kind
    return err


def test_backend_down_is_503_naming_url_and_variable_and_message_is_kept(
    make_settings: Any,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with TestClient(base_url=LOCAL, app=create_app(make_settings(chat_base_url=url))) as client:
        for stream in (False, True):
            r = client.post(
                "/v1/chat/completions",
                json={
                    "model": "m",
                    "stream": stream,
                    "messages": [{"role": "user", "content": f"hello {stream}"}],
                },
            )
            assert r.status_code == 503
            err = assert_envelope(r.json(), "backend_unavailable")
            assert url in err["message"] and "NIXX_CHAT_BASE_URL" in err["message"]
        rows = client.get("/v1/episodic/transcript", params={"start": 1}).json()["rows"]
        assert [(r["role"], r["content"]) for r in rows] == [
            ("user", "hello False"),
            ("user", "hello True"),
        ]
        r = client.get("/v1/models")
        assert r.status_code == 503
        assert_envelope(r.json(), "backend_unavailable")


def test_backend_http_error_is_502_with_its_message(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(status=500, error="model exploded"))
    r = nixx.chat("hi")
    assert r.status_code == 502
    assert "model exploded" in assert_envelope(r.json(), "backend")["message"]


def test_stream_cut_keeps_partial_answer_marked_incomplete(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content="one two three four five", cut_after=2))
    r = nixx.chat("tell me five words", stream=True)
    assert r.status_code == 200
    chunks = sse_chunks(r.text)
    assert chunks[-1] == "[DONE]"
    error_chunk = chunks[-2]
    assert error_chunk["choices"] == []
    assert error_chunk["error"]["code"] == "backend"
    assert "stream" in error_chunk["error"]["message"]
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks[:-2] if c["choices"]
    )
    assert text == "one two "
    rows = nixx.rows()
    assert rows[-1]["role"] == "assistant"
    assert rows[-1]["content"] == "one two "
    assert rows[-1]["meta"]["incomplete"] is True


def test_stream_cut_non_streaming_client_gets_502_and_partial_kept(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="alpha beta gamma", cut_after=1))
    r = nixx.chat("go")
    assert r.status_code == 502
    assert_envelope(r.json(), "backend")
    assert nixx.rows()[-1]["meta"] == {
        "incomplete": True,
        "error": nixx.rows()[-1]["meta"]["error"],
    }
    assert nixx.rows()[-1]["content"] == "alpha "


@pytest.mark.parametrize(
    "payload, param",
    [
        ({"messages": []}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages.0.content"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": 9}, "temperature"),
        (
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
            "tools.0",
        ),
    ],
)
def test_bad_chat_requests_are_400_with_envelope(
    nixx: Nixx, payload: dict[str, Any], param: str
) -> None:
    r = nixx.client.post("/v1/chat/completions", json=payload)
    assert r.status_code == 400, r.text
    err = assert_envelope(r.json())
    assert err["type"] == "invalid_request_error"
    assert err["param"] is not None and err["param"].startswith(param)
    assert nixx.rows() == []


def test_malformed_json_body_and_bad_origin(nixx: Nixx) -> None:
    r = nixx.client.post(
        "/v1/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400
    assert "JSON" in assert_envelope(r.json())["message"]
    r = nixx.chat("hi", headers={"X-Nixx-Origin": "emacs; rm -rf"})
    assert r.status_code == 400
    assert assert_envelope(r.json())["param"] == "X-Nixx-Origin"


@pytest.mark.parametrize(
    "method, path, payload",
    [
        ("post", "/v1/episodic/config", {"interval": "lots"}),
        ("post", "/v1/episodic/config", {"interval": 0}),
        ("post", "/v1/episodic/config", {"interval": -5}),
        ("post", "/v1/episodic/config", {"recall": "yes"}),
        ("post", "/v1/episodic/config", {"interval": 1.5}),
        ("post", "/v1/episodic/config", {"nonsense": 1}),
        ("post", "/v1/episodic/search", {"query": ""}),
        ("post", "/v1/episodic/search", {"query": "x", "limit": 0}),
        ("post", "/v1/episodic/summary", {"tags": "not-a-list"}),
        ("post", "/v1/intent", {"intent": "   "}),
        ("post", "/v1/intent", {}),
        ("post", "/v1/sources", {"name": ""}),
        ("post", "/v1/sources", {"name": "x", "start_id": 5, "end_id": 2}),
        ("post", "/v1/sources/search", {"query": "x", "limit": "many"}),
        ("post", "/v1/embeddings", {"input": []}),
        ("post", "/v1/embeddings", {"input": [[1, 2, 3]]}),
        ("get", "/v1/episodic/transcript?start=abc", None),
        ("get", "/v1/episodic/transcript?start=0", None),
        ("get", "/v1/episodic/transcript?start=5&end=2", None),
        ("get", "/v1/episodic/transcript", None),
        ("get", "/v1/sources/notanumber", None),
    ],
)
def test_bad_values_are_400_never_422_or_500(
    nixx: Nixx, method: str, path: str, payload: Any
) -> None:
    r = getattr(nixx.client, method)(path, **({"json": payload} if payload is not None else {}))
    assert r.status_code == 400, (path, payload, r.status_code, r.text)
    assert_envelope(r.json())


def test_unknown_route_and_method_use_the_envelope(nixx: Nixx) -> None:
    r = nixx.client.get("/v1/nothing")
    assert r.status_code == 404
    assert assert_envelope(r.json())["type"] == "not_found_error"
    r = nixx.client.delete("/v1/models")
    assert r.status_code == 405
    assert_envelope(r.json())
    r = nixx.client.get("/v1/sources/999")
    assert r.status_code == 404
    assert_envelope(r.json(), "not_found")


def test_api_key_required_when_set(make_settings: Any) -> None:
    with TestClient(base_url=LOCAL, app=create_app(make_settings(api_key="s3cret"))) as client:
        assert client.get("/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            r = client.get("/v1/intent", headers=headers)
            assert r.status_code == 401
            assert assert_envelope(r.json(), "invalid_api_key")["type"] == "authentication_error"
        r = client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "sneaky"}]},
        )
        assert r.status_code == 401
        ok = client.get("/v1/intent", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        rows = client.get(
            "/v1/episodic/transcript",
            params={"start": 1},
            headers={"Authorization": "Bearer s3cret"},
        ).json()["rows"]
        assert rows == []  # the unauthenticated turn wrote nothing


def test_non_loopback_bind_without_key_is_refused(make_settings: Any) -> None:
    from nixx.errors import ConfigError
    from nixx.server.run import check_bind

    with pytest.raises(ConfigError, match="NIXX_API_KEY"):
        check_bind(make_settings(host="0.0.0.0"))
    check_bind(make_settings(host="0.0.0.0", api_key="k" * 16))
    check_bind(make_settings(host="127.0.0.1"))


def test_store_of_another_embedder_degrades_recall_and_says_reindex(
    make_settings: Any, llm: FakeLLM
) -> None:
    settings = make_settings()
    from nixx.store import open_store

    store = open_store(settings.database_url)
    store.bind_embedder("some-other-model", 384)
    row = store.append_buffer("user", "old words")
    store.add_summary(
        "old summary",
        FakeLLM.embedding_of("old summary"),
        tags=[],
        entities={},
        start_buffer_id=row.id,
        end_buffer_id=row.id,
    )
    store.close()
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        llm.queue(Reply(content="still answering"))
        r = client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 200  # the turn goes on without recall
        assert r.json()["choices"][0]["message"]["content"] == "still answering"
        status = client.get("/v1/episodic/status").json()
        assert "reindex" in status["recall_error"]
        r = client.post("/v1/episodic/search", json={"query": "hi"})
        assert r.status_code == 409
        assert "reindex" in assert_envelope(r.json(), "embedder_mismatch")["message"]
