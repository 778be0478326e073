"""Who may read what: SQL predicates shared by every read.

A caller may read a thread (and post into it) when it is the thread's opener, is
expected to reply in it, is a member of its channel, the channel is public, or it is a
slot of a round the caller requested (a thread a channel supervisor opened under a
thread the caller opened).
A message is readable when its thread is, or (thread root not arrived yet) when its
channel is a member or public channel. The read cursor and unread stay member-only.

On top of that, a channel's `visibility` (docs/channels.md) narrows what a reader sees of
a thread's messages: `requester_only` (the default of a declared channel) shows the
thread's opener (and, in a round's slot, the round's requester) everything and every other reader the opener's messages, its own and —
in a `flow: sequential` channel — the answers handed to it (those of earlier members);
`all_members` shows everyone everything. Who replied (the quorum) stays visible.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from apsw import Connection


PUBLIC_CHANNELS = (
    "SELECT channel_id FROM nxc_channel_fields WHERE field = 'kind' AND value = '\"public\"'"
)
MEMBER_CHANNELS = "SELECT channel_id FROM nxc_members WHERE handle = :me"

#: a round's slot: a thread a channel supervisor opened under a thread `{t}` opened by :me
#: (the requester reads its round's slots, and everything in them)
_SLOT_OF_MINE = (
    "({t}.opener LIKE '%/\\_\\_channel-%' ESCAPE '\\' AND {t}.parent IN"
    " (SELECT pt.thread_id FROM nxc_threads pt WHERE pt.opener = :me))"
)

#: a thread row `t` joined with its state `s` (LEFT JOIN nxc_thread_state s)
THREAD_READABLE = (
    "(t.opener = :me OR t.channel_id IN (" + MEMBER_CHANNELS + ")"
    " OR t.channel_id IN (" + PUBLIC_CHANNELS + ")"
    " OR t.thread_id IN (SELECT thread_id FROM nxc_expected WHERE handle = :me)"
    " OR " + _SLOT_OF_MINE.format(t="t") + ")"
)

#: a message row `m`
MESSAGE_READABLE = (
    "(m.channel_id IN (" + MEMBER_CHANNELS + ") OR m.channel_id IN (" + PUBLIC_CHANNELS + ")"
    " OR m.thread_id IN (SELECT t.thread_id FROM nxc_threads t"
    " LEFT JOIN nxc_thread_state s USING (thread_id) WHERE " + THREAD_READABLE + "))"
)


#: the channel `{ch}` keeps each member's answers from the other members: its declared
#: `visibility` is `requester_only` (a declared channel with no recorded visibility takes
#: the documented default, requester_only; direct channels are two-party, never restricted)
_RESTRICTED = (
    "coalesce((SELECT json_extract(vf.value, '$') FROM nxc_channel_fields vf"
    " WHERE vf.channel_id = {ch} AND vf.field = 'visibility'),"
    " CASE WHEN {ch} LIKE 'decl:%' THEN 'requester_only' ELSE 'all_members' END)"
    " = 'requester_only'"
)

#: in a `flow: sequential` channel, the message's sender comes before :me in the declared
#: member order: its answer was handed to :me (the prompt of a later member carries the
#: earlier answers), so :me may read it too
_HANDED_OVER = (
    "EXISTS (SELECT 1 FROM nxc_channel_fields ff, nxc_channel_fields mf,"
    " json_each(mf.value) a, json_each(mf.value) b"
    " WHERE ff.channel_id = {ch} AND ff.field = 'flow' AND ff.value = '\"sequential\"'"
    " AND mf.channel_id = {ch} AND mf.field = 'members'"
    " AND a.value = m.sender AND b.value = :me AND a.key < b.key)"
)

#: visibility of a message row `m` the caller may otherwise read (MESSAGE_READABLE or a
#: readable thread). In a `requester_only` channel a reader sees, per thread: everything
#: when it opened the thread (the requester); else the opener's messages, its own, and —
#: in a sequential channel — the answers of the members before it. Everywhere else: all.
MESSAGE_VISIBLE = (
    "(m.sender = :me OR NOT (" + _RESTRICTED.format(ch="m.channel_id") + ")"
    " OR EXISTS (SELECT 1 FROM nxc_threads vt WHERE vt.thread_id = m.thread_id"
    " AND (vt.opener IN (:me, m.sender) OR " + _SLOT_OF_MINE.format(t="vt") + "))"
    " OR " + _HANDED_OVER.format(ch="m.channel_id") + ")"
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
