"""A person at the keyboard of a one-slot local model (issue 38): they read each answer for
1-12 seconds before typing the next message. The backend is `FakeLLM` with a
`PromptCache`: one cached prompt, evaluation time proportional to the tokens past the
shared prefix, a started prompt finished even when its client hangs up, llama-cpp-python's
one slot and ``interrupt_requests``. Time runs ten times faster than a person's (pauses,
the backend's speeds and ``background_quiet`` alike): the test asserts on tokens and on
what was made, never on a time.

What nixx's own work may cost the user: no turn re-evaluates the history it had cached
(summed over the turns, the tokens evaluated stay within twice the new tokens), and the
summary and the intent are made while the person keeps talking."""

from __future__ import annotations

import time
from typing import Any

import httpx

from nixx.llm.slot import TASK_NOTE
from nixx.memory.prompts import INTENT_PROMPT, SUMMARY_PROMPT
from nixx.testing.fake_llm import FakeLLM, PromptCache, Reply, user_words
from nixx.testing.person import MESSAGES, pauses

SCALE = 0.1  # seconds of the test per second of a person's time
EVAL_RATE, GEN_RATE = 200.0, 20.0  # tokens a second: a small model on a laptop's CPU



def _answer(words: str) -> str:
    """A turn's answer: about fifty words that take up what the person said."""
    topic = " ".join(words.split()[:8])
    return (f"About '{topic}': here is what I would do. Keep it practical and short, "
            "let people try things themselves, and say clearly what is safe and what is "
            "not. Beginners remember what they did with their own hands far better than "
            "what they heard, so give every step a small task.")


def _responder(body: dict[str, Any]) -> Reply:
    last = body["messages"][-1]
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    first = body["messages"][0].get("content") or ""
    task = text if text.startswith(TASK_NOTE) else first
    if SUMMARY_PROMPT in task:
        return Reply(content='{"summary": "Maaike plans a six-Saturday beekeeping course in '
                             'Ghent with Joris: veils, a Dadant demo hive, swarm prevention.", '
                             '"entities": {"people": ["Maaike", "Joris"]}, '
                             '"tags": ["beekeeping", "course"]}')
    if INTENT_PROMPT in task:
        return Reply(content="Planning a beginners' beekeeping course in Ghent; now "
                             "preparing the sessions and the sign-up form.")
    return Reply(content=_answer(user_words(body)))


def _is_turn(messages: list[dict[str, Any]], said: set[str]) -> bool:
    """A user's turn: its last message is one the person typed (with nixx's memory)."""
    last = messages[-1]
    content = last.get("content")
    return (last.get("role") == "user" and isinstance(content, str)
            and not content.startswith(TASK_NOTE)
            and content.split("\n\n---\n", 1)[0] in said)


def test_a_person_pausing_to_read_keeps_the_cache_and_gets_summaries(make_settings: Any) -> None:
    cache = PromptCache(eval_rate=EVAL_RATE / SCALE, gen_rate=GEN_RATE / SCALE)
    with FakeLLM(slots=1, interrupt=True, cache=cache) as llm:
        # llama-cpp-python's model list: nixx learns its one slot from it
        llm.model_fields = {"owned_by": "me", "permissions": []}
        llm.responder = _responder
        settings = make_settings(
            chat_base_url=llm.base_url, embed_base_url=llm.base_url,
            chat_context_length=8192, summary_interval=600, intent_interval=10,
            background_quiet=1.0 * SCALE,
        )
        from nixx.server.app import create_app
        from nixx.testing.live_server import LiveServer

        history: list[dict[str, Any]] = []
        turn_requests: list[int] = []  # index into cache.evaluations of each turn's request
        said: set[str] = set()
        with LiveServer(create_app(settings)) as server:
            import openai

            client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x",
                                   max_retries=0, timeout=120)
            pausing = pauses()
            for n, message in enumerate(MESSAGES):
                if n:
                    time.sleep(next(pausing) * SCALE)  # reading the answer
                said.add(message)
                history.append({"role": "user", "content": message})
                before = len(cache.evaluations)
                stream = client.chat.completions.create(
                    model="qwen", messages=history, stream=True)  # type: ignore[arg-type]
                answer = "".join(c.choices[0].delta.content or ""
                                 for c in stream if c.choices)
                assert answer.strip(), f"turn {n + 1}: no answer"
                history.append({"role": "assistant", "content": answer})
                turn_requests += [i for i in range(before, len(cache.evaluations))
                                  if _is_turn(cache.evaluations[i].messages, said)]
            # what was made while the person talked, before anything is waited for
            status = httpx.get(f"{server.base_url}/v1/episodic/status").json()
            summaries = httpx.get(f"{server.base_url}/v1/episodic/summaries").json()["summaries"]
            intent = httpx.get(f"{server.base_url}/v1/intent").json()

    turns = [cache.evaluations[i] for i in turn_requests]
    assert len(turns) == len(MESSAGES), [len(t.messages) for t in turns]
    new_total = evaluated_total = 0
    table = []
    previous: list[str] = []
    for n, turn in enumerate(turns):
        prompt = PromptCache.tokens(turn.body)
        shared = 0
        for a, b in zip(previous, prompt, strict=False):
            if a != b:
                break
            shared += 1
        new = len(prompt) - shared
        new_total += new
        evaluated_total += turn.evaluated
        table.append((n + 1, turn.cached, turn.evaluated, new))
        answer = history[2 * n + 1]["content"]
        previous = PromptCache.tokens(
            {**turn.body, "messages": [*turn.messages, {"role": "assistant", "content": answer}]}
        )[:-1]
    print("turn, cached, evaluated, new:", table)
    print("background:", status["background"])
    print("summaries:", len(summaries), "intent:", intent)
    assert evaluated_total <= 2 * new_total, table
    assert summaries, status
    assert intent["intent"] and intent["source"] == "derived", status
