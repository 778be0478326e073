"""Real clients from npm for tests (the MCP Inspector CLI, Codex, Claude Code).

    bin_path = npm_tool("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")

installs the pinned package once with the ordinary `npm install` into a cache folder
(``$NIXXTEST_NPM_DIR``, default ``~/.cache/nixx-tests/npm``; one subfolder per
package and version, so a second run costs nothing) and returns the path of its
executable. Without node/npm, or when the install fails (no network and not cached),
it raises `NpmUnavailable` with the reason; tests skip on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class NpmUnavailable(RuntimeError):
    """The tool cannot be installed here (no npm, no network and no cached copy)."""


def npm_dir() -> Path:
    return Path(os.environ.get("NIXXTEST_NPM_DIR")
                or Path.home() / ".cache" / "nixx-tests" / "npm")


def npm_tool(package: str, version: str, bin_name: str, *, timeout: float = 600) -> Path:
    folder = npm_dir() / f"{package.replace('/', '+')}@{version}"
    binary = folder / "node_modules" / ".bin" / bin_name
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise NpmUnavailable("node and npm are not on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder),
             f"{package}@{version}"],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise NpmUnavailable(f"npm install {package}@{version} took over {timeout:.0f}s") from exc
    if done.returncode != 0 or not binary.exists():
        raise NpmUnavailable(f"npm install {package}@{version} failed: "
                             f"{(done.stderr or done.stdout)[-500:]}")
    return binary
