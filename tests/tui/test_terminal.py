"""`nixx chat` in a real terminal (tmux): the server it autostarts ends with it, even when
the terminal is killed (no `finally` runs in the chat then)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from nixx.testing.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its new parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.parametrize("how", ["kill-pane", "sigkill-chat"])
def test_autostarted_server_ends_with_the_terminal(
    how: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    port = _free_port()
    socket_name = f"nixx-test-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", socket_name, "-f", "/dev/null"]
    env = {
        "NIXX_HOME": str(home),
        "NIXX_PORT": str(port),
        "NIXX_CHAT_BASE_URL": fake_llm.base_url,
        "NIXX_EMBED_PROVIDER": "openai",
        "NIXX_EMBED_BASE_URL": fake_llm.base_url,
        "NIXX_EMBED_MODEL": "fake-embed",
        "NIXX_WORKSPACE": str(tmp_path),
        "TERM": "xterm-256color",
    }
    command = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m",
               "nixx.cli.nixx", "chat"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NIXX_", "NXC_", "TMUX"))}
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "100", "-y", "30", "-s", "chat", *command],
        check=True, env=clean, timeout=30,
    )
    try:
        url = f"http://127.0.0.1:{port}/health"

        def answers() -> bool:
            try:
                return httpx.get(url, timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        _wait(answers, "the chat did not autostart a server")
        lock = home / "nixx.db.serve-lock"
        server_pid = int(lock.read_text().split()[1].rstrip(","))
        assert _alive(server_pid)
        pane = subprocess.run(
            [*tmux, "list-panes", "-t", "chat", "-F", "#{pane_pid}"],
            capture_output=True, text=True, check=True, timeout=30,
        )
        chat_pid = int(pane.stdout.split()[0])
        _wait(
            lambda: "nixx" in subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "chat"], capture_output=True, text=True,
                timeout=30,
            ).stdout,
            "the chat never drew its screen",
        )
        if how == "kill-pane":
            subprocess.run([*tmux, "kill-pane", "-t", "chat"], check=True, timeout=30)
        else:
            os.kill(chat_pid, signal.SIGKILL)
        _wait(lambda: not _alive(chat_pid), "the chat outlived its terminal")
        _wait(lambda: not _alive(server_pid), "the autostarted server outlived the chat")
        assert not answers()
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
