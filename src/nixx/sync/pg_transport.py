"""The PostgreSQL transport: for teams that already run a PostgreSQL server.

One pair of tables per deployment (a database, or a schema chosen with
``?options=-csearch_path%3Dmyschema`` in the URL), shared by every stream:

    nxs_sync_streams(stream PK, last_seq)           the per-stream sequence counter
    nxs_sync_ops(stream, seq, id, origin, pusher, op, pushed_at)
        PRIMARY KEY (stream, seq), UNIQUE (stream, id)
        op: the operation's canonical wire JSON; pusher: the replica that pushed it

**Gap-free sequence, no skipped rows.** A push locks its stream's counter row
(``SELECT ... FOR UPDATE``) for the whole transaction, numbers its new ops
``last_seq + 1 ...``, inserts them and moves the counter, then commits. The next pusher
on that stream waits for the lock, so sequence numbers are assigned in commit order and a
rolled-back push leaves no gap: a reader that has seen ``seq <= n`` can never later meet
a row with ``seq <= n`` committed late. The cursor is that ``n``.

**Deduplication.** Ops whose id the stream already holds are left out of the insert (the
``UNIQUE (stream, id)`` constraint backs this up), so a batch re-pushed after a crash
adds nothing. A pull leaves out the bodies of the rows this replica pushed itself, except
in the first catch-up after a (re)bind (the cursor reads ``<seq>+self`` meanwhile), so a
workspace restored from a backup gets back what it had pushed since.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from nixx.errors import SyncError
from nixx.log.op import Op
from nixx.sync.transport import (
    END_BYTES,
    Oversized,
    Pulled,
    Transport,
    decode_op,
    encode_op,
    oversized,
)

_SCHEMA = (
    "SELECT pg_advisory_xact_lock(hashtext('nxs_sync_schema'))",
    "CREATE TABLE IF NOT EXISTS nxs_sync_streams("
    " stream text PRIMARY KEY, last_seq bigint NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS nxs_sync_ops("
    " stream text NOT NULL, seq bigint NOT NULL, id text NOT NULL, origin text NOT NULL,"
    " pusher text NOT NULL, op text NOT NULL, pushed_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (stream, seq), UNIQUE (stream, id))",
)


_SELF = "+self"


def _redact(url: str) -> str:
    from nixx.sync.state import redact

    return redact(url)


class PgTransport(Transport):
    name = "postgres"

    def __init__(self, *, remote: str, stream: str, replica: str, state_dir: str,
                 source: str | None = None, connect_timeout: int = 10) -> None:
        import psycopg

        self.remote = remote
        self.stream = stream
        self.replica = replica
        self._psycopg = psycopg
        try:
            self.conn = psycopg.connect(remote, connect_timeout=connect_timeout,
                                        application_name="nxs-sync")
        except psycopg.Error as exc:
            raise SyncError(f"cannot reach the PostgreSQL sync remote {_redact(remote)}: "
                            f"{_redact(str(exc)).strip()}") from exc
        self._call(self._create_schema)

    def describe(self) -> str:
        return _redact(self.remote)

    def close(self) -> None:
        self.conn.close()

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._psycopg.Error as exc:
            with contextlib.suppress(self._psycopg.Error):
                self.conn.rollback()
            raise SyncError(f"PostgreSQL sync remote {_redact(self.remote)}: "
                            f"{str(exc).strip()}") from exc

    def _create_schema(self) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            for statement in _SCHEMA:
                cur.execute(statement)

    # -- push ------------------------------------------------------------------------

    def push(self, batches: Sequence[Sequence[Op]]) -> None:
        ops = [op for batch in batches for op in batch]
        if ops:
            self._call(self._push, ops)

    def _push(self, ops: list[Op]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute("INSERT INTO nxs_sync_streams(stream) VALUES (%s) ON CONFLICT DO NOTHING",
                        (self.stream,))
            row = cur.execute("SELECT last_seq FROM nxs_sync_streams WHERE stream = %s"
                              " FOR UPDATE", (self.stream,)).fetchone()
            assert row is not None
            last = int(row[0])
            ids = list({op.id for op in ops})
            there = {r[0] for r in cur.execute(
                "SELECT id FROM nxs_sync_ops WHERE stream = %s AND id = ANY(%s)",
                (self.stream, ids)).fetchall()}
            seq = last
            with cur.copy("COPY nxs_sync_ops(stream, seq, id, origin, pusher, op)"
                          " FROM STDIN") as copy:
                for op in ops:
                    if op.id in there:
                        continue
                    there.add(op.id)
                    seq += 1
                    copy.write_row((self.stream, seq, op.id, op.origin, self.replica,
                                    encode_op(op)))
            if seq != last:
                cur.execute("UPDATE nxs_sync_streams SET last_seq = %s WHERE stream = %s",
                            (seq, self.stream))

    # -- pull ------------------------------------------------------------------------

    def pull(self, cursor: str | None, limit: int, max_op_bytes: int) -> Pulled:
        pulled: Pulled = self._call(self._pull, cursor, limit, max_op_bytes)
        return pulled

    def _pull(self, cursor: str | None, limit: int, max_op_bytes: int) -> Pulled:
        # "<seq>+self": still in the first catch-up after a (re)bind, which reads back
        # what this replica pushed too (a workspace restored from a backup gets it back)
        read_self = cursor is None or cursor.endswith(_SELF)
        after = int(cursor.removesuffix(_SELF)) if cursor else 0
        with self.conn.transaction(), self.conn.cursor() as cur:
            # an op longer than the bound never leaves the server whole: its ends only
            rows = cur.execute(
                "SELECT seq, CASE WHEN (pusher = %s AND NOT %s) OR octet_length(op) > %s"
                " THEN NULL ELSE op END, pusher, octet_length(op),"
                " CASE WHEN octet_length(op) > %s THEN left(op, %s) END,"
                " CASE WHEN octet_length(op) > %s THEN right(op, %s) END"
                " FROM nxs_sync_ops WHERE stream = %s AND seq > %s ORDER BY seq LIMIT %s",
                (self.replica, read_self, max_op_bytes, max_op_bytes, END_BYTES,
                 max_op_bytes, END_BYTES, self.stream, after, limit)).fetchall()
        if not rows:
            return Pulled([], str(after), False)
        ops: list[Op] = []
        pushers: list[str] = []
        big: list[Oversized] = []
        rejected = 0
        for _seq, body, pusher, size, head, tail in rows:
            if head is not None and (pusher != self.replica or read_self):
                big.append(oversized(head.encode(), tail.encode(), int(size), str(pusher)))
                continue
            if body is None:
                continue
            op = decode_op(body, verify=False)
            if op is None:
                rejected += 1
            else:
                ops.append(op)
                pushers.append(str(pusher))
        more = len(rows) == limit
        suffix = _SELF if read_self and more else ""
        return Pulled(ops, f"{rows[-1][0]}{suffix}", more, rejected, pushers=pushers,
                      oversized=big)
