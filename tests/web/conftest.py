"""Fixtures for the memory browser: a real `nixx serve` app under uvicorn on loopback
(FakeLLM as the backend) and a real headless Chromium (Debian's ``chromium`` package)
driven by Playwright. ``make test`` installs Chromium when it is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.fixtures import scripted_settings
from nixx.testing.live_server import LiveServer

CHROMIUM = os.environ.get("NIXXTEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for the package's tests. Package scope, not session: playwright's sync
    API keeps an event loop running on the main thread while it is open, and every
    `asyncio.run` of a later test (tests/server after tests/web) would fail."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium package "
            "(apt-get install chromium), or set NIXXTEST_CHROMIUM"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    context.close()


def make_server(llm: FakeLLM, workspace: Path, **overrides: Any) -> LiveServer:
    return LiveServer(create_app(scripted_settings(llm, workspace, **overrides)))


@pytest.fixture
def server(llm: FakeLLM, workspace: Path) -> Iterator[LiveServer]:
    with make_server(llm, workspace) as live:
        yield live
