"""OpenAI details clients meet: `models.retrieve`, `usage` omitted when the backend sent
none, validation errors in the user's terms with `param`, token-array embeddings input
refused saying what to change (the official `openai` SDK against a real uvicorn)."""

from __future__ import annotations

import httpx
import openai
import pytest

from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LiveServer

from .conftest import Nixx


def test_models_retrieve(oai: openai.OpenAI, llm: FakeLLM) -> None:
    llm.models = ["fake-model", "org/other-model"]
    assert oai.models.retrieve("fake-model").id == "fake-model"
    assert oai.models.retrieve("org/other-model").object == "model"
    with pytest.raises(openai.NotFoundError) as info:
        oai.models.retrieve("nope")
    error = info.value.body
    assert isinstance(error, dict)
    assert error["param"] == "model"
    assert "fake-model, org/other-model" in error["message"]


def test_usage_is_estimated_when_the_backend_sent_none(
    oai: openai.OpenAI, llm: FakeLLM
) -> None:
    """`llm --no-stream` fails on a chat completion without `usage`, Codex showed "tokens
    used 0": without the backend's counts, nixx's estimate is sent, marked as such."""
    llm.queue(Reply(content="no counts here", usage=False))
    reply = oai.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "no counts here"
    assert reply.usage is not None and reply.usage.prompt_tokens > 10  # the system prompt
    assert reply.usage.completion_tokens == len("no counts here") // 4 + 1
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.model_dump()["usage"]["estimated"] is True
    llm.queue(Reply(content="streamed, no counts", usage=False))
    chunks = list(
        oai.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "again"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    counted = [c.usage for c in chunks if c.usage is not None]
    assert len(counted) == 1 and counted[0].model_dump()["estimated"] is True
    # a backend that counts: its counts come through, cached tokens too, not marked
    llm.queue(Reply(content="counted", cached_tokens=7))
    reply = oai.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "count me"}]
    )
    assert reply.usage is not None and reply.usage.prompt_tokens > 0
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 7
    assert "estimated" not in reply.model_dump()["usage"]


def test_a_round_the_backend_did_not_count_is_estimated_beside_its_counts(
    nixx: Nixx, llm: FakeLLM
) -> None:
    """A round nixx cut at a stop string ends before the backend's usage chunk: the turn's
    usage is the counted round's plus nixx's estimate of the cut one, marked estimated
    (it was the first round's counts alone, unmarked)."""
    llm.queue(Reply(tool_calls=[ToolCall("list_dir", {})]),
              Reply(content="the folder is empty ### and more words after the stop"))
    r = nixx.chat("what is in the folder?", stop=["###"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["message"]["content"] == "the folder is empty "
    first = llm.chat_requests[-2]
    counted = sum(len(str(m.get("content") or "").split()) for m in first["messages"])
    usage = body["usage"]
    assert usage["estimated"] is True
    assert usage["prompt_tokens"] > counted  # the cut round's prompt, estimated, added
    assert usage["completion_tokens"] == len("the folder is empty ") // 4 + 1
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # every round counted: the backend's sums, not marked
    llm.queue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(content="still empty"))
    again = nixx.chat("and now?").json()["usage"]
    assert "estimated" not in again
    assert again["completion_tokens"] == 2  # FakeLLM counts words: the call has none


def test_unknown_field_names_the_nearest_with_param(live: LiveServer) -> None:
    r = httpx.post(live.base_url + "/v1/sources/search", json={"q": "x"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["message"] == "invalid request: unknown field q; did you mean query?"
    assert error["param"] == "q"
    r = httpx.post(live.base_url + "/v1/sources/search", json={})
    assert r.json()["error"]["message"] == "invalid request: query is required"
    assert r.json()["error"]["param"] == "query"


def test_token_array_embeddings_input_says_what_to_change(
    oai: openai.OpenAI, live: LiveServer
) -> None:
    # langchain-openai's default: tiktoken ids, one array per text
    for value in ([[9906, 1917]], [9906, 1917]):
        r = httpx.post(
            live.base_url + "/v1/embeddings",
            json={"model": "text-embedding-ada-002", "input": value, "encoding_format": "base64"},
        )
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["param"] == "input"
        assert "check_embedding_ctx_length=False" in error["message"]
    with pytest.raises(openai.BadRequestError, match="token ids"):
        oai.embeddings.create(model="m", input=[[1, 2, 3]])
