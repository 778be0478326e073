"""The openai embedder against the scripted OpenAI-compatible server (real HTTP)."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from nixx.config import load_settings
from nixx.embed import make_embedder
from nixx.embed.openai import OpenAIEmbedder
from nixx.errors import BackendError, BackendUnavailable
from nixx.testing.fake_llm import FakeLLM, Reply


def _embedder(llm: FakeLLM, **kw: object) -> OpenAIEmbedder:
    kw.setdefault("backoff", 0.01)
    return OpenAIEmbedder(base_url=llm.base_url, model="fake-embed", **kw)  # type: ignore[arg-type]


def test_vectors_come_back_in_order_normalised(fake_llm: FakeLLM) -> None:
    texts = [f"text number {i} about topic {i % 3}" for i in range(10)]
    with _embedder(fake_llm, batch_size=4) as emb:
        got = emb.embed(texts)
    assert got.shape == (10, 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    for i, t in enumerate(texts):
        np.testing.assert_allclose(got[i], FakeLLM.embedding_of(t, 384), atol=1e-6)


def test_batches_by_batch_size(fake_llm: FakeLLM) -> None:
    with _embedder(fake_llm, batch_size=4) as emb:
        emb.embed([f"t{i}" for i in range(10)])
    sizes = [len(body["input"]) for body in fake_llm.embed_requests]
    assert sizes == [4, 4, 2]
    assert all(body["model"] == "fake-embed" for body in fake_llm.embed_requests)


def test_reorders_by_returned_index_and_normalises(fake_llm: FakeLLM) -> None:
    def reversed_unnormalised(body: dict) -> Reply:
        data = [
            {"object": "embedding", "index": i, "embedding": [3.0 * (i + 1), 4.0 * (i + 1)]}
            for i in range(len(body["input"]))
        ]
        return Reply(raw_body=json.dumps({"object": "list", "data": data[::-1]}))

    fake_llm.embed_responder = reversed_unnormalised
    with _embedder(fake_llm) as emb:
        got = emb.embed(["a", "b", "c"])
        assert emb.dim == 2
    np.testing.assert_allclose(got, [[0.6, 0.8]] * 3, atol=1e-6)


def test_order_survives_a_shuffled_answer(fake_llm: FakeLLM) -> None:
    def shuffled(body: dict) -> Reply:
        data = [
            {"index": i, "embedding": [float(i), 1.0]} for i in range(len(body["input"]))
        ]
        order = [2, 0, 3, 1]
        return Reply(raw_body=json.dumps({"data": [data[j] for j in order]}))

    fake_llm.embed_responder = shuffled
    with _embedder(fake_llm) as emb:
        got = emb.embed(["w", "x", "y", "z"])
    ratios = got[:, 0] / got[:, 1]
    np.testing.assert_allclose(ratios, [0.0, 1.0, 2.0, 3.0], atol=1e-5)


def test_retries_server_errors_then_succeeds(fake_llm: FakeLLM) -> None:
    fake_llm.fail_next_embeddings = 2
    with _embedder(fake_llm, max_retries=3) as emb:
        got = emb.embed(["survives two 500s"])
    assert len(fake_llm.embed_requests) == 3
    np.testing.assert_allclose(got[0], FakeLLM.embedding_of("survives two 500s"), atol=1e-6)


def test_gives_up_after_bounded_retries(fake_llm: FakeLLM) -> None:
    fake_llm.fail_embeddings = True
    with _embedder(fake_llm, max_retries=2) as emb, pytest.raises(BackendError) as info:
        emb.embed(["never"])
    assert len(fake_llm.embed_requests) == 3
    assert "500" in str(info.value) and "embeddings failing (scripted)" in str(info.value)
    assert not isinstance(info.value, BackendUnavailable)


def test_retries_429(fake_llm: FakeLLM) -> None:
    answers = iter([Reply(status=429, error="slow down"), None])
    fake_llm.embed_responder = lambda body: next(answers)
    with _embedder(fake_llm) as emb:
        emb.embed(["rate limited once"])
    assert len(fake_llm.embed_requests) == 2


def test_4xx_is_not_retried_and_carries_backend_message(fake_llm: FakeLLM) -> None:
    fake_llm.embed_responder = lambda body: Reply(status=400, error="input is too long")
    with _embedder(fake_llm) as emb, pytest.raises(BackendError) as info:
        emb.embed(["x"])
    assert len(fake_llm.embed_requests) == 1
    assert "input is too long" in str(info.value) and "400" in str(info.value)


def test_unauthorised_names_the_api_key_variable(fake_llm: FakeLLM) -> None:
    fake_llm.embed_responder = lambda body: Reply(status=401, error="bad key")
    with _embedder(fake_llm) as emb, pytest.raises(BackendError) as info:
        emb.embed(["x"])
    assert "bad key" in str(info.value) and "NIXX_EMBED_API_KEY" in str(info.value)


@pytest.mark.parametrize(
    "raw",
    [
        "not json at all",
        '{"object": "list"}',
        '{"data": [{"index": 0}]}',
        '{"data": [{"index": 0, "embedding": "!!"}]}',
        '{"data": []}',
        '{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [1]}]}',
    ],
)
def test_malformed_bodies_are_backend_errors(fake_llm: FakeLLM, raw: str) -> None:
    fake_llm.embed_responder = lambda body: Reply(raw_body=raw)
    with _embedder(fake_llm) as emb, pytest.raises(BackendError) as info:
        emb.embed(["one", "two"])
    assert fake_llm.base_url in str(info.value)


def test_dimension_change_is_refused(fake_llm: FakeLLM) -> None:
    with _embedder(fake_llm) as emb:
        assert emb.dim == 384
        fake_llm.embed_responder = lambda body: Reply(
            raw_body=json.dumps({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})
        )
        with pytest.raises(BackendError, match="expected 384"):
            emb.embed(["x"])


def test_dim_is_probed_lazily_once(fake_llm: FakeLLM) -> None:
    with _embedder(fake_llm) as emb:
        assert fake_llm.embed_requests == []
        assert emb.dim == 384
        assert emb.dim == 384
        assert len(fake_llm.embed_requests) == 1
        assert emb.embed([]).shape == (0, 384)
        assert len(fake_llm.embed_requests) == 1


def test_empty_string_is_sent_as_a_space(fake_llm: FakeLLM) -> None:
    with _embedder(fake_llm) as emb:
        got = emb.embed(["", "x"])
    assert fake_llm.embed_requests[0]["input"] == [" ", "x"]
    assert got.shape == (2, 384)


def test_api_key_is_sent_as_bearer(fake_llm: FakeLLM) -> None:
    with _embedder(fake_llm, api_key="sekrit") as emb:
        emb.embed(["x"])
    headers = {k.lower(): v for k, v in fake_llm.requests[-1].headers.items()}
    assert headers["authorization"] == "Bearer sekrit"


def test_one_connection_pool_is_reused(fake_llm: FakeLLM) -> None:
    with _embedder(fake_llm, batch_size=1) as emb:
        client = emb._client
        emb.embed(["a", "b", "c"])
        assert emb._client is client
    assert len(fake_llm.embed_requests) == 3


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_backend_down_is_unavailable_naming_url_and_variable() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with (
        OpenAIEmbedder(base_url=url, model="m", backoff=0.01) as emb,
        pytest.raises(BackendUnavailable) as info,
    ):
        emb.embed(["anyone there?"])
    msg = str(info.value)
    assert url in msg and "NIXX_EMBED_BASE_URL" in msg
    assert info.value.http_status == 503


def test_factory_builds_openai_from_settings(fake_llm: FakeLLM) -> None:
    settings = load_settings(
        embed_provider="openai", embed_base_url=fake_llm.base_url, embed_batch_size=2
    )
    emb = make_embedder(settings)
    try:
        assert isinstance(emb, OpenAIEmbedder)
        assert emb.model == "mxbai-embed-large"
        emb.embed(["a", "b", "c"])
    finally:
        emb.close()
    assert [len(b["input"]) for b in fake_llm.embed_requests] == [2, 1]
    assert fake_llm.embed_requests[0]["model"] == "mxbai-embed-large"
