"""`nixx serve` as a real process: the official client talks to it, the intent is
derived on schedule, and a restart (SIGTERM, start again) keeps memory and intent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai

from nixx.memory.prompts import INTENT_FRAMING, INTENT_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import sent_prompt

INTENT_BLOCK = "## Current Intent\n" + INTENT_FRAMING + "\n\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    nixx = str(Path(sys.executable).with_name("nixx"))
    proc = subprocess.Popen([nixx, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited")
        assert time.monotonic() < deadline, "nixx serve did not start"
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.wait(30) in (0, -signal.SIGTERM)
    log = proc.stderr.read().decode() if proc.stderr else ""
    assert "Application shutdown complete" in log


def wait_for(fn: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := fn()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return value


def test_serve_process_restart_keeps_memory_and_intent(
    llm: FakeLLM, tmp_path: Path, nixx_home: Path
) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == INTENT_PROMPT:
            return Reply(content="Learning Norwegian verbs.")
        return Reply(content="ok")

    llm.responder = respond
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
    env.update(
        NIXX_HOME=str(nixx_home),
        NIXX_CHAT_BASE_URL=llm.base_url,
        NIXX_EMBED_PROVIDER="openai",
        NIXX_EMBED_BASE_URL=llm.base_url,
        NIXX_EMBED_MODEL="fake-embed",
        NIXX_INTENT_INTERVAL="2",
        NIXX_WORKSPACE=str(tmp_path),
    )
    base = f"http://127.0.0.1:{port}"
    proc = start(env, port)
    try:
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "å være: to be"}]
        )
        assert reply.choices[0].message.content == "ok"
        intent = wait_for(lambda: httpx.get(base + "/v1/intent").json()["intent"])
        assert intent == "Learning Norwegian verbs."
    finally:
        stop(proc)
    assert (nixx_home / "nixx.db").exists()

    proc = start(env, port)
    try:
        assert httpx.get(base + "/v1/intent").json()["intent"] == "Learning Norwegian verbs."
        rows = httpx.get(base + "/v1/buffer/session").json()["rows"]
        assert [(r["role"], r["content"]) for r in rows] == [
            ("user", "å være: to be"),
            ("assistant", "ok"),
        ]
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "å ha"}])
        sent = [b for b in llm.chat_requests if b["messages"][0]["content"] != INTENT_PROMPT][-1]
        assert INTENT_BLOCK + "Learning Norwegian verbs." in sent_prompt(sent)
    finally:
        stop(proc)


def test_serve_refuses_public_bind_without_key(tmp_path: Path) -> None:
    nixx = str(Path(sys.executable).with_name("nixx"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
    env["NIXX_HOME"] = str(tmp_path)
    out = subprocess.run(
        [nixx, "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "NIXX_API_KEY" in out.stderr
