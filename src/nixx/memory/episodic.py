"""Episodic memory, the store side: the buffer (sessions, writes), the summary trigger
and the runtime switches. Synchronous (called from a worker thread by the service).

Runtime switches live in the store's state so they survive a restart:
``episodic.interval`` (words that trigger a summary) and ``episodic.recall``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypedDict

from nixx.config import Settings
from nixx.errors import ValidationError
from nixx.store.base import MemoryStore
from nixx.store.records import ORIGINS, BufferRow

INTERVAL_KEY = "episodic.interval"
RECALL_KEY = "episodic.recall"
SESSION_CLEAR = "session_clear"


CLIENT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
CLIENT_NAME_RULE = ("a lower-case name of at most 40 letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit")

# What a known client sends as its User-Agent's product, and the name its rows get when
# it does not name itself (the first word of the User-Agent, before any '/').
KNOWN_AGENTS: dict[str, str] = {
    "claude-cli": "claude-code",
    "codex_cli_rs": "codex-cli",
    "codex_exec": "codex-cli",
}


@dataclass(frozen=True)
class Sender:
    """Who sent a turn. `origin` is the buffer's column (one of ORIGINS: the dialect or
    nixx's own clients); `client` a client's own name (``claude-code``, ``my-script``),
    `agent` the nxc persona a turn runs for. Both names are kept in the meta of the
    turn's two rows (`tags`), where search filters on them."""

    origin: str = "api"
    client: str | None = None
    agent: str | None = None

    def tags(self) -> dict[str, Any] | None:
        tags = {k: v for k, v in (("client", self.client), ("agent", self.agent)) if v}
        return tags or None

    @classmethod
    def read(
        cls,
        origin: str | None,
        default: str = "api",
        *,
        client: str | None = None,
        agent: str | None = None,
        user_agent: str | None = None,
    ) -> Sender:
        """The sender from a request's headers: `origin` (``X-Nixx-Origin``) is one of
        ORIGINS or, failing that, a client name (the row keeps the route's `default`
        origin); `client` (``X-Nixx-Client``) names the client outright; without either,
        a known `user_agent` names it. Anything else is refused."""
        name = _client_name(client, "X-Nixx-Client") if client and client.strip() else None
        said = (origin or "").strip().lower()
        if said and said not in ORIGINS:
            if not CLIENT_NAME.fullmatch(said):
                raise ValidationError(
                    f"X-Nixx-Origin must be one of {', '.join(ORIGINS)}, or a client's name: "
                    f"{CLIENT_NAME_RULE} (got {origin!r})",
                    param="X-Nixx-Origin",
                )
            name, said = name or said, ""
        if name is None and user_agent:
            name = KNOWN_AGENTS.get(user_agent.strip().split("/", 1)[0].split(" ", 1)[0])
        return cls(said or default, name, agent)


def _client_name(value: str, header: str) -> str:
    name = value.strip().lower()
    if not CLIENT_NAME.fullmatch(name):
        raise ValidationError(f"{header} must be {CLIENT_NAME_RULE} (got {value!r})",
                              param=header)
    return name


def check_origin(origin: str | None) -> str:
    """The buffer origin a request names (``X-Nixx-Origin``, default ``api``); a name
    outside ORIGINS is refused (the routes that write turns take client names too:
    `Sender.read`)."""
    origin = (origin or "api").strip().lower()
    if origin not in ORIGINS:
        raise ValidationError(
            f"X-Nixx-Origin must be one of {', '.join(ORIGINS)} (got {origin!r})",
            param="X-Nixx-Origin",
        )
    return origin


class EpisodicStatus(TypedDict):
    """The buffer and its summaries at a glance (`Episodic.status`)."""

    interval: int  # words of unsummarised buffer that make a summary due
    unsummarised_words: int
    unsummarised_rows: int
    last_summarised_id: int
    buffer_rows: int
    max_buffer_id: int
    session_start_id: int
    summaries: int
    memories: int
    recall: bool

class Episodic:
    def __init__(self, settings: Settings, store: MemoryStore) -> None:
        self.settings = settings
        self.store = store
        # (last summarised id, newest row id counted, unsummarised words) - see summary_due
        self._due_cache: tuple[int, int, int] | None = None
        # (unsummarised words, the interval) as the last check after a turn found them
        self.backlog: tuple[int, int] | None = None

    # ---- switches -------------------------------------------------------------------
    def interval(self) -> int:
        return int(self.store.get_state(INTERVAL_KEY, self.settings.summary_interval))

    def recall_enabled(self) -> bool:
        return bool(self.store.get_state(RECALL_KEY, self.settings.recall_enabled))

    def configure(self, *, interval: int | None = None, recall: bool | None = None) -> None:
        if interval is not None:
            if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
                raise ValidationError(
                    f"interval must be a whole number of words >= 1 (got {interval!r})",
                    param="interval",
                )
            self.store.set_state(INTERVAL_KEY, interval)
        if recall is not None:
            self.store.set_state(RECALL_KEY, bool(recall))

    # ---- sessions -------------------------------------------------------------------
    def session_start(self) -> int:
        """The first buffer id of the current session."""
        return self.store.last_marker_id() + 1

    def session_rows(self) -> list[BufferRow]:
        return [r for r in self.store.get_buffer(self.session_start()) if r.role != "marker"]

    def clear_session(self, origin: str = "api") -> BufferRow:
        return self.store.append_buffer("marker", SESSION_CLEAR, origin=origin)

    # ---- writes ---------------------------------------------------------------------
    def record_user(
        self, text: str, origin: str, meta: dict[str, Any] | None = None
    ) -> BufferRow:
        """Append the turn's user message, once: a retried request (the session's newest
        row, past any answers marked incomplete, is this same message from the same
        origin) reuses that row. Atomic in the store, so concurrent identical requests
        give one row."""
        return self.store.append_user_once(text, origin, meta)

    def record_assistant(
        self, text: str, origin: str, meta: dict[str, Any] | None = None
    ) -> BufferRow:
        """Append the turn's answer. An incomplete answer identical to the session's
        newest row (a retried request cut at the same place again) is not stored twice."""
        if meta and meta.get("incomplete"):
            last = self.store.last_buffer_rows(1, after_id=self.session_start() - 1)
            if (
                last
                and last[0].role == "assistant"
                and last[0].meta.get("incomplete")
                and (last[0].content, last[0].origin) == (text, origin)
            ):
                return last[0]
        return self.store.append_buffer("assistant", text, origin=origin, meta=meta or None)

    def oldest_in_history(self, history_messages: int) -> int:
        """The buffer id of the oldest session row the client's history still carries:
        summaries ending before it are not already in the conversation."""
        start = self.session_start()
        if history_messages <= 0:
            return self.store.buffer_stats()["max_id"] + 1
        rows = self.store.last_buffer_rows(history_messages, after_id=start - 1)
        return rows[0].id if rows else start

    # ---- summaries ------------------------------------------------------------------
    def summary_due(self) -> tuple[bool, list[BufferRow]]:
        """(due, the unsummarised rows when due). Checked after every turn, so the word
        count is kept incrementally: only rows newer than the last check are read, unless
        a summary was stored since (then everything unsummarised is counted again)."""
        last = self.store.last_summarised_id()
        cache = self._due_cache
        if cache is not None and cache[0] == last:
            _, seen_id, words = cache
            newer = [r for r in self.store.get_buffer(seen_id + 1) if r.role != "marker"]
            words += sum(r.words for r in newer)
            seen_id = max([seen_id, *(r.id for r in newer)])
        else:
            rows = self.store.unsummarised()
            words = sum(r.words for r in rows)
            seen_id = max([last, *(r.id for r in rows)])
        self._due_cache = (last, seen_id, words)
        interval = self.interval()
        self.backlog = (words, interval)
        if words < interval:
            return False, []
        return True, self.store.unsummarised()

    def forget_cache(self) -> None:
        """Count the unsummarised words afresh next time (rows were deleted)."""
        self._due_cache = None

    def status(self) -> EpisodicStatus:
        rows = self.store.unsummarised()
        stats = self.store.buffer_stats()
        return {
            "interval": self.interval(),
            "unsummarised_words": sum(r.words for r in rows),
            "unsummarised_rows": len(rows),
            "last_summarised_id": self.store.last_summarised_id(),
            "buffer_rows": stats["rows"],
            "max_buffer_id": stats["max_id"],
            "session_start_id": self.session_start(),
            "summaries": self.store.count_summaries(),
            "memories": self.store.count_memories(),
            "recall": self.recall_enabled(),
        }
