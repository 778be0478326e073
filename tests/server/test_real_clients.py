"""The real agent CLIs, installed from npm (pinned, cached by `nixx.testing.clients`), each
completing one task against `nixx serve` with the scripted backend, offline, their turns
then found by `/v1/episodic/search`:

- Codex (`codex exec`), with a model provider whose base URL is nixx (``wire_api =
  "responses"``: it talks only the Responses API), running one shell command through its
  own tool (a function-call round trip through `/v1/responses`);
- Claude Code (`claude -p`) with ``ANTHROPIC_BASE_URL`` set to nixx (the Messages API),
  two versions: 2.1.197, what `npm i -g @anthropic-ai/claude-code` installs on Node 20
  (the last release whose ``engines`` allow Node < 22), and the newest, installed under
  Node 22 (npm's `node` package); both at a large window, and at nixx's default one;
- Simon Willison's `llm` CLI (from PyPI, in a venv of its own) with nixx as an extra
  OpenAI model (chat completions).

Each runs with PATH=/usr/bin:/bin (Node's folder first, for the Node a client was installed
under) and a fresh HOME (its config only there). Codex and Claude Code talk to nixx through a
`RecordingProxy`, so a test compares the tools the client sent with those the backend got."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from nixx.config import Settings
from nixx.server.app import create_app
from nixx.testing.clients import (
    ClientUnavailable,
    RecordingProxy,
    node_runtime,
    npm_tool,
    pip_tool,
)
from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall
from nixx.testing.live_server import LiveServer

from .conftest import SettingsFactory

pytestmark = pytest.mark.slow

CODEX = ("@openai/codex", "0.171.0", "codex")
CLAUDE = "@anthropic-ai/claude-code"
#: (Claude Code, the Node npm installs it under): what Node 20 gets (from 2.1.198 on,
#: ``engines`` asks for Node >= 22, so npm picks 2.1.197 there), and the newest under Node 22
CLAUDE_ON_NODE = [pytest.param("2.1.197", "20.20.2", id="claude-2.1.197-node20"),
                  pytest.param("2.1.332", "22.23.3", id="claude-2.1.332-node22")]
LLM_CLI = ("llm", "0.36", "llm")
BARE_PATH = "/usr/bin:/bin"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    """A backend window as large as these agents expect (Claude Code asks for up to
    32,000 output tokens and sends a long system prompt): the history is not trimmed."""
    return make_settings(chat_context_length=200_000)


def tool(spec: tuple[str, str, str], install: Any = npm_tool, **kw: Any) -> Path:
    """The client installed (pinned, cached); skipped when it cannot be installed here
    (no npm, no registry and no cache): not nixx's doing."""
    try:
        return install(*spec, **kw)  # type: ignore[no-any-return]
    except ClientUnavailable as exc:
        pytest.skip(f"{spec[0]} is not installable here: {exc}")


def claude_on(version: str, node: str) -> tuple[Path, str]:
    """Claude Code `version` as npm installs it under Node `node`, and the PATH to run it
    with (that Node's folder first). Its npm package is a native executable (the
    postinstall, run by that Node, puts the platform's binary in place)."""
    claude = tool((CLAUDE, version, "claude"), node=node)
    try:
        node_dir = node_runtime(node)
    except ClientUnavailable as exc:
        pytest.skip(f"node {node} is not installable here: {exc}")
    return claude, f"{node_dir}:{BARE_PATH}"


def run_claude(claude: Path, path: str, base_url: str, home: Path, work: Path,
               prompt: str) -> subprocess.CompletedProcess[str]:
    """`claude -p PROMPT` against `base_url`, offline: its one-time onboarding is not
    needed in print mode, the key is taken from the environment, and the updater,
    telemetry and other traffic to Anthropic are off."""
    env = {"PATH": path, "HOME": str(home), "ANTHROPIC_BASE_URL": base_url,
           "ANTHROPIC_API_KEY": "unused", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"}
    return subprocess.run(
        [str(claude), "-p", prompt, "--model", "fake-model", "--allowedTools", "Read"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL)


def nixx_tool_names(live: LiveServer) -> set[str]:
    return {s["function"]["name"] for s in live.service._tools.specs()}


def backend_tool_lists(llm: FakeLLM) -> list[list[str]]:
    return [[t["function"]["name"] for t in r["tools"]] for r in llm.chat_requests
            if r.get("tools")]


def search(live: LiveServer, query: str, client: str | None = None) -> list[dict[str, Any]]:
    body = {"query": query} if client is None else {"query": query, "client": client}
    answer = httpx.post(live.base_url + "/v1/episodic/search", json=body, timeout=30)
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
    llm.queue(
        Reply(content="Reading the note.",
              tool_calls=[ToolCall("exec_command", {"cmd": "cat notes.txt"}, id="call_cat")]),
        Reply(content="The note names the launch code pelican."),
    )
    with RecordingProxy(live.base_url) as proxy:
        (home / ".codex" / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "nixx"\n\n[model_providers.nixx]\n'
            f'name = "nixx"\nbase_url = "{proxy.base_url}/v1"\nwire_api = "responses"\n')
        done = subprocess.run(
            [str(codex), "exec", "--skip-git-repo-check", "what does notes.txt say?"],
            cwd=work,
            env={"PATH": BARE_PATH, "HOME": str(home), "CODEX_HOME": str(home / ".codex")},
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "The note names the launch code pelican." in done.stdout

    first, second = llm.chat_requests[-2:]
    assert first["messages"][-1] == {"role": "user", "content": "what does notes.txt say?"}
    result = second["messages"][-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_cat")
    assert "the launch code is pelican" in result["content"]  # the command really ran
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "exec_command"

    # Codex brings its tools (and its sandbox): the backend is offered exactly Codex's
    # function tools, in its order, and none of nixx's (issue 39). Its other kinds (a
    # `namespace` of sub-agent tools, `web_search`) are dropped (docs/api.md).
    sent = proxy.bodies("/v1/responses")
    assert len(sent) == 2
    theirs = [[t["name"] for t in body["tools"] if t.get("type") == "function"]
              for body in sent]
    assert "exec_command" in theirs[0]
    assert backend_tool_lists(llm) == theirs
    assert not nixx_tool_names(live) & {n for names in theirs for n in names}

    hits = search(live, "launch code pelican")
    assert {(h["role"], h["origin"]) for h in hits if h["kind"] == "buffer"} >= {
        ("assistant", "responses")}
    asked = search(live, "what does notes.txt say")
    assert any(h.get("role") == "user" and h["content"] == "what does notes.txt say?"
               for h in asked)
    # Codex is named by its User-Agent: both rows carry it, and search filters on it
    mine = [*search(live, "launch code pelican", client="codex-cli"),
            *search(live, "what does notes.txt say", client="codex-cli")]
    assert {(h["role"], h["meta"].get("client")) for h in mine} >= {
        ("user", "codex-cli"), ("assistant", "codex-cli")}, proxy.user_agents
    assert search(live, "launch code pelican", client="claude-code") == []


def read_then_answer(notes: Path) -> Any:
    """The scripted model of Claude Code's main turn: read the file with its Read tool,
    then answer from the tool's result; any side request (a title, a check) gets a
    plain answer."""

    def answer(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if last["role"] == "tool":
            said = "heron" if "heron" in last["content"] else "nothing"
            return Reply(content=f"The file says the staging database is {said}.")
        if "Read" in offered and "notes.txt" in json.dumps(last):
            return Reply(tool_calls=[ToolCall("Read", {"file_path": str(notes)},
                                              id="toolu_read")])
        return Reply(content="ok")

    return answer


def client_tools(body: dict[str, Any]) -> list[str]:
    """The names of the client tools of a Messages request (not Anthropic's server
    tools, whose `type` is versioned: nixx drops those, docs/api.md)."""
    return [t["name"] for t in body.get("tools") or []
            if t.get("type") in (None, "custom")]


@pytest.mark.parametrize(("version", "node"), CLAUDE_ON_NODE)
def test_claude_print_mode_runs_a_task_through_the_messages_api(
    llm: FakeLLM, live: LiveServer, tmp_path: Path, version: str, node: str
) -> None:
    claude, path = claude_on(version, node)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("the staging database is called heron\n")
    llm.responder = read_then_answer(notes)
    with RecordingProxy(live.base_url) as proxy:
        done = run_claude(claude, path, proxy.base_url, home, work, "what does notes.txt say?")
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

    # Claude Code brings its tools (behind its permission prompts): every request that
    # brought them reached the backend with exactly those, in its order, and none of
    # nixx's (issue 39)
    sent = [b for b in proxy.bodies("/v1/messages") if isinstance(b, dict)]
    theirs = [names for names in map(client_tools, sent) if names]
    assert theirs and "Read" in theirs[0]
    assert backend_tool_lists(llm) == theirs
    assert not nixx_tool_names(live) & {n for names in theirs for n in names}

    hits = search(live, "the staging database is heron")
    assert ("assistant", "anthropic") in {(h.get("role"), h.get("origin")) for h in hits}
    asked = search(live, "what does notes.txt say")
    assert ("user", "anthropic", "what does notes.txt say?") in {  # its reminders left out
        (h.get("role"), h.get("origin"), h["content"]) for h in asked}
    # Claude Code is named by its User-Agent: both rows carry it, and search filters on it
    mine = [*search(live, "the staging database is heron", client="claude-code"),
            *search(live, "what does notes.txt say", client="claude-code")]
    assert {(h["role"], h["meta"].get("client")) for h in mine} >= {
        ("user", "claude-code"), ("assistant", "claude-code")}, proxy.user_agents
    assert search(live, "what does notes.txt say heron", client="codex-cli") == []


def window_of(tokens: int, then: Any) -> Any:
    """A backend whose window is `tokens` and that says so only when it refuses a request
    (llama-cpp-python, an OpenAI-style gateway): prompt, tools and ``max_tokens`` over it
    are refused with OpenAI's message; the rest go to `then`."""

    def answer(body: dict[str, Any]) -> Reply:
        prompt = len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools") or [])) // 4
        if prompt + (body.get("max_tokens") or 0) > tokens:
            return Reply(status=400, error=(
                f"This model's maximum context length is {tokens} tokens. However, you "
                f"requested {prompt + (body.get('max_tokens') or 0)} tokens ({prompt} in the "
                f"messages, {body.get('max_tokens') or 0} in the completion). Please reduce "
                "the length of the messages or completion."))
        return then(body)

    return answer


@pytest.mark.parametrize(("version", "node"), CLAUDE_ON_NODE)
def test_claude_code_at_the_default_window_is_told_the_setting_at_once(
    llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path, version: str, node: str
) -> None:
    """nixx's default ``chat_context_length`` (8,192) against a backend whose window is
    8,192 and that does not say so (else nixx learns it): Claude Code's first request
    (``max_tokens`` 32,000, a ~7,000-character system prompt, ~32,000 characters of tool
    schemas) cannot fit whatever nixx trims — the tools alone are ~8,000 tokens. nixx cuts
    ``max_tokens`` to its least share (1,024) and sends the request; the backend refuses
    it, and Claude Code prints, at once (``x-should-retry: false``: no retries), nixx's
    error naming the refusal, the window nixx assumed and the setting
    (``chat_context_length``, ``NIXX_CHAT_CONTEXT_LENGTH``). docs/clients.md's one-time
    steps say what to set."""
    claude, path = claude_on(version, node)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("the staging database is called heron\n")
    llm.responder = window_of(8192, read_then_answer(notes))
    settings = make_settings()
    assert "chat_context_length" not in settings.model_fields_set
    assert settings.chat_context_length == 8192
    with LiveServer(create_app(settings)) as live, RecordingProxy(live.base_url) as proxy:
        done = run_claude(claude, path, proxy.base_url, home, work, "what does notes.txt say?")
    said = f"{done.stdout}\n{done.stderr}"
    assert done.returncode != 0, said

    first = next(b for b in proxy.bodies("/v1/messages") if client_tools(b))
    assert first["max_tokens"] == 32_000
    assert len(json.dumps(first["tools"])) // 4 > 6_000  # the tools alone pass 3/4 of it
    main = [r for r in llm.chat_requests if r.get("tools")]
    assert len(main) == 1, "Claude Code retried a refusal no retry fixes"
    assert main[0]["max_tokens"] == 1024  # cut to the answer's least share
    assert "8192 tokens (chat_context_length (default))" in said  # what nixx assumed
    assert "NIXX_CHAT_CONTEXT_LENGTH" in said  # the setting


def test_claude_code_at_the_default_window_is_told_the_size_it_needs(
    llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    claude, path = claude_on(*CLAUDE_ON_NODE[-1].values)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    llm.responder = window_of(8192, lambda body: Reply(content="ok"))
    with LiveServer(create_app(make_settings())) as live:
        done = run_claude(claude, path, live.base_url, home, work, "what does notes.txt say?")
    said = f"{done.stdout}\n{done.stderr}"
    counted = re.search(r"the request is ~(\d+) tokens", said)
    assert counted is not None, said
    assert int(counted.group(1)) > 8192, said  # tools counted: it does not fit


def test_claude_code_at_the_default_window_keeps_the_task_in_the_round_trip(
    llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """A backend that holds Claude Code's requests but does not say its window: nixx
    stays at the default 8,192; the answer comes, and the task should reach the
    backend with the tool's result."""
    claude, path = claude_on(*CLAUDE_ON_NODE[-1].values)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("the staging database is called heron\n")
    llm.responder = read_then_answer(notes)
    with LiveServer(create_app(make_settings())) as live:
        done = run_claude(claude, path, live.base_url, home, work, "what does notes.txt say?")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "The file says the staging database is heron." in done.stdout
    round_trip = next(r["messages"] for r in llm.chat_requests
                      if r["messages"][-1]["role"] == "tool")
    assert "what does notes.txt say?" in json.dumps(round_trip)


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
