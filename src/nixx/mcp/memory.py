"""`MemoryAPI`: the memory tools' one way to the store — the nixx server's HTTP API.

`nixx mcp` (stdio) talks to the server its `Target` names. Told where the user's server
is (`--url`, `NIXX_MCP_URL`), it connects there or fails naming it; told nothing, it
starts one on first use when none answers, the way `nixx chat` does (`nixx.local_server`),
stops it on exit (so the store keeps one writer), and `annotate` adds to every result the
store that server reads — an agent reading "no results" then sees which memory was empty. Inside `nixx serve` (`/mcp`) the same requests go to the
app's own routes in process (an ASGI transport, no socket), so both shells return the
same shapes from the same service methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

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


class Target(NamedTuple):
    """Where the memory tools go (`nixx.mcp.stdio.configure`): `start_server` is None when
    the user named the server (`told`: how — ``--url``, ``NIXX_MCP_URL``), so none is
    started in its stead; `store` is what a started server reads."""

    base_url: str
    api_key: SecretStr | str | None
    start_server: Callable[[], Any] | None
    told: str | None = None
    home: str = ""
    store: str = ""


class MemoryAPI:
    def __init__(
        self,
        base_url: str = "",
        *,
        api_key: SecretStr | str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        start_server: Callable[[], Any] | None = None,
        configure: Callable[[], Target] | None = None,
    ) -> None:
        """`start_server` (blocking, run in a worker thread) is called when the server does
        not answer; it returns an object with `stop()` (or None when one answered after all).
        `configure`, called once on first use, returns the `Target` instead (so reading the
        settings waits until a memory tool is called)."""
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._transport = transport
        self._start_server = start_server
        self._configure = configure
        self._client: httpx.AsyncClient | None = None
        self.started: Any = None  # the server started for us, if any
        self.target = Target(self.base_url, api_key, start_server)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            if self._configure is not None:
                self.target = self._configure()
                self._api_key, self._start_server = self.target.api_key, self.target.start_server
                self.base_url, self._configure = self.target.base_url.rstrip("/"), None
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
            raise BackendUnavailable(f"no nixx server answers at {self.base_url}{self._told()}: "
                                     "start it with `nixx serve`")
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
                    f"the nixx server at {self.base_url}{self._told()} does not answer ({exc})"
                ) from exc
        if resp.status_code < 400:
            return resp.json()
        try:
            err = resp.json()["error"]
            message, kind, param = err["message"], err.get("type"), err.get("param")
        except (ValueError, KeyError, TypeError):
            message, kind, param = resp.text[:500] or resp.reason_phrase, None, None
        if resp.status_code == 401:
            message = (f"the nixx server at {self.base_url}{self._told()} refused the key: "
                       f"{message}. nixx mcp sends NIXX_API_KEY from its environment or from "
                       f"$NIXX_HOME/config.toml ({self._home()}); see docs/mcp.md")
        raise APIError(message, status=resp.status_code, kind=kind, param=param)

    def _told(self) -> str:
        return f" (from {self.target.told})" if self.target.told else ""

    def _home(self) -> str:
        return f"NIXX_HOME={self.target.home}" if self.target.home else "NIXX_HOME unknown"

    def annotate(self, result: dict[str, Any], *, hits: int | None = None) -> dict[str, Any]:
        """`result` with the store it came from when the server is one this shell started
        (told nothing, and none answered): ``store`` (the database, `NIXX_HOME`, the URL);
        ``hits=0`` adds a ``note`` saying there were no results in that store, and how to
        point `nixx mcp` at another. A result from a server the user runs is left as is."""
        if self.started is None:
            return result
        store = {"database": self.target.store, "home": self.target.home,
                 "server": f"{self.base_url}, started by nixx mcp: no nixx server answered there"}
        out = {**result, "store": store}
        if hits == 0:
            out["note"] = (f"no results in {self.target.store} ({self._home()}), the store of "
                           "a server nixx mcp started itself. If your memory is in another "
                           "store, give nixx mcp its NIXX_HOME and NIXX_MCP_URL (`nixx mcp "
                           "install` writes them into the client's entry).")
        return out

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.started is not None:
            from anyio import to_thread

            started, self.started = self.started, None
            await to_thread.run_sync(started.stop)
