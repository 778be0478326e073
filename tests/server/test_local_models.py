"""nixx against a backend as local servers really are (issue 27): streams that end with
``[DONE]`` before a finish reason, empty answers, one slot, a small context, a prefix
cache. The backend is `FakeLLM`, told to behave as llama.cpp / llama-cpp-python do."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import httpx
import pytest

from nixx.llm.slot import TASK_NOTE
from nixx.memory.history import estimate_tokens, text_of
from nixx.memory.prompts import INTENT_FRAMING, INTENT_PROMPT, SUMMARY_PROMPT
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Nixx, sent_prompt
from .test_chat import sse_chunks
from .test_failures import assert_envelope


def test_stream_ending_done_without_finish_reason_is_incomplete(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="one two three four", done_after=2))
    r = nixx.chat("four words please", stream=True)
    chunks = sse_chunks(r.text)
    assert chunks[-1] == "[DONE]"
    error = chunks[-2]["error"]
    assert error["code"] == "backend" and "no finish reason" in error["message"]
    finishes = [c["choices"][0].get("finish_reason") for c in chunks[:-2] if c["choices"]]
    assert "stop" not in finishes  # never told "stop"
    row = nixx.rows()[-1]
    assert (row["role"], row["content"]) == ("assistant", "one two ")
    assert row["meta"]["incomplete"] is True and "no finish reason" in row["meta"]["error"]

    # a plain (non-streamed) client gets the 502, the partial answer kept the same way
    llm.queue(Reply(content="alpha beta gamma", done_after=1))
    r = nixx.chat("three words please")
    assert r.status_code == 502
    assert "no finish reason" in assert_envelope(r.json(), "backend")["message"]
    assert nixx.rows()[-1]["content"] == "alpha "
    assert nixx.rows()[-1]["meta"]["incomplete"] is True


def test_stream_interrupted_at_once_is_an_error_never_an_empty_success(
    nixx: Nixx, llm: FakeLLM
) -> None:
    # what llama-cpp-python sent when a background call waited: the role chunk, [DONE]
    for stream in (True, False):
        llm.queue(Reply(content="never sent", done_after=0))
        r = nixx.chat(f"hello {stream}", stream=stream)
        # nothing was streamed yet: the error is the HTTP answer, streamed or not
        assert r.status_code == 502, r.text
        assert "no finish reason" in assert_envelope(r.json(), "backend")["message"]
    assert [row["role"] for row in nixx.rows()] == ["user", "user"]


def test_an_empty_answer_is_never_reported_as_success(nixx: Nixx, llm: FakeLLM) -> None:
    llm.queue(Reply(content=""), Reply(content="   "))
    r = nixx.chat("say nothing")
    assert r.status_code == 502
    assert "empty" in assert_envelope(r.json(), "backend")["message"]
    r = nixx.chat("say nothing again", stream=True)  # blanks were streamed: then the error
    chunks = sse_chunks(r.text)
    assert "empty" in chunks[-2]["error"]["message"]
    assert "stop" not in [c["choices"][0].get("finish_reason") for c in chunks if c != "[DONE]" and c["choices"]]
    assert [row["role"] for row in nixx.rows()] == ["user", "user"]


# ---- the prompt layout a prefix cache can keep -----------------------------------------

ANSWER_WORDS = 80

TOPICS = [
    "postgres hnsw index tuning with ef_search and m",
    "deploying nixx behind caddy with tls certificates",
    "a sourdough bread recipe with rye flour",
    "the rust borrow checker and lifetimes in structs",
    "planning a ferry trip along the norwegian fjords",
    "writing pytest fixtures for an embedded postgres",
]


def _answer(question: str, n: int) -> str:
    """A plausible answer of ~70 words about the question (deterministic)."""
    words = question.split()
    body = " ".join(words[(i * 3) % len(words)] for i in range(ANSWER_WORDS))
    return f"Answer {n}: about {question}, here is what matters. {body}."


def _background(body: dict[str, Any]) -> bool:
    first = str(body["messages"][0]["content"])
    return first in (SUMMARY_PROMPT, INTENT_PROMPT)


def _serialised(body: dict[str, Any]) -> str:
    """The request as the backend's template would see it: each message's role and text."""
    return "".join(
        f"<|{m['role']}|>{text_of(m.get('content'))}<|end|>" for m in body["messages"]
    )


def _shared(earlier: str, later: str) -> float:
    """How much of `earlier` the prefix it shares with `later` covers."""
    n = 0
    for a, b in zip(earlier, later, strict=False):
        if a != b:
            break
        n += 1
    return n / len(earlier)


def _conversation(make_settings: Any, llm: FakeLLM, layout: str, tmp: Any) -> list[float]:
    """24 turns of one conversation (the client re-sends the whole history), over a store
    that holds an earlier session on the same topics, with summaries and the intent derived
    in the background; the shares of consecutive turn requests."""
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    def responder(body: dict[str, Any]) -> Reply:
        first = str(body["messages"][0]["content"])
        if first == SUMMARY_PROMPT:
            return Reply(content=json.dumps({"summary": "Talked about " + body["messages"][1]
                                             ["content"][:80], "tags": ["talk"]}))
        if first == INTENT_PROMPT:
            last = body["messages"][1]["content"].splitlines()[-1]
            return Reply(content="Working on " + last[:60])
        return Reply(content=_answer(text_of(body["messages"][-1]["content"]).split("\n\n")[0],
                                     len(body["messages"])))

    llm.responder = responder
    settings = make_settings(
        prompt_layout=layout,
        # room for the 24 turns with their memory (the intent's framing and recall by words
        # made each larger): a page trim resets the prefix, as it must, once at most
        chat_context_length=16384,
        intent_interval=6,
        summary_interval=400,
        db_url=f"sqlite:///{tmp}/{layout}.db",
    )
    with TestClient(create_app(settings), base_url=LOCAL) as client:
        nixx = Nixx(client)
        # an earlier session about the same topics: what recall finds
        for n, topic in enumerate(TOPICS * 2):
            nixx.chat(f"earlier question {n} on {topic}")
            nixx.idle()
        client.post("/v1/buffer/clear")
        llm.requests.clear()
        history: list[dict[str, Any]] = []
        for turn in range(24):
            question = f"Turn {turn}: tell me more on {TOPICS[turn % len(TOPICS)]}"
            r = nixx.chat(question, history=history)
            assert r.status_code == 200, r.text
            history += [
                {"role": "user", "content": question},
                {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]},
            ]
            nixx.idle()
        turns = [b for b in llm.chat_requests if not _background(b)]
        assert len(turns) == 24
        recalled = sum("## Recalled Memories" in sent_prompt(b) for b in turns)
        intents = {
            sent_prompt(b).partition("## Current Intent\n")[2].partition(INTENT_FRAMING)[2][:40]
            for b in turns
        }
        print("recalled in", recalled, "turns; intents", len(intents))
        assert recalled >= 6 and len(intents) >= 3  # memory changed from turn to turn
        texts = [_serialised(b) for b in turns]
        return [_shared(a, b) for a, b in zip(texts, texts[1:], strict=False)]


def test_consecutive_requests_share_their_prefix(
    make_settings: Any, llm: FakeLLM, tmp_path: Any
) -> None:
    shares = _conversation(make_settings, llm, "cache", tmp_path)
    kept = sum(s >= 0.7 for s in shares)
    assert kept >= 0.9 * len(shares), [round(s, 2) for s in shares]
    # the seed's layout (everything in the system message) loses the prefix whenever
    # recall or the intent change: the same conversation fails the bar
    seed = _conversation(make_settings, llm, "system", tmp_path)
    assert sum(s >= 0.7 for s in seed) < 0.9 * len(seed), [round(s, 2) for s in seed]
    print("cache layout shares:", [round(s, 2) for s in shares])
    print("system layout shares:", [round(s, 2) for s in seed])


def test_the_seed_layout_stays_available(make_settings: Any, llm: FakeLLM) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    with TestClient(create_app(make_settings(prompt_layout="system")), base_url=LOCAL) as client:
        client.post("/v1/intent", json={"intent": "Ship the release."})
        Nixx(client).chat("hello")
        sent = llm.chat_requests[-1]["messages"]
        assert sent[0]["content"].endswith(
            "\n\n## Current Intent\n" + INTENT_FRAMING + "\n\nShip the release."
        )
        assert sent[-1] == {"role": "user", "content": "hello"}
        assert client.get("/v1/debug/context").json()["memory_block"] == ""


# ---- the user comes first on a busy backend ---------------------------------------------


def _wait(what: Any, timeout: float = 20.0) -> None:
    """Wait until `what()` is true (a bound, not a measurement)."""
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.01)


def _is_summary(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith(SUMMARY_PROMPT)


GOOD_SUMMARY = json.dumps({"summary": "Talked about lorem.", "tags": ["lorem"]})


def test_a_users_turn_stops_a_summary_in_flight_which_runs_again_after(
    make_settings: Any, llm: FakeLLM
) -> None:
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    release = threading.Event()
    summaries: list[int] = []

    def responder(body: dict[str, Any]) -> Reply:
        if _is_summary(body):
            summaries.append(len(llm.chat_requests))
            if len(summaries) == 1:
                release.wait(30)  # the first summary is slow: still running at turn 2
            return Reply(content=GOOD_SUMMARY)
        return Reply(content="the whole answer, every word of it")

    llm.responder = responder
    try:
        with LiveServer(create_app(make_settings())) as server:
            url = server.base_url
            httpx.post(f"{url}/v1/episodic/config", json={"interval": 3})
            chat = {"model": "m", "messages": [{"role": "user", "content": "one lorem lorem"}]}
            assert httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=30).is_success
            _wait(lambda: len(summaries) == 1)  # the summary is in flight
            chat["messages"][0]["content"] = "two lorem lorem"
            r = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=30)
            assert r.json()["choices"][0]["message"]["content"] == (
                "the whole answer, every word of it"
            )
            # the summary was stopped for the turn and sent again, whole, after it
            _wait(lambda: httpx.get(f"{url}/v1/episodic/summaries").json()["summaries"] != [])
            turn_two = next(i for i, b in enumerate(llm.chat_requests)
                            if b["messages"][-1]["content"].startswith("two lorem lorem"))
            assert len(summaries) >= 2 and summaries[1] > turn_two
            first, again = [b for b in llm.chat_requests if _is_summary(b)][:2]
            assert again["messages"] == first["messages"]
            assert server.service._llm.gate.preemptions == 1
    finally:
        release.set()


def test_nixx_own_calls_wait_while_a_users_turn_runs(make_settings: Any, llm: FakeLLM) -> None:
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    go = threading.Event()

    def responder(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == INTENT_PROMPT:
            return Reply(content="Testing the gate.")
        go.wait(30)
        return Reply(content="slow answer")

    llm.responder = responder
    try:
        with LiveServer(create_app(make_settings())) as server:
            url = server.base_url
            chat = {"model": "m",
                    "messages": [{"role": "user", "content": "slow turn: testing the gate"}]}
            turn = threading.Thread(
                target=lambda: httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=30)
            )
            turn.start()
            _wait(lambda: len(llm.chat_requests) == 1)
            derive: list[Any] = []
            asked = threading.Thread(
                target=lambda: derive.append(httpx.post(f"{url}/v1/intent/derive", timeout=30))
            )
            asked.start()
            time.sleep(0.5)  # room for a call that does not wait (the assert holds either way)
            assert len(llm.chat_requests) == 1  # the intent waits for the turn
            waiting = httpx.get(f"{url}/v1/episodic/status").json()["background"]
            assert waiting["waiting"] == ["the intent"] and waiting["running"] is None
            go.set()
            turn.join(30)
            asked.join(30)
            assert derive[0].json()["intent"] == "Testing the gate."
            # (not `peak_in_flight`: the fake counts the turn until its handler thread has
            # returned, which can be just after nixx read the answer's end and sent the
            # intent — the wait is what the request count above shows)
            assert llm.chat_requests[1]["messages"][0]["content"] == INTENT_PROMPT
            assert llm.chat_requests[1]["max_tokens"] == 100  # bounded
    finally:
        go.set()


def test_one_slot_interrupting_backend_loses_no_answer(make_settings: Any) -> None:
    """llama-cpp-python's default: one slot, a running stream cut when another request
    waits. Turns with background summaries and intents beside them: every answer whole."""
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    with FakeLLM(slots=1, interrupt=True) as llm:

        def responder(body: dict[str, Any]) -> Reply:
            first = str(body["messages"][0]["content"])
            if first.startswith(SUMMARY_PROMPT):
                return Reply(content=GOOD_SUMMARY, delay=0.01)
            if first == INTENT_PROMPT:
                return Reply(content="Chatting about lorem.", delay=0.01)
            return Reply(content="a complete answer in seven words", delay=0.01)

        llm.responder = responder
        settings = make_settings(
            chat_base_url=llm.base_url, embed_base_url=llm.base_url, intent_interval=2
        )
        with LiveServer(create_app(settings)) as server:
            url = server.base_url
            httpx.post(f"{url}/v1/episodic/config", json={"interval": 4})
            history: list[dict[str, Any]] = []
            for n in range(8):
                history.append({"role": "user", "content": f"turn {n} lorem ipsum"})
                stream = n % 2 == 0
                r = httpx.post(
                    f"{url}/v1/chat/completions",
                    json={"model": "m", "messages": history, "stream": stream},
                    timeout=60,
                )
                assert r.status_code == 200, r.text
                if stream:
                    text = "".join(
                        (c["choices"][0]["delta"].get("content") or "")
                        for c in sse_chunks(r.text)[:-1] if c["choices"]
                    )
                else:
                    text = r.json()["choices"][0]["message"]["content"]
                assert text == "a complete answer in seven words"
                history.append({"role": "assistant", "content": text})
            server.call(server.service._jobs.wait_idle)
            rows = httpx.get(f"{url}/v1/episodic/transcript", params={"start": 1}).json()["rows"]
            answers = [r for r in rows if r["role"] == "assistant"]
            assert len(answers) == 8 and not any(r["meta"].get("incomplete") for r in answers)
            # nixx's own work got done, between the turns
            assert httpx.get(f"{url}/v1/episodic/summaries").json()["summaries"]
            assert httpx.get(f"{url}/v1/intent").json()["intent"] == "Chatting about lorem."


def test_nixx_own_calls_continue_the_conversation_in_a_one_slot_cache(
    nixx: Nixx, llm: FakeLLM
) -> None:
    """A one-slot backend holds one evaluated prompt: nixx's own call (the intent here) is
    sent as the conversation (the turn's request, its answer appended) with the task as
    one more user message, so the backend evaluates only the task and the next turn's
    prompt still begins with what it holds: nothing is sent again."""
    llm.props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    first = nixx.chat("we are planning the garden")
    answer = first.json()["choices"][0]["message"]["content"]
    nixx.idle()
    turn = llm.chat_requests[-1]
    conversation = [*turn["messages"], {"role": "assistant", "content": answer}]
    assert nixx.client.post("/v1/intent/derive").status_code == 200
    nixx.idle()
    own = llm.chat_requests[-1]
    assert own["messages"][:-1] == conversation
    task = own["messages"][-1]
    assert task["role"] == "user" and task["content"].startswith(TASK_NOTE)
    assert INTENT_PROMPT in task["content"] and "we are planning the garden" in task["content"]
    assert own["max_tokens"] == 100 and own.get("tools") == turn.get("tools")
    assert nixx.service._llm.gate.restores == 0
    status = nixx.client.get("/v1/episodic/status").json()["background"]
    assert (status["continued"], status["alone"], status["restores"]) == (1, 0, 0)
    history = [{"role": "user", "content": "we are planning the garden"},
               {"role": "assistant", "content": answer}]
    count = len(llm.chat_requests)
    nixx.chat("and the tomatoes?", history=history)
    nixx.idle()
    assert len(llm.chat_requests) == count + 1
    assert llm.chat_requests[-1]["messages"][: len(conversation)] == conversation


def test_the_conversation_kept_ends_where_a_stop_string_cut_the_answer(
    nixx: Nixx, llm: FakeLLM
) -> None:
    """The client is shown the answer up to its stop string and sends that back next
    turn: the conversation nixx's own calls continue is the same, not the backend's text
    past the stop (which no later prompt begins with)."""
    llm.props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    llm.queue(Reply(content="plant the beans first ### then the peas"))
    first = nixx.chat("what goes in the garden?", stop=["###"])
    answer = first.json()["choices"][0]["message"]["content"]
    assert answer == "plant the beans first "
    nixx.idle()
    turn = llm.chat_requests[-1]
    llm.responder = lambda body: Reply(content="Planning the garden.")
    assert nixx.client.post("/v1/intent/derive").status_code == 200
    nixx.idle()
    own = llm.chat_requests[-1]
    assert own["messages"][:-1] == [*turn["messages"], {"role": "assistant", "content": answer}]


def test_an_own_call_that_does_not_fit_is_sent_alone_and_the_conversation_again_in_slices(
    nixx: Nixx, llm: FakeLLM
) -> None:
    """When the conversation, the task and its answer would not fit the context, the own
    call goes alone (it replaces the backend's cache) and the conversation is sent again
    after it, a slice at a time, one token asked of each: a turn that comes meanwhile
    waits for one slice at most, and what the slices sent stays evaluated."""
    llm.props = {"default_generation_settings": {"n_ctx": 1400}, "total_slots": 1}
    history: list[dict[str, Any]] = []
    for n in range(6):
        history += [{"role": "user", "content": f"note {n}: " + "the beds need compost. " * 20},
                    {"role": "assistant", "content": f"noted {n}: " + "compost is good. " * 20}]
    r = nixx.chat("what do the beds need?", history=history, max_tokens=64)
    assert r.status_code == 200, r.text
    nixx.idle()
    turn = llm.chat_requests[-1]
    conversation = [*turn["messages"],
                    {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]}]
    count = len(llm.chat_requests)
    assert nixx.client.post("/v1/intent/derive").status_code == 200
    nixx.idle()
    own, *restore = llm.chat_requests[count:]
    assert [m["role"] for m in own["messages"]] == ["system", "user"]  # alone
    assert restore[-1]["messages"] == conversation and restore[-1]["max_tokens"] == 1
    assert len(restore) >= 3, [len(str(b["messages"])) for b in restore]
    sent = 0
    for body in restore:
        *whole, last = body["messages"]
        assert body["max_tokens"] == 1
        assert whole == conversation[: len(whole)]  # a prefix of the conversation
        assert conversation[len(whole)]["content"].startswith(last["content"])
        size = sum(len(str(m["content"])) for m in body["messages"])
        assert size > sent
        sent = size
    assert nixx.service._llm.gate.restores == 1
    status = nixx.client.get("/v1/episodic/status").json()["background"]
    assert (status["continued"], status["alone"], status["restores"]) == (0, 1, 1)


def _long_history() -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for n in range(5):
        history += [{"role": "user", "content": f"note {n}: " + "the beds need compost. " * 20},
                    {"role": "assistant", "content": f"noted {n}: " + "compost is good. " * 20}]
    return history


def test_a_turn_waits_for_the_slice_in_flight_and_the_own_call_yields_then_finishes(
    make_settings: Any, llm: FakeLLM
) -> None:
    """One slot (llama.cpp's /props say so). nixx's own call goes in slices, one token
    asked of each: a user's turn that comes while one is evaluated waits for that slice —
    stopping it would win nothing, the server finishes a prompt it has begun — and is never
    sent beside it; the call yields and runs again after the turn. After `PATIENCE` yields
    it runs to its end, the next turn waiting for it."""
    import queue

    from nixx.llm.gate import PATIENCE
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    llm.props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
    held: queue.Queue[int] = queue.Queue()  # a slice arrived and is being evaluated
    permits = threading.Semaphore(0)  # its evaluation ends

    def responder(body: dict[str, Any]) -> Reply:
        if body.get("max_tokens") == 1:
            held.put(1)
            permits.acquire(timeout=30)
        if INTENT_PROMPT in str(body["messages"][-1]["content"]):
            return Reply(content="Composting the beds.")
        return Reply(content="the whole answer, every word of it")

    llm.responder = responder
    with LiveServer(create_app(make_settings(background_quiet=0))) as server:
        url = server.base_url
        gate = server.service._llm.gate
        history = _long_history()
        chat = {"model": "m", "messages": [*history, {"role": "user", "content": "ok?"}]}
        assert httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=30).is_success
        for message in history:  # the session's rows: the intent's material is long
            server.service._store.append_buffer(message["role"], message["content"])
        derive: list[Any] = []
        asked = threading.Thread(
            target=lambda: derive.append(httpx.post(f"{url}/v1/intent/derive", timeout=60)))
        asked.start()
        for n in range(PATIENCE + 1):
            held.get(timeout=30)  # a slice is being evaluated
            assert gate.info()["late"] == (n == PATIENCE)
            stalls = httpx.get(f"{url}/v1/episodic/status").json()["stalls"]
            assert (n == PATIENCE) == any("runs to its end" in s for s in stalls), stalls
            count = len(llm.chat_requests)
            answers: list[Any] = []
            turn = threading.Thread(target=lambda out=answers: out.append(
                httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=60)))
            turn.start()
            time.sleep(0.3)  # room for a turn that would not wait (the asserts hold either way)
            assert len(llm.chat_requests) == count  # the turn waits for the slice
            permits.release(1 if n < PATIENCE else 100)  # late: the whole call, then the turn
            turn.join(60)
            assert answers[0].json()["choices"][0]["message"]["content"] == (
                "the whole answer, every word of it")
        asked.join(60)
        assert derive[0].json()["intent"] == "Composting the beds."
        assert gate.preemptions == PATIENCE and gate.late_runs == 1
        info = httpx.get(f"{url}/v1/episodic/status").json()["background"]
        assert (info["preemptions"], info["late_runs"]) == (PATIENCE, 1)


def test_what_the_backend_says_of_itself_is_asked_once(nixx: Nixx, llm: FakeLLM) -> None:
    """llama-cpp-python serves `/v1/models` through its one slot: a probe sent beside a
    turn waits for the slot and cuts the turn's stream. What a backend answered a probe —
    a 404 too — is kept, for every model and for nixx's own calls alike."""
    for model in ("m1", "m2"):
        r = nixx.client.post("/v1/chat/completions", json={
            "model": model, "messages": [{"role": "user", "content": f"hello {model}"}]})
        assert r.status_code == 200, r.text
    assert nixx.client.post("/v1/intent/derive").status_code == 200
    nixx.idle()
    asked = [(q.method, q.path) for q in llm.requests if not q.path.endswith(
        ("/chat/completions", "/embeddings"))]
    assert asked.count(("GET", "/props")) == 1
    assert asked.count(("GET", "/v1/models")) == 1


def test_a_backend_whose_slots_are_unknown_gets_no_extra_request(nixx: Nixx, llm: FakeLLM) -> None:
    """An OpenAI-compatible service says nothing of its slots: it may batch, and bills by
    the token: nothing is sent again for its cache."""
    nixx.chat("we are planning the garden")
    nixx.idle()
    count = len(llm.chat_requests)
    assert nixx.client.post("/v1/intent/derive").status_code == 200
    nixx.idle()
    assert len(llm.chat_requests) == count + 1
    assert nixx.service._llm.gate.restores == 0


# ---- the context length, learned ---------------------------------------------------------


@pytest.mark.parametrize(
    "tell, length, source",
    [
        ({"props": {"default_generation_settings": {"n_ctx": 1024}, "total_slots": 1}},
         1024, "llama.cpp /props"),
        ({"show": {"parameters": "num_ctx 1536\ntemperature 0.7",
                   "model_info": {"llama.context_length": 131072}}},
         1536, "Ollama /api/show num_ctx"),
        ({"show": {"model_info": {"qwen2.context_length": 2048}}},
         2048, "Ollama /api/show qwen2.context_length"),
        ({"model_fields": {"max_model_len": 1200}}, 1200, "/v1/models max_model_len"),
    ],
)
def test_the_context_length_is_learned_from_the_backend(
    make_settings: Any, llm: FakeLLM, tell: dict[str, Any], length: int, source: str
) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    for name, value in tell.items():
        setattr(llm, name, value)
    history = []
    for n in range(40):
        history += [{"role": "user", "content": f"question {n} " + "words " * 60},
                    {"role": "assistant", "content": f"answer {n} " + "words " * 60}]
    with TestClient(create_app(make_settings()), base_url=LOCAL) as client:
        r = Nixx(client).chat("the newest question", history=history)
        assert r.status_code == 200, r.text
        sent = llm.chat_requests[-1]["messages"]
        assert sum(estimate_tokens(m) for m in sent) <= length
        assert sent[-1]["content"].startswith("the newest question")
        assert r.json()["nixx"]["trimmed_messages"] > 0
        status = client.get("/v1/episodic/status").json()
        assert (status["context_length"], status["context_length_source"]) == (length, source)
        if "props" in tell:
            assert status["backend_slots"] == 1


def _refusing(limit: int) -> Any:
    def responder(body: dict[str, Any]) -> Reply:
        tokens = sum(estimate_tokens(m) for m in body["messages"])
        if tokens > limit:
            return Reply(status=400, error=(
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {tokens + 512} tokens. Please reduce the length of the messages."))
        if _is_summary(body):
            return Reply(content=GOOD_SUMMARY)
        return Reply(content="fits now")
    return responder


def test_a_turn_refused_for_its_length_is_trimmed_to_what_the_backend_names(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.responder = _refusing(1500)
    history = [{"role": "user" if n % 2 == 0 else "assistant", "content": "words " * 200}
               for n in range(30)]
    r = nixx.chat("and now?", history=history)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "fits now"
    refused, sent = llm.chat_requests[-2:]
    assert sum(estimate_tokens(m) for m in sent["messages"]) <= 1500
    status = nixx.client.get("/v1/episodic/status").json()
    assert (status["context_length"], status["context_length_source"]) == (
        1500, "the backend's refusal")
    # the next turn is trimmed to it at once
    nixx.chat("again", history=history)
    assert llm.chat_requests[-1]["messages"][-1]["content"].startswith("again")
    assert llm.chat_requests[-2] is not refused


def test_an_overflow_that_trimming_cannot_fix_names_the_length_and_the_setting(
    nixx: Nixx, llm: FakeLLM
) -> None:
    llm.queue(Reply(status=400, error="the request exceeds the available context size, "
                                     "try increasing it"))
    r = nixx.chat("hi")
    assert r.status_code == 400  # no retry fixes it
    message = assert_envelope(r.json(), "context_length_exceeded")["message"]
    assert "8192 tokens" in message and "chat_context_length" in message
    assert "NIXX_CHAT_CONTEXT_LENGTH" in message


def test_summaries_split_a_window_longer_than_the_context(nixx: Nixx, llm: FakeLLM) -> None:
    llm.props = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}
    llm.responder = _refusing(900)  # the backend refuses what does not fit
    store = nixx.service._store
    for n in range(12):
        store.append_buffer("user" if n % 2 == 0 else "assistant", f"row {n} " + "lorem " * 150)
    made = []
    for _ in range(12):
        r = nixx.client.post("/v1/episodic/summary", json={})
        if r.status_code != 200:
            break
        made.append((r.json()["summary"]["start_buffer_id"], r.json()["summary"]["end_buffer_id"]))
    # every row summarised, in windows one after the other, none longer than the context
    assert made[0][0] == 1 and made[-1][1] == 12
    assert all(b[0] == a[1] + 1 for a, b in zip(made, made[1:], strict=False))
    attempts = [b for b in llm.chat_requests if _is_summary(b)]
    assert all(len(b["messages"]) == 2 for b in attempts)  # never the failed answer
    assert all(len(b["messages"][1]["content"]) <= (2048 - 512 - 400) * 3 for b in attempts)
    assert any(b["max_tokens"] == 512 for b in attempts)


def test_a_source_longer_than_the_context_is_summarised_whole(nixx: Nixx, llm: FakeLLM) -> None:
    """Split into parts that fit, each summarised, the parts' summaries combined: every
    word of the source reaches the model, no request is longer than the context."""
    from nixx.ingest.summary import COMBINE_NOTE, PART_PROMPT
    from nixx.memory.prompts import SOURCE_SUMMARY_PROMPT

    n_ctx = 2048
    llm.props = {"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1}
    part_head = PART_PROMPT.partition("{part}")[0]

    def responder(body: dict[str, Any]) -> Reply:
        tokens = sum(estimate_tokens(m) for m in body["messages"]) + body.get("max_tokens", 0)
        if tokens > n_ctx:
            return Reply(status=400, error=f"This model's maximum context length is {n_ctx} "
                         f"tokens. However, you requested {tokens} tokens.")
        system = str(body["messages"][0]["content"])
        if system.startswith(part_head):
            found = sorted(set(re.findall(r"marker(\d+)", body["messages"][1]["content"])))
            return Reply(content="part with " + " ".join(f"m{n}" for n in found))
        if COMBINE_NOTE in system:
            return Reply(content="the whole source: " + body["messages"][1]["content"][:80])
        return Reply(content="fits")

    llm.responder = responder
    store = nixx.service._store
    for n in range(40):
        store.append_buffer("user" if n % 2 == 0 else "assistant",
                            f"marker{n} " + "we planted tomatoes and peppers. " * 12)
    r = nixx.client.post("/v1/sources", json={"name": "garden", "start_id": 1, "end_id": 40})
    assert r.status_code == 200, r.text
    assert r.json()["summary_error"] is None
    asked = [b for b in llm.chat_requests
             if str(b["messages"][0]["content"]).startswith((part_head, SOURCE_SUMMARY_PROMPT))]
    parts = [b for b in asked if str(b["messages"][0]["content"]).startswith(part_head)]
    assert len(parts) >= 3
    # nothing cut: every row's words went to the model, in one part or another
    seen = set()
    for b in parts:
        seen |= set(re.findall(r"marker(\d+)", b["messages"][1]["content"]))
    assert seen == {str(n) for n in range(40)}
    # no request longer than the context (none refused)
    assert all(sum(estimate_tokens(m) for m in b["messages"]) + b["max_tokens"] <= n_ctx
               for b in asked)
    final = asked[-1]
    assert COMBINE_NOTE in final["messages"][0]["content"]
    assert "part with m0 " in final["messages"][1]["content"]
    summary = r.json()["source"]["summary"]
    assert summary.startswith("the whole source: part with m0 ")


def test_a_derived_intent_is_bounded(nixx: Nixx, llm: FakeLLM) -> None:
    nixx.chat("we are planning the release, word by word")
    monologue = ("The user is working on a release. " * 3) + "x" * 500
    llm.queue(Reply(content=monologue))
    r = nixx.client.post("/v1/intent/derive")
    intent = r.json()["intent"]
    assert intent == "The user is working on a release. The user is working on a release."
    assert llm.chat_requests[-1]["max_tokens"] == 100
    llm.queue(Reply(content="word " * 200))
    intent = nixx.client.post("/v1/intent/derive").json()["intent"]
    assert len(intent) <= 300 and intent.endswith("…")


def test_no_backend_names_the_config_file_read(
    make_settings: Any, nixx_home: Any
) -> None:
    from fastapi.testclient import TestClient

    from nixx.server.app import create_app

    from .test_failures import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    config = nixx_home / "config.toml"
    for written in (False, True):
        if written:
            config.write_text("summary_interval = 500\n")
        with TestClient(create_app(make_settings(chat_base_url=url)), base_url=LOCAL) as client:
            r = Nixx(client).chat("hello")
            message = assert_envelope(r.json(), "backend_unavailable")["message"]
            assert str(config) in message
            assert ("does not set it" if written else "no config file was read") in message


# ---- failures in sight ---------------------------------------------------------------------


def test_a_summary_that_keeps_failing_is_shown_with_its_reason(nixx: Nixx, llm: FakeLLM) -> None:
    from nixx.tui.widgets import StatusInfo, failing_text, render_status

    def responder(body: dict[str, Any]) -> Reply:
        if _is_summary(body):
            return Reply(status=400, error="This model's maximum context length is 64 tokens")
        return Reply(content="fine")

    llm.responder = responder
    nixx.client.post("/v1/episodic/config", json={"interval": 3})
    for n in range(2):
        nixx.chat(f"message {n} lorem lorem lorem")
        nixx.idle()
    status = nixx.client.get("/v1/episodic/status").json()
    assert "maximum context length is 64 tokens" in status["summary_error"]
    assert status["summary_failures"] >= 1
    # the TUI's status line
    line = render_status(StatusInfo(failing=failing_text(status))).plain
    assert "summary failing" in line and "maximum context length is 64 tokens" in line
    # every page of /ui
    page = nixx.client.get("/ui/summaries").text
    assert "The summary keeps failing" in page and "maximum context length is 64 tokens" in page
    assert "No summaries yet" in page


def test_an_overdue_summary_is_shown_as_held_up(nixx: Nixx, llm: FakeLLM) -> None:
    """Issue 38: 1,554 unsummarised words against a 1,000 interval and every status said
    all was well. Twice the interval unsummarised is shown, in the status, `nixx chat`'s
    status line and every /ui page."""
    from nixx.tui.widgets import StatusInfo, render_status, stalled_text

    llm.responder = lambda body: (Reply(status=503, error="busy") if _is_summary(body)
                                  else Reply(content="fine"))
    nixx.client.post("/v1/episodic/config", json={"interval": 4})
    nixx.chat("one two three")
    nixx.idle()
    assert nixx.client.get("/v1/episodic/status").json()["stalls"] == []
    nixx.chat("four five six seven eight")
    nixx.idle()
    status = nixx.client.get("/v1/episodic/status").json()
    assert [s for s in status["stalls"] if s.startswith("summary overdue")], status["stalls"]
    line = render_status(StatusInfo(stalled=stalled_text(status))).plain
    assert "summary overdue" in line
    page = nixx.client.get("/ui/summaries").text
    assert "Held up: summary overdue" in page


def test_an_intent_near_the_context_keeps_its_newest_rows_and_continues(
    nixx: Nixx, llm: FakeLLM
) -> None:
    """A conversation near the context: the intent's ten rows would not fit beside it, so
    the derivation keeps the newest rows that do (the older ones are in the conversation
    anyway) and still continues it, instead of going alone and costing the next turn its
    cache."""
    llm.props = {"default_generation_settings": {"n_ctx": 3000}, "total_slots": 1}
    history = _long_history()
    r = nixx.chat("what do the beds need?", history=history, max_tokens=64)
    assert r.status_code == 200, r.text
    nixx.idle()
    for message in history:  # ten long rows of the session
        nixx.service._store.append_buffer(message["role"], message["content"])
    llm.responder = lambda body: Reply(content="Composting the beds.")
    assert nixx.client.post("/v1/intent/derive").json()["intent"] == "Composting the beds."
    nixx.idle()
    asked = [b for b in llm.chat_requests if INTENT_PROMPT in str(b["messages"][-1]["content"])
             and b.get("max_tokens") != 1]
    task = asked[-1]["messages"][-1]["content"]
    assert task.startswith(TASK_NOTE)  # a continuation, not alone
    assert 0 < task.count("\nUser: ") + task.count("\nAssistant: ") < 9  # fewer rows
    status = nixx.client.get("/v1/episodic/status").json()["background"]
    assert (status["continued"], status["alone"], status["restores"]) == (1, 0, 0)
