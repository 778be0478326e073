"""Pytest fixtures for nixx's own tests and for projects that build on nixx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nixx.testing.fake_llm import FakeLLM


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm
