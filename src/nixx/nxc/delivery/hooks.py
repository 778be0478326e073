"""The seam where delivery (issue 8: starting and resuming agent sessions) plugs in.

`Engine` calls a `Delivery` after each write has committed, so a spawned process always
finds the thread and the message in the log:

- `parent_thread(engine)`: where the sending session stands (its current thread), so a
  send from inside a session becomes a child thread; None at the top.
- `on_send(ctx)`: a message was posted by `send`; return what goes into the receipt
  (`nixx.nxc.shapes.Delivered`: ``session``, ``spawned``, ``warnings``, and for a round
  ``sessions``).
- `on_reply(ctx)`: a reply was posted; return `nixx.nxc.shapes.Resumed` (``resumed``,
  ``warnings``).

The other hooks are no-ops in the base, which every delivery inherits; `Engine` calls
each directly: `reducers()` — extra reducers to register with the store (delivery
outcomes); `on_refused(engine, to=, persona=, reason=, msg=)` — a send refused by
`addressable`, before the error is raised;
`annotate_status(engine, out)` — add sessions and outcomes to `nxc status`;
`annotate_thread(engine, summary)` — add `failures` (personas owed a reply whose delivery
failed or was refused) to a thread summary (`threads show`, `wait`).
`nixx.nxc.delivery.dispatch.LiveDelivery` is the real one (the CLI uses it).

`NoDelivery` (the default here) starts nothing: receipts say ``session: null,
spawned: false``. A delivery that records outcomes appends ops through
`ctx.engine.store` (e.g. domain ``message`` kinds registered with
`ChatReducer.register_kind`, or a device-local domain with ``local=True``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.log.reducer import Reducer
    from nixx.nxc.declarations import ChannelDecl, Persona
    from nixx.nxc.delivery.shapes import Taken
    from nixx.nxc.engine import Engine
    from nixx.nxc.shapes import Delivered, Resumed, StatusReport, ThreadSummary


class SendContext:
    """What `send` just wrote. `target` is "persona" or "channel"; `persona` / `channel`
    is the declaration addressed; `members`, for a channel, the members the round runs
    (the thread itself expects the channel's supervisor)."""

    def __init__(
        self, *, engine: Engine, sender: str, thread_id: str, message_id: str, channel_id: str,
        target: str, body: str, expects: list[str], deadline_ms: int | None,
        parent: str | None, persona: Persona | None = None, channel: ChannelDecl | None = None,
        members: list[str] | None = None,
    ) -> None:
        self.engine = engine
        self.sender = sender
        self.thread_id = thread_id
        self.message_id = message_id
        self.channel_id = channel_id
        self.target = target
        self.body = body
        self.expects = expects
        self.deadline_ms = deadline_ms
        self.parent = parent
        self.persona = persona
        self.channel = channel
        self.members = members or []


class ReplyContext:
    """What `reply` just wrote; `thread` is the thread summary after posting."""

    def __init__(
        self, *, engine: Engine, sender: str, thread_id: str, message_id: str, channel_id: str,
        body: str, escalate: bool, thread: ThreadSummary,
    ) -> None:
        self.engine = engine
        self.sender = sender
        self.thread_id = thread_id
        self.message_id = message_id
        self.channel_id = channel_id
        self.body = body
        self.escalate = escalate
        self.thread = thread


class Delivery:
    """Starts nothing: every hook is a no-op. Subclass, override what you deliver, and
    pass it to `Engine(delivery=...)`; `Engine` calls every hook directly."""

    def reducers(self) -> list[Reducer]:
        """Extra reducers the engine registers with the store it opens."""
        return []

    def parent_thread(self, engine: Engine) -> str | None:
        return None

    def agent_session(self, engine: Engine) -> str | None:
        """The agent session the calling process runs in (None: a person's)."""
        return None

    def on_send(self, ctx: SendContext) -> Delivered:
        return {"session": None, "spawned": False, "warnings": []}

    def on_reply(self, ctx: ReplyContext) -> Resumed:
        return {"resumed": None, "warnings": []}

    def on_refused(self, engine: Engine, *, to: str, persona: Persona, reason: str,
                   msg: str) -> None:
        """A send to `persona` was refused (`reason`), before the error is raised."""

    def on_decided(self, engine: Engine) -> list[Taken]:
        """A person decided an approval (`nixx.nxc.approvals`): take the steps held here
        that it decides. → what was taken."""
        return []

    def annotate_thread(self, engine: Engine, summary: ThreadSummary) -> ThreadSummary:
        """A thread summary (`threads show`, `wait`), with what delivery knows of it."""
        return summary

    def annotate_status(self, engine: Engine, out: StatusReport) -> StatusReport:
        """`nxc status`'s answer, with what delivery knows of its threads."""
        return out


NoDelivery = Delivery
