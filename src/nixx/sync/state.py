"""The sync binding and watermarks, in the workspace log file, in tables that never travel.

    sync_state(key, value)     stream, transport, remote, derived_from, bound_at,
                               pushed_seq (local seq: every syncable op at or below it that
                               did not arrive from the stream is on the remote),
                               pulled_cursor (the transport's opaque cursor), last_pass,
                               refused (ops refused on arrival: a count and the latest)
    sync_pulled(lo, hi)        ranges of local seqs inserted by pulls: they came from the
                               stream, so pushing them back is skipped

Only operations travel (`ops` rows with ``local = 0``); these tables, the device-local
store (`.nxs/local.sqlite`: sessions, transcripts) and everything else in the file stay.

Every watermark is written through a `Txn` of the log store: the pulled cursor and the
pulled ranges in the same transaction as the ops they cover, the pushed watermark right
after the remote acknowledged the batch (a crash in between re-pushes the batch, which
the remote deduplicates by op id).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

# the log's row decoding, shared so that a sync read is an ordinary `Op`
from nixx.log.store import OP_COLUMNS, row_to_op

if TYPE_CHECKING:
    from nixx.log.op import Op
    from nixx.log.store import LogStore, Txn

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sync_state(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    " WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS sync_pulled(lo INTEGER PRIMARY KEY, hi INTEGER NOT NULL)",
)
_BINDING_KEYS = ("stream", "transport", "remote", "derived_from", "bound_at")

# An op is pushable: synced (local = 0), past the watermark, and not inside a pulled range.
_PUSHABLE = (
    "o.seq > ? AND o.local = 0 AND coalesce((SELECT p.hi FROM sync_pulled p WHERE p.lo <= o.seq"
    " ORDER BY p.lo DESC LIMIT 1), 0) < o.seq"
)
_OP_COLS = ", ".join("o." + c.strip() for c in OP_COLUMNS.split(","))


class BindingJson(TypedDict):
    """A `Binding` as JSON (`Binding.to_dict`): what `nxs sync bind` answers, with
    ``remote`` redacted and its own keys added."""

    stream: str
    transport: str
    remote: str
    derived_from: str
    bound_at: int


class RefusedOp(TypedDict):
    """One op refused on arrival (`nixx.sync.engine._admit`, docs/sync.md "Trust"): kept
    in ``sync_state.refused``, listed by `nxs sync status`."""

    op: str  # the op's id
    origin: str
    pusher: str  # the replica that pushed it
    domain: str
    kind: str
    target: str
    reason: str
    at: int  # epoch ms, when it was refused


class RefusedRecord(TypedDict):
    """The ops refused on arrival (`refused`): the whole count and the latest
    `REFUSED_KEPT` of them; `nxs sync status` shows it (``refused``)."""

    count: int
    items: list[RefusedOp]


class LastPass(TypedDict):
    """The summary of the latest pass (`set_last_pass` by `nixx.sync.engine.sync_workspace`,
    read by `last_pass`): `nxs sync status` shows it (``last_pass``). A failed pass has
    ``error`` and no counts."""

    at: int  # epoch ms
    ok: bool
    pushed: NotRequired[int]
    pulled: NotRequired[int]
    stored: NotRequired[int]
    rejected: NotRequired[int]
    refused: NotRequired[int]
    elapsed_ms: NotRequired[float]
    error: NotRequired[str]
    at_iso: NotRequired[str | None]  # added by `nixx.sync.engine.status`


@dataclass
class Binding:
    stream: str
    transport: str  # "git" | "postgres"
    remote: str
    derived_from: str  # "origin" | "create" | "join"
    bound_at: int

    def to_dict(self) -> BindingJson:
        return cast(BindingJson, asdict(self))  # BindingJson names these fields


def _scalar(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def _has_tables(store: LogStore) -> bool:
    return bool(_scalar(store.conn, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                    " AND name = 'sync_state'"))


def ensure_schema(txn: Txn) -> None:
    for statement in _SCHEMA:
        txn.conn.execute(statement)


def _get(store_or_txn: LogStore | Txn, key: str) -> str | None:
    row = store_or_txn.conn.execute("SELECT value FROM sync_state WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _set(txn: Txn, key: str, value: str) -> None:
    txn.conn.execute("INSERT OR REPLACE INTO sync_state VALUES (?, ?)", (key, value))


def binding(store: LogStore) -> Binding | None:
    if not _has_tables(store):
        return None
    values: dict[str, str] = {
        str(k): str(v) for k, v in store.conn.execute("SELECT key, value FROM sync_state")}
    if "stream" not in values:
        return None
    return Binding(
        stream=values["stream"], transport=values["transport"], remote=values["remote"],
        derived_from=values.get("derived_from", "origin"),
        bound_at=int(values.get("bound_at", "0")),
    )


def write_binding(txn: Txn, new: Binding, *, reset: bool) -> None:
    """Store the binding; `reset` also forgets the watermarks (the next pass pushes and
    pulls everything again, deduplicated by op id on both sides)."""
    ensure_schema(txn)
    for key in _BINDING_KEYS:
        _set(txn, key, str(getattr(new, key)))
    if reset:
        txn.conn.execute(
            "DELETE FROM sync_state WHERE key IN ('pushed_seq', 'pulled_cursor', 'last_pass')")
        txn.conn.execute("DELETE FROM sync_pulled")


def pushed_seq(store: LogStore | Txn) -> int:
    value = _get(store, "pushed_seq")
    return int(value) if value else 0


def pulled_cursor(store: LogStore | Txn) -> str | None:
    return _get(store, "pulled_cursor")


def set_pushed_seq(txn: Txn, seq: int) -> None:
    if seq > pushed_seq(txn):  # a watermark never moves back
        _set(txn, "pushed_seq", str(seq))


def set_pulled_cursor(txn: Txn, cursor: str | None) -> None:
    if cursor is not None:
        _set(txn, "pulled_cursor", cursor)


def mark_pulled(txn: Txn, seqs: list[int]) -> None:
    """Record that these local seqs arrived from the stream (not to be pushed back)."""
    if not seqs:
        return
    seqs = sorted(seqs)
    runs: list[list[int]] = [[seqs[0], seqs[0]]]
    for seq in seqs[1:]:
        if seq == runs[-1][1] + 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    conn = txn.conn
    for lo, hi in runs:
        prev = conn.execute(
            "SELECT lo, hi FROM sync_pulled WHERE lo < ? ORDER BY lo DESC LIMIT 1", (lo,)
        ).fetchone()
        if prev is not None and prev[1] == lo - 1:
            conn.execute("UPDATE sync_pulled SET hi = ? WHERE lo = ?", (hi, prev[0]))
        else:
            conn.execute("INSERT OR REPLACE INTO sync_pulled VALUES (?, ?)", (lo, hi))


def pushable(store: LogStore, after: int, limit: int) -> tuple[list[Op], int]:
    """Up to `limit` ops to push past the watermark `after`, and the watermark that
    pushing them reaches: past the last op returned, or the newest seq of the log when
    nothing more is pushable (so pulled ops and device-local ops after the last pushable
    one are stepped over). One read transaction: a consistent snapshot."""
    conn = store.conn
    conn.execute("BEGIN")
    try:
        if _has_tables(store):
            rows = conn.execute(
                f"SELECT {_OP_COLS} FROM ops o WHERE {_PUSHABLE} ORDER BY o.seq LIMIT ?",
                (after, limit),
            ).fetchall()
        else:
            rows = conn.execute(
                f"SELECT {_OP_COLS} FROM ops o WHERE o.seq > ? AND o.local = 0 ORDER BY o.seq"
                " LIMIT ?", (after, limit)).fetchall()
        if len(rows) < limit:
            top = int(_scalar(conn, "SELECT coalesce(max(seq), 0) FROM ops"))
        else:
            top = int(rows[-1][0])  # type: ignore[arg-type]
    finally:
        conn.execute("COMMIT")
    return [row_to_op(r) for r in rows], max(top, after)


def unpushed_count(store: LogStore) -> int:
    after = pushed_seq(store) if _has_tables(store) else 0
    if not _has_tables(store):
        return int(_scalar(store.conn, "SELECT count(*) FROM ops WHERE seq > ? AND local = 0",
                           (after,)))
    return int(_scalar(store.conn, f"SELECT count(*) FROM ops o WHERE {_PUSHABLE}", (after,)))


#: how many refused ops `nxs sync status` keeps the details of (the count is whole)
REFUSED_KEPT = 100


def record_refused(txn: Txn, items: Sequence[RefusedOp]) -> None:
    """Add ops refused on arrival (`nixx.sync.engine._admit`) to the record: a count and
    the latest `REFUSED_KEPT` of them, each once (by op id)."""
    if not items:
        return
    ensure_schema(txn)
    current = _refused(txn)
    seen = {item["op"] for item in current["items"]}
    fresh = [item for item in items if item["op"] not in seen]
    if not fresh:
        return
    current["count"] += len(fresh)
    current["items"] = (current["items"] + fresh)[-REFUSED_KEPT:]
    _set(txn, "refused", json.dumps(current, sort_keys=True))


def _refused(store_or_txn: LogStore | Txn) -> RefusedRecord:
    value = _get(store_or_txn, "refused")
    out: RefusedRecord = json.loads(value) if value else {"count": 0, "items": []}
    return out


def refused(store: LogStore) -> RefusedRecord:
    """``{"count": n, "items": [the latest refused ops]}`` (empty when nothing was)."""
    if not _has_tables(store):
        return {"count": 0, "items": []}
    return _refused(store)


def set_last_pass(txn: Txn, summary: LastPass) -> None:
    _set(txn, "last_pass", json.dumps(summary, sort_keys=True))


def last_pass(store: LogStore) -> LastPass | None:
    if not _has_tables(store):
        return None
    value = _get(store, "last_pass")
    out: LastPass | None = json.loads(value) if value else None
    return out


def bind(
    store: LogStore, root: str, *, create: bool = False, join: str | None = None,
    rebind: bool = False, remote: str | None = None, cwd: str | None = None,
) -> tuple[Binding, bool]:
    """Bind the workspace at `root` to a stream and a remote (idempotent).

    The stream: `join` if given, else a new random one for `create`, else derived from the
    `origin` remote (else from a git `remote`). The remote: `remote` if given (a git URL
    or ``postgresql://``), else `origin`. Binding to something else than the current
    binding needs `rebind`, which also resets the watermarks. Returns the binding and
    whether anything changed."""
    import os

    from nixx.errors import Conflict, ValidationError
    from nixx.log import clock as hlc
    from nixx.sync.stream import (
        check_stream_id,
        new_stream_id,
        origin_url,
        resolve_remote,
        stream_for_url,
    )
    from nixx.sync.transport import transport_for_url

    if create and join:
        raise ValidationError("--create and --join exclude each other", param="create")
    origin = origin_url(root)
    if remote:
        remote_url = resolve_remote(remote, cwd or os.getcwd())
    elif origin:
        remote_url = resolve_remote(origin, root)
    else:
        raise ValidationError(
            f"no git `origin` remote in {root} to sync through: add one "
            "(`git remote add origin URL`) or pass --remote URL (a git URL or "
            "postgresql://...), with --create for a new stream or --join ID for an existing one",
            param="remote")
    transport = transport_for_url(remote_url)
    current = binding(store)
    if join:
        stream, derived = check_stream_id(join), "join"
    elif create:
        keep = current is not None and current.derived_from == "create" and not rebind
        stream, derived = (current.stream if keep and current else new_stream_id()), "create"
    elif origin:
        stream, derived = stream_for_url(origin, base=root), "origin"
    elif transport == "git":
        stream, derived = stream_for_url(remote_url), "remote"
    else:
        raise ValidationError(
            f"no git `origin` remote in {root} to derive the stream from: pass --create "
            "(mint a new stream) or --join ID (the stream another workspace printed)",
            param="join")
    new = Binding(stream=stream, transport=transport, remote=remote_url, derived_from=derived,
                  bound_at=hlc.now_ms())
    same = current is not None and (current.stream, current.transport, current.remote) == (
        new.stream, new.transport, new.remote)
    if same and not rebind:
        assert current is not None
        return current, False
    if current is not None and not same and not rebind:
        raise Conflict(
            f"this workspace is already bound to {current.stream} through {current.transport} "
            f"({redact(current.remote)}); pass --rebind to bind it to {new.stream} "
            f"({redact(new.remote)}) — that resets the watermarks: the next pass pushes and "
            "pulls everything again (nothing is doubled: ops are deduplicated by id)",
            param="rebind", current=current.stream)
    with store.transaction() as txn:
        write_binding(txn, new, reset=True)
    return new, True


def redact(url: str) -> str:
    """A remote URL without its secrets: ``user:***@``, ``password=***``, and for http(s)
    a lone user part (``https://<token>@host``, how tokens are often passed) as ``***@``."""
    import re

    url = re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", url)
    url = re.sub(r"^(https?://)[^/@:]+@", r"\1***@", url, flags=re.I)
    return re.sub(r"(password=)[^&]*", r"\1***", url)
