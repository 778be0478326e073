"""`LiveDelivery`: the `Delivery` that starts and resumes agent sessions (the push).

- `send --to <persona>`: a fresh session of the persona with the body in its prompt.
- `send --to <channel>`: a round (`rounds`).
- `reply --thread T`:
    * by T's opener: resumes the sessions answering T (a follow-up);
    * by anyone else, when T's quorum is now complete (or the reply escalates): wakes
      the session that opened T with every answer of the turn it has not been handed
      yet (keyed by message id, so a second wake for the same answers is dropped) — a
      human opener is never resumed;
    * in a round's slot (a member's own thread under the round's): the round moves on /
      settles; a member's escalation wakes the requester's session at once;
    * by the requester in the round's thread: every member's session hears it.
- A send refused by the persona's `addressable` is recorded before the error is raised.
- A person's decision (`nixx.nxc.approvals`), seen here first by the `nxc approve|deny`
  that wrote it or by the sync pass that brought it: the held steps it decides are
  taken (`take_decided`).

The sending session (`NXC_SESSION`) is where the sender stands: its thread becomes the
parent of what it sends, and it is recorded as the opener to wake.
"""

from __future__ import annotations

from nixx.nxc.delivery.hooks import Delivery

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Mapping

    from nixx.log.reducer import Reducer
    from nixx.log.workspace import Workspace
    from nixx.nxc.approvals import Approval
    from nixx.nxc.declarations import Persona
    from nixx.nxc.delivery.hooks import ReplyContext, SendContext
    from nixx.nxc.delivery.launcher import Deliverer
    from nixx.nxc.delivery.shapes import HeldArgs, Taken, Wake
    from nixx.nxc.engine import Engine
    from nixx.nxc.shapes import Delivered, Resumed, StatusReport, ThreadSummary


class LiveDelivery(Delivery):
    def __init__(self) -> None:
        self._deliverers: dict[int, Deliverer] = {}

    def reducers(self) -> list[Reducer]:
        from nixx.nxc.installed import delivery_reducers

        return delivery_reducers()

    def deliverer(self, engine: Engine) -> Deliverer:
        key = id(engine)
        d = self._deliverers.get(key)
        if d is None:
            from nixx.nxc.delivery.launcher import Deliverer

            d = Deliverer(workspace=engine.workspace, store=engine.store,
                          decls=engine.declarations, origin=engine.origin, env=engine.env)
            self._deliverers[key] = d
        return d

    def parent_thread(self, engine: Engine) -> str | None:
        d = self.deliverer(engine)
        if not d.in_session():  # a person's shell: no store opened
            return None
        current = d.here
        return current["thread_id"] if current else None

    def agent_session(self, engine: Engine) -> str | None:
        d = self.deliverer(engine)
        if not d.in_session():
            return None
        current = d.here
        return current["session"] if current else None

    def on_send(self, ctx: SendContext) -> Delivered:
        d = self.deliverer(ctx.engine)
        current = d.here
        if current is not None:
            from nixx.nxc.delivery import sessions

            sessions.add_opener(d.local, ctx.thread_id, current["session"])
        if ctx.target == "persona":
            assert ctx.persona is not None  # a send to a persona carries its declaration
            return d.start(ctx.persona, thread_id=ctx.thread_id, task=ctx.body,
                           sender=ctx.sender)
        from nixx.nxc.delivery import rounds

        assert ctx.channel is not None  # a send to a channel carries its declaration
        members = [h for h in ctx.members if h != ctx.sender]
        if not members:
            return {"session": None, "spawned": False, "warnings": []}
        return rounds.open_round(d, channel=ctx.channel, thread_id=ctx.thread_id,
                                 members=members, body=ctx.body, sender=ctx.sender,
                                 opener=current)

    def on_reply(self, ctx: ReplyContext) -> Resumed:
        from nixx.nxc.delivery import rounds, sessions

        d = self.deliverer(ctx.engine)
        thread = ctx.thread
        if not d.has_local():
            return {"resumed": None, "warnings": []}  # no session ever ran here
        round_thread = rounds.round_of_slot(d, thread)
        if round_thread is not None:  # a member answered (or escalated) in its slot
            out = rounds.on_slot_reply(d, round_thread=round_thread, slot=thread,
                                       sender=ctx.sender)
            if ctx.escalate:  # a member asks the requester for a decision or help
                me = d.here
                for sid in sessions.sessions_of_thread(d.local, round_thread, "opener"):
                    if me is None or sid != me["session"]:
                        woke = d.wake(sid, thread_id=ctx.thread_id, message_id=ctx.message_id,
                                      sender=ctx.sender, body=ctx.body)
                        out = {**out, "resumed": out.get("resumed") or woke.get("resumed"),
                               "warnings": out["warnings"] + woke["warnings"]}
            return out
        is_round = rounds.is_round(d, ctx.thread_id)
        if is_round and ctx.sender != thread["opener"]:
            # members answer in their slots: a post here is kept but answers nothing
            slot = rounds.slot_of_member(d, ctx.thread_id, ctx.sender)
            return {"resumed": None, "warnings": [] if slot is None else [
                f"{ctx.sender} answers this round in its own thread {slot} (nxc reply "
                f"--thread {slot}); this message does not count as its answer"]}
        targets: list[str] = []
        if ctx.sender == thread["opener"] and is_round:
            # the requester follows up in the round's thread: every member hears it
            targets = rounds.member_sessions(d, ctx.thread_id)
        elif ctx.sender == thread["opener"]:
            for sid in sessions.sessions_of_thread(d.local, ctx.thread_id, "member"):
                row = sessions.get(d.local, sid)
                if row and row["persona"] in thread["expects"]:
                    targets.append(sid)
        elif thread["complete"] or ctx.escalate:
            targets = sessions.sessions_of_thread(d.local, ctx.thread_id, "opener")
        me = d.here
        resumed, warnings = None, []
        trigger: Wake = {"thread_id": ctx.thread_id, "message_id": ctx.message_id,
                   "sender": ctx.sender, "body": ctx.body}
        carry = [trigger]
        if targets and ctx.sender != thread["opener"]:
            # the opener is woken with the whole turn's answers, not just the last one: two
            # replies completing the quorum at once then carry the same messages, and the
            # second wake is dropped (the wake queue is keyed by message id)
            carry = d.turn_answers(ctx.thread_id, thread["opener"])
            if ctx.message_id not in {m["message_id"] for m in carry}:
                carry.append(trigger)
        for sid in targets:
            if me is not None and sid == me["session"]:
                continue  # never wake yourself
            woke = d.wake(sid, thread_id=ctx.thread_id, message_id=ctx.message_id,
                          sender=ctx.sender, body=ctx.body, messages=carry)
            resumed = resumed or woke.get("resumed")
            warnings += woke.get("warnings", [])
        return {"resumed": resumed, "warnings": warnings}

    def on_refused(self, engine: Engine, *, to: str, persona: Persona, reason: str,
                   msg: str) -> None:
        from nixx.nxc.delivery import outcomes

        d = self.deliverer(engine)
        current = d.here
        thread = current["thread_id"] if current else None
        outcomes.record(engine.store, "refused", thread or persona.handle, engine.handle, {
            "thread": thread, "persona": persona.handle, "reason": reason, "msg": msg,
            "to": to})

    def on_decided(self, engine: Engine) -> list[Taken]:
        """A person decided an approval here: take the held steps it decides."""
        d = self.deliverer(engine)
        if not d.has_local():
            return []  # nothing was ever held on this machine
        return take_decided(d)

    def annotate_thread(self, engine: Engine, summary: ThreadSummary) -> ThreadSummary:
        """Add `failures`: the personas still owed a reply whose last delivery failed or was
        refused, with the cause (`reason`, `msg`)."""
        from nixx.nxc.delivery import outcomes

        outs = outcomes.for_threads(engine.store.conn, [summary["thread_id"]])
        summary["failures"] = outcomes.failures(outs.get(summary["thread_id"], []),
                                                summary["outstanding"], engine.store.replica)
        return summary

    def annotate_status(self, engine: Engine, out: StatusReport) -> StatusReport:
        """Add each thread's session and delivery outcomes, and each operation's refusals
        (also from threads of the tree the caller may not read)."""
        from nixx.nxc.delivery import outcomes, sessions

        d = self.deliverer(engine)
        conn = engine.store.conn
        has_local = d.has_local()
        ops = out.get("operations", [])
        # one query for the outcomes of every thread shown, one for their sessions (an
        # operation is shown whole, so its threads are the whole tree)
        shown = [t["thread_id"] for op in ops for t in op["threads"]]
        found = outcomes.for_threads(conn, shown)
        latest = sessions.latest_of_threads(d.local, shown, "member") if has_local else {}
        for op in ops:
            op["refusals"] = [o for t in op["threads"] for o in found.get(t["thread_id"], [])
                              if o["outcome"] in ("refused", "failed")]
            for t in op["threads"]:
                t["deliveries"] = outcomes.mark_remote(found.get(t["thread_id"], []),
                                                       engine.store.replica)
                t["failures"] = outcomes.failures(t["deliveries"], t["outstanding"],
                                                  engine.store.replica)
                row = latest.get(t["thread_id"])
                if row is not None:
                    t["session"] = row["session"]
                    t["session_state"] = row["state"]
        return out


def take_decided(d: Deliverer) -> list[Taken]:
    """Take each step held on this machine (`gates`) that a person has now decided:
    approved, the step runs; denied, the thread says so (a persona's start: a `refused`
    outcome, reason ``denied``; a round's start or hand-back: the supervisor hands the
    denial back). Each step runs once, whichever process sees the decision first; one that
    fails half-way is let go again, so the next `nxc approve` or sync pass retries it."""
    from nixx.nxc.delivery import gates

    out: list[Taken] = []
    for a, action, args in gates.decided(d):
        try:
            result = _take(d, a, action, args)
        except BaseException:
            gates.untake(d, a.id)  # taken by nobody: the next `approve` or sync pass retries
            raise
        out.append({"approval": a.id, "action": action, "state": a.state,
                    "thread": a.thread, "warnings": result.get("warnings", [])})
    return out


def _take(d: Deliverer, a: Approval, action: str, args: HeldArgs) -> Delivered | Resumed:
    """Run one decided step (`take_decided`)."""
    from nixx.nxc.delivery import gates, outcomes, rounds

    approved = a.state == "approved"
    if action == "resume":
        return _take_resume(d, a, args)
    if action == "round":
        return (rounds.begin(d, args["thread_id"]) if approved
                else rounds.deny(d, args["thread_id"], gates.denial(a)))
    if action == "hand_back":
        return rounds.hand_back(d, args["thread_id"], warnings=[],
                                denied=None if approved else gates.denial(a))
    persona = d.decls.personas.get(args["persona"])  # start
    if approved and persona is not None:
        return d.start(persona, approved=a.id, thread_id=args["thread_id"], task=args["task"],
                       sender=args["sender"], channel=args.get("channel"),
                       earlier=args.get("earlier"), timeout_ms=args.get("timeout_ms"),
                       round_thread=args.get("round_thread"),
                       round_opener=args.get("round_opener"),
                       kill_at_ms=args.get("kill_at_ms"), spawned_by=args.get("spawned_by"))
    msg = gates.denial(a) if not approved else (
        f"{args['persona']} is no longer declared: not started")
    outcomes.record(d.store, "refused", args["thread_id"], args["sender"], {
        "thread": args["thread_id"], "persona": args["persona"],
        "reason": "denied" if not approved else "undeclared", "approval": a.id, "msg": msg})
    if round_thread := args.get("round_thread"):  # the round goes on without this member
        rounds.on_member_exit(d, round_thread, args["persona"])
    return {"session": None, "spawned": False, "warnings": [msg]}


def _take_resume(d: Deliverer, a: Approval, args: HeldArgs) -> Resumed:
    """A held resume decided: approved, the session is resumed with every answer waiting
    in its queue; denied, they are dropped (handed over, never run) and its thread gets a
    `refused` outcome (reason ``denied``)."""
    from nixx.nxc.delivery import gates, outcomes, sessions

    sid = args["session"]
    row = sessions.get(d.local, sid)
    if row is None:
        return {"resumed": None, "warnings": [f"session {sid} is not on this machine"]}
    if a.state == "approved":
        wakes = sessions.take_queued(d.local, sid)
        if not wakes:
            return {"resumed": None, "warnings": [
                f"nothing waits for session {sid} now (it runs, or another approval took "
                "its answers)"]}
        return d.resume(sessions.require(d.local, sid), wakes, actor=args["actor"],
                        approved=a.id)
    sessions.take_queued(d.local, sid, drop=True)
    msg = gates.denial(a)
    outcomes.record(d.store, "refused", row["thread_id"] or sid, args["actor"], {
        "thread": row["thread_id"], "persona": row["persona"], "session": sid,
        "reason": "denied", "approval": a.id, "msg": msg})
    return {"resumed": None, "warnings": [msg]}


def catch_up(workspace: Workspace, env: Mapping[str, str]) -> list[str]:
    """After a sync pass stored new ops: move on the rounds this machine runs
    (`rounds.catch_up`), take the held steps a person decided on another clone, and tell
    this clone's sessions whose claims or leases lost (`tell_losers`).
    → the rounds settled, the approvals taken and the sessions woken."""
    import os

    from nixx.nxc.delivery.localstore import local_db_path

    if not os.path.exists(local_db_path(workspace.state_dir)):
        return []  # no session, round or held step ever here
    from nixx.nxc.delivery import rounds
    from nixx.nxc.delivery.launcher import Deliverer

    d = Deliverer.open(workspace.db_path, dict(env))
    try:
        taken = [t["approval"] for t in take_decided(d)]
        return rounds.catch_up(d) + taken + tell_losers(d)
    finally:
        d.store.close()


def tell_losers(d: Deliverer) -> list[str]:
    """Wake each session of this clone whose task claim or exclusive lease lost to one
    made apart on another clone (what a sync pass brought), with the fact — once: the
    wake queue is keyed by (session, the lost op), so a later pass wakes nobody again.
    → the sessions woken."""
    import time

    from nixx.nxc import work
    from nixx.nxc.delivery import sessions

    found = work.tasks(d.store.conn)
    live, lost_leases = work.lease_state(d.store.conn, time.time_ns() // 1_000_000)
    holders = {x["id"]: x["holder"] for x in live + lost_leases}
    replica = d.store.replica
    # (the session, the wake's key, who won, what it is told)
    facts: list[tuple[str, str, str, str]] = [
        (c["session"], f"lost-claim-{c['task']}", found[c["task"]].holder or c["by"],
         f"Your claim on task {c['task']} ({c['title']}) lost: {c['reason']}. Leave it to "
         "its holder (`nxc task list`).")
        for c in work.lost_claims(found) if c.get("session") and c["origin"] == replica]
    facts += [(x["session"], f"lost-lease-{x['id']}",
               holders.get(x.get("lost_to", ""), x["holder"]),
               f"Your lease {x['id']} on {', '.join(x['paths'])} lost: {x.get('reason')}. Do "
               "not change those files until it ends (`nxc leases`).")
              for x in lost_leases if x["session"] and x["origin"] == replica]
    woken: list[str] = []
    for sid, key, sender, body in facts:
        row = sessions.get(d.local, sid)
        if row is None or not row["thread_id"]:
            continue
        woke = d.wake(sid, thread_id=row["thread_id"], message_id=key, sender=sender,
                      body=body)
        if woke.get("resumed"):
            woken.append(sid)
    return woken
