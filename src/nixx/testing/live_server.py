"""`LiveServer`: a nixx app served by a real uvicorn on a free loopback port, in a
thread of the test process (for callers that need real HTTP: the `openai` SDK, the TUI).

    with LiveServer(create_app(settings)) as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x")
        server.call(server.service.settle)   # run a coroutine on the server's loop
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: The base URL for a client of the app in process (Starlette's `TestClient`): a loopback
#: ``Host``, which the server's Host check accepts (TestClient's default ``testserver`` is
#: no name this server answers to).
LOCAL = "http://127.0.0.1"


class LiveServer:
    def __init__(self, app: Any, *, startup_timeout: float = 30.0, **options: Any) -> None:
        """`options`: more `uvicorn.Config` keywords (`http`, `timeout_keep_alive`, ...)."""
        import uvicorn

        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5, **options
        )
        self._server = uvicorn.Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="nixx-live-server")
        self._startup_timeout = startup_timeout
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by start()
            self._error = exc

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._server.serve(sockets=[self._sock])

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def service(self) -> Any:
        return self.app.state.service

    def start(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the nixx server did not start: {self._error!r}")
            if time.monotonic() > deadline:
                raise RuntimeError("the nixx server did not start in time")
            time.sleep(0.01)
        return self

    def call(self, fn: Callable[[], Awaitable[T]], timeout: float = 60.0) -> T:
        """Run `fn()` on the server's event loop and return its result."""
        assert self._loop is not None

        async def wrapper() -> T:
            return await fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_until_serving(url: str, proc: Any, *, timeout: float = 60.0) -> None:
    """Wait until the server process `proc` (a `subprocess.Popen`) answers `url`/health;
    raise with its output when it exits first or `timeout` passes."""
    from nixx.local_server import server_answers

    deadline = time.monotonic() + timeout
    while not server_answers(url, timeout=1.0):
        if proc.poll() is not None:
            out = proc.stdout or proc.stderr
            raise AssertionError(f"the server exited ({proc.returncode}): "
                                 f"{out.read() if out else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no server answered at {url} within {timeout:.0f}s")
        time.sleep(0.1)
