"""When a turn offers the model nixx's own tools (``chat_tools``, `nixx.memory.turn._Offer`):
never beside a client's own tools unless the user turned them on (a coding agent runs its
tools behind its own sandbox: issue 39), never to a backend that leaves tool calls as text
(llama-cpp-python, a llama.cpp template or an Ollama model that says it has no tool calls:
issue 38), and the system message names them only when they are offered.

Every request here goes through the app to the scripted backend over loopback HTTP; the
backend is made to look like llama.cpp, llama-cpp-python or Ollama by what it answers to
``/props``, ``/v1/models`` and ``/api/show``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.memory.prompts import SYSTEM_PROMPT, TOOLS_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import SettingsFactory, offered_prompt

NIXX_TOOLS = {"read_file", "write_file", "list_dir", "delete_file", "search_transcript",
              "view_transcript"}
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}}
# the client's own tool, in each route's wire shape
CLIENT_TOOL = {
    "chat": {"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}},
    "responses": {"type": "function", "name": "get_weather", "parameters": PARAMS},
    "messages": {"name": "get_weather", "input_schema": PARAMS},
}
# llama-cpp-python's `/v1/models` entries (`python -m llama_cpp.server`)
LLAMA_CPP_PYTHON = {"owned_by": "me", "permissions": []}


def _request(route: str, text: str, tools: bool, **extra: Any) -> tuple[str, dict[str, Any]]:
    """A one-message request on `route`, with the client's own tool when `tools`."""
    if route == "chat":
        path = "/v1/chat/completions"
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": text}]}
    elif route == "responses":
        path, body = "/v1/responses", {"model": "m", "input": text}
    else:
        path = "/v1/messages"
        body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    if tools:
        body["tools"] = [CLIENT_TOOL[route]]
    return path, {**body, **extra}


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def _system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


@pytest.fixture
def serve(make_settings: SettingsFactory) -> Iterator[Any]:
    """`serve(**settings)`: the app, opened once per call, closed after the test."""
    opened: list[TestClient] = []

    def start(**overrides: Any) -> TestClient:
        client = TestClient(base_url=LOCAL, app=create_app(make_settings(**overrides)))
        client.__enter__()
        opened.append(client)
        return client

    yield start
    for client in opened:
        client.__exit__(None, None, None)


def _turn(client: TestClient, llm: FakeLLM, route: str, *, tools: bool = False,
          **extra: Any) -> dict[str, Any]:
    """One turn on `route`; what the backend received."""
    llm.queue(Reply(content="fine"))
    path, body = _request(route, "how is the weather", tools, **extra)
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    return llm.chat_requests[-1]


# ---- the client's own tools ----------------------------------------------------------------


@pytest.mark.parametrize("route", ["chat", "responses", "messages"])
def test_a_client_that_brings_tools_gets_none_of_nixx(
    serve: Any, llm: FakeLLM, route: str
) -> None:
    sent = _turn(serve(), llm, route, tools=True)
    assert _offered(sent) == ["get_weather"]
    assert _system(sent).startswith(SYSTEM_PROMPT) and TOOLS_PROMPT not in _system(sent)


@pytest.mark.parametrize("route", ["chat", "responses", "messages"])
def test_on_offers_them_beside_the_clients_own(serve: Any, llm: FakeLLM, route: str) -> None:
    sent = _turn(serve(chat_tools="on"), llm, route, tools=True)
    offered = _offered(sent)
    assert offered[0] == "get_weather" and set(offered[1:]) == NIXX_TOOLS
    assert _system(sent).startswith(offered_prompt())


@pytest.mark.parametrize("route", ["chat", "responses", "messages"])
def test_a_client_without_tools_gets_nixx_tools_by_default(
    serve: Any, llm: FakeLLM, route: str
) -> None:
    sent = _turn(serve(), llm, route)
    assert set(_offered(sent)) == NIXX_TOOLS
    assert _system(sent).startswith(offered_prompt())


def test_off_offers_none_and_names_none(serve: Any, llm: FakeLLM) -> None:
    client = serve(chat_tools="off")
    for tools in (False, True):
        sent = _turn(client, llm, "chat", tools=tools)
        assert _offered(sent) == (["get_weather"] if tools else [])
        assert _system(sent) == SYSTEM_PROMPT
    assert client.get("/v1/debug/context").json()["tools_prompt"] == ""


def test_tool_choice_none_names_no_tools_even_when_on(serve: Any, llm: FakeLLM) -> None:
    sent = _turn(serve(chat_tools="on"), llm, "chat", tool_choice="none")
    assert "tools" not in sent and "tool_choice" not in sent
    assert _system(sent) == SYSTEM_PROMPT


def test_the_users_own_system_prompt_is_sent_as_written(serve: Any, llm: FakeLLM) -> None:
    """NIXX_SYSTEM_PROMPT replaces the base prompt and the tools sentence: the tools are
    offered, the words are the user's."""
    sent = _turn(serve(system_prompt="You are terse."), llm, "chat")
    assert set(_offered(sent)) == NIXX_TOOLS
    assert _system(sent) == "You are terse."


def test_the_system_message_is_the_same_every_turn(serve: Any, llm: FakeLLM) -> None:
    """The prompt layout's prefix: one conversation's second request begins as its first."""
    client = serve()
    first = _turn(client, llm, "chat")
    llm.queue(Reply(content="still fine"))
    messages = [{"role": "user", "content": "how is the weather"},
                {"role": "assistant", "content": "fine"},
                {"role": "user", "content": "and tomorrow"}]
    r = client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert r.status_code == 200, r.text
    second = llm.chat_requests[-1]
    assert _system(second) == _system(first) == offered_prompt()
    assert second["messages"][1:3] == first["messages"][1:2] + [messages[1]]


# ---- what the backend says of tool calls -------------------------------------------------


def test_llama_cpp_python_gets_no_tools_and_no_tools_sentence(serve: Any, llm: FakeLLM) -> None:
    """Its default chat handler writes the tools into the prompt and never parses a call
    back: every answer came back as a call written out as text (issue 38)."""
    llm.model_fields = dict(LLAMA_CPP_PYTHON)
    for route in ("chat", "responses", "messages"):
        sent = _turn(serve(), llm, route)
        assert "tools" not in sent, route
        assert _system(sent).startswith(SYSTEM_PROMPT) and TOOLS_PROMPT not in _system(sent)


def test_on_offers_them_to_llama_cpp_python_too(serve: Any, llm: FakeLLM) -> None:
    """For a llama-cpp-python started with a function-calling ``--chat_format``."""
    llm.model_fields = dict(LLAMA_CPP_PYTHON)
    sent = _turn(serve(chat_tools="on"), llm, "chat")
    assert set(_offered(sent)) == NIXX_TOOLS
    assert _system(sent) == offered_prompt()


@pytest.mark.parametrize(
    "tell, offered",
    [
        # llama.cpp's `GET /props`: what the model's chat template can do
        ({"props": {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 2,
                    "chat_template_caps": {"supports_tools": True,
                                           "supports_tool_calls": False}}}, False),
        ({"props": {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 2,
                    "chat_template_caps": {"supports_tools": True,
                                           "supports_tool_calls": True}}}, True),
        # an older llama.cpp that names no capabilities: taken to parse them
        ({"props": {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 2}}, True),
        # Ollama's `POST /api/show`: the model's capabilities
        ({"show": {"capabilities": ["completion"],
                   "model_info": {"gemma.context_length": 8192}}}, False),
        ({"show": {"capabilities": ["completion", "tools"],
                   "model_info": {"qwen3.context_length": 8192}}}, True),
        # vLLM says nothing of tool calls
        ({"model_fields": {"max_model_len": 8192}}, True),
    ],
)
def test_what_the_backend_says_decides(
    serve: Any, llm: FakeLLM, tell: dict[str, Any], offered: bool
) -> None:
    for name, value in tell.items():
        setattr(llm, name, value)
    sent = _turn(serve(), llm, "chat")
    assert set(_offered(sent)) == (NIXX_TOOLS if offered else set())
    assert _system(sent) == (offered_prompt() if offered else SYSTEM_PROMPT)
