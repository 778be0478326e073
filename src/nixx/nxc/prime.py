"""The prime block: what a session needs before it acts, and nothing it gets otherwise.

`nxs prime` (the session-start hook) and `nxc prime` print it; `Engine.prime()` returns
its data (the JSON of both). Who you are, how many messages are unread (no bodies: a
session is handed the bodies it must act on), the threads that await your reply (with
the command that answers each), how many threads you opened still wait on others, the
tasks you hold, the leases you hold, the paths other handles lease (holder, thread, end)
and the claims and leases of yours that lost to an earlier one (`nixx.nxc.work`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.engine import Engine
    from nixx.nxc.shapes import OwedThread, PrimeBlock

SHOWN = 10  # owed threads listed by name; the rest are counted


def prime(engine: Engine) -> PrimeBlock:
    from nixx.nxc import cursor, threads

    me, now = engine.handle, engine.now_ms()
    unread = cursor.prime(engine.conn, me)
    owes: list[OwedThread] = [
        {"thread_id": t["thread_id"], "channel_id": t["channel_id"], "opener": t["opener"],
         "deadline": t["deadline"], "escalated": t["escalated"]}
        for t in threads.open_for(engine.conn, me, now)
    ]
    waiting = [t for t in threads.list_threads(
        engine.conn, me, now, limit=None, where="t.opener = :opener", params={"opener": me})
        if t["state"] == "open"]
    from nixx.nxc import work
    from nixx.nxc.durations import iso

    found = work.tasks(engine.conn)
    held = [t.id for t in found.values() if t.state == "claimed" and t.holder == me]
    live, lost_leases = work.lease_state(engine.conn, now)
    others = [f"{', '.join(x['paths'])} ({x['holder']}, lease {x['id']}"
              + (f", thread {x['thread']}" if x["thread"] else "") + f", until {iso(x['until'])})"
              for x in live if x["holder"] != me and not x["shared"]]
    mine = [f"{', '.join(x['paths'])} (lease {x['id']}, until {iso(x['until'])})"
            for x in live if x["holder"] == me]
    lost = ([f"your claim on task {c['task']} lost: {c['reason']}"
             for c in work.lost_claims(found) if c["by"] == me]
            + [f"your lease {x['id']} on {', '.join(x['paths'])} lost: {x['reason']}"
               for x in lost_leases if x["holder"] == me])
    from nixx.nxc import approvals

    # a person is told what waits for a decision; an agent (a caller in a session, as a
    # send's receipt judges it) never decides, so is not — and no declaration is read
    awaiting = [] if engine.env.get("NXC_SESSION") else [
        a.id for a in approvals.approvals(engine.conn).values() if a.state == "pending"]
    return {
        **unread,
        "workspace": str(engine.workspace.root),
        "approvals_waiting": awaiting,
        "owes": owes,
        "waiting_on_others": len(waiting),
        "tasks_held": held,
        "leases_held": mine,
        "leased_to_others": others,
        "lost": lost,
    }


def render(data: PrimeBlock) -> str:
    """The block as text: a few lines, the same every time for the same state."""
    lines = [f"nxc: you are {data['actor']} in the workspace {data['workspace']}."]
    count = data["count"]
    if count:
        lines.append(f"Unread: {count} ({len(data['in_turn'])} in turn, "
                     f"{len(data['next_session'])} for the next session); read a thread with "
                     "`nxc threads show <id>`.")
    else:
        lines.append("Unread: none.")
    owes = data["owes"]
    if owes:
        lines.append(f"You owe a reply in {len(owes)} thread{'s' if len(owes) != 1 else ''}:")
        for t in owes[:SHOWN]:
            due = f", due {t['deadline']}" if t["deadline"] else ""
            lines.append(f"  {t['thread_id']} from {t['opener']} in {t['channel_id']}{due}: "
                         f'nxc reply --thread {t["thread_id"]} "<answer>"')
        if len(owes) > SHOWN:
            lines.append(f"  … and {len(owes) - SHOWN} more (`nxc threads list --open`)")
    else:
        lines.append("You owe no replies.")
    if data["waiting_on_others"]:
        n = data["waiting_on_others"]
        lines.append(f"{n} thread{'s' if n != 1 else ''} you opened still wait{'s' if n == 1 else ''} "
                     "on others (`nxc status`).")
    if data.get("tasks_held"):
        lines.append(f"Tasks you hold: {', '.join(data['tasks_held'])} (`nxc task done <id>` "
                     "when finished, `nxc task release <id>` to give one back).")
    if data.get("leases_held"):
        lines.append("Your leases (`nxc release <lease>` when done): "
                     + "; ".join(data["leases_held"][:SHOWN]) + ".")
    if data.get("lost"):
        lines.append("Lost to someone earlier (see `nxc task list`, `nxc leases`): "
                     + "; ".join(data["lost"][:SHOWN]) + ".")
    if data.get("approvals_waiting"):
        ids = data["approvals_waiting"]
        lines.append(f"{len(ids)} step{'s' if len(ids) != 1 else ''} of your agents wait"
                     f"{'s' if len(ids) == 1 else ''} for your approval: `nxc approvals`, then "
                     "`nxc approve <id>` or `nxc deny <id>`.")
    if data.get("leased_to_others"):
        lines.append("Leased to others (do not change; commits touching them are refused): "
                     + "; ".join(data["leased_to_others"][:SHOWN]) + ".")
    return "\n".join(lines)
