"""Every shell ends quietly on a closed pipe (`nxc search apsw | head`): no traceback,
exit 141 like a process killed by SIGPIPE. The pipe's read end is closed before the
child starts, so its first write fails every time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.nxc.conftest import cli_env, write_personas

from nixx.log.workspace import init_workspace


def closed_pipe_run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            args, cwd=cwd, env=env, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    init_workspace(root, replica="ab12")
    write_personas(root)
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["nixx", "--help"],
        ["nixx", "version"],
        ["nixx", "db", "init"],
        ["nxc", "--help"],
        ["nxc", "list"],
        ["nxc", "search", "apsw", "--json"],
        ["nxc", "list", "--json"],
        ["nxs", "--help"],
    ],
)
def test_closed_pipe_is_a_quiet_exit(argv: list[str], project: Path, tmp_path: Path) -> None:
    tool, *rest = argv
    env = cli_env(NIXX_HOME=str(tmp_path / "home"))
    code, stderr = closed_pipe_run(
        [sys.executable, "-m", f"nixx.cli.{tool}", *rest], project, env
    )
    assert stderr == ""
    # --help exits through argparse (SystemExit 0); its buffered text is dropped at exit
    assert code == (0 if "--help" in rest else 141)
