"""Steps held on this machine until a person decides (`nixx.nxc.approvals`).

A declaration's `approve:` names steps a person must approve. When delivery reaches one,
`hold` writes the ask to the log (it syncs: a person decides on any clone) and keeps, in
the device-local store, what to do once decided — the step's action and its arguments
(`gates` table). `LiveDelivery.take_decided` runs the decided ones exactly once (a row is
taken by compare-and-set), wherever the decision is seen first on this machine: the
`nxc approve`/`deny` that wrote it, or the sync pass that brought it.

    action   args                                   approved              denied
    start    Deliverer.start's arguments            the session starts    a `refused`
                                                                          outcome (reason
                                                                          ``denied``)
    round    {thread_id}                            the round starts its  the round hands
                                                    members               back the denial
    hand_back {thread_id}                           the answers go back   the denial goes
                                                                          back instead
    resume   {session, actor}                       the session resumes   its waiting
                                                    with every answer     answers are
                                                    waiting in its queue  dropped; a
                                                                          `refused` outcome
"""

from __future__ import annotations

import json
import time

from nixx.nxc import approvals

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.approvals import Approval
    from nixx.nxc.delivery.launcher import Deliverer
    from nixx.nxc.delivery.shapes import HeldArgs


def hold(d: Deliverer, *, step: str, subject: str, thread: str, what: str, actor: str,
         action: str, args: HeldArgs) -> str:
    """Ask for a person's approval of `step` and keep what to do once decided.
    → the approval id."""
    approval_id = approvals.ask(d.store, step=step, subject=subject, thread=thread,
                                what=what, actor=actor)
    with d.local.transaction() as conn:
        conn.execute("INSERT INTO gates VALUES (?,?,?,?,0)",
                     (approval_id, action, json.dumps(args), time.time_ns() // 1_000_000))
    return approval_id


def waiting(d: Deliverer) -> dict[str, tuple[str, HeldArgs]]:
    """The steps held here and not yet taken: approval id → (action, args)."""
    return {aid: (action, json.loads(args)) for aid, action, args in d.local.conn.execute(
        "SELECT approval_id, action, args FROM gates WHERE done = 0 ORDER BY created")}


def take(d: Deliverer, approval_id: str) -> bool:
    """Mark a held step taken; False when another process took it first."""
    with d.local.transaction() as conn:
        conn.execute("UPDATE gates SET done = 1 WHERE approval_id = ? AND done = 0",
                     (approval_id,))
        return conn.changes() == 1


def untake(d: Deliverer, approval_id: str) -> None:
    """Let a taken step go again (its action failed): the next caller takes it."""
    with d.local.transaction() as conn:
        conn.execute("UPDATE gates SET done = 0 WHERE approval_id = ?", (approval_id,))


def decided(d: Deliverer) -> list[tuple[Approval, str, HeldArgs]]:
    """The held steps a person has decided, each taken (only this caller runs it):
    (approval, action, args), oldest first."""
    held = waiting(d)
    if not held:
        return []
    found = approvals.approvals(d.store.conn)
    out = []
    for aid, (action, args) in held.items():
        a = found.get(aid)
        if a is not None and a.state != "pending" and take(d, aid):
            out.append((a, action, args))
    return out


def denial(a: Approval) -> str:
    """What a denied step says, wherever it lands (an outcome, a round's hand-back)."""
    note = f": {a.note}" if a.note else ""
    return f"{a.decided_by} denied {a.step} ({a.subject}, approval {a.id}){note}"
