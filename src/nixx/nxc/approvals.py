"""Approvals a person gives from anywhere: a step an agent may not take alone waits for one.

A persona or channel declaration names the steps that need a person (`approve:`,
docs/personas.md, docs/channels.md). When delivery reaches one, it writes an **ask** and
holds the step on its own clone (`nixx.nxc.delivery.gates`); a person **decides** on any
clone — `nxc approve|deny`, the TUI, MCP, the web page — and the decision syncs like any
op. The clone holding the step then takes it (approved) or records why not (denied).

Both are ops of the ``work`` domain (`nixx.nxc.work` keeps them), decided at read time from
the set in the log's total order, so every clone shows the same state after a sync:

    kind              target        payload                              who may write it
    approval_ask      approval id   {step, subject, thread, what}        the replica that
                                                                         minted the id
    approval_decide   approval id   {decision: approved|denied, note}    any replica

An approval is ``pending`` until its first decision in pos order after the ask by a handle
other than its subject (a persona never approves its own start) — then ``approved`` or
``denied``, with who, when and from which clone. Every later decision is kept and listed
as a conflict ("decided already"). The CLI and the other shells refuse a decision from
inside an agent's session or by a declared persona: a person decides.

Steps: ``start`` (before a persona's session starts — its declared runtime command's
first run; on a channel, before its round starts its members), ``run`` (a persona: before
every run of its declared command, the start and each resume) and ``hand_back`` (a
channel: before the round hands its answers back).
"""

from __future__ import annotations

from nixx.log.ids import minter, new_thing_id

TYPE_CHECKING = False  # `typing` costs start-up; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from apsw import Connection

    from nixx.log.op import Op
    from nixx.log.store import LogStore
    from nixx.nxc.engine import Engine
    from nixx.nxc.shapes import ApprovalRecord

KINDS = ("approval_ask", "approval_decide")
STEPS = ("start", "run", "hand_back")  # what a declaration may hold (`declarations`)
DECISIONS = ("approved", "denied")
MAX_WHAT = 2000
MAX_NOTE = 2000

WRITERS = {
    "approval_ask": "the replica that minted the approval id (where the step waits)",
    "approval_decide": "any replica; the first decision after the ask by a handle other "
                       "than the subject counts",
}


def printable(text: object, limit: int) -> bool:
    """One line of printable text of at most `limit` characters: what a person reads in a
    terminal, so a clone cannot slip escape sequences or a fake line into it."""
    return isinstance(text, str) and len(text) <= limit and text.isprintable()


def well_formed(op: Op) -> bool:
    """Whether an approval op may be kept (`WorkReducer.fold`)."""
    p = op.payload
    if op.kind == "approval_ask":
        return (minter(op.target) == op.origin and p.get("step") in STEPS
                and printable(p.get("subject"), 200) and bool(p["subject"])
                and printable(p.get("thread"), 200) and printable(p.get("what"), MAX_WHAT))
    return p.get("decision") in DECISIONS and printable(p.get("note", ""), MAX_NOTE)


class Approval:
    """One approval as its ops decide it (the module docstring)."""

    __slots__ = ("id", "step", "subject", "thread", "what", "asked_by", "origin", "asked",
                 "state", "decided_by", "decided_origin", "decided", "note", "conflicts")

    def __init__(self, approval_id: str, payload: dict[str, Any], actor: str, origin: str,
                 created: int) -> None:
        self.id = approval_id
        self.step: str = payload["step"]
        self.subject: str = payload["subject"]
        self.thread: str = payload["thread"]
        self.what: str = payload["what"]
        self.asked_by, self.origin, self.asked = actor, origin, created
        self.state = "pending"  # pending | approved | denied
        self.decided_by: str | None = None
        self.decided_origin: str | None = None
        self.decided: int | None = None
        self.note = ""
        self.conflicts: list[dict[str, str]] = []

    def as_json(self) -> ApprovalRecord:
        return {"id": self.id, "step": self.step, "subject": self.subject,
                "thread": self.thread, "what": self.what, "asked_by": self.asked_by,
                "origin": self.origin, "asked": self.asked, "state": self.state,
                "decided_by": self.decided_by, "decided_origin": self.decided_origin,
                "decided": self.decided, "note": self.note, "conflicts": self.conflicts}


def approvals(conn: Connection) -> dict[str, Approval]:
    """Every approval by id, oldest ask first: one read."""
    import json

    rows = [(str(k), str(t), str(a), str(o), json.loads(str(p)), int(c)) for k, t, a, o, p, c
            in conn.execute("SELECT kind, target, actor, origin, payload, created FROM work_ops "
                            "WHERE kind IN ('approval_ask', 'approval_decide') ORDER BY pos")]
    found: dict[str, Approval] = {}
    for kind, target, actor, origin, p, created in rows:
        if kind == "approval_ask":
            if target not in found:  # written once: the least pos (its minter's) stands
                found[target] = Approval(target, p, actor, origin, created)
            continue
        a = found.get(target)
        if a is None:
            continue  # a decision before its ask (a forged clock): nothing to decide yet
        if a.state != "pending" or actor == a.subject:
            a.conflicts.append({"by": actor, "origin": origin, "decision": p["decision"],
                                "reason": "decided already" if a.state != "pending"
                                else "the subject may not decide its own step"})
            continue
        a.state, a.decided_by, a.decided_origin = p["decision"], actor, origin
        a.decided, a.note = created, p.get("note", "")
    return found


def ask(store: LogStore, *, step: str, subject: str, thread: str, what: str,
        actor: str) -> str:
    """Write the ask of a held step; → the approval id (minted by this replica)."""
    approval_id = new_thing_id("a", store.replica)
    what = "".join(c if c.isprintable() else " " for c in what)  # an argv may hold a newline
    what = what if len(what) <= MAX_WHAT else what[:MAX_WHAT - 1] + "…"
    store.append("work", "approval_ask", approval_id, actor,
                 {"step": step, "subject": subject, "thread": thread, "what": what})
    return approval_id


def decide(engine: Engine, approval_id: str, decision: str, note: str = "") -> ApprovalRecord:
    """A person's decision (`decision`: approved | denied), as the engine's handle. Raises
    `NotFound` for an unknown id, `Conflict` when it was decided already, `Forbidden` when
    the caller is an agent (a declared persona, or a process inside a session)."""
    from nixx.errors import Conflict, Forbidden, NotFound, ValidationError

    if decision not in DECISIONS:
        raise ValidationError(f"a decision is one of {', '.join(DECISIONS)}", param="decision")
    if not printable(note, MAX_NOTE):
        raise ValidationError(f"a note is one line of printable text, at most {MAX_NOTE} "
                              "characters", param="note")
    a = approvals(engine.conn).get(approval_id)
    if a is None:
        raise NotFound(f"no approval {approval_id} in this workspace (`nxc approvals`)")
    if engine.handle in engine.declarations.personas or engine.delivery.agent_session(engine):
        raise Forbidden(f"{engine.handle} is an agent: a person approves or denies "
                        f"(`nxc approve {approval_id}` from your own shell)")
    if a.state != "pending":
        raise Conflict(f"approval {approval_id} was {a.state} already by {a.decided_by}")
    engine.store.append("work", "approval_decide", approval_id, engine.handle,
                        {"decision": decision, "note": note})
    return approvals(engine.conn)[approval_id].as_json()
