"""Channel rounds: one send to a declared channel runs its members, as a tree.

The round's thread is the one `send` opened in the channel between the sender and the
channel's supervisor `<origin>/__channel-<name>`: it expects the supervisor. Under it the
supervisor opens one **slot thread** per member (same channel, `parent` = the round's
thread, opened by the supervisor, expecting that member; the task stays the round
thread's first message); the member answers there. So `nxc status` shows the round as a tree: the round's thread at
depth 0, its slots at depth 1, whatever a member sends in turn at depth 2.

Deadlines: a slot's is the channel's `timeout` from the moment the slot opens (or the
RFC3339 instant); the round's thread's is the channel's `timeout` per member (parallel:
one timeout; sequential: one per member; an instant: that instant). A member's run is
killed when its timeout passes.

- `flow: parallel` — every member's slot opens and its member starts at once.
- `flow: sequential` — one member at a time, in declaration order; the next slot opens
  when the previous member answered in its slot or its run ended (killed at the timeout,
  or exited without answering). Each later member's prompt carries the earlier answers
  as ``<message from="...">`` blocks.
- The sender is never started, even when it is a member.
- Every member runs at the round's depth + 1 (the hop a spawn from the sender gets),
  whichever member's process starts the next one: a round of nine members is one hop.
- When the round settles (every slot is answered, or every member has had its turn and
  no member's run is still going), the supervisor posts one reply in the round's thread
  with the answers **in member order**: `on_complete: pass_through` hands them over as
  blocks; `summarize` asks the backend with the channel's `summary_prompt` (falling back
  to the blocks, said so, when no backend answers). That reply completes the round's
  thread and wakes the opener when it is an agent session; a human opener sees the root
  `awaiting_human`.

Round bookkeeping (whose turn, settled) is device-local: the machine that sent runs the
round. The slots, answers and hand-back are in the log.
"""

from __future__ import annotations

import json
import time

from nixx.nxc.channels import supervisor_handle
from nixx.nxc.delivery import gates, outcomes, sessions
from nixx.nxc.delivery.session_prompt import blocks
from nixx.nxc.reducer import DOMAIN, children_by, posts_of

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from apsw import Connection

    from nixx.nxc.declarations import ChannelDecl, Persona
    from nixx.nxc.delivery.launcher import Deliverer
    from nixx.nxc.delivery.shapes import Said, SessionRecord
    from nixx.nxc.shapes import Delivered, Resumed, ThreadSummary

__all__ = ["begin", "catch_up", "deny", "hand_back", "is_round", "member_sessions",
           "on_member_exit", "on_slot_reply", "open_round", "round_of_slot", "settle",
           "slot_of_member", "slots", "supervisor_handle"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def open_round(d: Deliverer, *, channel: ChannelDecl, thread_id: str, members: list[str], body: str, sender: str,
               opener: SessionRecord | None) -> Delivered:
    """Record the round opened by the session `opener` (None: a person) and start its
    first member(s). → receipt fields."""
    config = {"on_complete": channel.on_complete, "summary_prompt": channel.summary_prompt,
              "body": body, "sender": sender, "origin": d.origin,
              "timeout_at_ms": channel.timeout_at_ms}
    with d.local.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO rounds VALUES (?,?,?,?,?,?,?,?,?,?)",
            (thread_id, channel.name, channel.flow, json.dumps(members), 0,
             opener["session"] if opener else None,
             channel.timeout_ms, 0, json.dumps(config), _now_ms()),
        )
    builtin = any(p is not None and p.runtime is not None and p.runtime.builtin
                  for p in (_persona(d, m) for m in members))
    # whoever settles the round may be a member's process, whose environment holds no
    # NIXX_* settings: the backend is captured here, in the sender's process
    if builtin or channel.on_complete == "summarize":
        d.keep_round_backend(thread_id, opener)
    if "start" in channel.approve:
        supervisor = supervisor_handle(d.origin, channel.name)
        approval = gates.hold(
            d, step="start", subject=supervisor, thread=thread_id, actor=supervisor,
            action="round", args={"thread_id": thread_id},
            what=(f"start the round of {channel.name} ({', '.join(members)}) in thread "
                  f"{thread_id}, asked by {sender}"))
        return {"session": None, "sessions": [], "spawned": False, "approval": approval,
                "warnings": [f"the round of {channel.name} starts once a person approves: "
                             f"nxc approve {approval} (or nxc deny {approval}), on any clone"]}
    return begin(d, thread_id)


def begin(d: Deliverer, thread_id: str) -> Delivered:
    """Start the round's first member(s): every member (parallel) or the first
    (sequential). → receipt fields."""
    r = _existing_round(d, thread_id)
    started: list[str] = []
    warnings: list[str] = []
    count = len(r["members"]) if r["flow"] == "parallel" else 1
    for _ in range(count):
        result = _start_next(d, thread_id)
        if result is None:
            break
        started += result.get("sessions", [])
        warnings += result.get("warnings", [])
    return {"session": started[0] if started else None, "sessions": started,
            "spawned": bool(started), "warnings": warnings}


def _persona(d: Deliverer, handle: str) -> Persona | None:
    return d.decls.personas.get(handle)


def _round(d: Deliverer, thread_id: str) -> dict[str, Any] | None:
    row = d.local.conn.execute(
        "SELECT channel, flow, members, next_index, opener_session, timeout_ms, settled, config"
        " FROM rounds WHERE thread_id = ?", (thread_id,)).fetchone()
    if row is None:
        return None
    return {"thread_id": thread_id, "channel": row[0], "flow": row[1],
            "members": json.loads(row[2]), "next_index": row[3], "opener_session": row[4],
            "timeout_ms": row[5], "settled": bool(row[6]), "config": json.loads(row[7])}


def _existing_round(d: Deliverer, thread_id: str) -> dict[str, Any]:
    """A round known to exist (rounds are never deleted)."""
    r = _round(d, thread_id)
    if r is None:
        from nixx.errors import StoreError

        raise StoreError(f"round {thread_id} is missing from the device-local store")
    return r


def is_round(d: Deliverer, thread_id: str) -> bool:
    return _round(d, thread_id) is not None


def _channel_id(r: dict[str, Any]) -> str:
    """The round's channel: a round is only ever sent to a declared channel, whose id is
    ``decl:<name>`` (`ChannelDecl.id`), so its slots and its hand-back are posted there."""
    return "decl:" + str(r["channel"])


def _supervisor(r: dict[str, Any]) -> str:
    return supervisor_handle(r["config"]["origin"], r["channel"])


def round_of_slot(d: Deliverer, thread: ThreadSummary) -> str | None:
    """The round's thread when `thread` (a summary) is one of its slots on this machine."""
    parent: str | None = thread.get("parent")
    if not parent:
        return None
    r = _round(d, parent)
    if r is None or thread["opener"] != _supervisor(r):
        return None
    return parent


def slots(conn: Connection, round_thread: str, supervisor: str) -> dict[str, str]:
    """member → its slot thread (from the log: the threads the supervisor opened under the
    round's thread, each expecting one member)."""
    out: dict[str, str] = {}
    for tid, expects in children_by(conn, round_thread, supervisor):
        for handle in expects[:1]:
            out.setdefault(handle, tid)
    return out


def slot_of_member(d: Deliverer, round_thread: str, member: str) -> str | None:
    """`member`'s slot in the round (None: not a member, or its turn has not come)."""
    r = _round(d, round_thread)
    if r is None:
        return None
    return slots(d.store.conn, round_thread, _supervisor(r)).get(member)


def _take_turn(d: Deliverer, thread_id: str,
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


def _answers(d: Deliverer, r: dict[str, Any], members: list[str]) -> list[Said]:
    """Each member's posts in its own slot, in member order (not arrival order)."""
    by_member = slots(d.store.conn, r["thread_id"], _supervisor(r))
    out: list[Said] = []
    for member in members:
        tid = by_member.get(member)
        if tid is None:
            continue
        out += [{"sender": s, "body": b} for s, b in posts_of(d.store.conn, tid, member)]
    return out


def _open_slot(d: Deliverer, r: dict[str, Any], member: str) -> str:
    """The supervisor opens `member`'s slot under the round's thread. The slot holds no
    copy of the task (it is the round thread's first message, which every member reads;
    a sequential member's earlier answers are in its prompt and in the earlier slots), so
    nobody gets the task twice as unread. → the slot's thread id."""
    from nixx.log.ids import new_thing_id

    now = _now_ms()
    deadline = r["config"].get("timeout_at_ms")
    if deadline is None and r["timeout_ms"]:
        deadline = now + r["timeout_ms"]
    channel_id = _channel_id(r)
    slot = new_thing_id("t", d.store.replica, now)
    d.store.append(DOMAIN, "thread_open", slot, _supervisor(r), {
        "channel": channel_id, "parent": r["thread_id"], "expects": [member],
        "deadline": deadline})
    return slot


def _start_next(d: Deliverer, thread_id: str, expected_index: int | None = None) -> Delivered | None:
    """Start the member whose turn it is (compare-and-set on the round's next index: None
    when nobody is left, or someone else advanced first). In a sequential round, a member
    with a runtime whose start failed or was refused passes the turn on at once. A member
    without one (a person, or an agent in another clone) is a mailbox: the round waits for
    its answer in the slot, which arrives by hand or by sync (`catch_up`), or for the slot's
    deadline (docs/channels.md)."""
    out: Delivered | None = None
    while (taken := _take_turn(d, thread_id, expected_index)) is not None:
        index, r = taken
        handle = r["members"][index]
        slot = _open_slot(d, r, handle)
        earlier = _answers(d, r, r["members"][:index]) if r["flow"] == "sequential" else None
        persona = _persona(d, handle)
        result: Delivered
        if persona is None:
            result = {"session": None, "spawned": False, "warnings": [
                f"{handle} is a member of {r['channel']} but no persona declares it: not "
                f"started (it can still answer in thread {slot})"]}
        else:
            cfg = r["config"]
            # `round_thread`: the member runs at the round's depth + 1 (the deliverer
            # counts from the round's opener, whichever member's process starts this one)
            result = d.start(persona, thread_id=slot, task=cfg["body"], sender=cfg["sender"],
                             channel=r["channel"], earlier=earlier or None,
                             timeout_ms=r["timeout_ms"], kill_at_ms=cfg.get("timeout_at_ms"),
                             round_thread=thread_id, round_opener=r["opener_session"])
        started = result["session"] if result.get("spawned") else None
        result["sessions"] = [started] if started is not None else []
        if out is None:
            out = result
        else:
            out["warnings"] = out.get("warnings", []) + result.get("warnings", [])
            out["sessions"] += result["sessions"]
            if result.get("session") and not out.get("session"):
                out["session"] = result["session"]
        mailbox = persona is None or persona.runtime is None
        if r["flow"] != "sequential" or result.get("spawned") or mailbox:
            break
        expected_index = index + 1
    return out


def _all_answered(d: Deliverer, r: dict[str, Any]) -> bool:
    from nixx.nxc.threads import get_thread

    if r["next_index"] < len(r["members"]):
        return False
    by_member = slots(d.store.conn, r["thread_id"], _supervisor(r))
    now = _now_ms()
    for member in r["members"]:
        tid = by_member.get(member)
        summary = get_thread(d.store.conn, tid, now) if tid else None
        if summary is None or not summary["complete"]:
            return False
    return True


def on_slot_reply(d: Deliverer, *, round_thread: str, slot: ThreadSummary,
                  sender: str) -> Resumed:
    """A message was posted in a slot of a round (`slot`: its summary after the post)."""
    r = _round(d, round_thread)
    if r is None or r["settled"]:
        return {"resumed": None, "warnings": []}
    warnings: list[str] = []
    member = slot["expects"][0] if slot["expects"] else None
    if r["flow"] == "sequential" and sender == member and slot["complete"]:
        current = r["next_index"] - 1
        if 0 <= current < len(r["members"]) and r["members"][current] == member:
            started = _start_next(d, round_thread, r["next_index"])
            if started:
                warnings += started.get("warnings", [])
    r = _existing_round(d, round_thread)
    if _all_answered(d, r):
        return settle(d, round_thread, warnings=warnings)
    return {"resumed": None, "warnings": warnings}


def on_member_exit(d: Deliverer, thread_id: str, member: str) -> Resumed | None:
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
    for slot in slots(d.store.conn, thread_id, _supervisor(r)).values():
        for sid in sessions.sessions_of_thread(d.local, slot, "member"):
            row = sessions.get(d.local, sid)
            if row and row["state"] == "running" and row["persona"] != member:
                return None
    return settle(d, thread_id, warnings=[])


def catch_up(d: Deliverer) -> list[str]:
    """Move on the rounds this machine runs with answers that arrived by sync (a member
    answered in its slot in another clone: no process here saw the reply). Called after
    a sync pass stored new ops (`dispatch.catch_up`). → the rounds settled now."""
    rows = d.local.conn.execute(
        "SELECT thread_id FROM rounds WHERE settled = 0 ORDER BY created").fetchall()
    settled: list[str] = []
    for root in [str(tid) for (tid,) in rows]:
        r = _existing_round(d, root)
        if r["flow"] == "sequential" and r["next_index"] > 0:
            from nixx.nxc.threads import get_thread

            member = r["members"][r["next_index"] - 1]
            slot = slots(d.store.conn, root, _supervisor(r)).get(member)
            summary = get_thread(d.store.conn, slot, _now_ms()) if slot else None
            if summary is not None and summary["complete"]:
                _start_next(d, root, r["next_index"])
                r = _existing_round(d, root)
        if _all_answered(d, r) and settle(d, root, warnings=[]).get("settled"):
            settled.append(root)
    return settled


def deny(d: Deliverer, thread_id: str, denied: str) -> Resumed:
    """A person denied the round's start: it is settled with the denial handed back."""
    with d.local.transaction() as conn:
        conn.execute("UPDATE rounds SET settled = 1 WHERE thread_id = ?", (thread_id,))
    return hand_back(d, thread_id, warnings=[], denied=denied)


def member_sessions(d: Deliverer, round_thread: str) -> list[str]:
    """The sessions started for the round's members (one per slot), in member order."""
    r = _round(d, round_thread)
    if r is None:
        return []
    by_member = slots(d.store.conn, round_thread, _supervisor(r))
    return [sid for m in r["members"] if m in by_member
            for sid in sessions.sessions_of_thread(d.local, by_member[m], "member")]


def settle(d: Deliverer, thread_id: str, *, warnings: list[str]) -> Resumed:
    """Post the supervisor's reply once, and wake the opener's session with it — or, when
    the channel declares `approve: [hand_back]`, hold it for a person (`gates`)."""
    with d.local.transaction() as conn:
        conn.execute("UPDATE rounds SET settled = 1 WHERE thread_id = ? AND settled = 0",
                     (thread_id,))
        if conn.changes() == 0:
            return {"resumed": None, "warnings": warnings}
    r = _existing_round(d, thread_id)
    channel = d.decls.channels.get(r["channel"])
    if channel is not None and "hand_back" in channel.approve:
        answers = _answers(d, r, r["members"])
        approval = gates.hold(
            d, step="hand_back", subject=_supervisor(r), thread=thread_id,
            actor=_supervisor(r), action="hand_back", args={"thread_id": thread_id},
            what=(f"hand the round of {r['channel']} in thread {thread_id} back to "
                  f"{r['config']['sender']}: {len(answers)} answer(s) from "
                  f"{', '.join(sorted({a['sender'] for a in answers})) or 'nobody'}"))
        return {"resumed": None, "settled": False, "approval": approval, "warnings": warnings + [
            f"the round of {r['channel']} is handed back once a person approves: nxc "
            f"approve {approval} (or nxc deny {approval}), on any clone"]}
    return hand_back(d, thread_id, warnings=warnings)


def hand_back(d: Deliverer, thread_id: str, *, warnings: list[str],
              denied: str | None = None) -> Resumed:
    """Post the supervisor's reply in the round's thread — the answers in member order,
    or what a person's denial says (`denied`) — and wake the opener's session with it."""
    r = _existing_round(d, thread_id)
    answers = _answers(d, r, r["members"])
    answered = {a["sender"] for a in answers}
    silent = [m for m in r["members"] if m not in answered]
    body = blocks(answers) if answers else "(no member answered)"
    if denied is not None:
        body = f"Not handed back: {denied}"
    elif r["config"]["on_complete"] == "summarize" and answers:
        body = _summarize(d, r, body)
    if silent and denied is None:
        body += "\n\nNo answer from: " + ", ".join(silent)
    actor = _supervisor(r)
    from nixx.log.ids import new_thing_id

    message_id = new_thing_id("m", d.store.replica)
    summary_channel = _channel_id(r)
    with d.store.transaction() as txn:
        txn.append(DOMAIN, "post", message_id, actor, {
            "thread": thread_id, "channel": summary_channel, "body": body, "kind": "report",
            "priority": "normal", "disposition": "in_turn", "escalate": False, "refs": {"round": r["channel"]}})
    outcomes.record(d.store, "round", thread_id, actor, {
        "thread": thread_id, "channel": r["channel"],
        "event": "posted" if denied is None else "denied",
        "answered": [m for m in r["members"] if m in answered], "silent": silent})
    resumed = None
    if r["opener_session"]:
        woke = d.wake(r["opener_session"], thread_id=thread_id, message_id=message_id,
                      sender=actor, body=body)
        resumed = woke.get("resumed")
        warnings = warnings + woke.get("warnings", [])
    return {"resumed": resumed, "warnings": warnings, "settled": True}


def _summarize(d: Deliverer, r: dict[str, Any], text: str) -> str:
    from nixx.nxc.delivery.folders import round_backend_file

    try:
        with open(round_backend_file(d.workspace.state_dir, r["thread_id"]),
                  encoding="utf-8") as fh:
            backend = json.load(fh)
    except (OSError, ValueError):
        backend = d.backend(None, inherit=d.here)
    from nixx.nxc.delivery.llm_backend import complete_once

    try:
        answer = complete_once(backend, [
            {"role": "system", "content": r["config"]["summary_prompt"]},
            {"role": "user", "content": text}])
    except Exception as exc:  # noqa: BLE001 - any backend failure falls back to the blocks
        return f"{text}\n\n(summary unavailable: {exc}; the answers are passed through)"
    return answer.strip() or text
