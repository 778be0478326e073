"""Shared fixtures. Every test runs with NIXX_HOME in a fresh temp dir, so nothing
touches the user's real data and every store is a real file."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from nixx.testing.fake_llm import FakeLLM


def pytest_configure(config: pytest.Config) -> None:
    """Tests send Ctrl+C (SIGINT) to real `nixx serve` and `nxs sync daemon` processes.
    A suite started in the background by a shell without job control (`cmd &`, as a CI
    script may) inherits SIGINT *ignored*, every child it starts inherits that, and
    Python then leaves SIGINT ignored: the Ctrl+C tests failed as if nixx ignored it.
    With SIGINT handled here, children start with the default and see Ctrl+C as a
    user's terminal would deliver it."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def nixx_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "nixx-home"
    home.mkdir()
    monkeypatch.setenv("NIXX_HOME", str(home))
    for name in list(os.environ):
        if name.startswith(("NIXX_", "NXC_")) and name != "NIXX_HOME":
            monkeypatch.delenv(name)
    return home


@pytest.fixture
def llm(fake_llm: FakeLLM) -> FakeLLM:
    """The scripted backend (`nixx.testing.fixtures.fake_llm`), under its short name."""
    return fake_llm


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder for file tools and ingest to be confined to."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root


pytest_plugins = ["nixx.testing.fixtures"]
