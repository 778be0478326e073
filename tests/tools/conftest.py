from __future__ import annotations

from pathlib import Path

import pytest

from nixx.config import load_settings


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello notes\n")
    (tmp_path / "ws-secret").mkdir()
    (tmp_path / "ws-secret" / "key.txt").write_text("TOP SECRET")
    return ws


@pytest.fixture
def store(tmp_path: Path):
    from nixx.store import open_store

    s = open_store(f"sqlite:///{tmp_path / 'nixx.db'}")
    yield s
    s.close()


@pytest.fixture
def make_registry(workspace: Path, store):
    from nixx.tools import ToolRegistry

    def make(**overrides):
        return ToolRegistry(load_settings(workspace=workspace, **overrides), store)

    return make
