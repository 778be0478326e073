"""The seam where delivery (issue 8: starting and resuming agent sessions) plugs in.

`Engine` calls a `Delivery` after each write has committed, so a spawned process always
finds the thread and the message in the log:

- `parent_thread(engine)`: where the sending session stands (its current thread), so a
  send from inside a session becomes a child thread; None at the top.
- `on_send(ctx)`: a message was posted by `send`; return what goes into the receipt:
  ``{"session": id | None, "spawned": bool, "warnings": [...]}``.
- `on_reply(ctx)`: a reply was posted; return ``{"resumed": id | None, "warnings": [...]}``.

`NoDelivery` (the default here) starts nothing: receipts say ``session: null,
spawned: false``. A delivery that records outcomes appends ops through
`ctx.engine.store` (e.g. domain ``message`` kinds registered with
`ChatReducer.register_kind`, or a device-local domain with ``local=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nixx.nxc.declarations import ChannelDecl, Persona
    from nixx.nxc.engine import Engine


@dataclass
class SendContext:
    engine: Engine
    sender: str
    thread_id: str
    message_id: str
    channel_id: str
    target: str  # "persona" | "channel"
    body: str
    expects: list[str]
    deadline_ms: int | None
    parent: str | None
    persona: Persona | None = None
    channel: ChannelDecl | None = None


@dataclass
class ReplyContext:
    engine: Engine
    sender: str
    thread_id: str
    message_id: str
    channel_id: str
    body: str
    escalate: bool
    thread: dict[str, Any] = field(default_factory=dict)  # the thread summary after posting


class Delivery:
    """Starts nothing. Subclass and pass to `Engine(delivery=...)`."""

    def parent_thread(self, engine: Engine) -> str | None:
        return None

    def on_send(self, ctx: SendContext) -> dict[str, Any]:
        return {"session": None, "spawned": False, "warnings": []}

    def on_reply(self, ctx: ReplyContext) -> dict[str, Any]:
        return {"resumed": None, "warnings": []}


NoDelivery = Delivery
