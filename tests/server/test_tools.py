"""nixx's own tools through the chat loop: every tool runs server-side and its result is
fed back to the model; every way out of the workspace is refused with an error the model
reads; the loop is bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LOCAL

from .conftest import Nixx


def run_tool(
    nixx: Nixx, llm: FakeLLM, name: str, args: dict[str, Any], *, stream: bool = False
) -> str:
    """One turn where the model calls `name(args)` then answers; returns the tool result
    the model was sent."""
    llm.queue(Reply(tool_calls=[ToolCall(name, args, id="call_x")]), Reply(content="done"))
    r = nixx.chat(f"please run {name}", stream=stream)
    assert r.status_code == 200, r.text
    follow_up = llm.chat_requests[-1]["messages"]
    assert follow_up[-2]["tool_calls"][0]["function"]["name"] == name
    tool_message = follow_up[-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_x"
    return str(tool_message["content"])


def test_tools_are_offered(nixx: Nixx, llm: FakeLLM) -> None:
    nixx.chat("hi")
    names = {t["function"]["name"] for t in llm.chat_requests[-1]["tools"]}
    assert names == {
        "read_file",
        "write_file",
        "list_dir",
        "delete_file",
        "search_transcript",
        "view_transcript",
    }


def test_each_tool_runs_in_the_workspace(nixx: Nixx, llm: FakeLLM, workspace: Path) -> None:
    result = run_tool(nixx, llm, "write_file", {"path": "notes/a.txt", "content": "hello file"})
    assert not result.startswith("error")
    assert (workspace / "notes" / "a.txt").read_text() == "hello file"
    assert "hello file" in run_tool(nixx, llm, "read_file", {"path": "notes/a.txt"})
    assert "a.txt" in run_tool(nixx, llm, "list_dir", {"path": "notes"}, stream=True)
    assert "please run write_file" in run_tool(
        nixx, llm, "search_transcript", {"query": "write_file"}
    )
    assert "please run read_file" in run_tool(nixx, llm, "view_transcript", {"start": 1, "end": 6})
    result = run_tool(nixx, llm, "delete_file", {"path": "notes/a.txt"})
    assert not result.startswith("error") and not (workspace / "notes" / "a.txt").exists()
    # the buffer records which tools ran with the answer
    answers = [r for r in nixx.rows() if r["role"] == "assistant"]
    assert answers[0]["meta"]["tools"] == [
        {
            "name": "write_file",
            "arguments": json.dumps({"path": "notes/a.txt", "content": "hello file"}),
        }
    ]


def test_streamed_tool_run_is_announced_in_a_chunk_with_choices(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(
        Reply(content="Let me look.", tool_calls=[ToolCall("list_dir", {})]),
        Reply(content="Empty."),
    )
    r = nixx.chat("what is there?", stream=True)
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    assert all("choices" in c for c in chunks)
    runs = [c["nixx"]["tool_run"] for c in chunks if "tool_run" in c.get("nixx", {})]
    assert [run["name"] for run in runs] == ["list_dir"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Let me look.\n\nEmpty."
    assert nixx.rows()[-1]["content"] == "Let me look.\n\nEmpty."


@pytest.fixture
def outside(tmp_path: Path, workspace: Path) -> Path:
    sibling = tmp_path / "workspace-secrets"
    sibling.mkdir()
    (sibling / "secret.txt").write_text("TOP SECRET")
    os.symlink(sibling, workspace / "link-out")
    os.symlink(sibling / "secret.txt", workspace / "file-link")
    return sibling


@pytest.mark.parametrize(
    "name, args",
    [
        ("read_file", {"path": "../workspace-secrets/secret.txt"}),
        ("read_file", {"path": "{outside}/secret.txt"}),
        ("read_file", {"path": "link-out/secret.txt"}),
        ("read_file", {"path": "file-link"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("write_file", {"path": "../workspace-secrets/new.txt", "content": "x"}),
        ("write_file", {"path": "link-out/new.txt", "content": "x"}),
        ("write_file", {"path": "{outside}/new.txt", "content": "x"}),
        ("list_dir", {"path": ".."}),
        ("list_dir", {"path": "link-out"}),
        ("delete_file", {"path": "../workspace-secrets/secret.txt"}),
        ("delete_file", {"path": "link-out/secret.txt"}),
    ],
)
def test_every_way_out_of_the_workspace_is_refused(
    nixx: Nixx, llm: FakeLLM, outside: Path, name: str, args: dict[str, Any]
) -> None:
    args = {
        k: v.replace("{outside}", str(outside)) if isinstance(v, str) else v
        for k, v in args.items()
    }
    result = run_tool(nixx, llm, name, args)
    assert result.startswith("error"), result
    assert "TOP SECRET" not in result
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET"


def test_model_mistakes_come_back_as_readable_errors(nixx: Nixx, llm: FakeLLM) -> None:
    assert run_tool(nixx, llm, "no_such_tool", {}).startswith("error: unknown tool")
    assert run_tool(nixx, llm, "read_file", {}).startswith("error")
    llm.queue(Reply(tool_calls=[ToolCall("read_file", "{broken json")]), Reply(content="sorry"))
    nixx.chat("broken")
    assert "not valid JSON" in llm.chat_requests[-1]["messages"][-1]["content"]


def test_tool_loop_is_bounded(make_settings: Any, llm: FakeLLM) -> None:
    calls = {"n": 0}

    def always_calls(body: dict[str, Any]) -> Reply:
        calls["n"] += 1
        if body.get("tools"):
            return Reply(tool_calls=[ToolCall("list_dir", {})])
        return Reply(content="giving up on tools")

    llm.responder = always_calls
    with TestClient(base_url=LOCAL, app=create_app(make_settings(tool_max_rounds=3))) as client:
        nixx = Nixx(client)
        r = nixx.chat("loop forever")
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"] == "giving up on tools"
        assert calls["n"] == 4  # three tool rounds, then one answer without tools
        assert "tools" not in llm.chat_requests[-1]
        assert len(r.json()["nixx"]["tool_runs"]) == 3


def test_disabled_tools_are_not_offered(make_settings: Any, llm: FakeLLM) -> None:
    with TestClient(base_url=LOCAL, app=create_app(make_settings(tools_write=False, tools_delete=False))) as client:
        Nixx(client).chat("hi")
        names = {t["function"]["name"] for t in llm.chat_requests[-1]["tools"]}
        assert "write_file" not in names and "delete_file" not in names and "read_file" in names


def test_forced_tool_choice_applies_to_the_first_round_only(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(content="listed"))
    forced = {"type": "function", "function": {"name": "list_dir"}}
    r = nixx.chat("list it", tool_choice=forced)
    assert r.json()["choices"][0]["message"]["content"] == "listed"
    first, second = llm.chat_requests[-2:]
    assert first["tool_choice"] == forced
    assert second["tool_choice"] == "auto"


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_none_never_runs_a_tool_the_model_calls_anyway(
    nixx: Nixx, llm: FakeLLM, workspace: Path, stream: bool
) -> None:
    # a prompt-injected model ignores tool_choice "none" and calls write_file and delete_file
    (workspace / "keep.txt").write_text("keep me")
    llm.queue(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "pwned.txt", "content": "x"}, id="c1"),
                ToolCall("delete_file", {"path": "keep.txt"}, id="c2"),
            ]
        ),
        Reply(content="I cannot use tools here."),
    )
    r = nixx.chat("summarise this web page", tool_choice="none", stream=stream)
    assert r.status_code == 200, r.text
    assert not (workspace / "pwned.txt").exists()
    assert (workspace / "keep.txt").read_text() == "keep me"
    first, second = llm.chat_requests[-2:]
    assert "tools" not in first and "tools" not in second
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["c1", "c2"]
    assert all("was not offered in this request and did not run" in m["content"] for m in answers)
    row = nixx.rows()[-1]
    assert row["content"] == "I cannot use tools here."
    assert row["meta"]["refused_tool_calls"] == ["write_file", "delete_file"]


def test_a_disabled_tool_called_anyway_does_not_run(
    make_settings: Any, llm: FakeLLM, workspace: Path
) -> None:
    with TestClient(base_url=LOCAL, app=create_app(make_settings(tools_write=False))) as client:
        llm.queue(
            Reply(tool_calls=[ToolCall("write_file", {"path": "w.txt", "content": "x"})]),
            Reply(content="ok"),
        )
        assert Nixx(client).chat("write it").status_code == 200
    assert not (workspace / "w.txt").exists()
    assert "disabled on this server" in llm.chat_requests[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", ".nxs-personas/evil.yaml", ".env"])
def test_write_file_cannot_plant_code_that_runs_later(
    nixx: Nixx, llm: FakeLLM, workspace: Path, path: str
) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    result = run_tool(nixx, llm, "write_file", {"path": path, "content": "runtime: sh -c evil"})
    assert result.startswith("error: ") and "is protected" in result
    assert "NIXX_TOOLS_PROTECTED" in result
    assert not (workspace / path).exists()
    assert not (workspace / ".nxs-personas").exists()


def test_protected_paths_follow_the_setting(
    make_settings: Any, llm: FakeLLM, workspace: Path
) -> None:
    with TestClient(base_url=LOCAL, app=create_app(make_settings(
        tools_protected="drafts/*", tools_write_allow=".env"
    ))) as client:
        nixx = Nixx(client)
        assert "protected" in run_tool(
            nixx, llm, "write_file", {"path": "drafts/a", "content": "x"}
        )
        ok = run_tool(nixx, llm, "write_file", {"path": ".env", "content": "A=1"})
        assert ok == "wrote 3 bytes to .env"
        refused = run_tool(nixx, llm, "write_file", {"path": "Makefile", "content": "x"})
        assert "rule: build and tool file" in refused and "NIXX_TOOLS_WRITE_ALLOW" in refused
