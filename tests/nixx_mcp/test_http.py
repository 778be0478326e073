"""`/mcp` on a real `nixx serve` (uvicorn on loopback, FakeLLM backend), driven by the
official MCP client SDK over streamable HTTP: behind the API key like every route."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from nixx.mcp.tools import CHAT_TOOLS, MEMORY_TOOLS
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LiveServer

from .conftest import API_KEY, call, http_client, refused, server_settings

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_mcp_endpoint_refuses_requests_without_the_key(live: LiveServer) -> None:
    url = live.base_url + "/mcp"
    missing = httpx.post(url, json=INIT, headers=HEADERS)
    assert missing.status_code == 401
    # a JSON-RPC error an MCP client shows, answering the request's id, and no OAuth
    # challenge (with WWW-Authenticate, clients start OAuth instead of showing it)
    assert "www-authenticate" not in missing.headers
    assert missing.headers["content-type"] == "application/json"
    answer = missing.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 1
    assert answer["error"]["code"] == -32001
    assert "missing API key" in answer["error"]["message"]
    assert "Authorization: Bearer <NIXX_API_KEY>" in answer["error"]["message"]
    assert answer["error"]["data"] == {"type": "invalid_api_key",
                                       "header": "Authorization: Bearer <key>",
                                       "setting": "NIXX_API_KEY"}
    wrong = httpx.post(url, json=INIT, headers={**HEADERS, "Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "wrong API key" in wrong.json()["error"]["message"]
    assert wrong.json()["error"]["data"]["type"] == "invalid_api_key"
    garbled = httpx.post(url, content=b"{not json", headers=HEADERS)
    assert garbled.status_code == 401 and garbled.json()["id"] is None
    # other routes keep the API's envelope and the Bearer challenge
    other = httpx.get(live.base_url + "/v1/intent")
    assert other.status_code == 401 and other.headers["www-authenticate"] == "Bearer"
    assert other.json()["error"]["code"] == "invalid_api_key"
    right = httpx.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {API_KEY}"},
                       timeout=60)  # the first /mcp request builds the MCP server
    assert right.status_code == 200, right.text

    statuses: list[int] = []

    async def sdk_without_key() -> None:
        async with http_client(url, None, statuses) as client:
            await client.list_tools()

    with pytest.raises(BaseException) as caught:  # the SDK gives up, saying why
        asyncio.run(sdk_without_key())
    assert "missing API key" in repr(caught.value) and "NIXX_API_KEY" in repr(caught.value)
    assert statuses and set(statuses) == {401}


def test_mcp_endpoint_serves_memory_and_chat_tools_in_process(
    live: LiveServer, project: Path, llm: FakeLLM
) -> None:
    async def scenario() -> None:
        async with http_client(live.base_url + "/mcp", API_KEY) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(MEMORY_TOOLS) | set(CHAT_TOOLS)  # the workspace has a log

            kept = await call(client, "memory_remember", {"text": "Heron is the staging database."})
            assert kept["status"] == "created"
            hits = await call(client, "sources_search", {"query": "staging database heron"})
            assert "Heron is the staging database." in json.dumps(hits)
            assert (await call(client, "ingest", {"path": "notes.md"}))["status"] == "created"
            await call(client, "intent_set", {"intent": "Testing /mcp."})
            assert (await call(client, "intent_get"))["intent"] == "Testing /mcp."
            found = await call(client, "memory_search", {"query": "heron"})
            assert found["query"] == "heron"
            assert (await call(client, "transcript_view", {"start": 1}))["rows"] == []

            primed = await call(client, "nxc_prime")
            assert primed["actor"].startswith("ab12/") and primed["workspace"] == str(project)
            receipt = await call(client, "nxc_send", {"to": "coder", "body": "Over HTTP."})
            shown = await call(client, "nxc_threads_show", {"thread": receipt["thread_id"]})
            assert [m["body"] for m in shown["messages"]] == ["Over HTTP."]

            assert "query" in await refused(client, "sources_search", {"query": ""})
            assert "not_found" in await refused(client, "nxc_threads_show", {"thread": "t-x"})

    asyncio.run(scenario())
    # the same store the HTTP API reads: the note is a source of this server
    auth = {"Authorization": f"Bearer {API_KEY}"}
    names = [s["name"] for s in httpx.get(live.base_url + "/v1/sources", headers=auth).json()["sources"]]
    assert "note: Heron is the staging database." in names


def test_mcp_endpoint_without_a_workspace_log_has_memory_tools_only(
    llm: FakeLLM, workspace: Path
) -> None:
    async def scenario(url: str) -> None:
        async with http_client(url, None) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(MEMORY_TOOLS)
            assert (await call(client, "intent_get"))["intent"] is None

    with LiveServer(create_app(server_settings(llm, workspace))) as server:
        asyncio.run(scenario(server.base_url + "/mcp"))
