"""Real clients for tests, installed with their own package manager, pinned, once.

    inspector = npm_tool("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")
    claude = npm_tool("@anthropic-ai/claude-code", "2.1.332", "claude", node="22.23.3")
    llm_cli = pip_tool("llm", "0.36", "llm")

`npm_tool` runs the ordinary `npm install` (the MCP Inspector CLI, Codex, Claude Code),
with ``node=`` under that exact Node version (`node_runtime`: the machine's `node` when it
is that version, else npm's `node` package of it, which ships the binary): npm's engine
check and the package's install scripts then see that Node, as on a user's machine with
it, and the install has a folder of its own;
`pip_tool` a `pip install` into a virtual environment of its own (the `llm` CLI; never
nixx's venv), each into a cache folder (``$NIXXTEST_CLIENTS_DIR``, default
``~/.cache/nixx-tests``; one subfolder per package and version, so a second run costs
nothing), and returns the path of the executable. Without the package manager, or when
the install fails (no network and not cached), they raise `ClientUnavailable` with the
reason; tests skip on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


class ClientUnavailable(RuntimeError):
    """The client cannot be installed here (no package manager, no network, no cache)."""


def clients_dir() -> Path:
    return Path(os.environ.get("NIXXTEST_CLIENTS_DIR")
                or Path.home() / ".cache" / "nixx-tests")


def _install(cmd: list[str], what: str, timeout: float,
             env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env)
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


def _node_version(node: str | Path) -> str | None:
    try:
        done = subprocess.run([str(node), "--version"], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().removeprefix("v") if done.returncode == 0 else None


def node_runtime(version: str, *, timeout: float = 600) -> Path:
    """The folder holding a `node` executable of exactly `version` ("22.23.3"): the
    machine's, when the `node` on PATH is that version, else the binary that npm's `node`
    package of that version ships (installed once into the cache, about 190 MB)."""
    system = shutil.which("node")
    if system is not None and _node_version(system) == version:
        return Path(system).resolve().parent
    folder = clients_dir() / "npm" / f"node@{version}"
    bin_dir = folder / "node_modules" / "node" / "bin"
    if _node_version(bin_dir / "node") == version:
        return bin_dir
    npm = shutil.which("npm")
    if npm is None or system is None:
        raise ClientUnavailable("node and npm are not on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    _install([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder),
              f"node@{version}"], f"node@{version}", timeout)
    found = _node_version(bin_dir / "node")
    if found != version:
        raise ClientUnavailable(f"node@{version} from npm gave no node {version} ({found})")
    return bin_dir


def npm_tool(package: str, version: str, bin_name: str, *, node: str | None = None,
             timeout: float = 600) -> Path:
    """`package@version` installed by npm, its `bin_name` executable's path; with `node`
    (an exact version), npm and the package's install scripts run under that Node
    (`node_runtime` first on PATH), in a folder of their own."""
    name = f"{package.replace('/', '+')}@{version}" + (f"+node{node}" if node else "")
    folder = clients_dir() / "npm" / name
    binary = folder / "node_modules" / ".bin" / bin_name
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise ClientUnavailable("node and npm are not on PATH")
    env = None
    if node is not None:
        env = {**os.environ,
               "PATH": f"{node_runtime(node, timeout=timeout)}{os.pathsep}{os.environ['PATH']}"}
    folder.mkdir(parents=True, exist_ok=True)
    _install([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder),
              f"{package}@{version}"], f"{package}@{version}", timeout, env=env)
    if not binary.exists():
        raise ClientUnavailable(f"{package}@{version} installed no {bin_name}")
    return binary


class RecordingProxy:
    """A pass-through on a loopback port in front of `upstream` (nixx's base URL) that
    records the JSON body of every request a client sends through it, so a test can
    compare what the client sent with what nixx sent the backend. Responses are streamed
    back as they come (SSE included) and end with the connection (HTTP/1.0).

        with RecordingProxy(live.base_url) as proxy:
            ... point the client at proxy.base_url ...
            proxy.requests  # [(method, path, body), ...]
    """

    _HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
            "proxy-connection", "upgrade", "te", "trailer", "accept-encoding"}

    def __init__(self, upstream: str) -> None:
        import http.server
        import threading

        import httpx

        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str, Any]] = []
        self.user_agents: list[str] = []  # each request's User-Agent, in order
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                proxy.requests.append((self.command, self.path, body))
                proxy.user_agents.append(self.headers.get("user-agent") or "")
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in RecordingProxy._HOP}
                headers["accept-encoding"] = "identity"  # the bytes pass as they come
                with httpx.Client(timeout=httpx.Timeout(300, connect=10)) as client, \
                        client.stream(self.command, proxy.upstream + self.path,
                                      headers=headers, content=raw) as answer:
                    self.send_response(answer.status_code)
                    for key, value in answer.headers.multi_items():
                        if key.lower() not in RecordingProxy._HOP:
                            self.send_header(key, value)
                    self.send_header("connection", "close")
                    self.end_headers()
                    for piece in answer.iter_raw():
                        self.wfile.write(piece)
                        self.wfile.flush()

            do_GET = do_POST = do_HEAD = do_DELETE = do_PUT = _forward

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="recording-proxy")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies sent to `path` (the query string left out), in order."""
        return [b for _m, p, b in self.requests if p.split("?")[0] == path]

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
