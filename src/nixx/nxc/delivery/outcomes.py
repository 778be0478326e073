"""Delivery outcomes: what happened when a message tried to reach an agent, recorded in
the workspace log (domain ``delivery``) so a sender can see a message that reached nobody.

These ARE synced like messages (they say what happened to a message; they carry no
process state). Each op is one immutable fact; the view is grow-only, so any delivery
order folds to the same rows.

    kind      target            payload
    spawned   thread id         {thread, session, persona, runtime, hop, mode: start|resume}
    queued    thread id         {thread, session, persona, messages: [message ids]}
                                                                 session busy: answers queued
    exited    thread id         {thread, session, persona, code, reason?}   a run ended
    failed    thread id         {thread, session, persona, reason, code?}
                                 the runtime could not start, or a run exited non-zero:
                                 `reason` is the cause in words (which URL, which setting)
    refused   thread id | handle {thread, persona, reason: hop_limit|resume_limit|addressable|denied|undeclared,
                                  hop | scope+count, limit, msg}
    round     thread id         {thread, channel, event: posted|denied|advanced, member?}

`refused` with reason ``addressable`` is written when a send is refused before any
thread exists: its target is the sender's current thread (inside a session) or the
persona's handle.

**Trust across clones.** An outcome is about a session of the clone that wrote it
(delivery is device-local). Each carries its `origin` (the replica prefix); one from
another clone is shown as coming from there (``origin``, ``remote: true``) but never
settles anything here: `failures` counts only this replica's own outcomes, so a
`failed` written elsewhere (or forged) cannot make `nxc wait` exit 5 (docs/sync.md).
"""

from __future__ import annotations

import json

import apsw

from nixx.log.reducer import Reducer

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from apsw import Connection

    from nixx.log.op import Op
    from nixx.log.store import LogStore
    from nixx.nxc.shapes import DeliveryOutcome

DOMAIN = "delivery"
KINDS = ("spawned", "queued", "exited", "failed", "refused", "round")

_CREATE = (
    "CREATE TABLE nxd_outcomes(op_id TEXT PRIMARY KEY, kind TEXT NOT NULL, target TEXT NOT NULL,"
    " thread_id TEXT, session_id TEXT, persona TEXT, actor TEXT NOT NULL, payload TEXT NOT NULL,"
    " pos TEXT NOT NULL, created INTEGER NOT NULL, origin TEXT NOT NULL) WITHOUT ROWID",
    "CREATE INDEX nxd_outcomes_thread ON nxd_outcomes(thread_id, pos)",
    "CREATE INDEX nxd_outcomes_target ON nxd_outcomes(target, pos)",
)


class DeliveryReducer(Reducer):
    domain = DOMAIN
    version = 2  # 2: the origin of each outcome

    def create_views(self, conn: Connection) -> None:
        for statement in _CREATE:
            conn.execute(statement)

    def drop_views(self, conn: Connection) -> None:
        conn.execute("DROP TABLE IF EXISTS nxd_outcomes")

    def fold(self, conn: Connection, op: Op) -> bool:
        p = op.payload
        if op.kind not in KINDS or not isinstance(p, dict) or not op.target:
            return False
        thread, session, persona = p.get("thread"), p.get("session"), p.get("persona")
        for value in (thread, session, persona):
            if value is not None and not isinstance(value, str):
                return False
        conn.execute(
            "INSERT OR IGNORE INTO nxd_outcomes VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (op.id, op.kind, op.target, thread, session, persona, op.actor,
             json.dumps(p, sort_keys=True), op.pos, op.created, op.origin),
        )
        return True


def record(store: LogStore, kind: str, target: str, actor: str, payload: dict[str, Any]) -> Op:
    return store.append(DOMAIN, kind, target, actor, payload)


def _out(row: tuple[Any, ...]) -> DeliveryOutcome:
    kind, target, actor, payload, created, origin = row
    from nixx.nxc.durations import iso

    # the payload, then the recorded fields: a payload cannot overwrite what the log says
    # of the op (a key both hold keeps its place, as in ``{**payload, ...}``)
    out: DeliveryOutcome = json.loads(payload)
    out["outcome"], out["target"], out["actor"] = kind, target, actor
    out["at"], out["origin"] = iso(created), origin
    return out


def for_threads(conn: Connection, thread_ids: list[str]) -> dict[str, list[DeliveryOutcome]]:
    """Outcomes per thread (and per target, for refusals recorded against a thread)."""
    out: dict[str, list[DeliveryOutcome]] = {}
    if not thread_ids:
        return out
    try:
        rows: list[Any] = conn.execute(
            "SELECT coalesce(thread_id, target), kind, target, actor, payload, created, origin"
            " FROM nxd_outcomes WHERE thread_id IN (SELECT value FROM json_each(?))"
            " OR target IN (SELECT value FROM json_each(?)) ORDER BY pos",
            (json.dumps(thread_ids), json.dumps(thread_ids)),
        ).fetchall()
    except apsw.SQLError as exc:  # views not built (the reducer was not registered)
        if "no such table" not in str(exc):
            raise
        return out
    for row in rows:
        key = row[0] if row[0] in thread_ids else row[2]
        out.setdefault(key, []).append(_out(row[1:]))
    return out


def all_outcomes(conn: Connection, *, limit: int = 200) -> list[DeliveryOutcome]:
    rows = conn.execute(
        "SELECT kind, target, actor, payload, created, origin FROM nxd_outcomes"
        " ORDER BY pos DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [_out(r) for r in rows]


_SETTLING = ("spawned", "failed", "refused", "exited")


def mark_remote(outs: list[DeliveryOutcome], replica: str) -> list[DeliveryOutcome]:
    """Flag each outcome another clone wrote (``remote: true``); returns `outs`."""
    for o in outs:
        o["remote"] = o.get("origin") != replica
    return outs


def failures(outs: list[DeliveryOutcome], outstanding: list[str],
             replica: str | None = None) -> list[DeliveryOutcome]:
    """Of a thread's outcomes (`for_threads`, in log order), the personas still owed a
    reply whose last delivery attempt failed or was refused: nobody is working on their
    answer. A later `spawned` (a resume, a retry) clears it. With `replica`, only that
    replica's own outcomes count (outcomes are about local sessions: module docstring)."""
    last: dict[str, DeliveryOutcome] = {}
    for o in outs:
        persona = o.get("persona")
        if not persona or o["outcome"] not in _SETTLING:
            continue
        if replica is not None and o.get("origin") != replica:
            continue
        if o["outcome"] == "exited" and persona in last and last[persona]["outcome"] == "failed":
            continue  # `failed` after `exited` of the same run: keep the diagnosis
        last[persona] = o
    return [last[p] for p in outstanding
            if p in last and last[p]["outcome"] in ("failed", "refused")]
