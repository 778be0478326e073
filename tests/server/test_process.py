"""`nixx serve` as a real process: the official client talks to it, the intent is
derived on schedule, and a restart (SIGTERM, start again) keeps memory and intent."""

from __future__ import annotations

import json
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
import pytest

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
            model="fake-model",
            messages=[{"role": "user", "content": "Norwegian verbs: å være, to be"}]
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
            ("user", "Norwegian verbs: å være, to be"),
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


def _mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.slow
def test_concurrent_large_turns_keep_the_server_under_its_ceiling(
    llm: FakeLLM, tmp_path: Path, nixx_home: Path
) -> None:
    """Two batches of eight concurrent 15 MiB turns (once: 1.7 GB at peak, 1.3 GB kept,
    a second batch 3.2 GB) keep `nixx serve` within the ceiling docs/limits-and-safety.md
    states (idle + 4 x NIXX_MAX_INFLIGHT_BYTES at most; measured ~idle + 95 MiB) and leave
    it near its idle size: a message larger than the context window is refused before it
    is stored, bodies past the in-flight budget are told to retry, and freed bodies go back
    to the system (glibc's mmap threshold held: 0-4 MiB above idle after, 4-42 MiB without)."""
    from concurrent.futures import ThreadPoolExecutor

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
    env.update(NIXX_HOME=str(nixx_home), NIXX_CHAT_BASE_URL=llm.base_url,
               NIXX_EMBED_PROVIDER="openai", NIXX_EMBED_BASE_URL=llm.base_url,
               NIXX_EMBED_MODEL="fake-embed", NIXX_WORKSPACE=str(tmp_path))
    base = f"http://127.0.0.1:{port}"
    proc = start(env, port)
    try:
        httpx.post(base + "/v1/chat/completions", timeout=60,
                   json={"messages": [{"role": "user", "content": "warm up"}]})
        idle = _mib(proc.pid, "VmRSS")
        big = "word " * (3 * 1024 * 1024)  # 15 MiB

        def one(i: int) -> int:
            body = json.dumps({"messages": [{"role": "user", "content": f"{i} {big}"}]})
            return httpx.post(base + "/v1/chat/completions", content=body, timeout=300,
                              headers={"Content-Type": "application/json"}).status_code

        for batch in range(2):
            with ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(one, range(8 * batch, 8 * batch + 8)))
            assert set(codes) <= {400, 503} and 400 in codes, codes
        peak = _mib(proc.pid, "VmHWM")
        after = _mib(proc.pid, "VmRSS")
        ceiling = idle + 4 * 64
        assert peak < ceiling, (idle, peak)
        assert after < idle + 20, (idle, after)
        rows = httpx.get(base + "/v1/episodic/transcript", params={"start": 1}).json()["rows"]
        assert [r["role"] for r in rows] == ["user", "assistant"]  # the warm-up turn only
    finally:
        stop(proc)


def test_slow_loris_connections_are_closed_by_the_served_server(
    llm: FakeLLM, tmp_path: Path, nixx_home: Path
) -> None:
    """A real `nixx serve` with NIXX_REQUEST_TIMEOUT=1: connections that send nothing, a
    header line at a time or a trickle of body are closed (the last after a 408) instead
    of staying open for ever (20 were still open after 60 s); a genuine request on a
    fresh connection is served throughout."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
    env.update(NIXX_HOME=str(nixx_home), NIXX_CHAT_BASE_URL=llm.base_url,
               NIXX_EMBED_PROVIDER="openai", NIXX_EMBED_BASE_URL=llm.base_url,
               NIXX_EMBED_MODEL="fake-embed", NIXX_WORKSPACE=str(tmp_path),
               NIXX_REQUEST_TIMEOUT="1")
    proc = start(env, port)
    try:
        sends = [b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"GET /hea",
                 b"POST /v1/intent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                 b"\r\nContent-Length: 50\r\n\r\n{"]
        socks = []
        for data in sends * 5:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.settimeout(30)  # far past the limit: the server must act first
            if data:
                sock.sendall(data)
            socks.append((data, sock))
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        for data, sock in socks:
            with sock:
                got = b""
                while piece := sock.recv(65536):
                    got += piece
                if data.startswith(b"POST"):
                    assert got.startswith(b"HTTP/1.1 408"), got
                else:
                    assert got == b"", got  # closed without an answer
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        stop(proc)


def test_forwarded_addresses_do_not_escape_the_sign_in_throttle(tmp_path: Path) -> None:
    """Twelve wrong keys to the served `/ui/login`, each claiming another address in
    `X-Forwarded-For`: with no proxy configured the header is not believed, the twelve
    come from loopback, and the throttle answers 429 past its limit."""
    from nixx.web.security import MAX_FAILURES

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
    env.update(NIXX_HOME=str(tmp_path), NIXX_API_KEY="k" * 32,
               NIXX_CHAT_BASE_URL="http://127.0.0.1:9/v1")
    proc = start(env, port)
    try:
        codes = [httpx.post(f"http://127.0.0.1:{port}/ui/login", data={"key": "wrong"},
                            headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
                 for i in range(12)]
    finally:
        stop(proc)
    assert codes[:MAX_FAILURES] == [401] * MAX_FAILURES
    assert set(codes[MAX_FAILURES:]) == {429}, codes


def test_a_guesser_behind_a_proxy_is_throttled_and_the_owner_signs_in_by_a_link(
    tmp_path: Path,
) -> None:
    """Behind a configured proxy the forwarded addresses are believed: twelve wrong keys
    from twelve addresses pass every per-address limit, and the limit over all addresses
    answers 429 before the twelfth — the owner's right key waits too. The owner's way back
    is `nixx web link` on this machine: a one-time link that signs the browser in
    whatever the throttle says, once."""
    from nixx.web.security import MAX_FAILURES, MAX_FAILURES_ALL

    assert MAX_FAILURES_ALL < 12
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
    env.update(NIXX_HOME=str(tmp_path), NIXX_API_KEY="k" * 32, NIXX_PORT=str(port),
               NIXX_FORWARDED_ALLOW_IPS="127.0.0.1",
               NIXX_CHAT_BASE_URL="http://127.0.0.1:9/v1")
    proc = start(env, port)
    base = f"http://127.0.0.1:{port}"
    try:
        codes = [httpx.post(base + "/ui/login", data={"key": "wrong"},
                            headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
                 for i in range(12)]
        owner = httpx.post(base + "/ui/login", data={"key": "k" * 32},
                           headers={"X-Forwarded-For": "198.51.100.7"})
        nixx = str(Path(sys.executable).with_name("nixx"))
        made = subprocess.run([nixx, "web", "link", "--json"], env=env, capture_output=True,
                              text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        link = json.loads(made.stdout)
        shown = subprocess.run([nixx, "web", "link"], env=env, capture_output=True,
                               text=True, timeout=60)
        wrong_key = subprocess.run([nixx, "web", "link"], env={**env, "NIXX_API_KEY": "x" * 32},
                                   capture_output=True, text=True, timeout=60)
        with httpx.Client(base_url=base) as browser:
            signed_in = browser.get(link["url"].removeprefix(base))
            page = browser.get("/ui")
        again = httpx.get(link["url"])
    finally:
        stop(proc)
    assert MAX_FAILURES < MAX_FAILURES_ALL  # no one address reached its own limit
    assert codes[:MAX_FAILURES_ALL] == [401] * MAX_FAILURES_ALL
    assert set(codes[MAX_FAILURES_ALL:]) == {429}, codes
    assert owner.status_code == 429  # the form keeps the owner out too...
    assert link["needs_sign_in"] and link["expires_in"] == 600
    assert link["url"].startswith(base + "/ui/login/once/")
    assert shown.returncode == 0 and "/ui/login/once/" in shown.stdout
    assert "one use" in shown.stdout
    # ...the link does not: signed in, the page answers, and the link is used up
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/ui"
    assert page.status_code == 200 and "Sign in" not in page.text
    assert again.status_code == 400 and "nixx web link" in again.text
    assert wrong_key.returncode != 0 and "refused this machine's key" in wrong_key.stderr
