"""The named shapes nxc hands across its seams: what a delivery hook returns to the
engine (`nixx.nxc.delivery.hooks`), and the receipts `Engine.send` / `Engine.reply`
return to their shells (the `nxc` CLI reads ``out["await"]["command"]``, the MCP chat
tools and the web's agents page return them as JSON).

Annotations only: every importer imports this module under ``TYPE_CHECKING`` (``typing``
costs a one-shot `nxc` process milliseconds: `tests/nxc/test_startup_imports.py`); at
run time these are plain dicts.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ThreadSummary(TypedDict):
    """A thread and its derived quorum (`nixx.nxc.threads`): what `threads show`,
    `threads list`, `wait` and a reply's delivery read."""

    thread_id: str
    channel_id: str
    opener: str
    parent: str | None
    origin: str
    created: str | None
    expects: list[str]
    replied: list[str]
    outstanding: list[str]
    complete: bool
    stale: bool
    deadline: str | None
    escalated: bool
    message_count: int
    state: str  # "open" | "answered" | "stale"
    messages: NotRequired[list[dict[str, Any]]]  # `Engine.thread(with_messages=True)`
    failures: NotRequired[list[dict[str, Any]]]  # `Delivery.annotate_thread`


class Delivered(TypedDict):
    """`Delivery.on_send`: who the send started."""

    session: str | None  # the session started (a round: its first)
    spawned: bool
    warnings: list[str]
    sessions: NotRequired[list[str]]  # a channel round: every session it started
    refused: NotRequired[str]  # why nothing was started (``hop_limit``)
    failed: NotRequired[str]  # why the start failed (executable missing, no supervisor)


class Resumed(TypedDict):
    """`Delivery.on_reply` (and `Deliverer.wake`): who the reply woke."""

    resumed: str | None  # the session resumed (or queued for)
    warnings: list[str]
    refused: NotRequired[str]  # ``resume_limit``
    dropped: NotRequired[bool]  # every message was handed over already
    queued: NotRequired[bool]  # the session runs: the answer waits for its next wake
    settled: NotRequired[bool]  # a round's last slot answered


class Await(TypedDict):
    """How the sender waits for the answers."""

    command: str  # ``nxc wait --thread <id>``
    until: str


# `await` is a keyword: the functional form
SendReceipt = TypedDict("SendReceipt", {
    "thread_id": str,
    "message_id": str,
    "to": str,  # the persona's handle, or the channel's name
    "target": str,  # "persona" | "channel"
    "channel": str,
    "parent": str | None,
    "session": str | None,
    "sessions": NotRequired[list[str]],
    "expects": list[str],
    "members": NotRequired[list[str]],
    "deadline": str | None,
    "spawned": bool,
    "warnings": list[str],
    "await": Await | None,  # None for an agent caller (its answers wake it)
})


class ReplyReceipt(TypedDict):
    posted: bool
    message_id: str
    thread_id: str
    channel_id: str
    escalate: bool
    complete: bool
    follow_up: bool
    expects: list[str] | None
    resumed: str | None
    warnings: list[str]
