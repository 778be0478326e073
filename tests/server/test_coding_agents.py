"""Coding agents behind nixx work on the first try (issue 39), through the official SDKs
against a real uvicorn and the scripted backend:

- Claude Code's system message inside ``messages`` (2.1.197, what npm installs on Node
  20, does not retry without it) and Codex's ``developer`` items are taken, each in a
  stable place, and the backend sees the text once;
- a ``max_tokens`` larger than the context leaves is cut to what fits (the backend gets
  the cut value, the header says so); a message that cannot fit names the real cause;
- answers no retry will fix say so (``x-should-retry: false``) and the SDK does not
  retry them; ``overloaded_error`` only when the backend is busy.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from nixx.memory.prompts import SYSTEM_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer

from .conftest import SettingsFactory

# Claude Code 2.1.197's first request of a session, as it sends it: the top-level
# ``system`` blocks, the user's message with its reminders, then a system message
MCP_NOTE = "# MCP Server Instructions\nThe docs server answers questions about the API."
REMINDER = "<system-reminder>\ncwd: /work\n</system-reminder>"


def first_request(question: str) -> list[Any]:
    return [
        {"role": "user", "content": [{"type": "text", "text": REMINDER},
                                     {"type": "text", "text": question}]},
        {"role": "system", "content": MCP_NOTE},
    ]


SYSTEM: Any = [
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
    {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
]


class Counted:
    """The requests an SDK really sent (its transport's event hook): a retry is one more."""

    def __init__(self) -> None:
        self.sent = 0

    def client(self, sdk: Any = anthropic) -> Any:
        return sdk.DefaultHttpxClient(event_hooks={"request": [self.count]})

    def count(self, request: Any) -> None:
        self.sent += 1


def rows(live: LiveServer) -> list[Any]:
    return live.call(lambda: live.service.run(live.service._store.get_buffer, 1))


def every_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


@pytest.fixture
def claude(live: LiveServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=live.base_url, api_key="unused", max_retries=0)


def test_claude_codes_system_message_in_messages_is_answered_once_in_a_stable_place(
    claude: anthropic.Anthropic, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="Read it first."), Reply(content="Done."))
    first = claude.messages.create(model="claude-sonnet-4-5", max_tokens=64, system=SYSTEM,
                                   messages=first_request("which file holds the API?"))
    assert first.content[0].text == "Read it first."  # type: ignore[union-attr]
    sent = llm.chat_requests[-1]
    assert every_text(sent).count(MCP_NOTE) == 1
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].startswith(SYSTEM_PROMPT)
    assert MCP_NOTE not in sent["messages"][0]["content"]  # the prompt's start is unchanged
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    asked = sent["messages"][1]["content"]
    assert asked.startswith(REMINDER + "\nwhich file holds the API?\n\n<system-reminder>\n"
                            + MCP_NOTE + "\n</system-reminder>")

    # the next request repeats the history: it begins as the first did
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=64, system=SYSTEM, messages=[
        *first_request("which file holds the API?"),
        {"role": "assistant", "content": "Read it first."},
        {"role": "user", "content": "done?"}])
    again = llm.chat_requests[-1]
    assert again["messages"][:2] == sent["messages"][:2]
    assert every_text(again).count(MCP_NOTE) == 1
    assert [(r.role, r.content) for r in rows(live)] == [
        ("user", "which file holds the API?"), ("assistant", "Read it first."),
        ("user", "done?"), ("assistant", "Done.")]


def test_a_leading_system_message_joins_the_system_prompt(
    claude: anthropic.Anthropic, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="ok"))
    claude.messages.create(model="m", max_tokens=64, system="Top.", messages=[
        {"role": "system", "content": [{"type": "text", "text": "Then this."}]},  # type: ignore[list-item]
        {"role": "user", "content": "hi"}])
    sent = llm.chat_requests[-1]["messages"]
    assert sent[0]["content"].endswith("Top.\n\nThen this.")
    assert sent[1:] == [{"role": "user", "content": "hi"}]


def test_a_developer_item_after_the_conversation_began_stays_in_place(
    oai: openai.OpenAI, llm: FakeLLM, live: LiveServer
) -> None:
    llm.queue(Reply(content="ok"))
    oai.responses.create(model="m", input=[
        {"role": "developer", "content": "Sandbox: read-only."},
        {"role": "user", "content": "list the files"},
        {"role": "developer", "content": "Approval policy changed: on-request."}])
    sent = llm.chat_requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0]["content"].endswith("Sandbox: read-only.")
    assert sent[1]["content"].startswith(
        "list the files\n\n<system-reminder>\nApproval policy changed: on-request.")
    assert rows(live)[0].content == "list the files"


@pytest.fixture
def small(make_settings: SettingsFactory) -> Iterator[LiveServer]:
    # (no background summary: every request the backend gets is the turn's)
    settings = make_settings(chat_context_length=8192, summary_interval=100_000)
    with LiveServer(create_app(settings)) as server:
        yield server


def test_a_max_tokens_past_the_context_is_cut_to_what_fits_and_said(
    small: LiveServer, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="short answer"), Reply(content="streamed"), Reply(content="resp"))
    claude = anthropic.Anthropic(base_url=small.base_url, api_key="k", max_retries=0)
    raw = claude.messages.with_raw_response.create(
        model="m", max_tokens=32000, system=SYSTEM, timeout=60,  # (else the SDK wants a stream)
        messages=[{"role": "user", "content": "x " * 5000}])  # ~2,500 tokens, as in the issue
    assert raw.http_response.status_code == 200
    sent = llm.chat_requests[-1]["max_tokens"]
    assert 1024 <= sent < 8192 - 2500
    assert raw.headers["x-nixx-max-tokens-clamped"] == str(sent)
    assert raw.parse().content[0].text == "short answer"  # type: ignore[union-attr]

    streamed = httpx.post(small.base_url + "/v1/messages", timeout=30, json={
        "model": "m", "max_tokens": 128000, "stream": True,
        "messages": [{"role": "user", "content": "go"}]})
    assert streamed.status_code == 200 and "message_stop" in streamed.text
    assert streamed.headers["x-nixx-max-tokens-clamped"] == str(
        llm.chat_requests[-1]["max_tokens"])

    oai = openai.OpenAI(base_url=small.base_url + "/v1", api_key="k", max_retries=0)
    resp = oai.responses.with_raw_response.create(model="m", input="hi", max_output_tokens=50000)
    assert resp.headers["x-nixx-max-tokens-clamped"] == str(llm.chat_requests[-1]["max_tokens"])
    assert llm.chat_requests[-1]["max_tokens"] < 8192


def test_a_message_that_cannot_fit_names_the_cause_and_no_negative_number(
    small: LiveServer, llm: FakeLLM
) -> None:
    claude = anthropic.Anthropic(base_url=small.base_url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model="m", max_tokens=32000, timeout=60,
                               messages=[{"role": "user", "content": "word " * 8000}])
    message = caught.value.body["error"]["message"]  # type: ignore[index]
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert re.search(r"about 100\d\d tokens", message) and "8192" in message
    for setting in ("NIXX_CHAT_CONTEXT_LENGTH", "max_tokens", "CLAUDE_CODE_MAX_OUTPUT_TOKENS"):
        assert setting in message
    assert not re.search(r"-\d", message)
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert llm.chat_requests == []


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_backend_that_refuses_connections_is_not_retried(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(chat_base_url=f"http://127.0.0.1:{closed_port()}/v1")
    with LiveServer(create_app(settings)) as live:
        counted = Counted()
        claude = anthropic.Anthropic(base_url=live.base_url, api_key="k",
                                     http_client=counted.client())  # the SDK's own retries
        started = time.monotonic()
        with pytest.raises(anthropic.APIStatusError) as caught:
            claude.messages.create(model="m", max_tokens=64,
                                   messages=[{"role": "user", "content": "hi"}])
        assert counted.sent == 1 and time.monotonic() - started < 10
        error = caught.value
        assert error.status_code == 503
        assert error.response.headers["x-should-retry"] == "false"
        assert error.body["error"]["type"] == "api_error"  # type: ignore[index]
        assert "no LLM backend answers at" in error.body["error"]["message"]  # type: ignore[index]
        counted_oai = Counted()
        oai = openai.OpenAI(base_url=live.base_url + "/v1", api_key="k",
                            http_client=counted_oai.client(openai))
        with pytest.raises(openai.APIStatusError) as refused:
            oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert counted_oai.sent == 1
        assert refused.value.response.headers["x-should-retry"] == "false"


def test_a_wrong_key_is_not_retried(make_settings: SettingsFactory) -> None:
    with LiveServer(create_app(make_settings(api_key="s3cret-but-long-enough"))) as live:
        counted = Counted()
        claude = anthropic.Anthropic(base_url=live.base_url, api_key="wrong",
                                     http_client=counted.client())
        with pytest.raises(anthropic.AuthenticationError) as caught:
            claude.messages.create(model="m", max_tokens=8,
                                   messages=[{"role": "user", "content": "hi"}])
        assert counted.sent == 1
        assert caught.value.response.headers["x-should-retry"] == "false"
        assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_the_backends_refusal_is_final_and_its_busyness_is_overloaded(
    llm: FakeLLM, live: LiveServer
) -> None:
    counted = Counted()
    claude = anthropic.Anthropic(base_url=live.base_url, api_key="k",
                                 http_client=counted.client())
    llm.queue(Reply(status=400, error="unknown model"))
    with pytest.raises(anthropic.APIStatusError) as refused:
        claude.messages.create(model="m", max_tokens=8,
                               messages=[{"role": "user", "content": "hi"}])
    assert counted.sent == 1 and refused.value.status_code == 502
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert refused.value.body["error"] == {  # type: ignore[index]
        "type": "api_error", "message": "the LLM backend answered HTTP 400: unknown model"}

    llm.queue(*[Reply(status=503, error="all slots busy")] * 3)
    busy = anthropic.Anthropic(base_url=live.base_url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        busy.messages.create(model="m", max_tokens=8,
                             messages=[{"role": "user", "content": "again"}])
    assert caught.value.status_code == 503
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    assert caught.value.response.headers["retry-after"] == "2"
    assert "x-should-retry" not in caught.value.response.headers
