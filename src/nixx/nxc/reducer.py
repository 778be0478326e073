"""The chat reducer: folds domain ``message`` operations into nxc's views.

Every kind's merge rule is order-independent (see docs/oplog.md). `pos` is the op's
total order key ``clock.origin.id`` (`nixx.log.op.Op.pos`).

    kind             target      payload                               merge rule
    channel          channel id  {fields: {name,kind,members,...}}     LWW per field on pos
    thread_open      thread id   {channel, parent, expects, deadline}  immutable root; same id
                                                                        twice: least pos wins
    thread_expects   thread id   {expects: [handles]}                  LWW register, opener
                                                                        from the owner only
    thread_deadline  thread id   {deadline: ms | null}                 LWW register, opener
                                                                        from the owner only
    post             message id  {thread, channel, body, kind, ...}    grow-only (same id
                                                                        twice: least pos wins)
    read_cursor      channel id  {pos}                                 max register per
                                                                        (actor, channel)

**Written once.** A message id (`post`) or thread id (`thread_open`) names one thing.
Every claim on one is kept in ``nxc_claims`` (its pos and a digest of its actor and
payload); the view shows the claim with the least pos (as before), and:

- an id that names the replica that minted it (`nixx.log.ids.minter`: every id nxc mints
  since issue 26) is refused from any other origin: that claim is recorded, refused, and
  never shown — so a clone cannot rewrite another's message or take over its thread,
  whatever clock it claims;
- an id with two claims of different content is *disputed* (``nxc_disputed``); `conflicts`
  lists every claim that is not the one shown, for `nxs sync status`.

Both are decided per op or per set of claims, so every delivery order gives the same rows.

**Who may write what** (`WRITERS`, docs/limits-and-safety.md): handles are not
authenticated across clones, replicas are (an op arrives only under the replica that
pushed it), so every kind names the replica whose writes count:

- `thread_open`, `post`: the id's minter (above);
- `thread_expects`, `thread_deadline`: the thread's owner — the origin of its shown root,
  which is the minter for every id minted since issue 26 — and there only the opener's
  writes. "Owner and opener" is decided at read time of the candidates, not at fold time:
  every register write is kept as a candidate (with its origin) and the winner is the
  greatest pos among those the owner's opener wrote. So a write that arrives before its
  thread's root is judged correctly once the root arrives; a write from another origin
  never wins and is listed by `conflicts` (refused);
- `read_cursor`: any replica where the reader's handle works: one max register per
  (reader, channel) across clones, so an ack on one machine holds on another (a person
  works in several clones, and a shared handle like ``team/alice`` has no single owning
  origin). It only moves forward, so a forged cursor can hide messages up to a position
  but never re-deliver read ones: the accepted limit;
- `channel`: any replica (channels come from the declarations every clone shares).
"""

from __future__ import annotations

import json

from nixx.log.ids import minter
from nixx.log.op import Op
from nixx.log.reducer import Reducer

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from apsw import Connection

    from nixx.nxc.shapes import ConflictItem, Conflicts

DOMAIN = "message"
MESSAGE_KINDS = ("task", "question", "report", "decision", "info")
PRIORITIES = ("urgent", "normal", "background")
DISPOSITIONS = ("in_turn", "next_session")
CHANNEL_FIELDS = {
    "name": str, "kind": str, "members": list, "expects": list, "description": str,
    "flow": str, "origin": str, "visibility": str,
}

#: who may write each kind: the replica whose writes count (module docstring; the rules
#: are applied by the folds below and listed in docs/limits-and-safety.md)
WRITERS = {
    "channel": "any replica",
    "thread_open": "the replica that minted the thread id",
    "post": "the replica that minted the message id",
    "thread_expects": "the thread's owner (the replica that minted it), as its opener",
    "thread_deadline": "the thread's owner (the replica that minted it), as its opener",
    # a person works in several clones and a shared handle has no single owning origin;
    # a max register only moves forward: a forged cursor can hide messages up to a
    # position but never re-deliver read ones (the accepted limit)
    "read_cursor": "any replica where the reader's handle works (max register per reader "
                   "and channel across clones)",
}

_TABLES = (
    "nxc_channel_fields", "nxc_members", "nxc_threads", "nxc_thread_regs", "nxc_thread_state",
    "nxc_expected", "nxc_messages", "nxc_cursors", "nxc_claims", "nxc_disputed",
)

_CREATE = """
CREATE TABLE nxc_channel_fields(
    channel_id TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL, pos TEXT NOT NULL,
    PRIMARY KEY(channel_id, field)) WITHOUT ROWID;
CREATE TABLE nxc_members(
    channel_id TEXT NOT NULL, handle TEXT NOT NULL,
    PRIMARY KEY(channel_id, handle)) WITHOUT ROWID;
CREATE INDEX nxc_members_handle ON nxc_members(handle, channel_id);
CREATE VIEW nxc_channels AS
    SELECT channel_id,
           json_extract(max(CASE field WHEN 'name' THEN value END), '$') AS name,
           coalesce(json_extract(max(CASE field WHEN 'kind' THEN value END), '$'), 'group') AS kind,
           max(CASE field WHEN 'members' THEN value END) AS members,
           json_extract(max(CASE field WHEN 'description' THEN value END), '$') AS description
    FROM nxc_channel_fields GROUP BY channel_id;
CREATE TABLE nxc_threads(
    thread_id TEXT PRIMARY KEY, channel_id TEXT NOT NULL, opener TEXT NOT NULL, parent TEXT,
    origin TEXT NOT NULL, created INTEGER NOT NULL, pos TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX nxc_threads_parent ON nxc_threads(parent);
CREATE INDEX nxc_threads_channel ON nxc_threads(channel_id, pos);
CREATE INDEX nxc_threads_opener ON nxc_threads(opener);
CREATE INDEX nxc_threads_pos ON nxc_threads(pos);
CREATE TABLE nxc_thread_regs(
    thread_id TEXT NOT NULL, field TEXT NOT NULL, pos TEXT NOT NULL, actor TEXT NOT NULL,
    value TEXT NOT NULL, origin TEXT NOT NULL, PRIMARY KEY(thread_id, field, pos)) WITHOUT ROWID;
CREATE TABLE nxc_thread_state(
    thread_id TEXT PRIMARY KEY, expects TEXT NOT NULL, expects_pos TEXT NOT NULL,
    deadline INTEGER, deadline_pos TEXT) WITHOUT ROWID;
CREATE TABLE nxc_expected(
    thread_id TEXT NOT NULL, handle TEXT NOT NULL,
    PRIMARY KEY(thread_id, handle)) WITHOUT ROWID;
CREATE INDEX nxc_expected_handle ON nxc_expected(handle, thread_id);
CREATE TABLE nxc_messages(
    mrow INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,
    channel_id TEXT NOT NULL, sender TEXT NOT NULL, kind TEXT NOT NULL, priority TEXT NOT NULL,
    disposition TEXT NOT NULL, escalate INTEGER NOT NULL, body TEXT NOT NULL, refs TEXT NOT NULL,
    origin TEXT NOT NULL, created INTEGER NOT NULL, pos TEXT NOT NULL);
CREATE INDEX nxc_messages_thread ON nxc_messages(thread_id, pos);
CREATE INDEX nxc_messages_channel ON nxc_messages(channel_id, pos);
CREATE VIRTUAL TABLE nxc_messages_fts USING fts5(
    body, content='nxc_messages', content_rowid='mrow', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER nxc_messages_ai AFTER INSERT ON nxc_messages BEGIN
    INSERT INTO nxc_messages_fts(rowid, body) VALUES (new.mrow, new.body);
END;
CREATE TRIGGER nxc_messages_ad AFTER DELETE ON nxc_messages BEGIN
    INSERT INTO nxc_messages_fts(nxc_messages_fts, rowid, body) VALUES ('delete', old.mrow, old.body);
END;
CREATE TRIGGER nxc_messages_au AFTER UPDATE ON nxc_messages BEGIN
    INSERT INTO nxc_messages_fts(nxc_messages_fts, rowid, body) VALUES ('delete', old.mrow, old.body);
    INSERT INTO nxc_messages_fts(rowid, body) VALUES (new.mrow, new.body);
END;
CREATE TABLE nxc_claims(
    kind TEXT NOT NULL, target TEXT NOT NULL, pos TEXT NOT NULL, digest TEXT NOT NULL,
    refused INTEGER NOT NULL, PRIMARY KEY(kind, target, pos)) WITHOUT ROWID;
CREATE TABLE nxc_disputed(
    kind TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY(kind, target)) WITHOUT ROWID;
CREATE TABLE nxc_cursors(
    reader TEXT NOT NULL, channel_id TEXT NOT NULL, pos TEXT NOT NULL,
    PRIMARY KEY(reader, channel_id)) WITHOUT ROWID;
"""


def _is_handles(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(h, str) and "/" in h for h in value)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ChatReducer(Reducer):
    domain = DOMAIN
    version = 5  # bump on any change to the views: stores rebuild them on open
    # 4: register candidates keep their origin; cursors were per writing replica
    # 5: cursors are one max register per (reader, channel) across clones again

    def __init__(self) -> None:
        self._kinds: dict[str, Callable[[Connection, Op], bool]] = {
            "channel": self._channel,
            "thread_open": self._thread_open,
            "thread_expects": self._thread_register,
            "thread_deadline": self._thread_register,
            "post": self._post,
            "read_cursor": self._read_cursor,
        }

    def register_kind(self, kind: str, fold: Callable[[Connection, Op], bool]) -> None:
        """Add a kind (issue 8: sessions, deliveries): `fold(conn, op) -> bool`."""
        if kind in self._kinds:
            raise ValueError(f"kind {kind!r} already folded")
        self._kinds[kind] = fold

    def create_views(self, conn: Connection) -> None:
        for statement in _split(_CREATE):
            conn.execute(statement)

    def drop_views(self, conn: Connection) -> None:
        conn.execute("DROP VIEW IF EXISTS nxc_channels")
        conn.execute("DROP TABLE IF EXISTS nxc_messages_fts")
        for table in _TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    def fold(self, conn: Connection, op: Op) -> bool:
        handler = self._kinds.get(op.kind)
        if handler is None or not isinstance(op.payload, dict) or not op.target:
            return False
        return handler(conn, op)

    # -- kinds ------------------------------------------------------------------------

    def _channel(self, conn: Connection, op: Op) -> bool:
        fields = op.payload.get("fields")
        if not isinstance(fields, dict) or not fields:
            return False
        for name, value in fields.items():
            expected = CHANNEL_FIELDS.get(name)
            if expected is None or not isinstance(value, expected):
                return False
            if name == "kind" and value not in ("group", "public", "direct"):
                return False
            if name == "visibility" and value not in ("requester_only", "all_members"):
                return False
            if name in ("members", "expects") and not _is_handles(value):
                return False
        pos = op.pos
        for name, value in sorted(fields.items()):
            conn.execute(
                "INSERT INTO nxc_channel_fields VALUES (?,?,?,?) "
                "ON CONFLICT(channel_id, field) DO UPDATE SET value = excluded.value, "
                "pos = excluded.pos WHERE excluded.pos > nxc_channel_fields.pos",
                (op.target, name, _dumps(value), pos),
            )
            if name == "members" and conn.changes():
                conn.execute("DELETE FROM nxc_members WHERE channel_id = ?", (op.target,))
                conn.executemany(
                    "INSERT OR IGNORE INTO nxc_members VALUES (?, ?)",
                    [(op.target, h) for h in value],
                )
        return True

    def _thread_open(self, conn: Connection, op: Op) -> bool:
        p = op.payload
        channel, parent = p.get("channel"), p.get("parent")
        expects, deadline = p.get("expects", []), p.get("deadline")
        if not isinstance(channel, str) or not channel:
            return False
        if parent is not None and (not isinstance(parent, str) or parent == op.target):
            return False
        if not _is_handles(expects) or (deadline is not None and type(deadline) is not int):
            return False
        if not _claim(conn, op):
            return True  # refused: recorded in nxc_claims, never shown
        pos = op.pos
        conn.execute(
            "INSERT INTO nxc_threads VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT(thread_id) DO UPDATE SET channel_id = excluded.channel_id, "
            "opener = excluded.opener, parent = excluded.parent, origin = excluded.origin, "
            "created = excluded.created, pos = excluded.pos WHERE excluded.pos < nxc_threads.pos",
            (op.target, channel, op.actor, parent, op.origin, op.created, pos),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO nxc_thread_regs VALUES (?,?,?,?,?,?)",
            [
                (op.target, "expects", pos, op.actor, _dumps(expects), op.origin),
                (op.target, "deadline", pos, op.actor, _dumps(deadline), op.origin),
            ],
        )
        _recompute_thread(conn, op.target)
        return True

    def _thread_register(self, conn: Connection, op: Op) -> bool:
        if op.kind == "thread_expects":
            field, value = "expects", op.payload.get("expects")
            if not _is_handles(value):
                return False
        else:
            field, value = "deadline", op.payload.get("deadline", "missing")
            if value is not None and type(value) is not int:
                return False
        conn.execute(
            "INSERT OR IGNORE INTO nxc_thread_regs VALUES (?,?,?,?,?,?)",
            (op.target, field, op.pos, op.actor, _dumps(value), op.origin),
        )
        _recompute_thread(conn, op.target)
        return True

    def _post(self, conn: Connection, op: Op) -> bool:
        p = op.payload
        thread, channel, body = p.get("thread"), p.get("channel"), p.get("body")
        kind = p.get("kind", "info")
        priority = p.get("priority", "normal")
        disposition = p.get("disposition", "in_turn")
        escalate = p.get("escalate", False)
        refs = p.get("refs", {})
        if not (isinstance(thread, str) and thread and isinstance(channel, str) and channel):
            return False
        if not isinstance(body, str) or not isinstance(refs, dict) or type(escalate) is not bool:
            return False
        if kind not in MESSAGE_KINDS or priority not in PRIORITIES or disposition not in DISPOSITIONS:
            return False
        if not _claim(conn, op):
            return True  # refused: recorded in nxc_claims, never shown
        conn.execute(
            "INSERT INTO nxc_messages(message_id, thread_id, channel_id, sender, kind, priority,"
            " disposition, escalate, body, refs, origin, created, pos)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(message_id) DO UPDATE SET thread_id = excluded.thread_id,"
            " channel_id = excluded.channel_id, sender = excluded.sender, kind = excluded.kind,"
            " priority = excluded.priority, disposition = excluded.disposition,"
            " escalate = excluded.escalate, body = excluded.body, refs = excluded.refs,"
            " origin = excluded.origin, created = excluded.created, pos = excluded.pos"
            " WHERE excluded.pos < nxc_messages.pos",
            (op.target, thread, channel, op.actor, kind, priority, disposition, int(escalate),
             body, _dumps(refs), op.origin, op.created, op.pos),
        )
        return True

    def _read_cursor(self, conn: Connection, op: Op) -> bool:
        pos = op.payload.get("pos")
        if not isinstance(pos, str) or not pos:
            return False
        conn.execute(
            "INSERT INTO nxc_cursors VALUES (?,?,?) ON CONFLICT(reader, channel_id) DO UPDATE"
            " SET pos = excluded.pos WHERE excluded.pos > nxc_cursors.pos",
            (op.actor, op.target, pos),
        )
        return True


def _claim(conn: Connection, op: Op) -> bool:
    """Record `op`'s claim on its id (a message's or a thread's); False when it is refused:
    the id names the replica that minted it and `op` comes from another one."""
    from nixx.log.op import short_digest

    made_by = minter(op.target)
    refused = made_by is not None and made_by != op.origin
    digest = short_digest(_dumps([op.actor, op.payload]))
    conn.execute("INSERT OR IGNORE INTO nxc_claims VALUES (?,?,?,?,?)",
                 (op.kind, op.target, op.pos, digest, int(refused)))
    if refused or conn.execute(
        "SELECT 1 FROM nxc_claims WHERE kind = ? AND target = ? AND digest != ? LIMIT 1",
        (op.kind, op.target, digest),
    ).fetchone():
        conn.execute("INSERT OR IGNORE INTO nxc_disputed VALUES (?, ?)", (op.kind, op.target))
    return not refused


def conflicts(conn: Connection, *, limit: int = 100) -> Conflicts:
    """The claims on a message or thread id that are not the one shown: refused (from
    another origin than the id's minter) or disputed (other content than the claim with
    the least pos); and the register writes on a thread refused (from another origin than
    its owner's). ``{"count": n, "items": [...]}``, the first `limit` items by id."""
    import apsw

    try:
        disputed = conn.execute("SELECT kind, target FROM nxc_disputed ORDER BY target, kind"
                                ).fetchall()
    except apsw.SQLError as exc:  # views not built here (no chat reducer registered)
        if "no such table" not in str(exc):
            raise
        return {"count": 0, "items": []}
    count, items = _refused_registers(conn, limit)
    for kind, target in disputed:
        claims = conn.execute(
            "SELECT pos, digest, refused FROM nxc_claims WHERE kind = ? AND target = ?"
            " ORDER BY pos", (kind, target)).fetchall()
        shown = next((c for c in claims if not c[2]), None)
        for pos, digest, refused in claims:
            if shown is not None and pos == shown[0]:
                continue
            if not refused and shown is not None and digest == shown[1]:
                continue  # the same content again: no conflict
            count += 1
            if len(items) < limit:
                clock, origin, op_id = str(pos).split(".", 2)
                items.append({
                    "kind": "message" if kind == "post" else "thread", "id": str(target),
                    "op": op_id, "origin": origin, "clock": clock,
                    "reason": ("refused: the id was minted by "
                               f"{minter(str(target))}, not {origin}") if refused else
                              "not shown: another claim on this id, with other content, is "
                              "earlier in the log's order (clock, origin, op id) and is the one "
                              "shown",
                    "kept": None if shown is None else str(shown[0]).rsplit(".", 1)[-1],
                })
    return {"count": count, "items": items}


def _refused_registers(conn: Connection, limit: int) -> tuple[int, list[ConflictItem]]:
    """Register writes (`thread_expects`, `thread_deadline`) on a thread from another
    origin than its owner's: kept as candidates, never winning (`_recompute_thread`)."""
    # the candidates an open writes (its initial registers) are listed with its claim
    where = (" FROM nxc_thread_regs r JOIN nxc_threads t USING (thread_id)"
             " WHERE r.origin != t.origin AND NOT EXISTS (SELECT 1 FROM nxc_claims c"
             " WHERE c.kind = 'thread_open' AND c.target = r.thread_id AND c.pos = r.pos)")
    (count,) = conn.execute("SELECT count(*)" + where).fetchall()[0]
    rows = conn.execute("SELECT r.thread_id, r.field, r.pos, t.origin" + where
                        + " ORDER BY r.thread_id, r.pos LIMIT ?", (limit,)).fetchall()
    items: list[ConflictItem] = []
    for thread_id, field, pos, owner in rows:
        clock, origin, op_id = str(pos).split(".", 2)
        items.append({
            "kind": f"thread_{field}", "id": str(thread_id), "op": op_id, "origin": origin,
            "clock": clock, "kept": None,
            "reason": (f"refused: thread {thread_id} is owned by {owner} (the replica that "
                       f"minted it); only its opener there sets its {field}, not {origin}"),
        })
    return int(str(count)), items


def _recompute_thread(conn: Connection, thread_id: str) -> None:
    """Materialise the winning registers of a thread: the greatest-pos candidate written
    by the root's opener from the thread's owner (the root's origin: its minter). No root
    yet: no state (candidates wait for it). (Measured: these four indexed statements beat
    one statement with correlated subqueries.)"""
    conn.execute("DELETE FROM nxc_expected WHERE thread_id = ?", (thread_id,))
    row = conn.execute("SELECT opener, origin FROM nxc_threads WHERE thread_id = ?",
                       (thread_id,)).fetchone()
    if row is None:
        conn.execute("DELETE FROM nxc_thread_state WHERE thread_id = ?", (thread_id,))
        return
    opener, owner = row
    winners = {}
    for field in ("expects", "deadline"):
        winners[field] = conn.execute(
            "SELECT value, pos FROM nxc_thread_regs WHERE thread_id = ? AND field = ?"
            " AND actor = ? AND origin = ? ORDER BY pos DESC LIMIT 1",
            (thread_id, field, opener, owner),
        ).fetchone()
    expects, expects_pos = winners["expects"] or ("[]", "")
    deadline, deadline_pos = winners["deadline"] or ("null", None)
    conn.execute(
        "INSERT OR REPLACE INTO nxc_thread_state VALUES (?,?,?,?,?)",
        (thread_id, expects, expects_pos, json.loads(deadline), deadline_pos),
    )
    conn.executemany(
        "INSERT OR IGNORE INTO nxc_expected VALUES (?, ?)",
        [(thread_id, handle) for handle in json.loads(expects)],
    )


def _split(script: str) -> list[str]:
    """Statements of a script; trigger bodies (BEGIN … END;) stay whole."""
    out, buf = [], []
    for line in script.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        in_trigger = text.upper().startswith("CREATE TRIGGER")
        if (in_trigger and text.upper().endswith("END;")) or (
            not in_trigger and text.endswith(";")
        ):
            out.append(text)
            buf = []
    return out


def snapshot(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every chat view as sorted rows without local row ids: two replicas that have folded
    the same set of operations give equal snapshots (used by the property tests)."""
    out = {}
    for table in _TABLES:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != "mrow"]
        rows = conn.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
        out[table] = sorted(rows, key=repr)
    # raises if the full-text index disagrees with the messages it indexes
    conn.execute("INSERT INTO nxc_messages_fts(nxc_messages_fts) VALUES ('integrity-check')")
    return out


# -- questions the views answer --------------------------------------------------------
# The engine and the delivery wing ask these instead of writing SQL on the tables above
# (the read modules `threads`, `access`, `cursor`, `status`, `search` hold their own).


def public_channels(conn: Connection) -> list[tuple[str, str | None, list[str], str | None]]:
    """Every public channel in the log: (channel id, name, members, description), by id."""
    rows = conn.execute(
        "SELECT channel_id, name, members, description FROM nxc_channels"
        " WHERE kind = 'public' ORDER BY channel_id"
    ).fetchall()
    return [(str(cid), None if name is None else str(name), json.loads(str(members or "[]")),
             None if description is None else str(description))
            for cid, name, members, description in rows]


def first_known_channel(conn: Connection, *channel_ids: str) -> str | None:
    """One of `channel_ids` that is a channel in the log, else None."""
    marks = ", ".join("?" * len(channel_ids))
    row = conn.execute(
        f"SELECT channel_id FROM nxc_channels WHERE channel_id IN ({marks})", channel_ids
    ).fetchone()
    return None if row is None else str(row[0])


def channel_fields(conn: Connection, channel_id: str) -> dict[str, str]:
    """The channel's current fields as stored (field → its JSON text)."""
    return {str(r[0]): str(r[1]) for r in conn.execute(
        "SELECT field, value FROM nxc_channel_fields WHERE channel_id = ?", (channel_id,))}


def message_pos(conn: Connection, message_id: str, channel_id: str) -> str | None:
    """The position of message `message_id` when it is in `channel_id`, else None."""
    row = conn.execute(
        "SELECT pos FROM nxc_messages WHERE message_id = ? AND channel_id = ?",
        (message_id, channel_id),
    ).fetchone()
    return None if row is None else str(row[0])


def thread_deadline(conn: Connection, thread_id: str) -> int | None:
    """The thread's current deadline (epoch ms), None when it has none."""
    row = conn.execute(
        "SELECT deadline FROM nxc_thread_state WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def children_by(conn: Connection, parent: str, opener: str) -> list[tuple[str, list[str]]]:
    """The threads `opener` opened under `parent`, oldest first: (thread id, expects)."""
    rows = conn.execute(
        "SELECT t.thread_id, coalesce(s.expects, '[]') FROM nxc_threads t"
        " LEFT JOIN nxc_thread_state s USING (thread_id)"
        " WHERE t.parent = ? AND t.opener = ? ORDER BY t.pos", (parent, opener))
    return [(str(tid), list(json.loads(expects))) for tid, expects in rows]


def posts_of(conn: Connection, thread_id: str, sender: str) -> list[tuple[str, str]]:
    """`sender`'s messages in the thread, in order: (sender, body)."""
    rows = conn.execute(
        "SELECT sender, body FROM nxc_messages WHERE thread_id = ? AND sender = ?"
        " ORDER BY pos", (thread_id, sender))
    return [(str(s), str(b)) for s, b in rows]


def turn_messages(conn: Connection, thread_id: str, opener: str) -> list[tuple[str, str, str]]:
    """The messages of the thread's current turn (after its expectation was declared)
    not sent by `opener`, in order: (message id, sender, body)."""
    rows = conn.execute(
        "SELECT m.message_id, m.sender, m.body FROM nxc_messages m"
        " LEFT JOIN nxc_thread_state s ON s.thread_id = m.thread_id"
        " WHERE m.thread_id = ? AND m.sender != ? AND m.pos > coalesce(s.expects_pos, '')"
        " ORDER BY m.pos", (thread_id, opener)).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]
