"""Channel rounds: one send to a declared channel runs its members.

The round's thread is the one `send` opened in the channel, expecting the channel's
`expects` (minus the sender). Its deadline is the channel's `timeout` per member
(parallel: one timeout; sequential: one per member; an RFC3339 instant: that instant),
so a round that runs out goes `stale` with the silent members outstanding. A member's
run is killed when its timeout passes: its own duration from its start, or the instant.

- `flow: parallel` — every expected member starts at once with the task.
- `flow: sequential` — one member at a time, in declaration order; the next starts when
  the previous one answered or its run ended (killed at the per-member timeout, or
  exited without answering). Each later member's prompt carries the earlier answers as
  ``<message from="...">`` blocks.
- The sender is never started, even when it is a member.
- When the round settles (the quorum is complete, or every member has had its turn and
  its run has ended), the channel's supervisor `<origin>/__channel-<name>` posts one
  reply in the thread with the answers: `on_complete: pass_through` hands them over as
  blocks; `summarize` asks the backend with the channel's `summary_prompt` (falling back
  to the blocks, said so, when no backend answers). That reply wakes the opener when the
  opener is an agent session; a human opener sees the root `awaiting_human`.

Round bookkeeping (whose turn, settled) is device-local: the machine that sent runs the
round.
"""

from __future__ import annotations

import json
import time

from nixx.nxc import outcomes, sessions
from nixx.nxc.prompt import blocks

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def supervisor_handle(origin: str, channel: str) -> str:
    return f"{origin}/__channel-{channel}"


def open_round(d, *, channel, thread_id: str, members: list[str], body: str, sender: str,
               opener_session: str | None) -> dict[str, Any]:
    """Record the round and start its first member(s). → receipt fields."""
    config = {"on_complete": channel.on_complete, "summary_prompt": channel.summary_prompt,
              "body": body, "sender": sender, "origin": d.origin,
              "timeout_at_ms": channel.timeout_at_ms}
    with d.local.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO rounds VALUES (?,?,?,?,?,?,?,?,?,?)",
            (thread_id, channel.name, channel.flow, json.dumps(members), 0, opener_session,
             channel.timeout_ms, 0, json.dumps(config), _now_ms()),
        )
    builtin = any(_persona(d, m) is not None and _persona(d, m).runtime is not None
                  and _persona(d, m).runtime.builtin for m in members)
    # whoever settles the round may be a member's process, whose environment holds no
    # NIXX_* settings: the backend is captured here, in the sender's process
    if builtin or channel.on_complete == "summarize":
        import os

        from nixx.nxc.spawn import write_private

        folder = os.path.join(d.workspace.state_dir, "rounds")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        write_private(os.path.join(folder, f"{thread_id}.backend.json"), d.backend(None))
    started: list[str] = []
    warnings: list[str] = []
    count = len(members) if channel.flow == "parallel" else 1
    for _ in range(count):
        result = _start_next(d, thread_id)
        if result is None:
            break
        if result.get("session"):
            started.append(result["session"])
        warnings += result.get("warnings", [])
    return {"session": started[0] if started else None, "sessions": started,
            "spawned": bool(started), "warnings": warnings}


def _persona(d, handle: str):
    return d.decls.personas.get(handle)


def _round(d, thread_id: str) -> dict[str, Any] | None:
    row = d.local.conn.execute(
        "SELECT channel, flow, members, next_index, opener_session, timeout_ms, settled, config"
        " FROM rounds WHERE thread_id = ?", (thread_id,)).fetchone()
    if row is None:
        return None
    return {"thread_id": thread_id, "channel": row[0], "flow": row[1],
            "members": json.loads(row[2]), "next_index": row[3], "opener_session": row[4],
            "timeout_ms": row[5], "settled": bool(row[6]), "config": json.loads(row[7])}


def _existing_round(d, thread_id: str) -> dict[str, Any]:
    """A round known to exist (rounds are never deleted)."""
    r = _round(d, thread_id)
    if r is None:
        from nixx.errors import StoreError

        raise StoreError(f"round {thread_id} is missing from the device-local store")
    return r


def is_round(d, thread_id: str) -> bool:
    return _round(d, thread_id) is not None


def _take_turn(d, thread_id: str,
               expected_index: int | None = None) -> tuple[int, dict[str, Any]] | None:
    """Compare-and-set the next member index; None when nobody is left (or someone else
    advanced first)."""
    with d.local.transaction() as conn:
        row = conn.execute("SELECT next_index, members FROM rounds WHERE thread_id = ?",
                           (thread_id,)).fetchone()
        if row is None:
            return None
        index, members = row[0], json.loads(row[1])
        if expected_index is not None and index != expected_index:
            return None
        if index >= len(members):
            return None
        conn.execute("UPDATE rounds SET next_index = ? WHERE thread_id = ?",
                     (index + 1, thread_id))
    return index, _existing_round(d, thread_id)


def _answers(d, thread_id: str, members: list[str]) -> list[dict[str, Any]]:
    from nixx.nxc.threads import messages

    wanted = set(members)
    return [{"sender": m["sender"], "body": m["body"]}
            for m in messages(d.store.conn, thread_id) if m["sender"] in wanted]


def _start_next(d, thread_id: str, expected_index: int | None = None) -> dict[str, Any] | None:
    taken = _take_turn(d, thread_id, expected_index)
    if taken is None:
        return None
    index, r = taken
    handle = r["members"][index]
    persona = _persona(d, handle)
    if persona is None:
        return {"session": None, "warnings": [
            f"{handle} is a member of {r['channel']} but no persona declares it: not started"]}
    earlier = _answers(d, thread_id, r["members"]) if r["flow"] == "sequential" else None
    result = d.start(persona, thread_id=thread_id, task=r["config"]["body"],
                     sender=r["config"]["sender"], channel=r["channel"], earlier=earlier or None,
                     timeout_ms=r["timeout_ms"], kill_at_ms=r["config"].get("timeout_at_ms"),
                     round_thread=thread_id)
    # nobody runs for this member: in a sequential round the next one goes now
    if r["flow"] == "sequential" and not result.get("spawned"):
        more = _start_next(d, thread_id, index + 1)
        if more is not None:
            result["warnings"] = result.get("warnings", []) + more.get("warnings", [])
            if more.get("session"):
                result["session"] = more["session"]
    return result


def on_reply(d, *, thread: dict[str, Any], sender: str, message_id: str) -> dict[str, Any]:
    """A message was posted in a round's thread."""
    r = _round(d, thread["thread_id"])
    if r is None:
        return {"resumed": None, "warnings": []}
    warnings: list[str] = []
    if r["flow"] == "sequential" and sender in r["members"]:
        current = r["next_index"] - 1
        if 0 <= current < len(r["members"]) and r["members"][current] == sender:
            started = _start_next(d, thread["thread_id"], r["next_index"])
            if started:
                warnings += started.get("warnings", [])
    if thread["complete"]:
        return settle(d, thread["thread_id"], warnings=warnings)
    return {"resumed": None, "warnings": warnings}


def on_member_exit(d, thread_id: str, member: str) -> dict[str, Any] | None:
    """A member's run ended (answered or not): in a sequential round whose turn it was,
    the next member goes; a round where everybody had their turn and nobody runs
    any more settles."""
    r = _round(d, thread_id)
    if r is None or r["settled"]:
        return None
    if r["flow"] == "sequential":
        current = r["next_index"] - 1
        if 0 <= current < len(r["members"]) and r["members"][current] == member:
            _start_next(d, thread_id, r["next_index"])
    r = _existing_round(d, thread_id)
    if r["next_index"] < len(r["members"]):
        return None
    for sid in sessions.sessions_of_thread(d.local, thread_id, "member"):
        row = sessions.get(d.local, sid)
        if row and row["state"] == "running" and row["persona"] != member:
            return None
    return settle(d, thread_id, warnings=[])


def settle(d, thread_id: str, *, warnings: list[str]) -> dict[str, Any]:
    """Post the supervisor's reply once, and wake the opener's session with it."""
    with d.local.transaction() as conn:
        conn.execute("UPDATE rounds SET settled = 1 WHERE thread_id = ? AND settled = 0",
                     (thread_id,))
        if conn.changes() == 0:
            return {"resumed": None, "warnings": warnings}
    r = _existing_round(d, thread_id)
    answers = _answers(d, thread_id, r["members"])
    answered = {a["sender"] for a in answers}
    silent = [m for m in r["members"] if m not in answered]
    body = blocks(answers) if answers else "(no member answered)"
    if r["config"]["on_complete"] == "summarize" and answers:
        body = _summarize(d, r, body)
    if silent:
        body += "\n\nNo answer from: " + ", ".join(silent)
    actor = supervisor_handle(r["config"]["origin"], r["channel"])
    from nixx.log.ids import new_ulid
    from nixx.nxc.reducer import DOMAIN

    message_id = "m-" + new_ulid()
    summary_channel = d.store.conn.execute(
        "SELECT channel_id FROM nxc_threads WHERE thread_id = ?", (thread_id,)).fetchone()
    with d.store.transaction() as txn:
        txn.append(DOMAIN, "post", message_id, actor, {
            "thread": thread_id, "channel": summary_channel[0] if summary_channel else
            "decl:" + r["channel"], "body": body, "kind": "report", "priority": "normal",
            "disposition": "in_turn", "escalate": False, "refs": {"round": r["channel"]}})
    outcomes.record(d.store, "round", thread_id, actor, {
        "thread": thread_id, "channel": r["channel"], "event": "posted",
        "answered": sorted(answered), "silent": silent})
    resumed = None
    if r["opener_session"]:
        woke = d.wake(r["opener_session"], thread_id=thread_id, message_id=message_id,
                      sender=actor, body=body)
        resumed = woke.get("resumed")
        warnings = warnings + woke.get("warnings", [])
    return {"resumed": resumed, "warnings": warnings, "settled": True}


def _summarize(d, r: dict[str, Any], text: str) -> str:
    import os

    path = os.path.join(d.workspace.state_dir, "rounds", f"{r['thread_id']}.backend.json")
    try:
        with open(path, encoding="utf-8") as fh:
            backend = json.load(fh)
    except (OSError, ValueError):
        backend = d.backend(None)
    from nixx.nxc.backend import complete_once

    try:
        answer = complete_once(backend, [
            {"role": "system", "content": r["config"]["summary_prompt"]},
            {"role": "user", "content": text}])
    except Exception as exc:  # noqa: BLE001 - any backend failure falls back to the blocks
        return f"{text}\n\n(summary unavailable: {exc}; the answers are passed through)"
    return answer.strip() or text
