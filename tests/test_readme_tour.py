"""The README's tour, run as written from two "terminals": the commands of its `sh` blocks
run in order as real subprocesses (bash), `make run` in the background as the first
terminal, everything else as the second one, which has none of the first one's
variables: what it knows comes from `config.toml`, as the README says. The only changes:
the LLM URL is the scripted backend's, the port a free one (written to the config file),
and `<thread>` the thread `nxc send` printed."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import wait_until_serving

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# commands the tour shows that need a person or a remote, each tested elsewhere
SKIP = {
    "nixx chat": "interactive (tests/tui/test_terminal.py runs it in a real terminal)",
    "nxs sync": "needs a git remote (tests/sync)",
}


def tour_commands() -> list[str]:
    section = README[README.index("## A 60-second tour") : README.index("## Documentation")]
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            command = lines[i]
            while command.rstrip().endswith("\\"):  # continued lines
                i += 1
                command += "\n" + lines[i]
            heredoc = re.search(r"<<'(\w+)'", command)
            if heredoc:  # the document, up to its terminator
                while lines[i].strip() != heredoc.group(1):
                    i += 1
                    command += "\n" + lines[i]
            commands.append(command)
            i += 1
    return commands


def test_the_tour_lists_what_this_test_runs() -> None:
    commands = tour_commands()
    assert commands[0].startswith('mkdir -p "${NIXX_HOME:=${XDG_DATA_HOME:-$HOME/.local/share}/nixx}"')
    assert "make run" in commands
    assert any(c.startswith("nixx ingest") for c in commands)
    assert any(c.startswith("nxc send --to reviewer") for c in commands)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("home_set", [False, True], ids=["default-home", "NIXX_HOME-set"])
def test_the_readme_tour_works_as_written(llm: FakeLLM, tmp_path: Path, home_set: bool) -> None:
    """As written, with nixx's default home, and with NIXX_HOME set in the user's
    environment (both terminals: a shell profile's), where the README's first line
    must write the config file nixx reads."""
    if shutil.which("make") is None or shutil.which("curl") is None:
        pytest.skip("needs make and curl")

    def respond(body: dict) -> Reply:  # type: ignore[type-arg]
        system = str(body["messages"][0].get("content", ""))
        if "review" in system.lower():
            return Reply(content="- looks fine\n- add a test\n- ship it")
        return Reply(content="Noted.")

    llm.responder = respond
    port = _free_port()
    home = tmp_path / "home"
    home.mkdir()
    here = tmp_path / "clone"  # the clone: its Makefile, .venv and docs
    here.mkdir()
    for name in ("Makefile", "pyproject.toml", ".venv"):
        (here / name).symlink_to(ROOT / name)
    # the docs the tour's question is about (all of docs/ takes minutes to embed here)
    (here / "docs").mkdir()
    for name in ("oplog.md", "sync.md"):
        shutil.copy(ROOT / "docs" / name, here / "docs" / name)
    (here / "your-project").mkdir()  # `cd your-project`: the user's project
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NIXX_", "NXC_", "XDG_")) and k not in ("USER", "VIRTUAL_ENV")}
    env.update(HOME=str(home), PATH=bin_dir + os.pathsep + env.get("PATH", ""))
    config = home / ".local/share/nixx/config.toml"
    if home_set:
        env["NIXX_HOME"] = str(tmp_path / "elsewhere")
        config = tmp_path / "elsewhere" / "config.toml"

    def sub(command: str) -> str:
        return (command.replace("http://127.0.0.1:11434/v1", llm.base_url)
                .replace("localhost:8420", f"localhost:{port}"))

    cwd = here
    server = None
    outputs: dict[str, str] = {}
    thread = None
    try:
        for command in tour_commands():
            if any(command.startswith(prefix) for prefix in SKIP):
                continue
            if command == "make run":  # the first terminal
                server = subprocess.Popen(
                    ["bash", "-c", "make run"], cwd=cwd, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                )
                wait_until_serving(f"http://127.0.0.1:{port}", server, timeout=120)
                continue
            if "<thread>" in command:
                assert thread, "nxc send printed no thread"
                command = command.replace("<thread>", thread)
            # the second terminal: a shell whose working directory carries over
            script = f"set -e\n{sub(command)}\npwd > {tmp_path / 'cwd'}\n"
            out = subprocess.run(["bash", "-c", script], cwd=cwd, env=env,
                                 capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, (command, out.stdout, out.stderr)
            assert "Traceback" not in out.stderr, (command, out.stderr)
            outputs[command] = out.stdout
            cwd = Path((tmp_path / "cwd").read_text().strip())
            if command.startswith('mkdir -p "${NIXX_HOME'):
                assert llm.base_url in config.read_text()
                with config.open("a") as fh:  # a free port instead of 8420
                    fh.write(f"port = {port}\n")
            if command.startswith("nxc send"):
                found = re.search(r"\bt-[0-9a-z-]+|\b[0-9A-Z]{26}\b", out.stdout)
                thread = found.group(0) if found else out.stdout.split()[0]
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)

    answered = [c for c in outputs if c.startswith("curl -s localhost:8420/v1/chat")]
    assert answered and json.loads(outputs[answered[0]])["choices"][0]["message"]["content"]
    ingest = next(c for c in outputs if c.startswith("nixx ingest"))
    assert "no summary" not in outputs[ingest].lower()
    # the reviewer's session (started by `nxc send`, running on) reached the backend the
    # config file names: the second terminal had no NIXX_* variables
    def reviewed() -> bool:
        return any("You review changes" in str(b["messages"][0].get("content", ""))
                   for b in llm.chat_requests)

    deadline = time.monotonic() + 120
    while not reviewed():
        assert time.monotonic() < deadline, "the reviewer never called the backend"
        time.sleep(0.2)
    search = next(c for c in outputs if "/v1/sources/search" in c)
    assert json.loads(outputs[search])["results"]  # the ingested docs answer
