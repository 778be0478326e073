"""A real MCP client from npm — the MCP Inspector CLI — starts nixx from the file `nixx mcp
install` wrote, in an environment without the venv on PATH (only /usr/bin:/bin, a fresh
HOME), lists the tools and calls `memory_search` against a real nixx server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from nixx.mcp.tools import MEMORY_TOOLS
from nixx.testing.clients import ClientUnavailable, npm_tool
from nixx.testing.live_server import LiveServer

from .conftest import API_KEY, source_path

pytestmark = pytest.mark.slow  # npm install once (cached), then node and `nixx mcp` processes

INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")
BARE_PATH = "/usr/bin:/bin"


@pytest.fixture(scope="module")
def inspector() -> Path:
    try:
        return npm_tool(*INSPECTOR)
    except ClientUnavailable as exc:
        pytest.skip(f"the MCP Inspector is not installable here: {exc}")


def test_inspector_runs_nixx_from_the_installed_config_without_the_venv_on_path(
    inspector: Path, live: LiveServer, project: Path, tmp_path: Path
) -> None:
    auth = {"Authorization": f"Bearer {API_KEY}"}
    turn = httpx.post(f"{live.base_url}/v1/chat/completions", headers=auth, timeout=30, json={
        "model": "fake-model",
        "messages": [{"role": "user", "content": "The staging database is called heron."}],
    })
    assert turn.status_code == 200, turn.text

    # the user's shell: no venv on PATH, a HOME whose nixx config names the server
    home = tmp_path / "client-home"
    config = home / ".local" / "share" / "nixx" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'port = {live.port}\napi_key = "{API_KEY}"\n')
    installed = subprocess.run(
        [sys.executable, "-m", "nixx.cli.nixx", "mcp", "install", "--client", "claude-code"],
        cwd=project, env={"PATH": BARE_PATH, "HOME": str(home), **source_path()},
        capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    assert "warning" not in installed.stderr
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["nixx"]
    assert Path(entry["command"]).is_absolute()
    assert entry["env"] == {"NIXX_HOME": str(config.parent.resolve()),
                            "NIXX_MCP_URL": f"http://127.0.0.1:{live.port}"}

    if source_path():  # a run with PYTHONPATH (a worktree): the entry's nixx runs that tree
        written = json.loads((project / ".mcp.json").read_text())
        written["mcpServers"]["nixx"]["env"].update(source_path())
        (project / ".mcp.json").write_text(json.dumps(written))

    # the client starts it with what the entry carries (the key is read from that home)
    env = {"PATH": BARE_PATH, "HOME": str(home)}

    def inspect(*args: str) -> dict:
        done = subprocess.run(
            [str(inspector), "--cli", "--config", str(project / ".mcp.json"), "--server", "nixx",
             "--cwd", str(project), *args],
            cwd=project, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    listed = inspect("--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}
    assert set(MEMORY_TOOLS) <= names

    found = inspect("--method", "tools/call", "--tool-name", "memory_search",
                    "--tool-arg", "query=what is the staging database")
    assert not found.get("isError"), found
    assert "heron" in json.dumps(found)


def test_bare_path_fails_as_the_issue_saw_it(inspector: Path, project: Path) -> None:
    """The old entry (`"command": "nixx"`) from the same shell: the client cannot start it
    — what the absolute path fixes."""
    (project / "old.json").write_text(json.dumps(
        {"mcpServers": {"nixx": {"command": "nixx", "args": ["mcp"]}}}))
    done = subprocess.run(
        [str(inspector), "--cli", "--config", str(project / "old.json"), "--server", "nixx",
         "--method", "tools/list"],
        cwd=project, env={"PATH": BARE_PATH, "HOME": str(project)}, capture_output=True,
        text=True, timeout=120)
    assert done.returncode != 0
    assert "ENOENT" in done.stdout + done.stderr
