"""Transcripts: each session's normalised stream — what the agent actually did.

Device-local (`.nxs/local.sqlite`, never synced). An entry:

    seq              assigned by the store: 1, 2, ... per session; a resumed session
                     continues the same sequence
    kind             session_init | assistant | thinking | tool_use | tool_result | result |
                     error; any other kind is kept as given
    at               epoch ms (given, or the time of the flush)
    toolUseId        a tool call's id (tool_use, tool_result)
    parentToolUseId  set on a sub-agent's entries: the id of the call that spawned it
    subagentType     the sub-agent's type (from the spawning call)
    data             opaque JSON; by convention {text} for assistant/thinking/result,
                     {name, input} for tool_use, {content, is_error} for tool_result,
                     {msg} for error

Caps: a thinking text is cut to 4,000 characters and a tool result to 8,000
(`data.truncated` holds the original length). A batch is atomic: every entry of one
`append` is stored, or none (a bad entry rejects the batch with the line number).

Retention: whole sessions expire `keep_days` (default 30) after their LAST entry; the
prune runs on the first flush of every new session (and by `nxc transcript prune`).

`show` nests one level: an entry whose `parentToolUseId` names a main-timeline tool call
sits under that call (`children`); a deeper parent is followed up to its main-timeline
ancestor; an unknown parent stays on the main timeline.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, cast

from nixx.errors import NotFound, ValidationError
from nixx.nxc.delivery.localstore import LocalStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from apsw import Connection

    from nixx.nxc.delivery.shapes import (
        Appended,
        Entry,
        ExpiredSession,
        Pruned,
        StoredEntry,
        TranscriptHit,
        TranscriptView,
    )

KINDS = ("session_init", "assistant", "thinking", "tool_use", "tool_result", "result", "error")
THINKING_CAP = 4_000
TOOL_RESULT_CAP = 8_000
DEFAULT_KEEP_DAYS = 30
DAY_MS = 86_400_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _at_ms(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError("`at` must be epoch milliseconds or an RFC3339 instant")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        from nixx.nxc.durations import parse_instant_ms

        parsed = parse_instant_ms(value)
        if parsed is not None:
            return parsed
    raise ValueError(f"`at` must be epoch milliseconds or an RFC3339 instant, got {value!r}")


def _cap(data: dict[str, Any], key: str, limit: int) -> None:
    value = data.get(key)
    if value is None:
        return
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    if len(value) > limit:
        data["truncated"] = len(value)
        value = value[:limit]
    data[key] = value


def _searchable(kind: str, data: Any) -> str:
    if not isinstance(data, dict):
        return json.dumps(data, ensure_ascii=False) if data is not None else ""
    if kind == "tool_use":
        return f"{data.get('name', '')} {json.dumps(data.get('input'), ensure_ascii=False)}"
    for key in ("text", "content", "msg"):
        text = data.get(key)
        if isinstance(text, str):
            return text
    return json.dumps(data, ensure_ascii=False)


def normalise(entry: Any, now_ms: int) -> Entry:
    """Check one entry and apply the caps; ValueError says what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError("an entry must be a JSON object")
    kind = entry.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError("an entry needs `kind` (session_init, assistant, thinking, tool_use, "
                         "tool_result, result, error, or your own)")
    ids = {}
    for key in ("toolUseId", "parentToolUseId", "subagentType"):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"`{key}` must be a string")
        ids[key] = value
    data = entry.get("data", {})
    if isinstance(data, dict):
        data = dict(data)
        if kind == "thinking":
            _cap(data, "text", THINKING_CAP)
        elif kind == "tool_result":
            _cap(data, "content", TOOL_RESULT_CAP)
    return {"kind": kind, "at": _at_ms(entry.get("at"), now_ms), "toolUseId": ids["toolUseId"],
            "parentToolUseId": ids["parentToolUseId"], "subagentType": ids["subagentType"],
            "data": data}


def _expired(row: tuple[Any, ...], iso: Callable[[int | None], str | None]) -> ExpiredSession:
    """A `transcript_sessions` row (session_id, last_at, entries) as a prune lists it."""
    return {"session": row[0], "last_entry": iso(row[1]), "entries": row[2]}


class TranscriptStore:
    """Transcripts in the device-local store. `now` is injectable (retention tests)."""

    def __init__(self, local: LocalStore, *, now: Callable[[], int] = _now_ms,
                 keep_days: int = DEFAULT_KEEP_DAYS) -> None:
        self.local = local
        self.now = now
        self.keep_days = keep_days

    def append(self, session: str, entries: list[Any]) -> Appended:
        """Store a batch atomically; seq continues the session's sequence. The first flush
        of a session that has no entries yet prunes expired sessions first."""
        now = self.now()
        rows = []
        for i, entry in enumerate(entries, 1):
            try:
                rows.append(normalise(entry, now))
            except ValueError as exc:
                raise ValidationError(f"transcript entry {i}: {exc}; nothing was stored",
                                      param="entries") from None
        pruned: Pruned | None = None
        with self.local.transaction() as conn:
            known = conn.execute("SELECT entries FROM transcript_sessions WHERE session_id = ?",
                                 (session,)).fetchone()
            if known is None:
                pruned = self._prune(conn, now, self.keep_days, dry_run=False)
            last = conn.execute("SELECT coalesce(max(seq), 0) FROM transcript WHERE session_id = ?",
                                (session,)).fetchone()
            top = int(last[0]) if last else 0
            seq = top
            for row in rows:
                seq += 1
                conn.execute(
                    "INSERT INTO transcript(session_id, seq, kind, at, tool_use_id,"
                    " parent_tool_use_id, subagent_type, data, text) VALUES (?,?,?,?,?,?,?,?,?)",
                    (session, seq, row["kind"], row["at"], row["toolUseId"],
                     row["parentToolUseId"], row["subagentType"],
                     json.dumps(row["data"], ensure_ascii=False),
                     _searchable(row["kind"], row["data"])),
                )
            if rows:
                last = max(r["at"] for r in rows)
                first = min(r["at"] for r in rows)
                conn.execute(
                    "INSERT INTO transcript_sessions VALUES (?,?,?,?) ON CONFLICT(session_id)"
                    " DO UPDATE SET last_at = max(last_at, excluded.last_at),"
                    " first_at = min(first_at, excluded.first_at),"
                    " entries = entries + excluded.entries",
                    (session, first, last, len(rows)),
                )
        out: Appended = {"session": session, "stored": len(rows),
                               "first_seq": top + 1 if rows else None,
                               "last_seq": seq if rows else None}
        if pruned is not None:
            out["pruned"] = pruned
        return out

    def _prune(self, conn: Connection, now: int, keep_days: int, *, dry_run: bool) -> Pruned:
        cutoff = now - keep_days * DAY_MS
        rows = conn.execute(
            "SELECT session_id, last_at, entries FROM transcript_sessions WHERE last_at < ?"
            " ORDER BY last_at", (cutoff,),
        ).fetchall()
        from nixx.nxc.durations import iso

        sessions = [_expired(r, iso) for r in rows]
        entries = 0
        for s in sessions:
            entries += s["entries"]
        if not dry_run:
            for r in rows:
                conn.execute("DELETE FROM transcript WHERE session_id = ?", (r[0],))
                conn.execute("DELETE FROM transcript_sessions WHERE session_id = ?", (r[0],))
        return {"keep_days": keep_days, "cutoff": iso(cutoff), "dry_run": dry_run,
                "sessions": sessions, "entries": entries}

    def prune(self, *, keep_days: int | None = None, dry_run: bool = False) -> Pruned:
        keep = self.keep_days if keep_days is None else keep_days
        if keep < 0:
            raise ValidationError("--keep-days must be 0 or more", param="keep_days")
        with self.local.transaction() as conn:
            return self._prune(conn, self.now(), keep, dry_run=dry_run)

    def entries(self, session: str) -> list[StoredEntry]:
        rows: list[Any] = self.local.conn.execute(
            "SELECT seq, kind, at, tool_use_id, parent_tool_use_id, subagent_type, data"
            " FROM transcript WHERE session_id = ? ORDER BY seq", (session,),
        ).fetchall()
        from nixx.nxc.durations import iso

        out: list[StoredEntry] = []
        for seq, kind, at, tid, parent, sub, data in rows:
            entry: dict[str, Any] = {"seq": seq, "kind": kind, "at": iso(at)}
            if tid:
                entry["toolUseId"] = tid
            if parent:
                entry["parentToolUseId"] = parent
            if sub:
                entry["subagentType"] = sub
            entry["data"] = json.loads(data)  # last, as it always was in the JSON
            out.append(cast("StoredEntry", entry))
        return out

    def show(self, session: str) -> TranscriptView:
        flat = self.entries(session)
        if not flat:
            known = self.local.conn.execute(
                "SELECT 1 FROM sessions WHERE session_id = ?", (session,)).fetchone()
            if known is None:
                raise NotFound(f"no transcript for session {session} on this machine "
                               "(transcripts are device-local)", param="session")
        return {"session": session, "entries": nest(flat), "count": len(flat)}

    def search(self, query: str, *, limit: int = 20) -> list[TranscriptHit]:
        from nixx.nxc.search import fts_query

        match = fts_query(query)
        if not match:
            raise ValidationError("the search query has no words", param="query")
        rows: list[Any] = self.local.conn.execute(
            "SELECT t.session_id, t.seq, t.kind, t.at, s.persona,"
            " snippet(transcript_fts, 0, '[', ']', '…', 16)"
            " FROM transcript_fts JOIN transcript t ON t.tid = transcript_fts.rowid"
            " LEFT JOIN sessions s ON s.session_id = t.session_id"
            " WHERE transcript_fts MATCH ? ORDER BY bm25(transcript_fts) LIMIT ?",
            (match, limit),
        ).fetchall()
        from nixx.nxc.durations import iso

        return [{"session": r[0], "seq": r[1], "kind": r[2], "at": iso(r[3]), "persona": r[4],
                 "snippet": r[5]} for r in rows]


def nest(flat: list[StoredEntry]) -> list[StoredEntry]:
    """One level: a sub-agent's entries under the main-timeline call that spawned them."""
    top_calls: dict[str, StoredEntry] = {}
    owner: dict[str, str] = {}  # any tool id → its main-timeline ancestor's id
    out: list[StoredEntry] = []
    for entry in flat:
        parent = entry.get("parentToolUseId")
        anchor = None
        if parent:
            anchor = parent if parent in top_calls else owner.get(parent)
        if anchor is not None:
            top_calls[anchor].setdefault("children", []).append(entry)
            if entry.get("toolUseId"):
                owner[entry["toolUseId"]] = anchor
            continue
        out.append(entry)
        if entry["kind"] == "tool_use" and entry.get("toolUseId"):
            top_calls[entry["toolUseId"]] = entry
    return out
