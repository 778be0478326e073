"""The workspace log on SQLite: operations, meta, and the views reducers fold.

One file (`.nxs/db.sqlite`) opened with apsw, WAL mode, every write in `BEGIN IMMEDIATE` (so writers
queue on the busy timeout instead of failing on a lock upgrade). Tables:

    meta(key, value)        replica prefix, creation time, view versions per domain
    ops(seq, id UNIQUE, domain, kind, target, origin, clock, actor, payload, created, local)
    nixx_migrations(version, name, applied_at)   the schema steps run (`nixx.migrations`)

`seq` is an INTEGER PRIMARY KEY assigned at insert under the write lock, so it grows
in commit order and a reader never sees a smaller seq appear later: "ops past a
watermark" is ``WHERE seq > ?`` (`ops_since`). Inserting an op whose id is stored is a
no-op (``INSERT OR IGNORE``); a newly stored op is folded by its domain's reducer in the
same transaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

import apsw

from nixx.errors import SchemaError, StoreError, ValidationError, WorkspaceError
from nixx.log import clock as hlc
from nixx.log import connection
from nixx.log.op import Op
from nixx.log.reducer import Reducer, ReducerRegistry
from nixx.migrations import Migrations, apply_sqlite
from nixx.sqlite_tx import immediate

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

#: The log's schema steps (`nixx.migrations`: recorded in `nixx_migrations`, a log newer
#: than this nixx refused). Append a step to change the schema.
MIGRATIONS = Migrations("the workspace log")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ops(
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    domain TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    origin TEXT NOT NULL,
    clock TEXT NOT NULL,
    actor TEXT NOT NULL,
    payload TEXT NOT NULL,
    created INTEGER NOT NULL,
    local INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS ops_domain_seq ON ops(domain, seq);
CREATE INDEX IF NOT EXISTS ops_clock ON ops(clock);
"""

OP_COLUMNS = "seq, id, domain, kind, target, origin, clock, actor, payload, created, local"


def row_to_op(row: tuple[Any, ...]) -> Op:
    seq, op_id, domain, kind, target, origin, clock, actor, payload, created, local = row
    return Op(op_id, domain, kind, target, origin, clock, actor, json.loads(payload), created,
              seq, bool(local))


def _connect(path: str) -> apsw.Connection:
    try:
        conn = connection.connect(path)
        # page cache up to 32 MB (allocated only as used): the random-keyed indexes (op ids,
        # message ids, full text) of a large log stop thrashing the default 2,000 pages
        conn.execute("PRAGMA cache_size=-32768")
    except apsw.Error as exc:
        raise StoreError(f"cannot open the workspace log {path}: {exc}") from exc
    return conn


@MIGRATIONS.register
def m001_ops(conn: apsw.Connection) -> None:
    """`meta` and `ops` with their indexes."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def _legacy_version(conn: apsw.Connection) -> int:
    """A log made before versions were kept in `nixx_migrations` kept it in
    meta('schema'): read it (and drop it: the table is the record from now on)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except apsw.SQLError:  # no meta table: a new file
        return 0
    if row is None:
        return 0
    conn.execute("DELETE FROM meta WHERE key = 'schema'")
    try:
        return int(row[0])
    except ValueError:
        raise SchemaError(f"the workspace log has an unreadable schema version {row[0]!r}") from None


def _migrate(conn: apsw.Connection, path: str) -> None:
    apply_sqlite(conn, MIGRATIONS, path, error=lambda exc, phase: write_error(path, exc),
                 legacy=_legacy_version)


def create_store(path: str | os.PathLike[str], replica: str) -> None:
    """Create a new log file at `path` with replica prefix `replica` (idempotent)."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        _migrate(conn, path)
        with immediate(conn, error=lambda exc, phase: write_error(path, exc)):
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('replica', ?)", (replica,))
            conn.execute(
                "INSERT OR IGNORE INTO meta VALUES ('created', ?)", (str(hlc.now_ms()),)
            )
    finally:
        conn.close()


class Txn:
    """One write transaction: append local ops, insert foreign ones, set meta."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.conn = store.conn
        self._last_clock: str | None = None
        self.inserted: list[Op] = []

    def _next_clock(self) -> str:
        if self._last_clock is None:
            # the greatest clock seen, leaving out any too far ahead (`hlc.ceiling`): an
            # op stored before clocks were bounded must not hold every later write back
            row = self.conn.execute("SELECT max(clock) FROM ops WHERE clock <= ?",
                                    (hlc.ceiling(),)).fetchone()
            self._last_clock = row[0] if row else None
        self._last_clock = hlc.tick(self._last_clock)
        return self._last_clock

    def append(
        self,
        domain: str,
        kind: str,
        target: str,
        actor: str,
        payload: dict[str, Any],
        *,
        local: bool = False,
    ) -> Op:
        """Mint a local op (next clock, this replica's origin), store it and fold it."""
        clock = self._next_clock()
        op = Op.make(
            domain=domain,
            kind=kind,
            target=target,
            origin=self.store.replica,
            clock=clock,
            actor=actor,
            payload=payload,
            created=hlc.now_ms(),
            local=local,
        )
        self._store_and_fold(op)
        return op

    def insert(self, ops: Iterable[Op]) -> list[Op]:
        """Store ops minted elsewhere (sync); already-stored ids are skipped. Each newly
        stored op is folded. Returns the newly stored ones, with their local `seq`.
        An op whose id does not match its content, whose clock is not a clock, or whose
        clock is too far ahead (`hlc.too_far_ahead`) raises `ValidationError` (and the
        caller's transaction rolls back; `nixx.sync.engine` leaves such ops out first)."""
        new = []
        ceiling = hlc.ceiling()
        for op in ops:
            if not op.verify():
                raise ValidationError(
                    f"operation {op.id!r} from {op.origin!r} is malformed (bad clock, or an id "
                    "that does not match its content): nothing of this batch was stored"
                )
            if op.clock > ceiling:
                raise ValidationError(
                    f"operation {op.id!r} from {op.origin!r} has a clock {op.clock} more than "
                    f"{hlc.MAX_AHEAD_MS // 60000} minutes ahead of this machine's: nothing of "
                    "this batch was stored"
                )
            if self._store_and_fold(op):
                new.append(op)
        if new and self._last_clock is not None:
            top = max(op.clock for op in new)
            if top > self._last_clock:
                self._last_clock = top
        return new

    def _store_and_fold(self, op: Op) -> bool:
        self.conn.execute(
            "INSERT OR IGNORE INTO ops(id, domain, kind, target, origin, clock, actor, payload,"
            " created, local) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (op.id, op.domain, op.kind, op.target, op.origin, op.clock, op.actor,
             op.payload_json(), op.created, int(op.local)),
        )
        if self.conn.changes() != 1:
            return False
        op.seq = self.conn.last_insert_rowid()
        self.inserted.append(op)
        reducer = self.store.registry.get(op.domain)
        if reducer is not None:
            self.store._fold_one(reducer, op)
        return True

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None


class _Transaction:
    """The context manager `LogStore.transaction` returns (a class rather than
    `contextlib.contextmanager`: importing contextlib costs every CLI start ~0.5 ms):
    the `.lock` flock, then `nixx.sqlite_tx.immediate` with the log's error mapping."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.fd: int | None = None
        self.tx = immediate(store.conn, error=self._error)

    def _error(self, exc: apsw.Error, phase: str) -> StoreError:
        return write_error(self.store.path, exc)  # a write SQLite refused: one error kind

    def __enter__(self) -> Txn:
        import fcntl

        store = self.store
        if not store.conn.in_transaction:  # the outermost writer queues on the flock
            self.fd = store._writer_lock()
            if self.fd is not None:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            self.tx.__enter__()
        except BaseException:
            self._unlock()
            raise
        return Txn(store)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        try:
            self.tx.__exit__(exc_type, exc, tb)
        finally:
            self._unlock()

    def _unlock(self) -> None:
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.fd = None


def write_error(path: str, exc: apsw.Error) -> StoreError:
    """The `store` error for a write SQLite refused, saying what to do."""
    if isinstance(exc, (apsw.ReadOnlyError, apsw.PermissionsError, apsw.CantOpenError)):
        return StoreError(
            f"the workspace log {path} is read-only ({exc}): make it and its folder "
            "writable, or point --db / NXC_DB at a log you may write"
        )
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return StoreError(
            f"the workspace log {path} stayed locked for "
            f"{connection.BUSY_TIMEOUT_S:.0f}s: {exc}"
        )
    if isinstance(exc, apsw.FullError):
        return StoreError(f"the disk holding the workspace log {path} is full: {exc}")
    return StoreError(f"could not write to the workspace log {path}: {exc}")


class LogStore:
    """An open workspace log. Build with `LogStore.open(path, reducers)`."""

    def __init__(self, path: str, conn: apsw.Connection, registry: ReducerRegistry) -> None:
        self.path = path
        self.conn = conn
        self.registry = registry
        meta: dict[str, str] = {r[0]: r[1] for r in conn.execute("SELECT key, value FROM meta")}
        if "replica" not in meta:
            raise SchemaError(f"{path} is not a workspace log (no replica in its meta table)")
        self.replica: str = meta["replica"]
        self._meta = meta
        self._lock_fd: int | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], reducers: Iterable[Reducer] = ()) -> LogStore:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise WorkspaceError(f"no workspace log at {path}; run `nxs init` to create one")
        conn = _connect(path)
        try:
            store = cls(path, conn, ReducerRegistry(list(reducers)))
        except apsw.Error as exc:
            conn.close()
            raise SchemaError(f"{path} is not a workspace log: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        try:
            _migrate(conn, path)  # one read when the log is current
        except BaseException:
            conn.close()
            raise
        store._ensure_views()
        return store

    def close(self) -> None:
        """Close (truncating an oversized WAL first: `nixx.log.connection.close`)."""
        connection.close(self.conn, self.path)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> LogStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------

    def _writer_lock(self) -> int | None:
        """An advisory `flock` beside the log that writers queue on. SQLite's own busy
        handler polls with growing sleeps (up to 100 ms), so under contention writers
        idle; a blocking flock hands over the moment the previous writer is done. The
        busy timeout still guards against writers that do not take the flock."""
        if self._lock_fd is None:
            try:
                self._lock_fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                return None
        return self._lock_fd

    def transaction(self) -> _Transaction:
        """`with store.transaction() as txn:` — `BEGIN IMMEDIATE` … `COMMIT` (rolled back
        on any exception), writers queued on the `.lock` flock (`_writer_lock`)."""
        return _Transaction(self)

    def append(
        self, domain: str, kind: str, target: str, actor: str, payload: dict[str, Any],
        *, local: bool = False,
    ) -> Op:
        with self.transaction() as txn:
            return txn.append(domain, kind, target, actor, payload, local=local)

    def insert(self, ops: Iterable[Op]) -> list[Op]:
        with self.transaction() as txn:
            return txn.insert(ops)

    # -- reading ----------------------------------------------------------------------

    def ops_since(self, seq: int, limit: int = 1000, *, include_local: bool = False) -> list[Op]:
        """Ops with `seq` greater than the watermark, in seq order (the sync read)."""
        where = "" if include_local else " AND local = 0"
        rows = self.conn.execute(
            f"SELECT {OP_COLUMNS} FROM ops WHERE seq > ?{where} ORDER BY seq LIMIT ?",
            (seq, limit),
        ).fetchall()
        return [row_to_op(r) for r in rows]

    def ops(
        self, *, domain: str | None = None, after: int = 0, limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Op]:
        sql = f"SELECT {OP_COLUMNS} FROM ops WHERE seq > ?"
        params: list[Any] = [after]
        if domain is not None:
            sql += " AND domain = ?"
            params.append(domain)
        sql += " ORDER BY seq DESC" if newest_first else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [row_to_op(r) for r in self.conn.execute(sql, params).fetchall()]

    def get_op(self, op_id: str) -> Op | None:
        row = self.conn.execute(f"SELECT {OP_COLUMNS} FROM ops WHERE id = ?", (op_id,)).fetchone()
        return row_to_op(row) if row else None

    def count(self, domain: str | None = None) -> int:
        if domain is None:
            row = self.conn.execute("SELECT count(*) FROM ops").fetchone()
        else:
            row = self.conn.execute("SELECT count(*) FROM ops WHERE domain = ?", (domain,)).fetchone()
        return int(row[0]) if row else 0

    def max_seq(self) -> int:
        row = self.conn.execute("SELECT coalesce(max(seq), 0) FROM ops").fetchone()
        return int(row[0]) if row else 0

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def data_version(self) -> int:
        row = self.conn.execute("PRAGMA data_version").fetchone()
        return int(row[0]) if row else 0

    # -- folding ----------------------------------------------------------------------

    def _fold_one(self, reducer: Reducer, op: Op) -> bool:
        """Fold one op. A reducer bug (any exception but SQLite's own) rolls back that op's
        view writes and leaves it unfolded; a SQLite error (disk full, I/O) propagates and
        aborts the whole transaction, so the log and its views never disagree.
        An op whose clock is too far ahead (`hlc.too_far_ahead`: stored before clocks were
        bounded) is left unfolded, so `refold` recovers a log such an op poisoned."""
        if hlc.too_far_ahead(op.clock):
            return False
        try:
            with immediate(self.conn):  # inside the write: a savepoint
                return bool(reducer.fold(self.conn, op))
        except apsw.Error:
            raise
        except Exception:
            return False

    def _ensure_views(self) -> None:
        stale = [
            r for r in self.registry
            if self._meta.get(f"views:{r.domain}") != str(r.version)
        ]
        if stale:
            with self.transaction() as txn:
                for reducer in stale:
                    # another process may have rebuilt them while we waited for the lock
                    if txn.get_meta(f"views:{reducer.domain}") != str(reducer.version):
                        self._rebuild(txn, reducer)

    def _rebuild(self, txn: Txn, reducer: Reducer) -> int:
        reducer.drop_views(self.conn)
        reducer.create_views(self.conn)
        folded = 0
        last = 0
        while True:  # batches, so no read cursor stays open across the folds' writes
            rows: list[Any] = self.conn.execute(
                f"SELECT {OP_COLUMNS} FROM ops WHERE domain = ? AND seq > ? ORDER BY seq"
                " LIMIT 5000",
                (reducer.domain, last),
            ).fetchall()
            if not rows:
                break
            last = rows[-1][0]
            for row in rows:
                folded += self._fold_one(reducer, row_to_op(row))
        txn.set_meta(f"views:{reducer.domain}", str(reducer.version))
        return folded

    def refold(self, domains: Iterable[str] | None = None) -> dict[str, int]:
        """Drop and rebuild the views of `domains` (default: every registered one) from the
        whole log, in one transaction. Returns the number of ops folded per domain."""
        wanted = set(domains) if domains is not None else set(self.registry.domains())
        out = {}
        with self.transaction() as txn:
            for reducer in self.registry:
                if reducer.domain in wanted:
                    out[reducer.domain] = self._rebuild(txn, reducer)
        return out
