"""The real agent CLIs, installed from npm (pinned, cached by `nixx.testing.clients`), each
completing one task against `nixx serve` with the scripted backend, offline, their turns
then found by `/v1/episodic/search`:

- Codex (`codex exec`), with a model provider whose base URL is nixx (``wire_api =
  "responses"``: it talks only the Responses API), running one shell command through its
  own tool (a function-call round trip through `/v1/responses`);
- Claude Code (`claude -p`) with ``ANTHROPIC_BASE_URL`` set to nixx (the Messages API);
- Simon Willison's `llm` CLI (from PyPI, in a venv of its own) with nixx as an extra
  OpenAI model (chat completions).

Each runs with PATH=/usr/bin:/bin and a fresh HOME (its config only there)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from nixx.config import Settings
from nixx.testing.clients import ClientUnavailable, npm_tool, pip_tool
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LiveServer

from .conftest import SettingsFactory

pytestmark = pytest.mark.slow

CODEX = ("@openai/codex", "0.171.0", "codex")
CLAUDE = ("@anthropic-ai/claude-code", "2.1.332", "claude")
LLM_CLI = ("llm", "0.36", "llm")
BARE_PATH = "/usr/bin:/bin"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    """A backend window as large as these agents expect (Claude Code asks for up to
    32,000 output tokens and sends a long system prompt): the history is not trimmed."""
    return make_settings(chat_context_length=200_000)


def tool(spec: tuple[str, str, str], install: Any = npm_tool) -> Path:
    try:
        return install(*spec)  # type: ignore[no-any-return]
    except ClientUnavailable as exc:
        pytest.skip(f"{spec[0]} is not installable here: {exc}")


def search(live: LiveServer, query: str) -> list[dict[str, Any]]:
    answer = httpx.post(live.base_url + "/v1/episodic/search", json={"query": query},
                        timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["results"]  # type: ignore[no-any-return]


def test_codex_exec_runs_a_task_through_the_responses_api(
    llm: FakeLLM, live: LiveServer, tmp_path: Path
) -> None:
    codex = tool(CODEX)
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    work.mkdir()
    (work / "notes.txt").write_text("the launch code is pelican\n")
    (home / ".codex" / "config.toml").write_text(
        'model = "fake-model"\nmodel_provider = "nixx"\n\n[model_providers.nixx]\n'
        f'name = "nixx"\nbase_url = "{live.base_url}/v1"\nwire_api = "responses"\n')
    llm.queue(
        Reply(content="Reading the note.",
              tool_calls=[ToolCall("exec_command", {"cmd": "cat notes.txt"}, id="call_cat")]),
        Reply(content="The note names the launch code pelican."),
    )
    done = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", "what does notes.txt say?"],
        cwd=work, env={"PATH": BARE_PATH, "HOME": str(home), "CODEX_HOME": str(home / ".codex")},
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "The note names the launch code pelican." in done.stdout

    first, second = llm.chat_requests[-2:]
    offered = [t["function"]["name"] for t in first["tools"]]
    assert "exec_command" in offered
    # Codex brings its tools (and its sandbox): none of nixx's beside them (issue 39)
    assert not {"read_file", "write_file", "list_dir", "delete_file"} & set(offered)
    assert first["messages"][-1] == {"role": "user", "content": "what does notes.txt say?"}
    result = second["messages"][-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_cat")
    assert "the launch code is pelican" in result["content"]  # the command really ran
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "exec_command"

    hits = search(live, "launch code pelican")
    assert {(h["role"], h["origin"]) for h in hits if h["kind"] == "buffer"} >= {
        ("assistant", "responses")}
    asked = search(live, "what does notes.txt say")
    assert any(h.get("role") == "user" and h["content"] == "what does notes.txt say?"
               for h in asked)


def test_claude_print_mode_runs_a_task_through_the_messages_api(
    llm: FakeLLM, live: LiveServer, tmp_path: Path
) -> None:
    claude = tool(CLAUDE)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("the staging database is called heron\n")

    def answer(body: dict[str, Any]) -> Reply:
        """Claude Code's main turn: read the file with its Read tool, then answer from
        the tool's result; any side request (a title, a check) gets a plain answer."""
        last = body["messages"][-1]
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if last["role"] == "tool":
            said = "heron" if "heron" in last["content"] else "nothing"
            return Reply(content=f"The file says the staging database is {said}.")
        if "Read" in offered and "notes.txt" in json.dumps(last):
            return Reply(tool_calls=[ToolCall("Read", {"file_path": str(notes)},
                                              id="toolu_read")])
        return Reply(content="ok")

    llm.responder = answer
    env = {"PATH": BARE_PATH, "HOME": str(home), "ANTHROPIC_BASE_URL": live.base_url,
           "ANTHROPIC_API_KEY": "unused", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"}
    done = subprocess.run(
        [str(claude), "-p", "what does notes.txt say?", "--model", "fake-model",
         "--allowedTools", "Read"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "The file says the staging database is heron." in done.stdout
    results = [r["messages"][-1] for r in llm.chat_requests
               if r["messages"][-1]["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["toolu_read"]
    round_trip = next(r["messages"] for r in llm.chat_requests if r["messages"][-1] in results)
    assert round_trip[-2]["role"] == "assistant"  # the call, then its result
    assert round_trip[-2]["tool_calls"][0]["function"]["name"] == "Read"
    assert "what does notes.txt say?" in json.dumps(round_trip[-3])
    assert "the staging database is called heron" in results[0]["content"]  # Read ran
    # a request that brought Claude Code's tools got none of nixx's beside them
    for body in llm.chat_requests:
        names = {t["function"]["name"] for t in body.get("tools") or []}
        assert "Read" not in names or not {"read_file", "write_file"} & names
    hits = search(live, "the staging database is heron")
    assert ("assistant", "anthropic") in {(h.get("role"), h.get("origin")) for h in hits}
    asked = search(live, "what does notes.txt say")
    assert ("user", "anthropic", "what does notes.txt say?") in {  # its reminders left out
        (h.get("role"), h.get("origin"), h["content"]) for h in asked}


def test_llm_cli_talks_to_nixx_as_an_extra_openai_model(
    llm: FakeLLM, live: LiveServer, tmp_path: Path
) -> None:
    cli = tool(LLM_CLI, pip_tool)
    config = tmp_path / "llm-config"
    config.mkdir()
    (config / "extra-openai-models.yaml").write_text(
        f"- model_id: nixx\n  model_name: fake-model\n  api_base: {live.base_url}/v1\n")
    llm.queue(Reply(content="The kettle is in the left cupboard."))
    done = subprocess.run(
        [str(cli), "-m", "nixx", "--no-log", "where is the kettle?"],
        env={"PATH": BARE_PATH, "HOME": str(tmp_path), "LLM_USER_PATH": str(config)},
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The kettle is in the left cupboard."
    assert llm.chat_requests[-1]["messages"][-1] == {"role": "user",
                                                     "content": "where is the kettle?"}
    hits = search(live, "kettle left cupboard")
    assert ("assistant", "api") in {(h.get("role"), h.get("origin")) for h in hits}
