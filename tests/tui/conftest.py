"""Fixtures: the scripted LLM and a live nixx server in front of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nixx.testing.fake_llm import FakeLLM

from .live import LiveServer, ThreadedServer, llm_settings


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def live_server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[LiveServer]:
    settings = llm_settings(tmp_path, fake_llm.base_url, fake_llm.base_url)
    with ThreadedServer(settings) as url:
        yield LiveServer(url, settings, fake_llm)
