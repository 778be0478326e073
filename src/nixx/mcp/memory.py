"""`MemoryAPI`: the memory tools' one way to the store — the nixx server's HTTP API.

`nixx mcp` (stdio) talks to the configured server URL; when none answers on first use
it starts one the way `nixx chat` does (`nixx.local_server`) and stops it on exit,
so the store keeps one writer. Inside `nixx serve` (`/mcp`) the same requests go to the
app's own routes in process (an ASGI transport, no socket), so both shells return the
same shapes from the same service methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nixx.errors import BackendUnavailable, NixxError
from nixx.secret import reveal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import httpx
    from pydantic import SecretStr

# httpx (~0.2 s with its CLI's imports) and the settings are loaded on the first call, not
# at start-up: `nixx mcp` must answer `tools/list` fast.
TIMEOUT, CONNECT_TIMEOUT = 300.0, 5.0  # ingesting a folder or a page can take a while


class APIError(NixxError):
    """The nixx server refused a request; `kind` is its error type, `message` its text."""

    def __init__(self, message: str, *, status: int, kind: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message, param=param)
        self.status = status
        if kind:
            self.kind = kind


class MemoryAPI:
    def __init__(
        self,
        base_url: str = "",
        *,
        api_key: SecretStr | str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        start_server: Callable[[], Any] | None = None,
        configure: Callable[[], tuple[str, SecretStr | str | None, Callable[[], Any] | None]]
        | None = None,
    ) -> None:
        """`start_server` (blocking, run in a worker thread) is called when the server does
        not answer; it returns an object with `stop()` (or None when one answered after all).
        `configure`, called once on first use, returns (base_url, api_key, start_server)
        instead (so reading the settings waits until a memory tool is called)."""
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._transport = transport
        self._start_server = start_server
        self._configure = configure
        self._client: httpx.AsyncClient | None = None
        self.started: Any = None  # the server started for us, if any

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            if self._configure is not None:
                base, self._api_key, self._start_server = self._configure()
                self.base_url, self._configure = base.rstrip("/"), None
            key = reveal(self._api_key)
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=headers, transport=self._transport,
                timeout=httpx.Timeout(TIMEOUT, connect=CONNECT_TIMEOUT),
            )
        return self._client

    async def _ensure_server(self) -> None:
        from anyio import to_thread

        if self._start_server is None:
            raise BackendUnavailable(
                f"no nixx server answers at {self.base_url}: start it with `nixx serve`"
            )
        if self.started is not None:  # ours, and gone: stop what is left before a new one
            await to_thread.run_sync(self.started.stop)
        self.started = await to_thread.run_sync(self._start_server)

    async def request(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One API call; the body of a 2xx answer, else `APIError` with the server's message.
        A server that does not answer is started (once per failure) when this shell may."""
        import httpx

        http = self._http()
        try:
            resp = await http.request(method, path, json=json, params=params)
        except httpx.TransportError:
            await self._ensure_server()
            try:
                resp = await http.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                raise BackendUnavailable(
                    f"the nixx server at {self.base_url} does not answer ({exc})"
                ) from exc
        if resp.status_code < 400:
            return resp.json()
        try:
            err = resp.json()["error"]
            message, kind, param = err["message"], err.get("type"), err.get("param")
        except (ValueError, KeyError, TypeError):
            message, kind, param = resp.text[:500] or resp.reason_phrase, None, None
        raise APIError(message, status=resp.status_code, kind=kind, param=param)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.started is not None:
            from anyio import to_thread

            started, self.started = self.started, None
            await to_thread.run_sync(started.stop)
