"""Fixtures for the server tests: a FakeLLM backend (chat and embeddings), settings that
point nixx at it, the app in process (`TestClient`) and under a real uvicorn."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.config import Settings, load_settings
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.fixtures import scripted_backend, scripted_settings
from nixx.testing.live_server import LOCAL, LiveServer
from nixx.testing.pg_fixtures import pg_server, pg_url  # noqa: F401 - used by server_db_url

SettingsFactory = Callable[..., Settings]


@pytest.fixture
def server_db_url(request: pytest.FixtureRequest) -> str:
    """The store every server test uses: the SQLite file in NIXX_HOME, or with
    ``NIXXTEST_SERVER_DB=postgres`` a fresh embedded-PostgreSQL database per test (the whole
    suite then runs on PostgreSQL; test_backends.py runs a scenario on both every time)."""
    if os.environ.get("NIXXTEST_SERVER_DB") == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return ""


@pytest.fixture
def make_settings(llm: FakeLLM, workspace: Path, server_db_url: str) -> SettingsFactory:
    def make(**overrides: Any) -> Settings:
        return scripted_settings(llm, workspace, **{"db_url": server_db_url, **overrides})

    return make


def standalone_settings(base: Path, llm: FakeLLM, **overrides: Any) -> Settings:
    """Settings for a server that outlives one test (module-scoped fixtures): its own home,
    SQLite file and workspace under `base`, backed by `llm`."""
    return load_settings(**{**scripted_backend(llm), "home": base, "workspace": base,
                            "db_url": f"sqlite:///{base / 'nixx.db'}", **overrides})


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings()


class Nixx:
    """The app in process, with helpers to reach its service."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    @property
    def service(self) -> Any:
        return self.client.app.state.service  # type: ignore[attr-defined]

    def idle(self) -> None:
        """Wait for background summaries and intent derivations to finish, and embed the
        rows the vector queue has pending (it waits for a quiet moment before a batch: left
        alone, its write could land in the middle of what a test checks next)."""
        self.client.portal.call(self.service.settle)  # type: ignore[union-attr]

    def chat(self, content: Any, *, history: list[dict[str, Any]] | None = None, **kw: Any) -> Any:
        messages = [*(history or []), {"role": "user", "content": content}]
        headers = kw.pop("headers", None)
        return self.client.post(
            "/v1/chat/completions",
            json={"model": "fake-model", "messages": messages, **kw},
            headers=headers,
        )

    def rows(self) -> list[dict[str, Any]]:
        body = self.client.get("/v1/episodic/transcript", params={"start": 1, "limit": 1000}).json()
        return body["rows"]


@pytest.fixture
def nixx(settings: Settings) -> Iterator[Nixx]:
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        yield Nixx(client)


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings)) as server:
        yield server


@pytest.fixture
def oai(live: LiveServer) -> Any:
    import openai

    return openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0)


def offered_prompt() -> str:
    """The system message of a turn that offers nixx's own tools (the default for a client
    that sent none, to a backend that says nothing of tool calls): the base prompt, then
    the sentence that names the tools."""
    from nixx.memory.prompts import SYSTEM_PROMPT, TOOLS_PROMPT

    return f"{SYSTEM_PROMPT} {TOOLS_PROMPT}"


def sent_memory(request: dict[str, Any]) -> str:
    """The memory nixx added to a request it sent (the `cache` layout: after the text of
    the latest user message, behind `MEMORY_NOTE`); "" when none."""
    from nixx.memory.history import text_of
    from nixx.memory.prompts import MEMORY_NOTE

    for message in reversed(request["messages"]):
        if message.get("role") == "user":
            text = text_of(message.get("content"))
            _, sep, memory = text.partition(f"\n\n{MEMORY_NOTE}\n\n")
            return memory if sep else ""
    return ""


def sent_prompt(request: dict[str, Any]) -> str:
    """What nixx gave the model besides the conversation: the system message, then the
    memory it added to the latest user message (the sections of the seed's one system
    message, in the same order, wherever the layout put them)."""
    system = str(request["messages"][0]["content"])
    memory = sent_memory(request)
    return f"{system}\n\n{memory}" if memory else system
