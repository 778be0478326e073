"""Fixtures for nxc: a real workspace on disk and a runner for the real CLIs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nixx.log.workspace import init_workspace

PERSONAS = {
    "coder.yaml": "handle: coder\njob_title: Coder\nsystem_prompt: You write code.\n",
    "reviewer.yaml": "handle: reviewer\njob_title: Reviewer\nsystem_prompt: You review.\n",
    "channels.yaml": (
        "- name: team\n  members: [coder, reviewer, alice]\n  description: the core team\n"
        "- name: front\n  kind: public\n  members: [coder]\n"
    ),
}


def write_personas(root: Path, files: dict[str, str] | None = None) -> Path:
    folder = root / ".nxs-personas"
    folder.mkdir(exist_ok=True)
    for name, text in (PERSONAS if files is None else files).items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def ws(tmp_path):
    """A workspace with replica `ab12` and the personas above."""
    root = tmp_path / "proj"
    root.mkdir()
    workspace, _ = init_workspace(root, replica="ab12")
    write_personas(root)
    return workspace


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}
    env.pop("USER", None)
    env.update(extra)
    return env


def run(tool: str, *args: str, cwd, env: dict[str, str] | None = None, stdin: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `nxc`/`nxs` as a real process (python -m, so the venv's code is what runs)."""
    return subprocess.run(
        [sys.executable, "-m", f"nixx.cli.{tool}", *args],
        cwd=str(cwd), env=cli_env() if env is None else env, input=stdin,
        capture_output=True, text=True, timeout=timeout,
    )


def run_json(tool: str, *args: str, cwd, env=None, stdin=None, code: int = 0):
    proc = run(tool, *args, "--json", cwd=cwd, env=env, stdin=stdin)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)
