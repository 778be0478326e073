"""The `nixx serve` a client on this machine reaches: where it is, whether it answers, and
starting one for a client (`nixx chat`, `nixx mcp`) when none answers, stopped afterwards.

`server_url(host, port)` is the one answer to "where does a client reach nixx serve bound
to host:port" (a wildcard bind — ``0.0.0.0``, ``::``, ``[::]``, empty — is reached on
``127.0.0.1``; an IPv6 address is bracketed): `default_url(settings)` for the clients, the
built-in agent's backend file (`nixx.nxc.delivery.llm_backend`). `server_answers(url)` is
the one probe. The users are clients of the server, not the server — `tui`, `mcp`,
`testing`, `nxc.delivery` — so it is filed beside them, not under `nixx.server`.

`ensure_server(url, settings, client=...)` probes ``URL/health``. When a server answers it
returns None (nothing to stop). When none does and the URL is on this machine, it starts
``python -m nixx.cli.nixx serve --host H --port P`` in its own process group with the
current environment (so the same `NIXX_*` settings: embedded SQLite store and local
embedder by default), its output going to ``$NIXX_HOME/logs/<client>-server.log``
(``chat-server.log``, ``mcp-server.log``), waits for ``/health`` and returns a
`ServerProcess` whose `stop()` ends it. On Linux the kernel also ends it when the
client dies any other way (its terminal closed or killed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from nixx.config import Settings, is_loopback_host
from nixx.errors import BackendUnavailable, ConfigError

START_TIMEOUT = 60.0


WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


def server_url(host: str, port: int) -> str:
    """Where a client on this machine reaches `nixx serve` bound to `host`:`port`."""
    host = host.strip()
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def default_url(settings: Settings) -> str:
    """The URL of the server `nixx serve` would start with these settings (the clients'
    default when no ``--url`` is given)."""
    return server_url(settings.host, settings.port)


def server_answers(url: str, *, timeout: float = 2.0) -> bool:
    """Whether a nixx server answers at `url` now: ``/health`` says 200 with its
    ``{"status": "ok", "version"}`` (another program on the port does not count). The
    one probe of a running server (clients, `nixx mcp`, the nxc agents)."""
    import httpx  # not at import: the nxc side reads `server_url` without it

    try:
        resp = httpx.get(url.rstrip("/") + "/health", timeout=timeout)
        data = resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(data, dict) and data.get("status") == "ok" and "version" in data


class ServerProcess:
    """A `nixx serve` child process started for a client."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.proc = proc
        self.url = url
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (uvicorn shuts down cleanly), then SIGKILL if it lingers."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


def _die_with_parent(parent: int):  # type: ignore[no-untyped-def]
    """A `preexec_fn` that has the kernel send the server SIGTERM when the chat dies
    (Linux `prctl(PR_SET_PDEATHSIG)`), so a chat killed with its terminal (SIGHUP,
    SIGKILL: no `finally` runs) does not leave its server behind. Elsewhere: None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def arm() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the chat died before the line above
            os._exit(1)

    return arm


def start_server(
    url: str,
    settings: Settings,
    *,
    timeout: float = START_TIMEOUT,
    client: str = "chat",
    on_start: Callable[[], None] | None = None,
) -> ServerProcess:
    """Start `nixx serve` for `url` and wait until `/health` answers. `client` names the
    verb it is started for (`chat`, `mcp`) in messages and in the log file's name;
    `on_start` is called before the wait, to tell the user about it."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if not is_loopback_host(host):
        raise BackendUnavailable(
            f"no nixx server answers at {url}, and nixx {client} only starts one on this "
            "machine: start it there with `nixx serve`, or check --url"
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme == "https":
        raise ConfigError(f"cannot start a server for {url}: nixx serve speaks plain http")
    if on_start is not None:
        on_start()
    log_dir = settings.home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{client}-server.log"
    env = dict(os.environ)
    env["NIXX_HOST"] = host
    env["NIXX_PORT"] = str(port)
    cmd = [sys.executable, "-m", "nixx.cli.nixx", "serve", "--host", host, "--port", str(port)]
    with log_path.open("ab") as log:
        log.write(f"\n--- nixx {client} started: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # the terminal's signals are the client's, not the server's
            preexec_fn=_die_with_parent(os.getpid()),
        )
    server = ServerProcess(proc, url, log_path)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise BackendUnavailable(
                f"the nixx server started for nixx {client} exited with code {proc.returncode}; "
                f"its log ({log_path}) ends with:\n{server.log_tail()}"
            )
        if server_answers(url, timeout=1.0):
            return server
        if time.monotonic() > deadline:
            server.stop()
            raise BackendUnavailable(
                f"the nixx server started for nixx {client} did not answer at {url} within "
                f"{timeout:.0f}s; see {log_path}"
            )
        time.sleep(0.1)


def ensure_server(
    url: str,
    settings: Settings,
    *,
    client: str = "chat",
    on_start: Callable[[], None] | None = None,
) -> ServerProcess | None:
    """None when a server answers at `url`; otherwise the server started for it
    (`on_start` is called first, to tell the user about the wait)."""
    if server_answers(url):
        return None
    return start_server(url, settings, client=client, on_start=on_start)
