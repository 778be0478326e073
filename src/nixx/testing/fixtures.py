"""Pytest fixtures for nixx's own tests and for projects that build on nixx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nixx.testing.fake_llm import FakeLLM

if TYPE_CHECKING:
    from nixx.config import Settings


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


def scripted_backend(llm: FakeLLM) -> dict[str, Any]:
    """The settings that point a nixx at the scripted server `llm` for chat and embeddings
    (``fake-embed``)."""
    return {"chat_base_url": llm.base_url, "embed_provider": "openai",
            "embed_base_url": llm.base_url, "embed_model": "fake-embed"}


def scripted_settings(llm: FakeLLM, workspace: Path, **overrides: Any) -> Settings:
    """Settings for a test's nixx backed by `llm` (`scripted_backend`), its file tools in
    `workspace`: recall's threshold at 0.3 (the fake embedder's scale) and the intent
    derived rarely (background jobs take replies from the shared queue: off unless a test
    wants them). `overrides` win."""
    from nixx.config import load_settings

    values: dict[str, Any] = {**scripted_backend(llm), "workspace": workspace,
                              "recall_threshold": 0.3, "intent_interval": 10_000}
    values.update(overrides)
    return load_settings(**values)
