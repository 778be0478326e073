"""The nxc engine: every read and write of the conversation, as a library.

The CLI is a thin shell over `Engine`; an embedding app (a TUI, the server) uses it the
same way. Each method returns the JSON shape the CLI prints (docs/nxc.md).

    engine = Engine.open()            # finds the workspace like the CLI does
    receipt = engine.send("coder", "please fix the test", expect=None, deadline="10m")
    engine.reply("done", thread=receipt["thread_id"])
    engine.thread(receipt["thread_id"])["complete"]
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping

from nixx.errors import Forbidden, NotFound, ValidationError
from nixx.log.ids import new_thing_id
from nixx.log.store import LogStore
from nixx.log.workspace import Workspace, find_workspace
from nixx.nxc.channels import dm_id, is_dm
from nixx.nxc.declarations import (
    CHANNELS_FILE,
    ChannelDecl,
    Declarations,
    Persona,
    load_declarations,
)
from nixx.nxc.durations import check_deadline, iso, parse_deadline
from nixx.nxc.handles import parse_handle_list, resolve_handle, resolve_origin
from nixx.nxc.reducer import (
    DOMAIN,
    MESSAGE_KINDS,
    PRIORITIES,
    ChatReducer,
    channel_fields,
    first_known_channel,
    message_pos,
    public_channels,
    thread_deadline,
)

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    import builtins
    from typing import Any

    from apsw import Connection

    from nixx.nxc.delivery.hooks import Delivery
    from nixx.nxc.shapes import (
        ApprovalRecord,
        DeclarationsFolder,
        HeldTask,
        ListedChannel,
        ListedPersona,
        Listing,
        PrimeBlock,
        PublicChannel,
        ReadMark,
        ReplyReceipt,
        SearchHit,
        SendReceipt,
        StatusReport,
        ThreadSummary,
        UnreadMessage,
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000




class Engine:
    def __init__(
        self,
        workspace: Workspace,
        *,
        env: Mapping[str, str] | None = None,
        delivery: Delivery | None = None,
        reducer: ChatReducer | None = None,
        now_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.workspace = workspace
        self.env = dict(os.environ if env is None else env)
        if delivery is None:
            from nixx.nxc.delivery.hooks import Delivery

            delivery = Delivery()
        self.delivery = delivery
        self.reducer = reducer or ChatReducer()
        self.now_ms = now_ms
        self._store: LogStore | None = None
        self._decls: Declarations | None = None
        self._declared_origin: str | None = None
        self._declared_origin_read = False  # workspace.yaml is read once

    @classmethod
    def open(
        cls, *, db: str | os.PathLike[str] | None = None, cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None, **kwargs: Any,
    ) -> Engine:
        return cls(find_workspace(cwd, db=db, env=env), env=env, **kwargs)

    # -- plumbing -----------------------------------------------------------------------

    @property
    def store(self) -> LogStore:
        if self._store is None:
            from nixx.nxc.work import WorkReducer

            self._store = LogStore.open(self.workspace.db_path,
                                        [self.reducer, WorkReducer(), *self.delivery.reducers()])
        return self._store

    @property
    def conn(self) -> Connection:
        return self.store.conn

    @property
    def declared_origin(self) -> str | None:
        """The origin `.nxs-personas/workspace.yaml` declares (read once), or None."""
        if not self._declared_origin_read:
            from nixx.nxc.declarations import declared_origin

            self._declared_origin = declared_origin(self.workspace.personas_dir,
                                                    cache_dir=self.workspace.state_dir)
            self._declared_origin_read = True
        return self._declared_origin

    @property
    def origin(self) -> str:
        return resolve_origin(self.store.replica, self.env, self.declared_origin)

    @property
    def handle(self) -> str:
        return resolve_handle(self.store.replica, self.env, self.declared_origin)

    @property
    def declarations(self) -> Declarations:
        if self._decls is None:
            self._decls = load_declarations(
                self.workspace.personas_dir, self.origin, cache_dir=self.workspace.state_dir
            )
        return self._decls

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _channels_file(self) -> str:
        return os.path.join(self.workspace.personas_dir, CHANNELS_FILE)

    # -- declarations -------------------------------------------------------------------

    def list(self) -> Listing:
        me, decls = self.handle, self.declarations
        personas: builtins.list[ListedPersona] = [
            {
                "handle": p.handle,
                "job_title": p.job_title,
                "job_description": p.job_description,
                "direct": dm_id(me, p.handle),
                "addressable": p.addressable.to_dict(),
                "runtime": p.runtime.to_dict() if p.runtime else None,
                "file": str(p.file),
            }
            for p in sorted(decls.personas.values(), key=lambda p: p.handle)
        ]
        channels: builtins.list[ListedChannel] = [
            {
                "name": c.name,
                "channel_id": c.id,
                "kind": c.kind,
                "members": list(c.members),
                "expects": list(c.expects),
                "flow": c.flow,
                "timeout": c.timeout,
                "description": c.description,
            }
            for c in sorted(decls.channels.values(), key=lambda c: c.name)
        ]
        public: builtins.list[PublicChannel] = [
            {
                "channel_id": cid, "name": name, "members": members,
                "description": description, "declared": decls.channel_by_id(cid) is not None,
            }
            for cid, name, members, description in public_channels(self.conn)
        ]
        folder: DeclarationsFolder = {"folder": str(decls.folder), "files": decls.files}
        if not public:  # `public_channels` only when the log has any
            return {"actor": me, "personas": personas, "channels": channels,
                    "declarations": folder}
        return {"actor": me, "personas": personas, "channels": channels,
                "public_channels": public, "declarations": folder}

    # -- writing ------------------------------------------------------------------------

    def _check_addressable(self, persona: Persona, me: str) -> None:
        rule = persona.addressable
        if rule.mode == "general":
            return
        if rule.mode == "none":
            raise Forbidden(
                f"{persona.handle} is not addressable directly (addressable: none in "
                f"{persona.file}); reach it through a channel it is a member of"
            )
        is_persona = me in self.declarations.personas
        if (is_persona and me in rule.personas) or (not is_persona and rule.humans):
            return
        raise Forbidden(
            f"{me} may not address {persona.handle}: its `addressable` in {persona.file} "
            f"allows personas {list(rule.personas)} and humans={rule.humans}"
        )

    def _resolve_target(self, to: str, me: str) -> tuple[str, Any, str, dict[str, Any]]:
        """→ (target kind, declaration, channel id, channel fields to record)."""
        decls = self.declarations
        to = to.strip()
        if not to:
            raise ValidationError("--to is empty: name a persona or a declared channel", param="to")
        if not to.startswith(("decl:", "dm:")):
            persona = decls.find_persona(to, self.origin)
            if persona is not None:
                if persona.handle == me:
                    raise ValidationError(f"{me} cannot send to itself", param="to")
                try:
                    self._check_addressable(persona, me)
                except Forbidden as exc:  # recorded (delivery outcome), then raised
                    self.delivery.on_refused(self, to=to, persona=persona, reason="addressable",
                                             msg=exc.message)
                    raise
                members = sorted([me, persona.handle])
                return "persona", persona, dm_id(me, persona.handle), {
                    "kind": "direct", "members": members,
                }
        name = to[5:] if to.startswith("decl:") else to
        channel = decls.channels.get(name)
        if channel is not None:
            fields: dict[str, Any] = {"name": channel.name, "kind": channel.kind,
                                      "members": list(channel.members),
                                      "flow": channel.flow, "visibility": channel.visibility}
            if channel.description:
                fields["description"] = channel.description
            return "channel", channel, channel.id, fields
        if is_dm(to):
            raise ValidationError(
                f"{to} is a direct channel: send to the persona instead (nxc send --to <persona>)",
                param="to",
            )
        known = first_known_channel(self.conn, to, "decl:" + name)
        if known is not None:
            raise NotFound(
                f"channel {known} exists in the log but no declaration names it, so it is "
                f"not a target; declare it in {self._channels_file()} to send to it "
                "(its messages stay readable with nxc threads / nxc search)",
                param="to",
            )
        names = sorted([p.handle for p in decls.personas.values()] + list(decls.channels))
        raise NotFound(
            f"no persona or channel {to!r} is declared in {decls.folder}"
            + (f"; declared: {', '.join(names)}" if names else " (the folder has no declarations)"),
            param="to",
        )

    def send(
        self,
        to: str,
        body: str,
        *,
        expect: builtins.list[str] | str | None = None,
        deadline: str | int | None = None,
        kind: str = "task",
        priority: str = "normal",
        parent: str | None = None,
        refs: dict[str, Any] | None = None,
    ) -> SendReceipt:
        """Open a thread to a persona or a declared channel with a first message."""
        _check_body(body)
        _check_choice(kind, MESSAGE_KINDS, "kind")
        _check_choice(priority, PRIORITIES, "priority")
        me = self.handle
        target, decl, channel_id, fields = self._resolve_target(to, me)
        expects, members, warnings = self._send_expects(expect, target, decl, channel_id,
                                                        fields)
        now = self.now_ms()
        deadline_ms = self._deadline(deadline, now, decl if target == "channel" else None,
                                     members or expects)
        if parent is None:
            parent = self.delivery.parent_thread(self)
        if parent is not None:
            from nixx.nxc.threads import get_thread

            if get_thread(self.conn, parent, now) is None:
                raise NotFound(f"parent thread {parent} is not in the log", param="parent")
        replica = self.store.replica
        thread_id = new_thing_id("t", replica, now)
        message_id = new_thing_id("m", replica, now)
        with self.store.transaction() as txn:
            stored = channel_fields(txn.conn, channel_id)
            changed = {k: v for k, v in fields.items() if stored.get(k) != _dumps(v)}
            if changed:
                txn.append(DOMAIN, "channel", channel_id, me, {"fields": changed})
            txn.append(DOMAIN, "thread_open", thread_id, me, {
                "channel": channel_id, "parent": parent, "expects": expects,
                "deadline": deadline_ms,
            })
            txn.append(DOMAIN, "post", message_id, me, {
                "thread": thread_id, "channel": channel_id, "body": body, "kind": kind,
                "priority": priority, "disposition": "in_turn", "escalate": False,
                "refs": refs or {},
            })
        from nixx.nxc.delivery.hooks import SendContext

        ctx = SendContext(
            engine=self, sender=me, thread_id=thread_id, message_id=message_id,
            channel_id=channel_id, target=target, body=body, expects=expects,
            deadline_ms=deadline_ms, parent=parent, members=members,
            persona=decl if target == "persona" else None,
            channel=decl if target == "channel" else None,
        )
        delivered = self.delivery.on_send(ctx)
        agent_caller = bool(self.env.get("NXC_SESSION"))
        receipt: SendReceipt = {
            "thread_id": thread_id,
            "message_id": message_id,
            "to": decl.handle if target == "persona" else decl.name,
            "target": target,
            "channel": channel_id,
            "parent": parent,
            "session": delivered.get("session"),
            "expects": expects,
            "deadline": iso(deadline_ms),
            "spawned": bool(delivered.get("spawned")),
            "warnings": warnings + list(delivered.get("warnings", [])),
            "await": None if agent_caller else {
                "command": f"nxc wait --thread {thread_id}", "until": "complete or stale"},
        }
        if "sessions" in delivered:
            receipt["sessions"] = delivered["sessions"]
        if "approval" in delivered:  # held for a person (`nixx.nxc.approvals`)
            receipt["approval"] = delivered["approval"]
        if target == "channel":
            receipt["members"] = members
        return receipt

    def _send_expects(
        self, expect: builtins.list[str] | str | None, target: str, decl: Any, channel_id: str,
        fields: dict[str, Any],
    ) -> tuple[builtins.list[str], builtins.list[str], builtins.list[str]]:
        """(who the new thread expects, a channel round's members, warnings)."""
        me = self.handle
        warnings: builtins.list[str] = []
        if expect is not None:
            expects = parse_handle_list(expect, self.origin) if isinstance(expect, str) else [
                h for h in parse_handle_list(",".join(expect), self.origin)
            ]
            channel_members = set(fields["members"])
            for handle in expects:
                if handle.partition("/")[2].startswith("__"):
                    raise ValidationError(
                        f"{handle} is a reserved handle (names starting with '__' are nxc's "
                        "own, such as a channel's supervisor): it cannot be expected",
                        param="expect")
                if handle not in channel_members and handle not in self.declarations.personas:
                    warnings.append(
                        f"{handle} is neither a member of {channel_id} nor a declared persona"
                    )
        elif target == "persona":
            expects = [decl.handle]
        else:
            expects = [h for h in decl.expects if h != me]
        # a channel send runs a round: the thread between the sender and the channel's
        # supervisor expects the supervisor (its hand-back), and each member answers in
        # a slot thread of its own under it (docs/channels.md)
        members: builtins.list[str] = []
        if target == "channel":
            from nixx.nxc.channels import supervisor_handle

            members = expects
            expects = [supervisor_handle(self.origin, decl.name)] if members else []
        return expects, members, warnings

    def _deadline(
        self, deadline: str | int | None, now: int, channel: ChannelDecl | None, expects: builtins.list[str]
    ) -> int | None:
        if isinstance(deadline, int):
            return check_deadline(deadline, now_ms=now)
        if deadline:
            return parse_deadline(deadline, now_ms=now)
        if channel is None:
            return None
        if channel.timeout_at_ms is not None:
            return channel.timeout_at_ms
        if channel.timeout_ms is not None:
            rounds = len(expects) if channel.flow == "sequential" else 1
            return now + channel.timeout_ms * max(rounds, 1)
        return None

    def reply(
        self,
        body: str,
        *,
        thread: str | None = None,
        kind: str = "report",
        priority: str = "normal",
        escalate: bool = False,
        refs: dict[str, Any] | None = None,
    ) -> ReplyReceipt:
        """Post into an existing thread (the only way to). Without `thread`: the caller's
        one open conversation (a thread where it still owes a reply). The opener's reply to
        a persona conversation (`dm:`) whose expectation was met is a follow-up: it
        re-declares the same expectation first (`follow_up: true`), opening a new turn."""
        from nixx.nxc import access, threads

        _check_body(body)
        _check_choice(kind, MESSAGE_KINDS, "kind")
        _check_choice(priority, PRIORITIES, "priority")
        me, now = self.handle, self.now_ms()
        if thread is None:
            owed = threads.open_for(self.conn, me, now)
            if len(owed) != 1:
                which = ", ".join(t["thread_id"] for t in owed)
                raise ValidationError(
                    f"{me} has {len(owed)} open conversations"
                    + (f" ({which})" if owed else "")
                    + "; name one with --thread",
                    param="thread",
                )
            thread = owed[0]["thread_id"]
        summary = threads.get_thread(self.conn, thread, now)
        if summary is None:
            raise NotFound(f"thread {thread} is not in the log", param="thread")
        if not access.can_read_thread(self.conn, me, thread):
            raise Forbidden(
                f"{me} may not post in {thread}: not its opener, not expected in it, and not "
                f"a member of {summary['channel_id']}"
            )
        message_id = new_thing_id("m", self.store.replica, now)
        # A follow-up: the opener writes again in a conversation with a persona whose
        # expectation was met. It opens a new turn for the same personas (the expectation
        # is re-declared, as `expect` would), so their answer is owed — and delivered.
        # Only in a thread this clone owns: another clone's registers are not ours to set.
        follow_up = (me == summary["opener"] and summary["complete"] and bool(summary["expects"])
                     and summary["channel_id"].startswith("dm:")
                     and summary["origin"] == self.store.replica)
        with self.store.transaction() as txn:
            if follow_up:
                txn.append(DOMAIN, "thread_expects", thread, me, {"expects": summary["expects"]})
            txn.append(DOMAIN, "post", message_id, me, {
                "thread": thread, "channel": summary["channel_id"], "body": body, "kind": kind,
                "priority": priority, "disposition": "in_turn", "escalate": escalate,
                "refs": refs or {},
            })
        after = threads.get_thread(self.conn, thread, self.now_ms()) or summary
        from nixx.nxc.delivery.hooks import ReplyContext

        delivered = self.delivery.on_reply(ReplyContext(
            engine=self, sender=me, thread_id=thread, message_id=message_id,
            channel_id=summary["channel_id"], body=body, escalate=escalate, thread=after,
        ))
        return {
            "posted": True,
            "message_id": message_id,
            "thread_id": thread,
            "channel_id": summary["channel_id"],
            "escalate": escalate,
            "complete": after["complete"],
            "follow_up": follow_up,
            "expects": after["expects"] if follow_up else None,
            "resumed": delivered.get("resumed"),
            "warnings": list(delivered.get("warnings", [])),
        }

    def expect(
        self, thread: str, handles: builtins.list[str] | str, *, deadline: str | int | None = None
    ) -> ThreadSummary:
        """Re-declare who must reply (opener only); starts a new turn for everyone named."""
        from nixx.nxc import threads

        me, now = self.handle, self.now_ms()
        summary = threads.get_thread(self.conn, thread, now)
        if summary is None:
            raise NotFound(f"thread {thread} is not in the log", param="thread")
        if summary["opener"] != me:
            raise Forbidden(
                f"only the opener of {thread} ({summary['opener']}) may re-declare who must "
                f"reply; you are {me}"
            )
        if summary["origin"] != self.store.replica:
            raise Forbidden(
                f"{thread} was opened in clone {summary['origin']}: only there may its opener "
                f"re-declare who must reply or its deadline (this clone is "
                f"{self.store.replica}; docs/limits-and-safety.md)")
        text = handles if isinstance(handles, str) else ",".join(handles)
        expects = parse_handle_list(text, self.origin)
        self._check_expectable(thread, summary, expects)
        deadline_ms = None
        if deadline is not None:
            deadline_ms = (check_deadline(deadline, now_ms=now) if isinstance(deadline, int)
                           else parse_deadline(deadline, now_ms=now))
        with self.store.transaction() as txn:
            txn.append(DOMAIN, "thread_expects", thread, me, {"expects": expects})
            if deadline_ms is not None:
                txn.append(DOMAIN, "thread_deadline", thread, me, {"deadline": deadline_ms})
        return self.thread(thread, with_messages=False)

    def _check_expectable(self, thread: str, summary: ThreadSummary,
                          expects: builtins.list[str]) -> None:
        """`expect` names only who may answer: a declared persona, a member of the
        thread's channel, or a handle the thread already expects. A reserved handle
        (an agent name starting ``__``: a channel's supervisor) is nxc's own, never."""
        members = set(json.loads(channel_fields(self.conn, summary["channel_id"]).get(
            "members", "[]")))
        current = set(summary["expects"])
        for handle in expects:
            agent = handle.partition("/")[2]
            if agent.startswith("__"):
                raise ValidationError(
                    f"{handle} is a reserved handle (names starting with '__' are nxc's "
                    "own, such as a channel's supervisor): it cannot be expected",
                    param="handles")
            if (handle not in self.declarations.personas and handle not in members
                    and handle not in current):
                raise ValidationError(
                    f"{handle} is neither a declared persona nor a member of "
                    f"{summary['channel_id']} (the channel of {thread}): declare it in "
                    ".nxs-personas/ or add it to the channel's members", param="handles")

    def mark_read(self, channel: str, upto: str | None = None) -> ReadMark:
        """Move my read cursor in `channel` to message `upto` (default: its latest message).
        Never moves back; member-only."""
        from nixx.nxc import access, cursor

        me = self.handle
        if not access.is_member(self.conn, me, channel):
            raise Forbidden(f"{me} is not a member of {channel}: a non-member keeps no read state")
        if upto is None:
            pos = cursor.latest_pos(self.conn, channel)
        else:
            pos = message_pos(self.conn, upto, channel)
            if pos is None:
                raise NotFound(f"message {upto} is not in channel {channel}", param="upto")
        current = cursor.cursor_of(self.conn, me, channel)
        moved = pos is not None and (current is None or pos > current)
        if moved:
            self.store.append(DOMAIN, "read_cursor", channel, me, {"pos": pos})
        return {"channel_id": channel, "reader": me, "pos": cursor.cursor_of(self.conn, me, channel),
                "moved": moved}

    # -- reading ------------------------------------------------------------------------

    def thread(self, thread_id: str, *, with_messages: bool = True) -> ThreadSummary:
        from nixx.nxc import access, threads

        me = self.handle
        summary = threads.get_thread(self.conn, thread_id, self.now_ms())
        if summary is None:
            raise NotFound(f"thread {thread_id} is not in the log", param="thread")
        if not access.can_read_thread(self.conn, me, thread_id):
            raise Forbidden(f"{me} may not read {thread_id} (a member-only channel)")
        if with_messages:
            summary["messages"] = threads.messages(self.conn, thread_id, me)
            for m in summary["messages"]:  # written in another clone: say so (docs/sync.md)
                m["remote"] = m["origin"] != self.store.replica
        return self.delivery.annotate_thread(self, summary)

    def threads(
        self, *, channel: str | None = None, open_only: bool = False, limit: int | None = 50
    ) -> builtins.list[ThreadSummary]:
        from nixx.nxc import threads

        found = threads.list_threads(self.conn, self.handle, self.now_ms(), channel=channel,
                                     limit=None if open_only else limit)
        if open_only:
            found = [t for t in found if t["state"] == "open"][:limit]
        return found

    def prime(self) -> PrimeBlock:
        """The session-start block's data (`nixx.nxc.prime`): who you are, unread counts,
        the threads you owe a reply, how many you opened still wait on others."""
        from nixx.nxc.prime import prime

        return prime(self)

    def unread(self, channel: str | None = None) -> builtins.list[UnreadMessage]:
        from nixx.nxc import cursor

        return cursor.unread(self.conn, self.handle, channel)

    def status(
        self, *, thread: str | None = None, channel: str | None = None, include_finished: bool = False
    ) -> StatusReport:
        from nixx.nxc import threads
        from nixx.nxc.status import operations

        if thread is not None and threads.get_thread(self.conn, thread, self.now_ms()) is None:
            raise NotFound(f"thread {thread} is not in the log", param="thread")
        ops = operations(
            self.conn, self.handle, self.now_ms(), personas=self.declarations.personas,
            thread=thread, channel=channel, include_finished=include_finished,
        )
        from nixx.nxc import work

        now = self.now_ms()
        found = work.tasks(self.conn)
        held: list[HeldTask] = [
            {"id": t.id, "title": t.title, "holder": t.holder, "thread": t.thread}
            for t in found.values() if t.state == "claimed" and t.holder]
        live, lost = work.lease_state(self.conn, now)
        from nixx.nxc import approvals

        pending = [a.as_json() for a in approvals.approvals(self.conn).values()
                   if a.state == "pending"]
        held_in = {a["thread"] for a in pending}
        for op in ops:  # a step held for a person: the operation and its thread await one
            for t in op["threads"]:
                t["awaiting_human"] = t["awaiting_human"] or t["thread_id"] in held_in
            tree = {t["thread_id"] for t in op["threads"]}
            op["approvals"] = [a for a in pending if a["thread"] in tree]
            op["awaiting_human"] = op["awaiting_human"] or bool(op["approvals"])
        out: StatusReport = {"actor": self.handle, "operations": ops, "held": held,
                             "leases": live, "lost_claims": work.lost_claims(found),
                             "lost_leases": lost, "approvals": pending}
        return self.delivery.annotate_status(self, out)

    def approvals(self, *, include_decided: bool = False) -> builtins.list[ApprovalRecord]:
        """The approvals asked in this workspace (`nixx.nxc.approvals`): the pending ones,
        oldest first, or every one with `include_decided`."""
        from nixx.nxc import approvals

        found = approvals.approvals(self.conn).values()
        return [a.as_json() for a in found if include_decided or a.state == "pending"]

    def decide(self, approval_id: str, decision: str, note: str = "") -> ApprovalRecord:
        """A person approves or denies (`decision`: approved | denied) a held step; the
        steps it decides that are held on this machine are taken now (`taken`), those
        held on another clone when the decision reaches it by sync."""
        from nixx.nxc import approvals

        out = approvals.decide(self, approval_id, decision, note)
        out["taken"] = self.delivery.on_decided(self)
        return out

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchHit]:
        from nixx.nxc.search import search

        return search(self.conn, self.handle, query, limit=limit)

    def wait(self, thread: str, *, timeout: float | None = None) -> tuple[str, ThreadSummary]:
        """Block until the thread's quorum is complete or stale, every persona still owed
        a reply failed (its runtime failed or its spawn was refused: nobody will answer,
        `failures` says why), or `timeout` seconds pass.
        Returns (`complete` | `stale` | `failed` | `timeout`, the thread summary)."""
        from nixx.log.watcher import DataVersionWatcher

        summary = self.thread(thread, with_messages=False)
        if not summary["expects"]:
            raise ValidationError(f"thread {thread} expects no reply: there is nothing to wait for")
        give_up = None if timeout is None else time.monotonic() + timeout
        with DataVersionWatcher(self.workspace.db_path) as watcher:
            while True:
                summary = self.thread(thread, with_messages=False)
                if summary["complete"]:
                    return "complete", summary
                if summary["stale"]:
                    return "stale", summary
                failed = {f["persona"] for f in summary.get("failures", [])}
                if summary["outstanding"] and failed.issuperset(summary["outstanding"]):
                    return "failed", summary
                step = 60.0
                if give_up is not None:
                    step = give_up - time.monotonic()
                    if step <= 0:
                        return "timeout", summary
                deadline = thread_deadline(self.conn, thread)
                if deadline is not None:  # wake when it would go stale
                    step = min(step, max(0.0, (deadline - self.now_ms()) / 1000) + 0.01)
                watcher.wait(step)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


#: the longest message body, in UTF-8 bytes, on every entry (CLI, MCP, library): the op
#: that carries it stays within what a sync pass takes in (`nixx.sync.engine.MAX_OP_BYTES`)
MAX_BODY_BYTES = 512 * 1024


def _check_body(body: str) -> None:
    if not isinstance(body, str) or not body.strip():
        raise ValidationError("the message body is empty", param="body")
    if len(body) > MAX_BODY_BYTES or (len(body) * 4 > MAX_BODY_BYTES
                                      and len(body.encode("utf-8")) > MAX_BODY_BYTES):
        raise ValidationError(
            f"the message body is more than {MAX_BODY_BYTES // 1024} KiB: put a long text "
            "in a file of the repository and send its path", param="body")


def _check_choice(value: str, choices: tuple[str, ...], name: str) -> None:
    if value not in choices:
        raise ValidationError(f"--{name} must be one of {', '.join(choices)}; got {value!r}",
                              param=name)
