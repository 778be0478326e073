"""`nixx mcp` as a real subprocess, driven by the official MCP client SDK over stdio.

Memory tools go to a real nixx server (uvicorn on loopback, FakeLLM backend, an API key);
agent-chat tools work on the project's workspace log as two agents (`--actor`)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import httpx
import pytest

from nixx.local_server import server_answers
from nixx.mcp.tools import CHAT_TOOLS, MEMORY_TOOLS
from nixx.memory.intent import MAX_CHARS as INTENT_MAX_CHARS
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LiveServer

from .conftest import API_KEY, call, mcp_env, refused, stdio_client

pytestmark = pytest.mark.slow  # each test starts `nixx mcp` processes (the SDK import: ~1.5 s CPU)


def test_stdio_lists_tools_with_schemas_and_runs_every_memory_tool(
    live: LiveServer, project: Path, nixx_home: Path, tmp_path: Path
) -> None:
    auth = {"Authorization": f"Bearer {API_KEY}"}
    turn = httpx.post(f"{live.base_url}/v1/chat/completions", headers=auth, timeout=30, json={
        "model": "fake-model",
        "messages": [{"role": "user", "content": "The staging database is called heron."}],
    })
    assert turn.status_code == 200, turn.text
    (tmp_path / "outside.md").write_text("not in the workspace")
    env = mcp_env(nixx_home, NIXX_API_KEY=API_KEY)

    async def scenario() -> None:
        async with stdio_client("--url", live.base_url, "--actor", "lead", cwd=project,
                                env=env) as client:
            listed = (await client.list_tools()).tools
            assert {t.name for t in listed} == set(MEMORY_TOOLS) | set(CHAT_TOOLS)
            by_name = {t.name: t for t in listed}
            search_schema = by_name["memory_search"].input_schema
            assert search_schema["required"] == ["query"]
            assert search_schema["properties"]["limit"]["maximum"] == 100
            assert all(t.description for t in listed)
            assert by_name["memory_search"].description.startswith("Search past conversations")
            assert by_name["memory_search"].annotations.read_only_hint is True
            assert by_name["memory_remember"].annotations.read_only_hint is False
            # the schema says what the server takes: a longer intent is refused there
            intent_schema = by_name["intent_set"].input_schema["properties"]["intent"]
            assert intent_schema["maxLength"] == INTENT_MAX_CHARS

            found = await call(client, "memory_search", {"query": "what is the staging database"})
            assert found["query"] == "what is the staging database"
            assert "heron" in json.dumps(found)

            kept = await call(client, "memory_remember", {
                "text": "Deploys go through the blue-green switch on Fridays.", "tags": ["deploy"],
            })
            assert kept["status"] == "created"
            note = kept["sources"][0]
            assert note["name"] == "note: Deploys go through the blue-green switch on Fridays."

            hits = await call(client, "sources_search", {"query": "blue-green switch Fridays"})
            assert "blue-green switch" in json.dumps(hits["results"][0])

            ingested = await call(client, "ingest", {"path": "notes.md", "tags": ["ops"]})
            assert ingested["status"] == "created" and ingested["files"] == 1

            assert (await call(client, "intent_set", {"intent": "Shipping the MCP server."}))[
                "intent"] == "Shipping the MCP server."
            got = await call(client, "intent_get")
            assert got["intent"] == "Shipping the MCP server." and got["source"] == "manual"

            rows = (await call(client, "transcript_view", {"start": 1, "limit": 10}))["rows"]
            assert [r["role"] for r in rows[:2]] == ["user", "assistant"]
            assert rows[0]["content"] == "The staging database is called heron."

            # bad calls are tool errors with a message, and the server keeps serving
            assert "query" in await refused(client, "memory_search", {"query": ""})
            assert "exactly one" in await refused(client, "ingest", {})
            assert "exactly one" in await refused(client, "ingest", {"path": "a", "url": "b"})
            outside = await refused(client, "ingest", {"path": str(tmp_path / "outside.md")})
            assert "workspace" in outside
            assert "empty" in await refused(client, "memory_remember", {"text": "   "})
            assert "start" in await refused(client, "transcript_view", {"start": 0})
            assert "intent" in await refused(client, "intent_set", {})
            assert "nope" in await refused(client, "nope", {})
            assert (await call(client, "intent_get"))["intent"] == "Shipping the MCP server."

    asyncio.run(scenario())
    # everything went to the one server (one writer): the note and the file are its sources
    names = {s["name"] for s in httpx.get(f"{live.base_url}/v1/sources", headers=auth).json()["sources"]}
    assert {"note: Deploys go through the blue-green switch on Fridays.", "notes.md"} <= names


def test_stdio_chat_tools_two_agents_send_reply_wait(project: Path, nixx_home: Path) -> None:
    # no nixx server anywhere: agent chat needs none, and none is started for it
    env = mcp_env(nixx_home, NIXX_PORT=str(_free_port()))

    async def scenario() -> None:
        async with stdio_client("--actor", "lead", cwd=project, env=env) as lead, \
                stdio_client("--actor", "coder", cwd=project / ".nxs-personas", env=env) as coder:
            primed = await call(lead, "nxc_prime")
            assert primed["actor"] == "ab12/lead" and primed["owes"] == []
            assert primed["workspace"] == str(project)
            listed = await call(lead, "nxc_list")
            assert {p["handle"] for p in listed["personas"]} == {"ab12/coder", "ab12/lead"}

            receipt = await call(lead, "nxc_send", {"to": "coder", "body": "Fix the flaky test.",
                                                    "deadline": "1h"})
            tid = receipt["thread_id"]
            assert receipt["expects"] == ["ab12/coder"] and receipt["spawned"] is False

            owed = await call(coder, "nxc_prime")
            assert [t["thread_id"] for t in owed["owes"]] == [tid] and owed["count"] == 1
            waiting = asyncio.create_task(call(lead, "nxc_wait", {"thread": tid, "timeout": 60}))
            replied = await call(coder, "nxc_reply", {"body": "Fixed: a race in the fixture."})
            assert replied["thread_id"] == tid and replied["complete"] is True
            outcome = await waiting
            assert outcome["outcome"] == "complete" and outcome["outstanding"] == []

            shown = await call(lead, "nxc_threads_show", {"thread": tid})
            assert [m["body"] for m in shown["messages"]] == [
                "Fix the flaky test.", "Fixed: a race in the fixture."]
            listed_threads = await call(lead, "nxc_threads_list", {})
            assert tid in [t["thread_id"] for t in listed_threads["threads"]]
            assert (await call(lead, "nxc_threads_list", {"open_only": True}))["threads"] == []
            status = await call(lead, "nxc_status", {"include_finished": True})
            assert status["actor"] == "ab12/lead"
            assert [op["root"] for op in status["operations"]] == [tid]
            hits = await call(coder, "nxc_search", {"query": "flaky"})
            assert [h["body"] for h in hits["results"]] == ["Fix the flaky test."]
            assert (await call(coder, "nxc_prime"))["owes"] == []

            assert "not_found" in await refused(lead, "nxc_threads_show", {"thread": "t-nope"})
            assert "nobody" in await refused(lead, "nxc_send", {"to": "nobody", "body": "hi"})
            # the library's bounds hold over MCP too (no check of its own here)
            assert "KiB" in await refused(lead, "nxc_send", {"to": "coder",
                                                             "body": "x" * 3_000_000})
            for deadline in ("99999999w", "1970-01-01T00:00:00Z"):
                assert "validation" in await refused(lead, "nxc_send", {
                    "to": "coder", "body": "hi", "deadline": deadline})
            assert "not both" in await refused(lead, "nxc_status", {"thread": tid,
                                                                    "channel": "x"})
            assert "timeout" in await refused(lead, "nxc_wait", {"thread": tid, "timeout": 0})
            assert "open conversations" in await refused(coder, "nxc_reply", {"body": "again"})

    asyncio.run(scenario())
    assert not (nixx_home / "logs" / "mcp-server.log").exists()


def test_stdio_work_tools_two_agents_never_hold_one_task_or_one_file(
    project: Path, nixx_home: Path
) -> None:
    """Over MCP as over `nxc task`/`nxc lease`: the lead adds two tasks, the second after
    the first; the coder claims the first, the lead's claim of it is refused naming the
    holder, the second waits until the first is done; a leased path refuses another
    handle's lease until it is released."""
    env = mcp_env(nixx_home, NIXX_PORT=str(_free_port()))

    async def scenario() -> None:
        async with stdio_client("--actor", "lead", cwd=project, env=env) as lead, \
                stdio_client("--actor", "coder", cwd=project, env=env) as coder:
            first = await call(lead, "nxc_task_add", {"title": "fix the fixture"})
            second = await call(lead, "nxc_task_add", {"title": "release", "after": [first["id"]]})
            claimed = await call(coder, "nxc_task_claim", {"task": first["id"]})
            assert (claimed["state"], claimed["holder"]) == ("claimed", "ab12/coder")
            assert "ab12/coder holds it" in await refused(lead, "nxc_task_claim",
                                                          {"task": first["id"]})
            assert "waits on" in await refused(coder, "nxc_task_claim", {"task": second["id"]})
            assert "only the task's holder" in await refused(lead, "nxc_task_done",
                                                             {"task": first["id"]})
            await call(coder, "nxc_task_done", {"task": first["id"]})
            assert (await call(lead, "nxc_task_claim", {"task": second["id"]}))["holder"] == \
                "ab12/lead"
            tasks = {t["id"]: t for t in (await call(coder, "nxc_tasks"))["tasks"]}
            assert [tasks[first["id"]]["state"], tasks[second["id"]]["state"]] == ["done", "claimed"]
            lease = await call(coder, "nxc_lease", {"paths": ["tests/"], "minutes": 20})
            assert "leased to ab12/coder" in await refused(lead, "nxc_lease",
                                                           {"paths": ["tests/test_x.py"]})
            assert [x["id"] for x in (await call(lead, "nxc_leases"))["leases"]] == [lease["id"]]
            await call(coder, "nxc_release", {"lease": lease["id"]})
            assert (await call(lead, "nxc_lease", {"paths": ["tests/test_x.py"]}))["holder"] == \
                "ab12/lead"

    asyncio.run(scenario())


def test_stdio_chat_tools_outside_a_workspace_say_what_to_do(tmp_path: Path, nixx_home: Path) -> None:
    async def scenario() -> None:
        async with stdio_client(cwd=tmp_path, env=mcp_env(nixx_home)) as client:
            message = await refused(client, "nxc_prime", {})
            assert "no_workspace" in message and "nxs init" in message

    asyncio.run(scenario())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_stdio_starts_the_nixx_server_on_the_first_memory_call_and_stops_it(
    llm: FakeLLM, project: Path, nixx_home: Path
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = mcp_env(
        nixx_home, NIXX_PORT=str(port), NIXX_CHAT_BASE_URL=llm.base_url,
        NIXX_EMBED_PROVIDER="openai", NIXX_EMBED_BASE_URL=llm.base_url,
        NIXX_EMBED_MODEL="fake-embed", NIXX_WORKSPACE=str(project),
    )

    async def scenario() -> None:
        async with stdio_client(cwd=project, env=env) as client:
            assert len((await client.list_tools()).tools) == len(MEMORY_TOOLS + CHAT_TOOLS)
            assert not server_answers(url), "the server must not start before a memory tool"
            await call(client, "intent_set", {"intent": "Testing autostart."})
            assert server_answers(url)
            got = await call(client, "intent_get")
            assert got["intent"] == "Testing autostart."
            # a server nixx mcp started: every result names the store it read
            db = str(nixx_home / "nixx.db")
            assert got["store"]["database"] == db and got["store"]["home"] == str(nixx_home)
            assert "started by nixx mcp" in got["store"]["server"]
            empty = await call(client, "memory_search", {"query": "what did we decide"})
            assert empty["results"] == [] and empty["note"].startswith(f"no results in {db} ")
            assert "NIXX_MCP_URL" in empty["note"]

    asyncio.run(scenario())
    assert not server_answers(url), "the server started for nixx mcp stops with it"
    assert "nixx mcp started" in (nixx_home / "logs" / "mcp-server.log").read_text()


def test_stdio_stops_the_server_it_started_when_the_host_sends_sigterm(
    llm: FakeLLM, project: Path, nixx_home: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"PATH": os.environ["PATH"], **mcp_env(
        nixx_home, NIXX_PORT=str(port), NIXX_CHAT_BASE_URL=llm.base_url,
        NIXX_EMBED_PROVIDER="openai", NIXX_EMBED_BASE_URL=llm.base_url,
        NIXX_EMBED_MODEL="fake-embed")}
    proc = subprocess.Popen([sys.executable, "-m", "nixx.cli.nixx", "mcp"], cwd=project, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "host", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "intent_get", "arguments": {}}},
    ]
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
    proc.stdin.flush()
    while (answer := json.loads(proc.stdout.readline())).get("id") != 2:
        pass
    assert answer["result"]["structuredContent"]["intent"] is None
    assert server_answers(url)
    proc.send_signal(signal.SIGTERM)  # the stdin stays open: only the signal ends it
    assert proc.wait(60) == 128 + signal.SIGTERM
    assert not server_answers(url), "the server started for nixx mcp outlived it"


def test_stdio_a_person_approves_a_held_start_and_an_agent_may_not(
    project: Path, nixx_home: Path
) -> None:
    """Over MCP as over `nxc approvals|approve`: a persona declaring `approve: [start]` is
    held when the lead sends to it; the lead (a declared persona) may not approve; the
    person this server runs for (dana) sees what is asked and approves; the held start is
    taken at once (the step waits on this clone)."""
    import sys

    started = project / "deployer-started"
    import yaml

    (project / ".nxs-personas" / "deployer.yaml").write_text(yaml.safe_dump({
        "handle": "deployer", "system_prompt": "You deploy.", "approve": ["start"],
        "runtime": {"start": [sys.executable, "-c", f"open({str(started)!r}, 'w').close()",
                              "{prompt}"]}}))
    env = mcp_env(nixx_home, NIXX_PORT=str(_free_port()))

    async def scenario() -> None:
        async with stdio_client("--actor", "lead", cwd=project, env=env) as lead, \
                stdio_client("--actor", "dana", cwd=project, env=env) as dana:
            receipt = await call(lead, "nxc_send", {"to": "deployer", "body": "ship it"})
            assert receipt["spawned"] is False and receipt["approval"]
            (asked,) = (await call(dana, "nxc_approvals"))["approvals"]
            assert asked["id"] == receipt["approval"] and asked["step"] == "start"
            assert "forbidden" in await refused(lead, "nxc_approve",
                                                {"approval": asked["id"]})
            decided = await call(dana, "nxc_approve", {"approval": asked["id"],
                                                      "note": "looks fine"})
            assert (decided["state"], decided["decided_by"]) == ("approved", "ab12/dana")
            assert [t["action"] for t in decided["taken"]] == ["start"]
            assert "approved already" in await refused(dana, "nxc_deny",
                                                       {"approval": asked["id"]})
            assert (await call(dana, "nxc_approvals"))["approvals"] == []

    asyncio.run(scenario())
    for _ in range(600):  # the runtime runs detached, under its supervisor
        if started.exists():
            break
        import time

        time.sleep(0.1)
    assert started.exists()
