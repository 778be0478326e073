"""Fixtures for the MCP tests: a project with a workspace log and declared personas, a real
nixx server (uvicorn on loopback, FakeLLM backend), and MCP clients from the official SDK
(stdio to a `nixx mcp` subprocess, streamable HTTP to `/mcp`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from nixx.config import Settings
from nixx.log.workspace import init_workspace
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.fixtures import scripted_settings
from nixx.testing.live_server import LiveServer

API_KEY = "mcp-test-key"
PERSONAS = {
    "coder.yaml": "handle: coder\njob_title: Coder\nsystem_prompt: You write code.\n",
    "lead.yaml": "handle: lead\njob_title: Lead\nsystem_prompt: You lead.\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git-less project folder with a workspace log (replica ab12) and two personas."""
    root = tmp_path / "proj"
    root.mkdir()
    init_workspace(root, replica="ab12")
    folder = root / ".nxs-personas"
    folder.mkdir()
    for name, text in PERSONAS.items():
        (folder / name).write_text(text)
    (root / "notes.md").write_text("# Deploy notes\n\nThe staging database is called heron.\n")
    return root


def server_settings(llm: FakeLLM, workspace: Path, **overrides: Any) -> Settings:
    return scripted_settings(llm, workspace, **overrides)


@pytest.fixture
def live(llm: FakeLLM, project: Path) -> Iterator[LiveServer]:
    """`nixx serve` in a real uvicorn, its workspace the project, behind an API key."""
    with LiveServer(create_app(server_settings(llm, project, api_key=API_KEY))) as server:
        yield server


def source_path() -> dict[str, str]:
    """`PYTHONPATH` as this test run has it, for a subprocess: the tree under test, not
    the one the venv installed."""

    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(paths)} if paths else {}


def mcp_env(nixx_home: Path, **extra: str) -> dict[str, str]:
    return {"NIXX_HOME": str(nixx_home), **source_path(), **extra}


@contextlib.asynccontextmanager
async def stdio_client(*args: str, cwd: Path, env: dict[str, str]) -> AsyncIterator[Any]:
    """An official-SDK client on `python -m nixx.cli.nixx mcp ARGS` started in `cwd`."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "nixx.cli.nixx", "mcp", *args], cwd=str(cwd), env=env
    )
    async with Client(params) as client:
        yield client


@contextlib.asynccontextmanager
async def http_client(url: str, key: str | None,
                      statuses: list[int] | None = None) -> AsyncIterator[Any]:
    """An official-SDK client on streamable HTTP; `statuses` collects every HTTP status."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def record(response: Any) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60,
                                  event_hooks={"response": [record]}) as http, Client(
        streamable_http_client(url, http_client=http)  # a Transport: yields the two streams
    ) as client:
        yield client


async def call(client: Any, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; its text and structured content must agree."""
    result = await client.call_tool(name, args or {})
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, f"{name} failed: {text}"
    assert json.loads(text) == result.structured_content
    return result.structured_content


async def refused(client: Any, name: str, args: dict[str, Any]) -> str:
    """Call a tool that must be refused with a tool error; its message."""
    result = await client.call_tool(name, args)
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error, f"{name}({args}) was not refused: {text}"
    return text
