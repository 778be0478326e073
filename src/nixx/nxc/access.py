"""Who may read what: SQL predicates shared by every read.

A caller may read a thread (and post into it) when it is the thread's opener, is
expected to reply in it, is a member of its channel, or the channel is public.
A message is readable when its thread is, or (thread root not arrived yet) when its
channel is a member or public channel. The read cursor and unread stay member-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apsw import Connection


PUBLIC_CHANNELS = (
    "SELECT channel_id FROM nxc_channel_fields WHERE field = 'kind' AND value = '\"public\"'"
)
MEMBER_CHANNELS = "SELECT channel_id FROM nxc_members WHERE handle = :me"

#: a thread row `t` joined with its state `s` (LEFT JOIN nxc_thread_state s)
THREAD_READABLE = (
    "(t.opener = :me OR t.channel_id IN (" + MEMBER_CHANNELS + ")"
    " OR t.channel_id IN (" + PUBLIC_CHANNELS + ")"
    " OR EXISTS (SELECT 1 FROM json_each(coalesce(s.expects, '[]')) WHERE value = :me))"
)

#: a message row `m`
MESSAGE_READABLE = (
    "(m.channel_id IN (" + MEMBER_CHANNELS + ") OR m.channel_id IN (" + PUBLIC_CHANNELS + ")"
    " OR m.thread_id IN (SELECT t.thread_id FROM nxc_threads t"
    " LEFT JOIN nxc_thread_state s USING (thread_id) WHERE " + THREAD_READABLE + "))"
)


def can_read_thread(conn: Connection, me: str, thread_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM nxc_threads t LEFT JOIN nxc_thread_state s USING (thread_id)"
        " WHERE t.thread_id = :tid AND " + THREAD_READABLE,
        {"me": me, "tid": thread_id},
    ).fetchone()
    return row is not None


def is_member(conn: Connection, me: str, channel_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM nxc_members WHERE channel_id = ? AND handle = ?", (channel_id, me)
    ).fetchone()
    return row is not None
