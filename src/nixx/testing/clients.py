"""Real clients for tests, installed with their own package manager, pinned, once.

    inspector = npm_tool("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")
    llm_cli = pip_tool("llm", "0.36", "llm")

`npm_tool` runs the ordinary `npm install` (the MCP Inspector CLI, Codex, Claude Code),
`pip_tool` a `pip install` into a virtual environment of its own (the `llm` CLI; never
nixx's venv), each into a cache folder (``$NIXXTEST_CLIENTS_DIR``, default
``~/.cache/nixx-tests``; one subfolder per package and version, so a second run costs
nothing), and returns the path of the executable. Without the package manager, or when
the install fails (no network and not cached), they raise `ClientUnavailable` with the
reason; tests skip on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


class ClientUnavailable(RuntimeError):
    """The client cannot be installed here (no package manager, no network, no cache)."""


def clients_dir() -> Path:
    return Path(os.environ.get("NIXXTEST_CLIENTS_DIR")
                or Path.home() / ".cache" / "nixx-tests")


def _install(cmd: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ClientUnavailable(f"installing {what} took over {timeout:.0f}s") from exc
    if done.returncode != 0:
        raise ClientUnavailable(f"installing {what} failed: "
                                f"{(done.stderr or done.stdout)[-500:]}")


def pip_tool(package: str, version: str, bin_name: str, *, timeout: float = 600) -> Path:
    folder = clients_dir() / "pip" / f"{package}@{version}"
    binary = folder / "bin" / bin_name
    if binary.exists():
        return binary
    _install([sys.executable, "-m", "venv", str(folder)], f"a venv for {package}", timeout)
    _install([str(folder / "bin" / "python"), "-m", "pip", "install", "-q",
              f"{package}=={version}"], f"{package}=={version}", timeout)
    if not binary.exists():
        raise ClientUnavailable(f"{package}=={version} installed no {bin_name}")
    return binary


def npm_tool(package: str, version: str, bin_name: str, *, timeout: float = 600) -> Path:
    folder = clients_dir() / "npm" / f"{package.replace('/', '+')}@{version}"
    binary = folder / "node_modules" / ".bin" / bin_name
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise ClientUnavailable("node and npm are not on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    _install([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder),
              f"{package}@{version}"], f"{package}@{version}", timeout)
    if not binary.exists():
        raise ClientUnavailable(f"{package}@{version} installed no {bin_name}")
    return binary
