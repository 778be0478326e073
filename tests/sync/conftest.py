"""Fixtures for sync: real workspaces, a real bare git repository as the remote, the
embedded PostgreSQL as the other one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nixx.log.store import LogStore
from nixx.log.workspace import Workspace, init_workspace
from nixx.nxc.installed import reducers
from nixx.sync import state
from nixx.sync.engine import PassResult, sync_workspace
from nixx.testing.pg_fixtures import *  # noqa: F403 - pg_server / pg_url

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_TERMINAL_PROMPT": "0"}


def git(*args: str, cwd: Path | str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)
    return proc.stdout.strip()


def bare_repo(tmp: Path, name: str = "remote.git") -> Path:
    path = tmp / name
    git("init", "-q", "--bare", str(path))
    return path


def clone(remote: Path, dest: Path) -> Path:
    git("clone", "-q", str(remote), str(dest))
    return dest


def workspace(folder: Path, replica: str) -> Workspace:
    folder.mkdir(parents=True, exist_ok=True)
    ws, _ = init_workspace(folder, replica=replica)
    return ws


def bind(ws: Workspace, **kwargs) -> state.Binding:
    with LogStore.open(ws.db_path) as store:
        bound, _ = state.bind(store, ws.root, **kwargs)
    return bound


def sync(ws: Workspace, **options) -> PassResult:
    return sync_workspace(ws, reducers(), **options)


def open_store(ws: Workspace) -> LogStore:
    return LogStore.open(ws.db_path, reducers())


class Remote:
    """One remote of either kind, with N workspaces bound to one stream on it."""

    def __init__(self, kind: str, tmp: Path, pg_url: str | None = None) -> None:
        self.kind = kind
        self.tmp = tmp
        self.url = str(bare_repo(tmp)) if kind == "git" else pg_url
        self.stream: str | None = None

    def workspace(self, name: str, replica: str) -> Workspace:
        ws = workspace(self.tmp / name, replica)
        if self.stream is None:
            self.stream = bind(ws, remote=self.url, create=True).stream
        else:
            bind(ws, remote=self.url, join=self.stream)
        return ws


@pytest.fixture(params=["git", pytest.param("postgres", marks=pytest.mark.postgres)])
def remote(request, tmp_path) -> Remote:
    if request.param == "postgres":
        return Remote("postgres", tmp_path, request.getfixturevalue("pg_url"))
    return Remote("git", tmp_path)


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}
    env.pop("USER", None)
    env.update(extra)
    return env


def run(tool: str, *args: str, cwd, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `nxc` / `nxs` as a real process (python -m: the venv's code is what runs)."""
    import sys

    return subprocess.run([sys.executable, "-m", f"nixx.cli.{tool}", *args], cwd=str(cwd),
                          env=cli_env() if env is None else env, capture_output=True,
                          text=True, timeout=timeout)
