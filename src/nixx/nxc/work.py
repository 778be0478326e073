"""Agents that do not collide: claimable tasks and leased files, over the workspace log.

Domain ``work``; every op is kept (``work_ops``) and the state is decided at read time
from the set, in the log's total order (`Op.pos`: clock, origin, id) — so any delivery
order, duplication or partial delivery gives the same answer on every clone, which the
property tests check.

    kind           target    payload                                 who may write it
    task_add       task id   {title, depends_on: [ids], thread}      the replica that
                                                                     minted the task id
    task_claim     task id   {session?}                              any replica (the
                                                                     claimer's own)
    task_release   task id   {}                                      any; counts from the holder
    task_done      task id   {}                                      any; counts from the holder
    lease          lease id  {paths, thread, until, shared,          the replica that
                              session?}
                                                                     minted the lease id
    lease_release  lease id  {session?}                              the lease's replica
    approval_ask, approval_decide: a person's approvals (`nixx.nxc.approvals`)

**A task** is ``open`` → ``claimed`` by one handle → ``done`` (or released back to open).
Walking its ops in pos order: a claim counts when the task is open and every task it
depends on was done by an op before the claim; a release or done counts from the holder
(handle and the replica that made the winning claim). Every other claim is *lost* and
listed with the winner (`Task.conflicts`): two clones claiming while apart both see the
claim with the least pos win after sync, and the other is told.

**A lease** names its holder (the actor), the paths or globs it covers, a thread, and an
expiry (``until``, epoch ms); it is active until released by its own replica or until the
clock passes ``until`` (decided at read time: it expires by itself, on every clone).
An exclusive lease (not ``shared``) held by another handle refuses a commit that touches
its paths (`blocking_leases`, run by the pre-commit hook `nxc lease-check`).
"""

from __future__ import annotations

import json

from nixx.log.ids import minter, new_thing_id
from nixx.log.reducer import Reducer
from nixx.nxc import approvals

TYPE_CHECKING = False  # `typing` costs start-up; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from apsw import Connection

    from nixx.log.op import Op
    from nixx.log.store import LogStore
    from nixx.nxc.engine import Engine
    from nixx.nxc.shapes import LeaseRecord, LostStep, TaskRecord

DOMAIN = "work"
TASK_KINDS = ("task_add", "task_claim", "task_release", "task_done")
LEASE_KINDS = ("lease", "lease_release")
MAX_TITLE = 500
MAX_PATHS = 100
MAX_DEPENDS = 50
MAX_LEASE_MS = 7 * 86_400_000

#: who may write each kind (the module docstring; docs/limits-and-safety.md)
WRITERS = {
    "task_add": "the replica that minted the task id",
    "task_claim": "any replica (the claimer's own; the least pos among open claims wins)",
    "task_release": "any replica; it counts only from the holder",
    "task_done": "any replica; it counts only from the holder",
    "lease": "the replica that minted the lease id",
    "lease_release": "the lease's own replica",
}

_CREATE = """
CREATE TABLE work_ops(
    kind TEXT NOT NULL, target TEXT NOT NULL, pos TEXT NOT NULL, actor TEXT NOT NULL,
    origin TEXT NOT NULL, payload TEXT NOT NULL, created INTEGER NOT NULL,
    PRIMARY KEY(target, pos)) WITHOUT ROWID;
CREATE INDEX work_ops_kind ON work_ops(kind, target);
"""


class WorkReducer(Reducer):
    """Keeps every well-formed ``work`` op its writer may write; the rest is refused."""

    domain = DOMAIN
    version = 1

    def create_views(self, conn: Connection) -> None:
        for statement in _CREATE.split(";"):
            if statement.strip():
                conn.execute(statement)

    def drop_views(self, conn: Connection) -> None:
        conn.execute("DROP TABLE IF EXISTS work_ops")

    def fold(self, conn: Connection, op: Op) -> bool:
        if not _well_formed(op):
            return False
        conn.execute("INSERT OR IGNORE INTO work_ops VALUES (?,?,?,?,?,?,?)",
                     (op.kind, op.target, op.pos, op.actor, op.origin,
                      json.dumps(op.payload, sort_keys=True), op.created))
        return True


def _well_formed(op: Op) -> bool:
    p = op.payload
    if op.kind not in TASK_KINDS + LEASE_KINDS + approvals.KINDS or not isinstance(p, dict) \
            or not op.actor:
        return False
    if op.kind in approvals.KINDS:
        return approvals.well_formed(op)
    if op.kind == "task_add":
        deps = p.get("depends_on", [])
        return (minter(op.target) == op.origin and isinstance(p.get("title"), str)
                and approvals.printable(p["title"], MAX_TITLE) and bool(p["title"])
                and isinstance(deps, list)
                and len(deps) <= MAX_DEPENDS and all(isinstance(d, str) for d in deps)
                and isinstance(p.get("thread"), (str, type(None))))
    if op.kind == "lease":
        paths = p.get("paths")
        return (minter(op.target) == op.origin and isinstance(paths, list)
                and 0 < len(paths) <= MAX_PATHS
                and all(approvals.printable(x, 1000) and x for x in paths)
                and type(p.get("until")) is int and isinstance(p.get("shared"), bool)
                and isinstance(p.get("thread"), (str, type(None)))
                and isinstance(p.get("session"), (str, type(None))))
    if op.kind == "lease_release":
        return minter(op.target) == op.origin
    if op.kind == "task_claim":  # judged against the holder at read time
        return isinstance(p.get("session"), (str, type(None)))
    return True  # release, done: judged against the holder at read time


# -- reading: the state from the ops, in pos order ------------------------------------------


class Task:
    """One task's state as its ops decide it (the module docstring)."""

    __slots__ = ("id", "title", "depends_on", "thread", "author", "state", "holder",
                 "holder_origin", "conflicts")

    def __init__(self, task_id: str, title: str, depends_on: list[str], thread: str | None,
                 author: str) -> None:
        self.id, self.title, self.depends_on, self.thread = task_id, title, depends_on, thread
        self.author = author
        self.state = "open"  # open | claimed | done
        self.holder: str | None = None
        self.holder_origin: str | None = None
        self.conflicts: list[LostStep] = []

    def as_json(self, done: set[str]) -> TaskRecord:
        blocked = [d for d in self.depends_on if d not in done]
        return {"id": self.id, "title": self.title, "state": self.state, "holder": self.holder,
                "depends_on": self.depends_on, "blocked_by": blocked, "thread": self.thread,
                "author": self.author, "conflicts": self.conflicts}


def _rows(conn: Connection, kinds: tuple[str, ...]) -> list[tuple[str, str, str, str, str, dict[str, Any]]]:
    marks = ",".join("?" * len(kinds))
    return [(k, t, pos, actor, origin, json.loads(payload)) for k, t, pos, actor, origin, payload
            in conn.execute(f"SELECT kind, target, pos, actor, origin, payload FROM work_ops "
                            f"WHERE kind IN ({marks}) ORDER BY pos", kinds)]


def _lost(kind: str, actor: str, origin: str, reason: str, payload: dict[str, Any]) -> LostStep:
    """A step that counted for nothing; a claim names the session it was made in, so
    that session can be told it lost (`dispatch.tell_losers`)."""
    out: LostStep = {"kind": kind, "by": actor, "origin": origin, "reason": reason}
    if isinstance(payload.get("session"), str):
        out["session"] = payload["session"]
    return out


def tasks(conn: Connection) -> dict[str, Task]:
    """Every task by id, decided from its ops in pos order (dependencies: done by an op
    before the claim)."""
    found: dict[str, Task] = {}
    done_at: dict[str, str] = {}  # task id -> the pos of the op that made it done
    pending: list[tuple[str, str, str, str, str, dict[str, Any]]] = []
    for kind, target, pos, actor, origin, payload in _rows(conn, TASK_KINDS):
        if kind == "task_add":
            if target in found:
                continue  # written once: the least pos (its minter's) stands
            found[target] = Task(target, payload["title"],
                                 list(dict.fromkeys(payload.get("depends_on") or [])),
                                 payload.get("thread"), actor)
        else:
            pending.append((kind, target, pos, actor, origin, payload))
    for kind, target, pos, actor, origin, payload in sorted(pending, key=lambda r: r[2]):
        t = found.get(target)
        if t is None or t.state == "done" and kind != "task_done":
            if t is not None and kind == "task_claim":
                t.conflicts.append(_lost("claim", actor, origin, "the task was done", payload))
            continue
        if kind == "task_claim":
            blocked = [d for d in t.depends_on if done_at.get(d, "~") >= pos]
            if t.state == "claimed" or blocked:
                t.conflicts.append(_lost("claim", actor, origin, (
                    f"{t.holder} claimed it first" if t.state == "claimed"
                    else f"waits on {', '.join(blocked)}"), payload))
                continue
            t.state, t.holder, t.holder_origin = "claimed", actor, origin
        elif (t.state == "claimed" and actor == t.holder and origin == t.holder_origin):
            if kind == "task_release":
                t.state, t.holder, t.holder_origin = "open", None, None
            elif kind == "task_done":
                t.state = "done"
                done_at[t.id] = pos
        else:
            t.conflicts.append({"kind": kind.removeprefix("task_"), "by": actor,
                                "origin": origin, "reason": "only the holder may"})
    return found


def lost_claims(found: dict[str, Task]) -> list[dict[str, str]]:
    """The claims that lost and still matter — on a task not done, by a handle that does
    not hold it now — each ``{task, title, by, origin, reason, session?}``: how the loser
    of a race is told (`nxc status`, `nxc prime` for the loser's own, and a wake of the
    session it was made in: `dispatch.tell_losers`)."""
    out = []
    for t in found.values():
        if t.state == "done":
            continue
        for c in t.conflicts:
            if c["kind"] == "claim" and (c["by"], c["origin"]) != (t.holder, t.holder_origin):
                out.append({"task": t.id, "title": t.title, "by": c["by"],
                            "origin": c["origin"], "reason": c["reason"],
                            **({"session": c["session"]} if "session" in c else {})})
    return out


def lease_state(conn: Connection, now_ms: int) -> tuple[list[LeaseRecord], list[LeaseRecord]]:
    """(the active leases, the leases that lost) at `now_ms`, oldest first: one read of
    the view.

    Walking the leases in pos order, a lease *loses* when an earlier lease that did not
    lose overlaps it (`overlaps`), is another handle's, is not shared with it (both
    shared), and still held when it was taken — not released by an op before it, not
    expired by its clock. So two clones leasing one path while apart both show, after
    sync, the lease with the least pos as the holder's; the other never refuses anyone
    and is listed with the reason. A lease is active when it did not lose, its own
    replica has not released it and `now_ms` is before its ``until``."""
    from nixx.log.clock import decode

    rows = _rows(conn, LEASE_KINDS)
    released_at: dict[str, str] = {}  # lease id -> the pos of its replica's first release
    for kind, target, pos, _actor, origin, _p in rows:
        if kind == "lease_release" and minter(target) == origin and target not in released_at:
            released_at[target] = pos
    kept: list[LeaseRecord] = []
    lost: list[LeaseRecord] = []
    seen: set[str] = set()
    for kind, target, pos, actor, origin, p in rows:
        if kind != "lease" or target in seen:
            continue  # written once: the least pos (its minter's) stands
        seen.add(target)
        x: LeaseRecord = {"id": target, "holder": actor, "origin": origin, "paths": p["paths"],
             "thread": p.get("thread"), "until": p["until"], "shared": p["shared"],
             "session": p.get("session")}
        taken_ms = decode(pos.split(".", 1)[0])[0]
        first = next((m for m in kept if m["holder"] != actor
                      and not (m["shared"] and x["shared"]) and m["until"] > taken_ms
                      and released_at.get(m["id"], "~") > pos and overlaps(m, x)), None)
        if first is None:
            kept.append(x)
        else:
            x["lost_to"] = first["id"]
            x["reason"] = f"leased to {first['holder']} first (lease {first['id']})"
            lost.append(x)
    live = [x for x in kept if x["id"] not in released_at and x["until"] > now_ms]
    return live, [x for x in lost if x["id"] not in released_at and x["until"] > now_ms]


def leases(conn: Connection, now_ms: int) -> list[LeaseRecord]:
    """The active leases at `now_ms` (`lease_state`), oldest first."""
    return lease_state(conn, now_ms)[0]


def overlaps(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two leases' paths meet: a path or glob of one covers one of the other's."""
    return (any(covers(a, q) for q in b["paths"]) or any(covers(b, p) for p in a["paths"]))


def covers(lease: Mapping[str, Any], path: str) -> bool:
    """Whether `lease` covers the repository-relative `path` (a glob or a path prefix)."""
    import fnmatch  # only a lease check pays for it, not every verb that opens the log

    path = path.strip("/")
    for pattern in lease["paths"]:
        pattern = pattern.strip("/")
        if fnmatch.fnmatchcase(path, pattern) or path == pattern or path.startswith(pattern + "/"):
            return True
    return False


def blocking_leases(conn: Connection, paths: Iterable[str], me: str,
                    now_ms: int) -> list[LeaseRecord]:
    """The active exclusive leases another handle holds over any of `paths`, each with the
    paths it covers (what the pre-commit hook refuses)."""
    out: list[LeaseRecord] = []
    for lease in leases(conn, now_ms):
        if lease["shared"] or lease["holder"] == me:
            continue
        hit = [p for p in paths if covers(lease, p)]
        if hit:
            out.append({**lease, "touched": hit})
    return out


# -- writing, through an engine ----------------------------------------------------------------


def _append(engine: Engine, kind: str, target: str, payload: dict[str, Any]) -> None:
    engine.store.append(DOMAIN, kind, target, engine.handle, payload)


def _task(engine: Engine, task_id: str) -> Task:
    from nixx.errors import NotFound

    found = tasks(engine.conn).get(task_id)
    if found is None:
        raise NotFound(f"no task {task_id} in this workspace (`nxc task list`)")
    return found


def add_task(engine: Engine, title: str, depends_on: list[str] | None = None,
             thread: str | None = None) -> TaskRecord:
    from nixx.errors import NotFound, ValidationError

    title = " ".join(title.split())
    if not title or not approvals.printable(title, MAX_TITLE):
        raise ValidationError(f"a task's title is 1 to {MAX_TITLE} characters of printable "
                              "text")
    known = tasks(engine.conn)
    missing = [d for d in depends_on or [] if d not in known]
    if missing:
        raise NotFound(f"no task {', '.join(missing)} to depend on (`nxc task list`)")
    task_id = new_thing_id("k", engine.store.replica, engine.now_ms())
    _append(engine, "task_add", task_id, {"title": title, "depends_on": list(depends_on or []),
                                          "thread": thread})
    return _task(engine, task_id).as_json(_done(engine))


def _done(engine: Engine) -> set[str]:
    return {t.id for t in tasks(engine.conn).values() if t.state == "done"}


def claim(engine: Engine, task_id: str) -> TaskRecord:
    """Claim an open task whose dependencies are done; raises `Conflict` naming the holder
    or what it waits on (nothing is written then)."""
    from nixx.errors import Conflict

    t = _task(engine, task_id)
    done = _done(engine)
    waits = [d for d in t.depends_on if d not in done]
    if t.state != "open" or waits:
        why = (f"{t.holder} holds it" if t.state == "claimed" else "it is done"
               if t.state == "done" else f"it waits on {', '.join(waits)}")
        raise Conflict(f"task {task_id} cannot be claimed: {why}")
    session = engine.delivery.agent_session(engine)
    _append(engine, "task_claim", task_id, {"session": session} if session else {})
    return _task(engine, task_id).as_json(_done(engine))


def _holder_step(engine: Engine, task_id: str, kind: str) -> TaskRecord:
    from nixx.errors import Conflict

    t = _task(engine, task_id)
    if t.state != "claimed" or t.holder != engine.handle or t.holder_origin != engine.store.replica:
        holder = f"{t.holder} holds it" if t.holder else f"it is {t.state}"
        raise Conflict(f"only the task's holder may {kind.removeprefix('task_')} it: {holder}")
    _append(engine, kind, task_id, {})
    return _task(engine, task_id).as_json(_done(engine))


def release_task(engine: Engine, task_id: str) -> TaskRecord:
    return _holder_step(engine, task_id, "task_release")


def finish_task(engine: Engine, task_id: str) -> TaskRecord:
    return _holder_step(engine, task_id, "task_done")


def task_list(engine: Engine) -> list[TaskRecord]:
    found = tasks(engine.conn)
    done = {t.id for t in found.values() if t.state == "done"}
    return [t.as_json(done) for t in found.values()]


def lease(engine: Engine, paths: list[str], *, for_ms: int, thread: str | None = None,
          shared: bool = False) -> LeaseRecord:
    """Lease `paths` (paths or globs, repository-relative) for `for_ms`; raises `Conflict`
    when another handle holds an exclusive lease over them (or this one would be
    exclusive over a path another holds)."""
    from nixx.errors import Conflict, ValidationError
    from nixx.nxc.durations import iso

    clean = [p.strip().strip("/") for p in paths if p.strip().strip("/")]
    if not clean or len(clean) > MAX_PATHS:
        raise ValidationError(f"give 1 to {MAX_PATHS} paths or globs to lease")
    if not all(approvals.printable(p, 1000) for p in clean):
        raise ValidationError("a leased path is at most 1,000 characters of printable text")
    if not 0 < for_ms <= MAX_LEASE_MS:
        raise ValidationError("a lease lasts from a second to 7 days (--for 30m, 2h, 1d)")
    now = engine.now_ms()
    me = engine.handle
    for other in leases(engine.conn, now):
        if other["holder"] == me or (other["shared"] and shared):
            continue
        if overlaps(other, {"paths": clean}):
            raise Conflict(f"{', '.join(other['paths'])} is leased to {other['holder']} "
                           f"(lease {other['id']}, until {iso(other['until'])})")
    lease_id = new_thing_id("l", engine.store.replica, now)
    payload: dict[str, Any] = {"paths": clean, "thread": thread, "until": now + for_ms,
                               "shared": shared}
    session = engine.delivery.agent_session(engine)
    if session is not None:  # taken inside an agent's session: it ends with the session
        payload["session"] = session
    _append(engine, "lease", lease_id, payload)
    return next(x for x in leases(engine.conn, now) if x["id"] == lease_id)


def release_session_leases(store: LogStore, session: str, actor: str) -> list[str]:
    """Release the leases taken inside `session` on this clone that are still active
    (the supervisor, when the session's run ends with nothing left to do). → their ids."""
    import time

    now = time.time_ns() // 1_000_000
    mine = [x["id"] for x in leases(store.conn, now)
            if x.get("session") == session and minter(x["id"]) == store.replica]
    if mine:
        with store.transaction() as txn:
            for lease_id in mine:
                txn.append(DOMAIN, "lease_release", lease_id, actor, {"session": session})
    return mine


def release_lease(engine: Engine, lease_id: str) -> dict[str, str]:
    from nixx.errors import Conflict, NotFound

    live, lost = lease_state(engine.conn, engine.now_ms())
    if not any(x["id"] == lease_id for x in live + lost):
        raise NotFound(f"no active lease {lease_id} (`nxc leases`)")
    if minter(lease_id) != engine.store.replica:
        raise Conflict(f"lease {lease_id} was taken on another clone: only it releases it")
    _append(engine, "lease_release", lease_id, {})
    return {"released": lease_id}



# -- the git pre-commit hook ---------------------------------------------------------------
HOOK_MARK = "# nxc lease-check: installed by nxs init"


def hook_script(nxc: str) -> str:
    import shlex

    return (f"#!/bin/sh\n{HOOK_MARK}\n"
            "# refuses a commit that touches a path leased exclusively to another handle;\n"
            "# NXC_LEASE_OVERRIDE=1 (or git commit --no-verify) commits anyway\n"
            f"exec {shlex.quote(nxc)} lease-check --staged\n")


def install_lease_hook(root: str, nxc: str) -> str:
    """Install the pre-commit hook running `nxc lease-check` in the git repository at
    `root`: "added", "unchanged", or why it was left alone (not a repository; a
    pre-commit hook of another tool is there: add ``nxc lease-check --staged`` to it)."""
    import os
    import subprocess

    found = subprocess.run(["git", "-C", root, "rev-parse", "--git-path", "hooks/pre-commit"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        return "skipped: not a git repository"
    path = os.path.join(root, found.stdout.strip())
    script = hook_script(nxc)
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as fh:
            current = fh.read()
        if current == script:
            return "unchanged"
        if HOOK_MARK not in current:
            return (f"skipped: {path} is another tool's hook; add `{nxc} lease-check "
                    "--staged` to it")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(script)
    os.chmod(path, 0o755)
    return "added"
