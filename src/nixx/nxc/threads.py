"""Threads and the derived quorum. Nothing here is stored: every field is computed from
the root, the winning registers and the messages.

Let E be the thread's current `expects_reply_from` and W the pos of the op that set it.
replied = handles in E that posted in the thread after W (an escalation, a post asking
the opener for help or a decision, does not count as an answer); outstanding = E − replied;
complete = E non-empty and nothing outstanding (no wall clock); stale = a deadline
exists, now is past it and something is outstanding. complete and stale are disjoint.
"""

from __future__ import annotations

import json

from nixx.nxc.access import MESSAGE_VISIBLE, THREAD_READABLE
from nixx.nxc.durations import iso

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from apsw import Connection

    from nixx.nxc.shapes import ThreadMessage, ThreadSummary

_THREAD_COLS = (
    "t.thread_id, t.channel_id, t.opener, t.parent, t.origin, t.created, t.pos,"
    " coalesce(s.expects, '[]'), coalesce(s.expects_pos, ''), s.deadline"
)


def state_of(q: ThreadSummary | dict[str, Any]) -> str:
    """`stale` | `answered` | `open` for a thread summary (no expectation: answered)."""
    if q["stale"]:
        return "stale"
    if q["complete"] or not q["expects"]:
        return "answered"
    return "open"


def _summaries(conn: Connection, rows: list[tuple[Any, ...]], now_ms: int) -> list[ThreadSummary]:
    """Thread summaries for thread rows (`_THREAD_COLS`), with one more query for all of
    them: who posted in each thread after its expectation was declared (answers and
    escalations apart) and how many messages it holds — never a query per thread."""
    if not rows:
        return []
    per: dict[str, dict[str, Any]] = {}
    for tid, sender, answers, escalations, count in conn.execute(
        "SELECT m.thread_id, m.sender,"
        " sum(m.pos > coalesce(s.expects_pos, '') AND m.escalate = 0),"
        " sum(m.pos > coalesce(s.expects_pos, '') AND m.escalate != 0), count(*)"
        " FROM nxc_messages m LEFT JOIN nxc_thread_state s USING (thread_id)"
        " WHERE m.thread_id IN (SELECT value FROM json_each(?))"
        " GROUP BY m.thread_id, m.sender",
        (json.dumps([r[0] for r in rows]),),
    ):
        agg = per.setdefault(tid, {"answered": set(), "escalated": False, "count": 0})
        if answers:
            agg["answered"].add(sender)
        agg["escalated"] = agg["escalated"] or bool(escalations)
        agg["count"] += count
    return [_summary(row, per.get(row[0]), now_ms) for row in rows]


def _summary(row: tuple[Any, ...], agg: dict[str, Any] | None, now_ms: int) -> ThreadSummary:
    tid, channel, opener, parent, origin, created, pos, expects_json, w_pos, deadline = row
    expects = json.loads(expects_json)
    replied = agg["answered"].intersection(expects) if agg else set()
    outstanding = [h for h in expects if h not in replied]
    complete = bool(expects) and not outstanding
    stale = deadline is not None and now_ms > deadline and bool(outstanding)
    out: ThreadSummary = {
        "thread_id": tid,
        "channel_id": channel,
        "opener": opener,
        "parent": parent,
        "origin": origin,
        "created": iso(created),
        "expects": expects,
        "replied": [h for h in expects if h in replied],
        "outstanding": outstanding,
        "complete": complete,
        "stale": stale,
        "deadline": iso(deadline),
        "escalated": bool(agg and agg["escalated"]),
        "message_count": agg["count"] if agg else 0,
        "state": "",
    }
    out["state"] = state_of(out)
    return out


def get_thread(conn: Connection, thread_id: str, now_ms: int) -> ThreadSummary | None:
    row = conn.execute(
        f"SELECT {_THREAD_COLS} FROM nxc_threads t LEFT JOIN nxc_thread_state s USING (thread_id)"
        " WHERE t.thread_id = ?",
        (thread_id,),
    ).fetchone()
    return None if row is None else _summaries(conn, [row], now_ms)[0]


def messages(conn: Connection, thread_id: str, me: str | None = None) -> list[ThreadMessage]:
    """The thread's messages in order; with `me`, only those `me` may see (the channel's
    `visibility`, access.MESSAGE_VISIBLE). Without: all of them (the engine's own use).
    `origin` is the replica that wrote each one (the engine adds `remote`)."""
    rows: list[Any] = conn.execute(
        "SELECT m.message_id, m.sender, m.kind, m.priority, m.disposition, m.escalate, m.body,"
        " m.refs, m.created, m.channel_id, m.origin FROM nxc_messages m WHERE m.thread_id = :tid"
        + ("" if me is None else f" AND {MESSAGE_VISIBLE}") + " ORDER BY m.pos",
        {"tid": thread_id, "me": me},
    ).fetchall()
    return [
        {
            "message_id": r[0], "sender": r[1], "kind": r[2], "priority": r[3],
            "disposition": r[4], "escalate": bool(r[5]), "body": r[6], "refs": json.loads(r[7]),
            "created": iso(r[8]), "channel_id": r[9], "origin": r[10],
        }
        for r in rows
    ]


def list_threads(
    conn: Connection, me: str | None, now_ms: int, *, channel: str | None = None,
    limit: int | None = 50, where: str = "", params: dict[str, Any] | None = None,
) -> list[ThreadSummary]:
    """Threads `me` may read (every thread when `me` is None), newest first."""
    sql = (
        f"SELECT {_THREAD_COLS} FROM nxc_threads t LEFT JOIN nxc_thread_state s USING (thread_id)"
        f" WHERE {THREAD_READABLE if me is not None else '1'}"
    )
    args: dict[str, Any] = {"me": me, **(params or {})}
    if channel is not None:
        sql += " AND t.channel_id = :channel"
        args["channel"] = channel
    if where:
        sql += f" AND ({where})"
    sql += " ORDER BY t.pos DESC"
    if limit is not None:
        sql += " LIMIT :limit"
        args["limit"] = limit
    return _summaries(conn, conn.execute(sql, args).fetchall(), now_ms)


def open_for(conn: Connection, me: str, now_ms: int) -> list[ThreadSummary]:
    """Threads where `me` still owes a reply (and that are not stale)."""
    rows = conn.execute(
        f"SELECT {_THREAD_COLS} FROM nxc_expected x JOIN nxc_threads t USING (thread_id)"
        " JOIN nxc_thread_state s USING (thread_id) WHERE x.handle = :me"
        " ORDER BY t.pos DESC",
        {"me": me},
    ).fetchall()
    return [summary for summary in _summaries(conn, rows, now_ms)
            if me in summary["outstanding"] and not summary["stale"]]
