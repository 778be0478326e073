"""`nixx mcp` reaches the memory the user meant: a real `nixx serve` subprocess on a home
and port of its own, its entry written by a real `nixx mcp install`, and `nixx mcp`
started with only what Codex passes its servers (HOME, LANG, PATH, PWD, SHELL, TERM) plus
what that entry sets. Told a server that does not answer, it says so; told nothing, it
starts one and says which store it read."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nixx.local_server import server_answers
from nixx.testing.fake_llm import FakeLLM

from .conftest import call, mcp_env, refused, source_path, stdio_client
from .test_stdio import _free_port

pytestmark = pytest.mark.slow  # real servers and `nixx mcp` processes

KEY = "reach-test-key-0123456789"
CODEX_PASSES = ("HOME", "LANG", "PATH", "PWD", "SHELL", "TERM")


@pytest.fixture
def users_server(llm: FakeLLM, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """The user's `nixx serve`: its own NIXX_HOME (port in config.toml) and the API key in
    its environment only, as a shell that exports NIXX_API_KEY starts it."""
    home = tmp_path / "elsewhere" / "nixx"
    home.mkdir(parents=True)
    port = _free_port()
    (home / "config.toml").write_text(
        f'port = {port}\nchat_base_url = "{llm.base_url}"\nembed_provider = "openai"\n'
        f'embed_base_url = "{llm.base_url}"\nembed_model = "fake-embed"\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NIXX_HOME": str(home),
           "NIXX_API_KEY": KEY, **source_path()}
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "nixx.cli.nixx", "serve"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if server_answers(f"http://127.0.0.1:{port}", timeout=0.5):
                break
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)
        yield home, port
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_codex_entry_reaches_the_users_server_with_codex_environment_only(
    users_server: tuple[Path, int], project: Path, tmp_path: Path
) -> None:
    home, port = users_server
    url = f"http://127.0.0.1:{port}"
    turn = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {KEY}"}, json={
        "model": "fake-model",
        "messages": [{"role": "user", "content": "The staging database is called heron."}]})
    assert turn.status_code == 200, turn.text

    # the user's shell: NIXX_HOME and the key exported; install from the project
    shell = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NIXX_HOME": str(home),
             "NIXX_API_KEY": KEY, **source_path()}
    done = subprocess.run([sys.executable, "-m", "nixx.cli.nixx", "mcp", "install",
                           "--client", "codex"], cwd=project, env=shell, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = (project / ".codex" / "config.toml").read_text()
    assert KEY not in text  # passed by name, never written
    entry = tomllib.loads(text)["mcp_servers"]["nixx"]
    assert entry["args"] == ["mcp"]
    assert entry["env"] == {"NIXX_HOME": str(home.resolve()), "NIXX_MCP_URL": url}
    assert entry["env_vars"] == ["NIXX_API_KEY"]

    # what Codex gives the server: its short list, the entry's env, the variables it names
    codex = {"HOME": str(tmp_path), "LANG": "C.UTF-8", "PATH": os.environ["PATH"],
             "PWD": str(project), "SHELL": "/bin/sh", "TERM": "dumb"}
    assert set(codex) == set(CODEX_PASSES)
    env = {**codex, **entry["env"], **{name: shell[name] for name in entry["env_vars"]},
           **source_path()}  # the tree under test, not the venv's copy

    async def scenario() -> None:
        async with stdio_client(cwd=project, env=env) as client:
            found = await call(client, "memory_search", {"query": "staging database"})
            assert "heron" in str(found)
            assert "store" not in found and "note" not in found  # the user's own server

    asyncio.run(scenario())
    assert not (tmp_path / ".local" / "share" / "nixx" / "logs").exists()  # none started


def test_told_a_server_that_does_not_answer_it_says_so_and_starts_none(
    project: Path, nixx_home: Path
) -> None:
    url = f"http://127.0.0.1:{_free_port()}"

    async def scenario() -> None:
        async with stdio_client(cwd=project, env=mcp_env(nixx_home, NIXX_MCP_URL=url)) as client:
            message = await refused(client, "memory_search", {"query": "anything"})
            assert f"no nixx server answers at {url} (from NIXX_MCP_URL)" in message
            assert "nixx serve" in message

    asyncio.run(scenario())
    assert not server_answers(url)
    assert not (nixx_home / "logs" / "mcp-server.log").exists()


def test_a_wrong_key_is_refused_naming_the_server_and_the_setting(
    users_server: tuple[Path, int], project: Path, nixx_home: Path
) -> None:
    _home, port = users_server
    url = f"http://127.0.0.1:{port}"
    env = mcp_env(nixx_home, NIXX_MCP_URL=url, NIXX_API_KEY="${NIXX_API_KEY}")  # unexpanded

    async def scenario() -> None:
        async with stdio_client(cwd=project, env=env) as client:
            message = await refused(client, "memory_search", {"query": "anything"})
            assert f"the nixx server at {url} (from NIXX_MCP_URL) refused the key" in message
            assert "missing API key" in message and f"NIXX_HOME={nixx_home}" in message

    asyncio.run(scenario())
