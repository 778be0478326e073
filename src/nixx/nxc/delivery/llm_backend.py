"""The LLM backend of nxc's built-in runtime and of channel summaries.

The backend (`nixx.nxc.delivery.shapes.Backend`) is what `Deliverer.backend` builds
(nixx's `Settings` as the process that started the chain resolved them, `from_settings`,
plus the persona's `model` and `tools`) and the spawner hands over in a 0600 file. Here:
where each of its settings is set (for error
messages), a blocking client of it (`nixx.llm.SyncChatClient`, so failures are nixx
errors), whether `nixx serve` answers and a client of it (the route a persona's turns
take when its memory is shared), the model a turn uses, and one plain completion. Both
the runtime (`nixx.nxc.delivery.builtin_runtime`) and the channel rounds (`nixx.nxc.delivery.rounds`) call it; it
imports neither.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.llm import SyncChatClient
    from nixx.nxc.delivery.shapes import Backend


def from_settings() -> Backend:
    """The backend as this process's nixx settings make it (the start of a chain: a
    child's environment holds no ``NIXX_*`` settings, so it inherits the file). The keys
    are written for the built-in agent in clear (a 0600 file)."""
    from nixx.config import config_file_path, load_settings
    from nixx.local_server import server_url
    from nixx.secret import reveal

    s = load_settings()
    return {"base_url": s.chat_base_url, "api_key": reveal(s.chat_api_key),
            "model": s.chat_model, "timeout": s.chat_timeout,
            "background_timeout": s.background_timeout,
            "max_rounds": s.tool_max_rounds, "tools_write": s.tools_write,
            "tools_delete": s.tools_delete, "allow_hard_links": s.allow_hard_links,
            "config_file": str(config_file_path()),
            # `nixx serve` as these settings place it: persona turns go through it when
            # it answers (shared recall, intent and buffer)
            "server_url": server_url(s.host, s.port),
            "server_api_key": reveal(s.api_key)}


def env_hint(backend: Backend, variable: str, key: str) -> str:
    """Where a setting is set: the variable, or the key in the config file nixx read."""
    config = backend.get("config_file")
    return f"{variable} (or `{key}` in {config})" if config else variable


def open_client(backend: Backend) -> SyncChatClient:
    """A blocking client of the backend (close it, or use it as a context manager)."""
    from nixx.llm import SyncChatClient

    return SyncChatClient(backend["base_url"], api_key=backend.get("api_key"),
                          timeout=float(backend.get("timeout") or 120),
                          env_var=env_hint(backend, "NIXX_CHAT_BASE_URL", "chat_base_url"))


def server_answers(backend: Backend) -> bool:
    """Whether the persona's turns go through `nixx serve`: the persona did not opt out
    (`shared_memory: false`) and the server the settings name answers `/health` now."""
    url = backend.get("server_url")
    if not url or not backend.get("shared_memory", True):
        return False
    from nixx.local_server import server_answers as answers

    return answers(url)


def open_server_client(backend: Backend) -> SyncChatClient:
    """A blocking client of `nixx serve`'s `/v1`, as the persona (`X-Nixx-Agent`)."""
    from nixx.llm import SyncChatClient

    return SyncChatClient(
        backend["server_url"].rstrip("/") + "/v1", api_key=backend.get("server_api_key"),
        timeout=float(backend.get("timeout") or 120) + 30,
        env_var=env_hint(backend, "NIXX_HOST/NIXX_PORT", "host/port"),
        headers={"X-Nixx-Origin": "api", "X-Nixx-Agent": str(backend.get("persona") or "nxc")})


def resolve_model(backend: Backend, client: SyncChatClient | None = None) -> str:
    """The persona's `model`, else NIXX_CHAT_MODEL, else the backend's first listed model
    (as `nixx serve` does) — never a made-up name. `BackendError` when there is none."""
    from nixx.errors import BackendError

    chosen = backend.get("persona_model") or backend.get("model")
    if chosen:
        return str(chosen)
    if backend.get("resolved_model"):
        return str(backend["resolved_model"])
    own = client is None
    client = client or open_client(backend)
    try:
        data = client.list_models()
    finally:
        if own:
            client.close()
    names = [str(m.get("id")) for m in data["data"] if isinstance(m, dict) and m.get("id")]
    if not names:
        raise BackendError(
            f"the LLM backend at {backend['base_url']} lists no models; set "
            f"{env_hint(backend, 'NIXX_CHAT_MODEL', 'chat_model')} or the persona's `model`")
    backend["resolved_model"] = names[0]
    return names[0]


#: a channel round's summary: a few paragraphs at most
ROUND_SUMMARY_MAX_TOKENS = 400


def complete_once(backend: Backend, messages: list[dict[str, Any]]) -> str:
    """One plain completion (a channel round's summary): nixx's own call, so bounded —
    `ROUND_SUMMARY_MAX_TOKENS` and the time budget (``NIXX_BACKGROUND_TIMEOUT``). When
    `nixx serve` answers, it is asked (``POST /v1/background/completions``): the call then
    goes through the server's backend gate, waiting while a user's turn runs, never
    beside one on a one-slot backend. Else the backend is asked directly."""
    from nixx.errors import BackendError
    from nixx.llm import SyncChatClient

    budget = float(backend.get("background_timeout") or backend.get("timeout") or 120)
    if backend.get("server_url") and server_answers(backend):
        # waits for the users' turns, then runs within the budget: the client waits for both
        timeout = budget + float(backend.get("timeout") or 120) + 30
        with SyncChatClient(
            backend["server_url"].rstrip("/") + "/v1", api_key=backend.get("server_api_key"),
            timeout=timeout, env_var=env_hint(backend, "NIXX_HOST/NIXX_PORT", "host/port"),
        ) as server:
            try:
                out = server.post("/background/completions", {
                    "messages": messages, "max_tokens": ROUND_SUMMARY_MAX_TOKENS,
                    "model": backend.get("persona_model") or backend.get("model") or None,
                    "what": "a channel round's summary"})
                return str(out.get("content") or "")
            except BackendError as exc:
                if exc.details.get("status") != 404:  # an older server: ask the backend
                    raise
    with SyncChatClient(backend["base_url"], api_key=backend.get("api_key"), timeout=budget,
                        env_var=env_hint(backend, "NIXX_CHAT_BASE_URL", "chat_base_url")) as client:
        out = client.create({"model": resolve_model(backend, client), "messages": messages,
                             "max_tokens": ROUND_SUMMARY_MAX_TOKENS})
    return out["choices"][0]["message"].get("content") or ""
