"""Reasoning across the dialects, with the official `openai` and `anthropic` SDKs against
nixx under a real uvicorn and the scripted backend: the effort asked for reaches the
backend as chat's ``reasoning_effort``."""

from __future__ import annotations

import openai

from nixx.testing.fake_llm import FakeLLM, Reply


def test_responses_reasoning_effort_reaches_the_backend(
    oai: openai.OpenAI, llm: FakeLLM
) -> None:
    llm.queue(Reply(content="Paris."))
    oai.responses.create(model="fake-model", input="capital of France?",
                         reasoning={"effort": "low", "summary": "auto"})
    sent = llm.chat_requests[-1]
    assert sent["reasoning_effort"] == "low"
    assert "reasoning" not in sent


def test_chat_reasoning_effort_passes_through(oai: openai.OpenAI, llm: FakeLLM) -> None:
    llm.queue(Reply(content="Paris."))
    oai.chat.completions.create(model="fake-model", reasoning_effort="high",
                                messages=[{"role": "user", "content": "capital of France?"}])
    assert llm.chat_requests[-1]["reasoning_effort"] == "high"
