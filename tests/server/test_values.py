"""Values at the edge: ids beyond SQLite's 64-bit range or negative, NaN and Infinity,
lone UTF-16 surrogates — each a 400 with `param`, never a 500; and no answer, 4xx or 5xx,
resets the keep-alive connection (a real uvicorn server, one client connection)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL, LiveServer

from .conftest import Nixx, standalone_settings
from .test_failures import assert_envelope

BIG = 2**63
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    "path, param",
    [
        (f"/v1/episodic/transcript?start={BIG}", "start"),
        (f"/v1/episodic/transcript?start=1&end={BIG}", "end"),
        ("/v1/episodic/transcript?start=-1", "start"),
        (f"/v1/episodic/transcript?start=1&limit={BIG}", "limit"),
        (f"/v1/episodic/summaries?offset={BIG}", "offset"),
        ("/v1/episodic/summaries?offset=-1", "offset"),
        (f"/v1/episodic/summaries?limit={BIG}", "limit"),
        (f"/v1/sources/{BIG}", "source_id"),
        ("/v1/sources/-1", "source_id"),
        (f"/v1/sources/{BIG}/chunks", "source_id"),
        (f"/v1/sources/{10**40}", "source_id"),
    ],
)
def test_ids_out_of_range_are_400_with_param(nixx: Nixx, path: str, param: str) -> None:
    r = nixx.client.get(path)
    assert r.status_code == 400, (path, r.status_code, r.text)
    assert assert_envelope(r.json())["param"] == param


@pytest.mark.parametrize(
    "payload, param",
    [
        ({"name": "x", "start_id": BIG}, "start_id"),
        ({"name": "x", "end_id": BIG}, "end_id"),
        ({"name": "x", "start_id": -3}, "start_id"),
    ],
)
def test_body_ids_out_of_range_are_400(nixx: Nixx, payload: dict[str, Any], param: str) -> None:
    r = nixx.client.post("/v1/sources", json=payload)
    assert r.status_code == 400, r.text
    assert assert_envelope(r.json())["param"] == param


@pytest.mark.parametrize(
    "raw, param",
    [
        ('{"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_p": NaN}', "top_p"),
        (
            '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_p": Infinity}',
            "top_p",
        ),
        (
            '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": -Infinity}',
            "seed",
        ),
        (
            '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": {"y": [NaN]}}',
            "x.y.0",
        ),
        (
            '{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
            "messages.0.content",
        ),
        (
            '{"model": "m", "messages": [{"role": "user", "content": "\\udfff"}]}',
            "messages.0.content",
        ),
        (
            '{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud83d"}]}]}',
            "messages.0.content.0.text",
        ),
    ],
)
def test_nan_infinity_and_lone_surrogates_in_chat_are_400(nixx: Nixx, raw: str, param: str) -> None:
    r = nixx.client.post(
        "/v1/chat/completions", content=raw.encode(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert assert_envelope(r.json())["param"] == param
    assert nixx.rows() == []


@pytest.mark.parametrize(
    "path, raw, param",
    [
        ("/v1/intent", '{"intent": "x\\ud800"}', "intent"),
        ("/v1/embeddings", '{"input": "x\\ud800"}', "input"),
        ("/v1/embeddings", '{"input": ["ok", "\\udc00"]}', "input.1"),
        ("/v1/episodic/search", '{"query": "\\ud800"}', "query"),
        ("/v1/sources/search", '{"query": "q", "limit": NaN}', "limit"),
        ("/v1/episodic/config", '{"interval": Infinity}', "interval"),
    ],
)
def test_other_bodies_refuse_surrogates_and_nan(
    nixx: Nixx, path: str, raw: str, param: str
) -> None:
    r = nixx.client.post(path, content=raw.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert assert_envelope(r.json())["param"] == param


def test_a_paired_surrogate_is_a_normal_character(nixx: Nixx) -> None:
    raw = '{"model": "m", "messages": [{"role": "user", "content": "smile \\ud83d\\ude00"}]}'
    r = nixx.client.post(
        "/v1/chat/completions", content=raw.encode(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    assert nixx.rows()[0]["content"] == "smile \U0001f600"


@settings(max_examples=60, deadline=None)
@given(
    value=st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70),
        st.text(max_size=25),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
    ),
    where=st.sampled_from(
        [
            "/v1/episodic/transcript?start={v}",
            "/v1/episodic/transcript?start=1&end={v}",
            "/v1/episodic/transcript?start=1&limit={v}",
            "/v1/episodic/summaries?offset={v}",
            "/v1/episodic/summaries?limit={v}",
            "/v1/sources/{v}",
            "/v1/sources/{v}/chunks",
        ]
    ),
)
def test_any_id_value_answers_without_a_server_error(
    shared_nixx: Nixx, value: Any, where: str
) -> None:
    r = shared_nixx.client.get(where.format(v=httpx.QueryParams({"": str(value)}).__str__()[1:]))
    assert r.status_code < 500, (where, value, r.text)
    if r.status_code >= 400:
        assert_envelope(r.json())


@pytest.fixture(scope="module")
def shared_nixx(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from fastapi.testclient import TestClient

    base = tmp_path_factory.mktemp("values")
    with FakeLLM() as llm:
        s = standalone_settings(base, llm)
        with TestClient(base_url=LOCAL, app=create_app(s)) as client:
            yield Nixx(client)


def test_errors_never_reset_the_keep_alive_connection(settings: Any, llm: FakeLLM) -> None:
    app = create_app(settings)

    async def broken() -> None:  # a bug in a route: the one way left to a 500
        raise RuntimeError("a bug")

    app.add_api_route("/test-only/broken", broken)
    with LiveServer(app) as server:
        ports: set[Any] = set()

        def remember(response: httpx.Response) -> None:
            stream = response.extensions.get("network_stream")
            if stream is not None:
                ports.add(stream.get_extra_info("client_addr"))

        with httpx.Client(
            base_url=server.base_url,
            limits=httpx.Limits(max_connections=1),
            event_hooks={"response": [remember]},
        ) as client:
            for _ in range(2):
                assert client.get(f"/v1/sources/{BIG}").status_code == 400
                assert client.get("/v1/nothing").status_code == 404
                assert client.post("/v1/chat/completions", content=b"{bad",
                                   headers={"Content-Type": "application/json"}).status_code == 400
                # a body that does not say it is JSON: 415, and the connection still stands
                assert client.post("/v1/chat/completions", content=b"{bad").status_code == 415
                r = client.post(
                    "/v1/chat/completions",
                    content=b'{"model":"m","messages":[{"role":"user","content":"x"}],"top_p":NaN}',
                    headers={"Content-Type": "application/json"},
                )
                assert r.status_code == 400
                assert client.get("/v1/sources/999").status_code == 404
                llm.queue(Reply(status=500, error="backend down"))
                assert client.post("/v1/chat/completions", json=CHAT).status_code == 502
                r = client.get("/test-only/broken")
                assert r.status_code == 500
                assert (
                    r.json()["error"]["message"]
                    == "internal error (RuntimeError); see the server log"
                )
                assert client.get("/health").status_code == 200
        assert len(ports) == 1, ports  # every request went over the same connection


def test_the_largest_id_is_served_not_overflowed(nixx: Nixx) -> None:
    # found by the schemathesis fuzz: start + limit - 1 passed 2^63 - 1
    r = nixx.client.get(f"/v1/episodic/transcript?start={BIG - 1}&limit=1000")
    assert r.status_code == 200 and r.json()["rows"] == []
