"""Read state: the cursor per (reader, channel) and unread as a predicate.

The cursor is an operation (`read_cursor`, a max register on the message position
``clock.origin.op``), so it syncs and a late operation with an older position never
moves it back. Unread = messages in channels I am a member of, after my cursor, that I
did not send. Member-only: a non-member has no read state to keep.
"""

from __future__ import annotations

from nixx.nxc.access import MESSAGE_VISIBLE
from nixx.nxc.durations import iso

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from apsw import Connection

    from nixx.nxc.shapes import UnreadCounts, UnreadHeader, UnreadMessage

_UNREAD = (
    "SELECT m.message_id, m.thread_id, m.channel_id, m.sender, m.kind, m.priority,"
    " m.disposition, m.created, m.pos FROM nxc_messages m"
    " JOIN nxc_members mb ON mb.channel_id = m.channel_id AND mb.handle = :me"
    " LEFT JOIN nxc_cursors c ON c.reader = :me AND c.channel_id = m.channel_id"
    " WHERE m.sender != :me AND m.pos > coalesce(c.pos, '')"
    " AND " + MESSAGE_VISIBLE  # what the channel's visibility hides is not unread either
)


def _unread_rows(conn: Connection, me: str, channel: str | None) -> list[Any]:
    sql = _UNREAD
    args: dict[str, Any] = {"me": me}
    if channel is not None:
        sql += " AND m.channel_id = :channel"
        args["channel"] = channel
    rows: list[Any] = conn.execute(sql + " ORDER BY m.pos", args).fetchall()
    return rows


def _header(r: Any) -> UnreadHeader:
    return {
        "message_id": r[0], "thread_id": r[1], "channel_id": r[2], "sender": r[3],
        "kind": r[4], "priority": r[5], "disposition": r[6], "created": iso(r[7]),
    }


def unread(conn: Connection, me: str, channel: str | None = None) -> list[UnreadMessage]:
    return [{**_header(r), "pos": r[8]} for r in _unread_rows(conn, me, channel)]


def cursor_of(conn: Connection, me: str, channel: str) -> str | None:
    row = conn.execute(
        "SELECT pos FROM nxc_cursors WHERE reader = ? AND channel_id = ?", (me, channel)
    ).fetchone()
    return row[0] if row else None


def latest_pos(conn: Connection, channel: str) -> str | None:
    row = conn.execute(
        "SELECT max(pos) FROM nxc_messages WHERE channel_id = ?", (channel,)
    ).fetchone()
    return row[0] if row else None


def prime(conn: Connection, me: str) -> UnreadCounts:
    """The seam an embedding app renders: what is unread, split by disposition, no bodies."""
    items = [_header(r) for r in _unread_rows(conn, me, None)]
    return {
        "actor": me,
        "count": len(items),
        "in_turn": [i for i in items if i["disposition"] == "in_turn"],
        "next_session": [i for i in items if i["disposition"] == "next_session"],
    }
