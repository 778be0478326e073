"""One sync pass: pull what this workspace lacks, push what the remote lacks.

    pull  the transport's ops past the pulled cursor, about `pull_batch` at a time; each
          chunk is inserted (already-stored ids are skipped, every new op is folded by its
          domain's reducer, ops of domains nobody here folds are stored unfolded) in ONE
          transaction with the new cursor and the record of which seqs came from the stream
    push  ops past the pushed watermark (synced ones: ``local = 0``, and not ones that
          arrived from the stream), in batches of `batch_size`, `batches_per_push` batches
          per transport call; after each call the watermark advances (a crash between the
          call and the advance re-pushes that call's batches next time: the remote
          deduplicates by op id)

Passes of one workspace are serialised by a lock file (`.nxs/sync.lock`); appends by
other processes go on meanwhile (the log's own write lock is held only per transaction).

What arrives is bounded (docs/limits-and-safety.md, "What a pass takes in"): an entry
longer than `max_op_bytes` (the `sync_max_op_bytes` setting, default `MAX_OP_BYTES`) is
refused unread — never decoded, never stored, listed in `nxs sync status` like the other
refusals — and a pass pulls at most `max_pull` ops (`sync_max_pull_ops`, default
`MAX_PULL_OPS`; `more` says the next pass goes on), so one pass's memory and the log's
growth stay bounded whatever a remote holds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from nixx.errors import Conflict, NixxError, NotFound, ValidationError
from nixx.log import clock as hlc
from nixx.sync import state

if TYPE_CHECKING:
    from nixx.log.op import Op
    from nixx.log.reducer import Reducer
    from nixx.log.store import LogStore
    from nixx.log.workspace import Workspace
    from nixx.nxc.shapes import Conflicts
    from nixx.sync.transport import Oversized, Transport

BATCH_SIZE = 1000
BATCHES_PER_PUSH = 20
PULL_BATCH = 5000
#: the longest op a pass takes in (its wire JSON): a message body is at most
#: `nixx.nxc.engine.MAX_BODY_BYTES` (512 KiB; JSON escapes at most 6 bytes per byte)
#: plus its envelope
MAX_OP_BYTES = 4 * 1024 * 1024
#: the most ops one pass pulls; the next pass goes on where it stopped
MAX_PULL_OPS = 100_000
LOCK_NAME = "sync.lock"


class PassJson(TypedDict):
    """A `PassResult` as JSON (`PassResult.to_dict`): what `nxs sync run --json` prints
    and each ``pass`` event of `nxs sync daemon` carries (`nixx.sync.daemon`)."""

    stream: str
    transport: str
    remote: str
    pushed: int
    pulled: int
    stored: int
    rejected: int
    refused: int
    pushed_seq: int
    unpushed: int
    more: bool
    elapsed_ms: float


class SyncStatus(TypedDict):
    """Where this workspace's sync stands (`status`): what `nxs sync status` shows and
    prints with ``--json``. The binding's keys only when the workspace is bound."""

    bound: bool
    replica: str
    db: str
    stream: NotRequired[str]
    transport: NotRequired[str]
    remote: NotRequired[str]  # redacted (`state.redact`)
    derived_from: NotRequired[str]
    bound_at: NotRequired[int]  # epoch ms
    pushed_seq: int
    pulled_cursor: str | None
    unpushed: int
    log_seq: int
    last_pass: state.LastPass | None
    refused: state.RefusedRecord
    bound_at_iso: NotRequired[str | None]
    # added by `nxs sync status` (`nixx.cli.nxs_sync`): `nixx.nxc.reducer.conflicts`
    conflicts: NotRequired[Conflicts]


@dataclass
class PassResult:
    stream: str
    transport: str
    remote: str
    pushed: int = 0  # ops handed to the remote this pass
    pulled: int = 0  # ops received from the remote
    stored: int = 0  # of those, new here (the rest were duplicates)
    rejected: int = 0  # received entries that were not valid ops (skipped)
    refused: int = 0  # valid ops refused: another origin than their pusher, clock too far ahead
    pushed_seq: int = 0
    unpushed: int = 0
    more: bool = False  # a limit stopped the pass before it was done
    elapsed_ms: float = 0.0

    def to_dict(self) -> PassJson:
        return cast(PassJson, asdict(self))  # PassJson names these fields


@contextmanager
def sync_lock(state_dir: str, *, wait: float = 0.0) -> Iterator[None]:
    """Exclusive per-workspace pass lock; Conflict when another pass holds it longer
    than `wait` seconds. A killed pass releases it (the kernel drops the flock)."""
    import fcntl

    fd = os.open(os.path.join(state_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Conflict("another sync pass is running on this workspace "
                                   "(`nxs sync daemon` or `nxs sync run`); try again when "
                                   "it ends") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _split(ops: Sequence[Op], size: int) -> list[list[Op]]:
    return [list(ops[i:i + size]) for i in range(0, len(ops), size)]


def run_pass(
    store: LogStore, transport: Transport, binding: state.Binding, *,
    push: bool = True, pull: bool = True, batch_size: int = BATCH_SIZE,
    batches_per_push: int = BATCHES_PER_PUSH, pull_batch: int = PULL_BATCH,
    max_push: int | None = None, max_pull: int | None = MAX_PULL_OPS,
    max_op_bytes: int = MAX_OP_BYTES,
) -> PassResult:
    """One pass over an open store (the caller holds `sync_lock`). `max_push` /
    `max_pull` stop early (a partial pass; `more` tells); an entry longer than
    `max_op_bytes` is refused unread (module docstring)."""
    started = time.perf_counter()
    result = PassResult(stream=binding.stream, transport=binding.transport,
                        remote=transport.describe())
    if state.binding(store) is None:  # a binding given by the caller, not stored yet
        with store.transaction() as txn:
            state.ensure_schema(txn)
    # pull first: the first pass after a (re)bind reads back what this replica had
    # pushed before (not what it is about to push), and the push steps over what arrived
    if pull:
        _pull(store, transport, result, pull_batch, max_pull, max_op_bytes)
    if push:
        _push(store, transport, result, batch_size, batches_per_push, max_push)
    result.pushed_seq = state.pushed_seq(store)
    result.unpushed = state.unpushed_count(store)
    result.elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
    return result


def _push(store: LogStore, transport: Transport, result: PassResult, batch_size: int,
          batches_per_push: int, max_push: int | None) -> None:
    while True:
        budget = batch_size * batches_per_push
        if max_push is not None:
            budget = min(budget, max_push - result.pushed)
            if budget <= 0:
                result.more = result.more or state.unpushed_count(store) > 0
                return
        watermark = state.pushed_seq(store)
        ops, top = state.pushable(store, watermark, budget)
        if ops:
            transport.push(_split(ops, batch_size))
            result.pushed += len(ops)
        if top > watermark:
            with store.transaction() as txn:
                state.set_pushed_seq(txn, top)
        if len(ops) < budget:
            return


def _pull(store: LogStore, transport: Transport, result: PassResult, pull_batch: int,
          max_pull: int | None, max_op_bytes: int) -> None:
    while True:
        limit = pull_batch
        if max_pull is not None:
            limit = min(limit, max_pull - result.pulled)
            if limit <= 0:
                result.more = True
                return
        cursor = state.pulled_cursor(store)
        got = transport.pull(cursor, limit, max_op_bytes)
        result.rejected += got.rejected
        if got.cursor != cursor or got.ops or got.oversized:
            ops, refused = _admit(got.ops, got.pushers)
            refused += _too_long(got.oversized, max_op_bytes)
            result.refused += len(refused)
            try:
                new = _store_chunk(store, ops, got.cursor, refused)
            except ValidationError:  # a forged or corrupted op: leave it out, keep the rest
                ops = [op for op in ops if op.verify()]
                result.rejected += len(got.ops) - len(refused) - len(ops)
                new = _store_chunk(store, ops, got.cursor, refused)
            result.pulled += len(got.ops) + len(got.oversized)
            result.stored += len(new)
        if not got.more:
            return


def _admit(ops: list[Op], pushers: list[str]) -> tuple[list[Op], list[state.RefusedOp]]:
    """Split pulled ops into those to store and those refused on arrival (docs/sync.md,
    "Trust"): an op whose `origin` is not the replica that pushed it (each replica
    writes only under its own name), or whose clock is more than `hlc.MAX_AHEAD_MS`
    ahead of this machine's. A refused op is never stored; `nxs sync status` lists it."""
    keep: list[Op] = []
    refused: list[state.RefusedOp] = []
    ceiling = hlc.ceiling()
    at = hlc.now_ms()
    for i, op in enumerate(ops):
        pusher = pushers[i] if i < len(pushers) else op.origin
        reason = None
        if op.origin != pusher:
            reason = f"its origin {op.origin!r} is not the replica that pushed it ({pusher!r})"
        elif op.clock > ceiling:
            reason = (f"its clock {op.clock} is more than {hlc.MAX_AHEAD_MS // 60000} minutes "
                      "ahead of this machine's")
        if reason is None or not op.verify():  # a malformed op: `insert` rejects it
            keep.append(op)
        else:
            refused.append({"op": op.id, "origin": op.origin, "pusher": pusher,
                            "domain": op.domain, "kind": op.kind, "target": op.target,
                            "reason": reason, "at": at})
    return keep, refused


def _too_long(entries: list[Oversized], max_op_bytes: int) -> list[state.RefusedOp]:
    """The refusals of entries longer than the bound (`Pulled.oversized`)."""
    at = hlc.now_ms()
    return [{"op": e["op"] or "(unreadable)", "origin": e["origin"], "pusher": e["pusher"],
             "domain": e["domain"], "kind": e["kind"], "target": e["target"],
             "reason": (f"it is {e['size']} bytes, more than the {max_op_bytes} a pass takes "
                        "in (the sync_max_op_bytes setting)"), "at": at}
            for e in entries]


def _store_chunk(store: LogStore, ops: list[Op], cursor: str | None,
                 refused: Sequence[state.RefusedOp] = ()) -> list[Op]:
    """Insert pulled ops, record which seqs came from the stream and which ops were
    refused, and move the cursor: one transaction. ValidationError (nothing stored) if
    an op is malformed."""
    with store.transaction() as txn:
        new = txn.insert(ops)
        state.mark_pulled(txn, [op.seq for op in new if op.seq is not None])
        state.record_refused(txn, refused)
        state.set_pulled_cursor(txn, cursor)
    return new


def sync_workspace(
    ws: Workspace, reducers: Sequence[Reducer], *, lock_wait: float = 0.0, **options: Any,
) -> PassResult:
    """Open the workspace, take the pass lock, run one pass, record its summary."""
    from nixx.log.store import LogStore
    from nixx.sync.transport import open_transport, source_id

    with LogStore.open(ws.db_path, reducers) as store:
        bound = state.binding(store)
        if bound is None:
            raise NotFound("this workspace is not bound to a sync stream: run `nxs sync bind` "
                           "first (it derives the stream from the git `origin` remote)")
        with sync_lock(ws.state_dir, wait=lock_wait):
            try:
                with open_transport(bound.transport, remote=bound.remote, stream=bound.stream,
                                    replica=store.replica, state_dir=ws.state_dir,
                                    source=source_id(store)) as transport:
                    result = run_pass(store, transport, bound, **options)
            except Exception as exc:
                try:  # best effort: the original error is what the caller must see
                    with store.transaction() as txn:
                        state.set_last_pass(txn, {"at": hlc.now_ms(), "ok": False,
                                                  "error": str(exc)})
                except NixxError:
                    pass
                raise
            summary: state.LastPass = {
                "at": hlc.now_ms(), "ok": True, "pushed": result.pushed,
                "pulled": result.pulled, "stored": result.stored, "rejected": result.rejected,
                "refused": result.refused, "elapsed_ms": result.elapsed_ms}
            with store.transaction() as txn:
                state.set_last_pass(txn, summary)
        return result


def status(ws: Workspace) -> SyncStatus:
    """Stream, remote, watermarks and the unpushed count (no remote is contacted)."""
    from nixx.log.store import LogStore

    with LogStore.open(ws.db_path) as store:
        bound = state.binding(store)
        pushed = state.pushed_seq(store) if bound else 0
        cursor = state.pulled_cursor(store) if bound else None
        unpushed, log_seq = state.unpushed_count(store), store.max_seq()
        last, refused = state.last_pass(store), state.refused(store)
        out: SyncStatus
        if bound is None:
            out = {"bound": False, "replica": store.replica, "db": ws.db_path,
                   "pushed_seq": pushed, "pulled_cursor": cursor, "unpushed": unpushed,
                   "log_seq": log_seq, "last_pass": last, "refused": refused}
        else:  # the binding's keys between the workspace's and the watermarks
            out = {"bound": True, "replica": store.replica, "db": ws.db_path,
                   "stream": bound.stream, "transport": bound.transport,
                   "remote": state.redact(bound.remote), "derived_from": bound.derived_from,
                   "bound_at": bound.bound_at,
                   "pushed_seq": pushed, "pulled_cursor": cursor, "unpushed": unpushed,
                   "log_seq": log_seq, "last_pass": last, "refused": refused}
    # the times in epoch ms stay (programs compare them); each also as an RFC3339 instant
    from nixx.nxc.durations import iso

    if out.get("bound_at"):
        out["bound_at_iso"] = iso(out["bound_at"])
    last = out["last_pass"]
    if last and last.get("at"):
        last["at_iso"] = iso(last["at"])
    return out
