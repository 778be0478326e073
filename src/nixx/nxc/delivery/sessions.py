"""Sessions: the internal session id every delivery is keyed on, and its process state.

When nxc starts a persona it mints an internal id (``s-`` + ULID) and hands it to the
runtime as `NXC_SESSION`; the runtime may answer with its own id, mapped by `bind`
(`nxc session bind`). The return address on a reply, the hop guard and the transcript
are all keyed on the internal id. All of it is device-local (`localstore`).

State machine, one process per session at a time:

    running  --(process exits, wake queue empty)-->  exited (code 0) | failed (non-zero:
                                                     `detail` says why, `stderr_tail` kept)
    running  --(process exits, answers queued)--->   running (resumed with them)
    exited   --(resume)------------------------->    running
    (start fails: executable missing, ...)        -> failed

`claim` is the only way into `running` and refuses a running session with
`AlreadyRunning`; `deliver` turns that refusal into a queued wake, so answers that
arrive while a persona is busy are handed over together when its process ends. The wake
queue is keyed by message id: a message is handed to a session once, and a wake that
carries only messages already handed over is dropped. A
`running` session whose supervisor process is gone (killed, machine rebooted) counts
as `lost`, and can be claimed again.
"""

from __future__ import annotations

import json
import os
import time

from nixx.errors import AlreadyRunning, NotFound, ValidationError
from nixx.log.ids import new_ulid
from nixx.nxc.delivery.localstore import LocalStore

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Container, Sequence
    from typing import Any

    from apsw import Connection

    from nixx.nxc.declarations import Runtime
    from nixx.nxc.delivery.shapes import (
        Refusal,
        ResumeBound,
        SessionRecord,
        StoredRuntime,
        Wake,
        WakeFrom,
    )

STATES = ("running", "exited", "failed", "lost")

_COLS = ("session_id, persona, thread_id, runtime, runtime_session, hop, max_hops, "
         "parent_session, state, pid, runs, exit_code, detail, created, updated, stderr_tail, "
         "chain, max_thread_resumes, max_chain_resumes")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _iso(ms: int | None) -> str | None:
    from nixx.nxc.durations import iso

    return iso(ms)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _row(row: tuple[Any, ...]) -> SessionRecord:
    (sid, persona, thread, runtime, rsid, hop, max_hops, parent, state, pid, runs, code,
     detail, created, updated, stderr_tail, chain, max_thread, max_chain) = row
    if state == "running" and not pid_alive(pid):
        state = "lost"
    return {
        "session": sid, "persona": persona, "thread_id": thread,
        "runtime": json.loads(runtime), "runtime_session": rsid, "hop": hop,
        "max_hops": max_hops, "parent_session": parent, "state": state, "pid": pid,
        "runs": runs, "exit_code": code, "detail": detail, "stderr_tail": stderr_tail,
        "chain": chain or sid, "max_thread_resumes": max_thread, "max_chain_resumes": max_chain,
        "created": _iso(created), "updated": _iso(updated),
    }


def new_session_id() -> str:
    return "s-" + new_ulid()


def stored_runtime(runtime: Runtime) -> StoredRuntime:
    """A persona's runtime as a session stores it (from a `declarations.Runtime`)."""
    if runtime.builtin:
        return {"builtin": runtime.builtin, "format": "nixx"}
    return {"start": list(runtime.start), "resume": list(runtime.resume),
            "format": runtime.format or "stream-json"}


def create(
    local: LocalStore, *, persona: str, thread_id: str | None, runtime: StoredRuntime,
    hop: int, max_hops: int, parent_session: str | None, session_id: str | None = None,
    chain: str | None = None, max_thread_resumes: int | None = None,
    max_chain_resumes: int | None = None,
) -> str:
    """Mint a session in state `running` (its process is about to start). `chain`: the
    first session of the spawn chain it belongs to (None: it starts one)."""
    sid = session_id or new_session_id()
    now = _now_ms()
    with local.transaction() as conn:
        conn.execute(
            f"INSERT INTO sessions({_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (sid, persona, thread_id, json.dumps(runtime), None, hop, max_hops, parent_session,
             "running", None, 0, None, None, now, now, None, chain or sid, max_thread_resumes,
             max_chain_resumes),
        )
        if thread_id is not None:
            conn.execute("INSERT OR IGNORE INTO thread_sessions VALUES (?, 'member', ?)",
                         (thread_id, sid))
    return sid


def _session(conn: Connection, session_id: str) -> SessionRecord | None:
    """The session's row read on `conn` (inside a caller's transaction, or not)."""
    row = conn.execute(f"SELECT {_COLS} FROM sessions WHERE session_id = ?",
                       (session_id,)).fetchone()
    return None if row is None else _row(row)


def _existing(conn: Connection, session_id: str) -> SessionRecord:
    """`_session`, or `NotFound` when there is no such session."""
    found = _session(conn, session_id)
    if found is None:
        raise NotFound(f"no session {session_id} on this machine (sessions are device-local; "
                       "`nxc session state` lists them)", param="session")
    return found


def get(local: LocalStore, session_id: str) -> SessionRecord | None:
    return _session(local.conn, session_id)


def require(local: LocalStore, session_id: str) -> SessionRecord:
    return _existing(local.conn, session_id)


def all_sessions(local: LocalStore, *, limit: int = 100) -> list[SessionRecord]:
    rows = local.conn.execute(
        f"SELECT {_COLS} FROM sessions ORDER BY created DESC, session_id DESC LIMIT ?", (limit,)
    ).fetchall()
    return [_row(r) for r in rows]


def bind(local: LocalStore, session_id: str, runtime_session: str) -> SessionRecord:
    """Map the internal id to the runtime's own session id (the last binding wins)."""
    runtime_session = runtime_session.strip()
    if not runtime_session:
        raise ValidationError("the runtime session id is empty", param="runtime_session")
    with local.transaction() as conn:
        conn.execute(
            "UPDATE sessions SET runtime_session = ?, updated = ? WHERE session_id = ?",
            (runtime_session, _now_ms(), session_id),
        )
        if conn.changes() == 0:
            raise NotFound(f"no session {session_id} on this machine to bind", param="session")
    return require(local, session_id)


def set_pid(local: LocalStore, session_id: str, pid: int) -> None:
    """The pid of the session's supervisor (alive while the session runs)."""
    with local.transaction() as conn:
        conn.execute("UPDATE sessions SET pid = ?, updated = ? WHERE session_id = ?",
                     (pid, _now_ms(), session_id))


def count_run(local: LocalStore, session_id: str) -> None:
    with local.transaction() as conn:
        conn.execute("UPDATE sessions SET runs = runs + 1, updated = ? WHERE session_id = ?",
                     (_now_ms(), session_id))


def fail(local: LocalStore, session_id: str, detail: str) -> None:
    with local.transaction() as conn:
        conn.execute("UPDATE sessions SET state = 'failed', detail = ?, pid = NULL, updated = ? "
                     "WHERE session_id = ?", (detail, _now_ms(), session_id))


def add_opener(local: LocalStore, thread_id: str, session_id: str) -> None:
    """Record that `session_id` opened `thread_id`: a completed quorum wakes it."""
    with local.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO thread_sessions VALUES (?, 'opener', ?)",
                     (thread_id, session_id))


def sessions_of_thread(local: LocalStore, thread_id: str, role: str) -> list[str]:
    rows = local.conn.execute(
        "SELECT session_id FROM thread_sessions WHERE thread_id = ? AND role = ? "
        "ORDER BY session_id", (thread_id, role),
    ).fetchall()
    return [str(r[0]) for r in rows]


def latest_of_threads(local: LocalStore, thread_ids: list[str], role: str) -> dict[str, SessionRecord]:
    """thread id → its latest session in `role`, for many threads in one query."""
    if not thread_ids:
        return {}
    cols = ", ".join(f"s.{c.strip()}" for c in _COLS.split(","))
    out: dict[str, SessionRecord] = {}
    for row in local.conn.execute(
        f"SELECT ts.thread_id, {cols} FROM thread_sessions ts JOIN sessions s USING (session_id)"
        " WHERE ts.role = ? AND ts.thread_id IN (SELECT value FROM json_each(?))"
        " ORDER BY ts.session_id", (role, json.dumps(thread_ids))):
        out[row[0]] = _row(row[1:])
    return out


DEFAULT_MAX_THREAD_RESUMES = 20
DEFAULT_MAX_CHAIN_RESUMES = 100


class ResumeRefused(Exception):  # noqa: N818 - a refusal, not an error: it is recorded
    """A resume past a loop bound; `info` is the `refused` outcome's payload."""

    def __init__(self, info: Refusal) -> None:
        super().__init__(info["msg"])
        self.info = info


def _count_resume(conn: Connection, row: SessionRecord, messages: Sequence[WakeFrom],
                  agents: Container[str]) -> ResumeBound | None:
    """Count one resume of `row` caused by `messages`, inside the caller's transaction.
    Only a resume carrying a message from an agent (a declared persona, `agents`) counts:
    a person's follow-ups never exhaust a bound. → None (counted), or the refusal when the
    resume would pass the session's per-thread or per-chain bound (nothing counted)."""
    threads = sorted({m["thread_id"] for m in messages if m.get("sender") in agents})
    if not threads:
        return None
    chain = row["chain"]
    max_thread = row["max_thread_resumes"] or DEFAULT_MAX_THREAD_RESUMES
    max_chain = row["max_chain_resumes"] or DEFAULT_MAX_CHAIN_RESUMES

    def count(scope: str, key: str) -> int:
        got = conn.execute("SELECT n FROM resume_counts WHERE scope = ? AND key = ?",
                           (scope, key)).fetchone()
        return int(got[0]) if got else 0

    for tid in threads:
        n = count("thread", tid)
        if n + 1 > max_thread:
            return {"scope": "thread", "count": n, "limit": max_thread, "thread": tid,
                    "variable": "NXC_MAX_THREAD_RESUMES"}
    n = count("chain", chain)
    if n + 1 > max_chain:
        return {"scope": "chain", "count": n, "limit": max_chain, "thread": threads[0],
                "variable": "NXC_MAX_CHAIN_RESUMES"}
    for scope, key in [("thread", t) for t in threads] + [("chain", chain)]:
        conn.execute("INSERT INTO resume_counts VALUES (?, ?, 1) ON CONFLICT(scope, key) "
                     "DO UPDATE SET n = n + 1", (scope, key))
    return None


def _refusal(row: SessionRecord, bound: ResumeBound) -> Refusal:
    where = (f"thread {bound['thread']}" if bound["scope"] == "thread"
             else f"the spawn chain of session {row['chain']}")
    msg = (f"not resumed: {row['persona']} (session {row['session']}) was already resumed "
           f"{bound['count']} times by agents in {where}, the limit ({bound['variable']}="
           f"{bound['limit']}); the answer stays in thread {bound['thread']}")
    return {"thread": bound["thread"], "session": row["session"], "persona": row["persona"],
            "reason": "resume_limit", "scope": bound["scope"], "count": bound["count"],
            "limit": bound["limit"], "msg": msg}


def resume_counts(local: LocalStore, *, thread: str | None = None,
                  chain: str | None = None) -> int:
    key, scope = (thread, "thread") if thread is not None else (chain, "chain")
    got = local.conn.execute("SELECT n FROM resume_counts WHERE scope = ? AND key = ?",
                             (scope, key)).fetchone()
    return int(got[0]) if got else 0


def deliver(
    local: LocalStore, session_id: str, messages: list[Wake], *, agents: Container[str] = (),
) -> tuple[str, list[Wake]]:
    """Hand `messages` ({thread_id, message_id, sender, body}) to a session, atomically.

    The wake queue is keyed by (session, message id): a message already handed to the
    session (queued, or taken by a run) is skipped. → (`resume`, the new messages): the
    session was not running and is now claimed — start its process with them;
    (`queued`, new): it runs, they wait for its next wake; (`dropped`, []): every message
    had been handed over already (two replies completing one quorum at the same moment
    both wake the opener with the same answers: the second wake is dropped here).
    A resume past a loop bound (`_count_resume`) raises `ResumeRefused`: nothing is
    queued or claimed. Answers queued for a running session are counted when its
    supervisor takes them (`finish_or_take`)."""
    now = _now_ms()
    refused = None
    with local.transaction() as conn:
        current = _existing(conn, session_id)
        running = current["state"] == "running"
        if not running:
            new = [m for m in messages if m.get("message_id") is None or conn.execute(
                "SELECT 1 FROM wake_queue WHERE session_id = ? AND message_id = ?",
                (session_id, m["message_id"])).fetchone() is None]
            bound = _count_resume(conn, current, new, agents) if new else None
            if bound is not None:
                refused = _refusal(current, bound)
                messages = []  # nothing is queued or claimed
        fresh: list[tuple[int, Wake]] = []
        for m in messages:
            conn.execute(
                "INSERT OR IGNORE INTO wake_queue(session_id, thread_id, message_id, sender, body,"
                " queued, taken) VALUES (?,?,?,?,?,?,?)",
                (session_id, m["thread_id"], m.get("message_id"), m["sender"], m["body"], now,
                 None if running else now))
            if conn.changes():
                fresh.append((conn.last_insert_rowid(), m))
        if refused is not None:
            raise ResumeRefused(refused)  # nothing was written: the rollback is a no-op
        if not fresh:
            return "dropped", []
        if running:
            return "queued", [m for _, m in fresh]
        conn.execute("UPDATE sessions SET state = 'running', pid = NULL, detail = NULL, "
                     "updated = ? WHERE session_id = ?", (now, session_id))
        return "resume", [m for _, m in fresh]


def requeue(local: LocalStore, session_id: str, wakes: list[Wake]) -> None:
    """A resume held for a person (`gates`): the session, claimed for it, is let go
    (`exited`) and the answers it was to be handed wait in its queue again."""
    ids = [w["message_id"] for w in wakes if w.get("message_id")]
    with local.transaction() as conn:
        if ids:
            conn.execute(f"UPDATE wake_queue SET taken = NULL WHERE session_id = ? AND "
                         f"message_id IN ({','.join('?' * len(ids))})", (session_id, *ids))
        conn.execute("UPDATE sessions SET state = 'exited', pid = NULL, updated = ? "
                     "WHERE session_id = ?", (_now_ms(), session_id))


def take_queued(local: LocalStore, session_id: str, *, drop: bool = False) -> list[Wake]:
    """The answers waiting in an idle session's queue, taken: the session is claimed
    (`running`) to be resumed with them — or, `drop`, they are only marked handed over
    (a person denied the resume). Nothing when the session runs (its supervisor takes
    them when the run ends) or nothing waits."""
    now = _now_ms()
    with local.transaction() as conn:
        current = _existing(conn, session_id)
        if current["state"] == "running":
            return []
        rows = _queued(conn, session_id)
        if not rows:
            return []
        _mark_taken(conn, rows, now)
        if not drop:
            conn.execute("UPDATE sessions SET state = 'running', pid = NULL, detail = NULL, "
                         "updated = ? WHERE session_id = ?", (now, session_id))
    return _wakes(rows)


def _queued(conn: Connection, session_id: str) -> list[Any]:
    """The session's wake-queue rows not handed over yet, oldest first."""
    return conn.execute(
        "SELECT id, thread_id, message_id, sender, body FROM wake_queue "
        "WHERE session_id = ? AND taken IS NULL ORDER BY id", (session_id,)).fetchall()


def _mark_taken(conn: Connection, rows: Sequence[Any], now: int) -> None:
    conn.execute(f"UPDATE wake_queue SET taken = ? WHERE id IN ({','.join('?' * len(rows))})",
                 (now, *[r[0] for r in rows]))


def _wakes(rows: Sequence[Any]) -> list[Wake]:
    return [{"thread_id": r[1], "message_id": r[2], "sender": r[3], "body": r[4]} for r in rows]


def claim_or_queue(
    local: LocalStore, session_id: str, *, thread_id: str, message_id: str | None,
    sender: str, body: str,
) -> bool:
    """One message: True when the session was claimed (start its process with it), False
    when it was queued (or had been handed over already). See `deliver`."""
    outcome, _ = deliver(local, session_id, [{"thread_id": thread_id, "message_id": message_id,
                                               "sender": sender, "body": body}])
    return outcome == "resume"


def delivered(local: LocalStore, session_id: str) -> list[str]:
    """Message ids handed to the session so far (queued or taken), oldest first."""
    rows = local.conn.execute(
        "SELECT message_id FROM wake_queue WHERE session_id = ? AND message_id IS NOT NULL"
        " ORDER BY id", (session_id,)).fetchall()
    return [str(r[0]) for r in rows]


def claim(local: LocalStore, session_id: str) -> None:
    """Mark a session running; `AlreadyRunning` if a process runs for it now."""
    now = _now_ms()
    with local.transaction() as conn:
        current = _existing(conn, session_id)
        if current["state"] == "running":
            raise AlreadyRunning(
                f"session {session_id} ({current['persona']}) already runs (pid "
                f"{current['pid']}); one process per session: answers are queued for its "
                "next wake", session=session_id)
        conn.execute("UPDATE sessions SET state = 'running', pid = NULL, detail = NULL, "
                     "updated = ? WHERE session_id = ?", (now, session_id))


def finish_or_take(local: LocalStore, session_id: str, exit_code: int | None, *,
                   failure: str | None = None, stderr_tail: str | None = None,
                   agents: Container[str] = (), refused: list[Refusal] | None = None,
                   ) -> list[Wake]:
    """The process ended. With answers queued: take them all (the session stays running
    and is resumed with them). Else the session becomes `exited` — or `failed` with the
    cause (`failure`) as its detail when the run failed. The run's stderr tail is kept
    with the session either way. Queued answers whose resume would pass a loop bound are
    taken (handed over once) but not run: the session ends, and the refusal is appended
    to `refused`."""
    now = _now_ms()
    with local.transaction() as conn:
        rows = _queued(conn, session_id)
        conn.execute("UPDATE sessions SET exit_code = ?, stderr_tail = ?, updated = ? "
                     "WHERE session_id = ?", (exit_code, stderr_tail, now, session_id))
        if rows:
            row = _session(conn, session_id)
            assert row is not None  # its wake queue has rows: the session exists
            senders: list[WakeFrom] = [{"thread_id": r[1], "sender": r[3]} for r in rows]
            bound = _count_resume(conn, row, senders, agents)
            if bound is not None:
                _mark_taken(conn, rows, now)
                if refused is not None:
                    refused.append(_refusal(row, bound))
                rows = []
        if not rows:
            conn.execute("UPDATE sessions SET state = ?, detail = ?, pid = NULL "
                         "WHERE session_id = ?",
                         ("failed" if failure else "exited", failure, session_id))
            return []
        _mark_taken(conn, rows, now)
    return _wakes(rows)


def queued(local: LocalStore, session_id: str) -> int:
    row = local.conn.execute(
        "SELECT count(*) FROM wake_queue WHERE session_id = ? AND taken IS NULL", (session_id,)
    ).fetchone()
    return int(row[0]) if row else 0
