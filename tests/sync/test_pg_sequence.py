"""The PostgreSQL transport's sequence under concurrent pushers: gap-free, and a reader
that follows the cursor while pushes commit never skips a row."""

from __future__ import annotations

import threading

import pytest

from nixx.log.op import Op
from nixx.sync.engine import MAX_OP_BYTES
from nixx.sync.pg_transport import PgTransport

pytestmark = pytest.mark.postgres

STREAM = "stream-" + "c" * 24


def ops_of(replica: str, n: int) -> list[Op]:
    return [Op.make(domain="message", kind="post", target=f"m-{replica}-{i}", origin=replica,
                    clock=f"{i:012x}0000", actor=f"{replica}/x", payload={"body": str(i)},
                    created=i) for i in range(n)]


def test_concurrent_pushers_and_a_following_reader(pg_url, tmp_path):
    pushers = {r: ops_of(r, 300) for r in ("p1p1", "p2p2", "p3p3", "p4p4")}
    everything = {op.id for ops in pushers.values() for op in ops}
    errors: list[BaseException] = []
    done = threading.Event()

    def push(replica: str, ops: list[Op]) -> None:
        try:
            with PgTransport(remote=pg_url, stream=STREAM, replica=replica,
                             state_dir=str(tmp_path)) as t:
                for i in range(0, len(ops), 10):
                    batch = ops[i:i + 10]
                    t.push([batch[:5], batch[5:]])
                    if i % 50 == 0:
                        t.push([batch])  # a repeated batch adds nothing
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    seen: list[str] = []

    def read() -> None:
        try:
            with PgTransport(remote=pg_url, stream=STREAM, replica="rdrr",
                             state_dir=str(tmp_path)) as t:
                cursor = None
                while True:
                    finished = done.is_set()
                    got = t.pull(cursor, 7, MAX_OP_BYTES)
                    seen.extend(op.id for op in got.ops)
                    cursor = got.cursor
                    if finished and not got.more and not got.ops:
                        return
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=push, args=item) for item in pushers.items()]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    done.set()
    reader.join(timeout=120)
    assert not errors, errors
    assert len(seen) == len(set(seen)) == len(everything)  # nothing skipped, nothing twice
    assert set(seen) == everything

    import psycopg

    with psycopg.connect(pg_url) as conn:
        seqs = [r[0] for r in conn.execute(
            "SELECT seq FROM nxs_sync_ops WHERE stream = %s ORDER BY seq", (STREAM,))]
        last = conn.execute("SELECT last_seq FROM nxs_sync_streams WHERE stream = %s",
                            (STREAM,)).fetchone()[0]
    assert seqs == list(range(1, len(everything) + 1)) and last == len(everything)  # gap-free


def test_a_rolled_back_push_leaves_no_gap(pg_url, tmp_path):
    import psycopg

    from nixx.errors import SyncError

    with PgTransport(remote=pg_url, stream=STREAM, replica="p1p1",
                     state_dir=str(tmp_path)) as t:
        t.push([ops_of("p1p1", 3)])
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a push failing mid-way
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN IF NEW.op LIKE"
                " '%m-bad%' THEN RAISE EXCEPTION 'refused by a trigger'; END IF;"
                " RETURN NEW; END $$ LANGUAGE plpgsql")
            conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON nxs_sync_ops"
                         " FOR EACH ROW EXECUTE FUNCTION refuse()")
        bad = Op.make(domain="message", kind="post", target="m-bad", origin="p2p2",
                      clock="0000000000ff0000", actor="p2p2/x", payload={}, created=0)
        with pytest.raises(SyncError, match="refused by a trigger"):
            t.push([ops_of("p2p2", 2) + [bad]])
        t.push([ops_of("p3p3", 2)])
    with PgTransport(remote=pg_url, stream=STREAM, replica="rdrr",
                     state_dir=str(tmp_path)) as reader:
        got = reader.pull(None, 100, MAX_OP_BYTES)
    assert got.cursor == "5" and len(got.ops) == 5  # p1p1's 3 and p3p3's 2; p2p2's none
    with psycopg.connect(pg_url) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM nxs_sync_ops ORDER BY seq")]
    assert seqs == [1, 2, 3, 4, 5]
