"""The workspace log: identity, idempotence, folding rules, watermarks, refold."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from nixx.errors import NoWorkspace, SchemaError, ValidationError, WorkspaceError
from nixx.log import clock as hlc
from nixx.log.op import Op
from nixx.log.reducer import Reducer
from nixx.log.store import LogStore, create_store
from nixx.log.watcher import DataVersionWatcher
from nixx.log.workspace import Workspace, find_workspace, init_workspace


class CountReducer(Reducer):
    """Folds domain `count`: kind `add` adds payload n to a per-target total (a
    commutative merge), anything else is refused; kind `boom` raises after writing."""

    domain = "count"
    version = 1

    def create_views(self, conn):
        conn.execute("CREATE TABLE count_totals(target TEXT PRIMARY KEY, total INTEGER NOT NULL)")

    def drop_views(self, conn):
        conn.execute("DROP TABLE IF EXISTS count_totals")

    def fold(self, conn, op):
        if op.kind == "boom":
            conn.execute("INSERT INTO count_totals VALUES ('boom', 1)")
            raise RuntimeError("a reducer bug")
        n = op.payload.get("n")
        if op.kind != "add" or type(n) is not int:
            return False
        conn.execute(
            "INSERT INTO count_totals VALUES (?, ?) ON CONFLICT(target) DO UPDATE"
            " SET total = total + excluded.total",
            (op.target, n),
        )
        return True


def totals(store):
    return dict(store.conn.execute("SELECT target, total FROM count_totals").fetchall())


@pytest.fixture
def store(tmp_path):
    ws, created = init_workspace(tmp_path, replica="ab12")
    assert created
    with LogStore.open(ws.db_path, [CountReducer()]) as s:
        yield s


def test_init_creates_the_log_at_the_git_top_level(tmp_path):
    (tmp_path / ".git").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    ws, created = init_workspace(deep)
    assert created and ws.root == str(tmp_path)
    assert (tmp_path / ".nxs" / "db.sqlite").is_file()
    assert (tmp_path / ".nxs" / ".gitignore").read_text().strip().endswith("*")
    again, created_again = init_workspace(deep)
    assert not created_again and again == ws
    assert find_workspace(deep, env={}) == ws


def test_init_without_git_uses_the_current_folder(tmp_path):
    ws, _ = init_workspace(tmp_path)
    assert ws.root == str(tmp_path)
    with LogStore.open(ws.db_path) as s:
        assert len(s.replica) == 4
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_init_keeps_the_replica_prefix(tmp_path):
    ws, _ = init_workspace(tmp_path, replica="zz99")
    init_workspace(tmp_path, replica="ab12")
    with LogStore.open(ws.db_path) as s:
        assert s.replica == "zz99"


def test_missing_workspace_names_nxs_init(tmp_path):
    with pytest.raises(NoWorkspace, match="nxs init"):
        find_workspace(tmp_path, env={})
    with pytest.raises(NoWorkspace, match="nxs init"):
        find_workspace(tmp_path, env={"NXC_DB": str(tmp_path / "nope.sqlite")})


def test_nxc_db_overrides_and_must_be_absolute(tmp_path):
    ws, _ = init_workspace(tmp_path / "one")
    other = tmp_path / "two"
    other.mkdir()
    assert find_workspace(other, env={"NXC_DB": ws.db_path}) == ws
    assert find_workspace(other, env={"NXC_DB": ""}, db=ws.db_path) == ws
    with pytest.raises(WorkspaceError, match="absolute"):
        find_workspace(other, env={"NXC_DB": "one/.nxs/db.sqlite"})
    with pytest.raises(NoWorkspace):  # an empty NXC_DB counts as unset
        find_workspace(other, env={"NXC_DB": ""})


def test_workspace_for_a_log_outside_nxs(tmp_path):
    assert Workspace.for_db(tmp_path / "x.sqlite").root == str(tmp_path)
    assert Workspace.for_db(tmp_path / ".nxs" / "db.sqlite").root == str(tmp_path)


def test_a_file_that_is_not_a_log_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(SchemaError):
        LogStore.open(path)


def test_append_mints_increasing_clocks_and_content_ids(store):
    ops = [store.append("count", "add", "x", "ab12/me", {"n": i}) for i in range(50)]
    clocks = [op.clock for op in ops]
    assert clocks == sorted(clocks) and len(set(clocks)) == 50
    assert all(op.origin == "ab12" and op.verify() for op in ops)
    assert [op.seq for op in ops] == list(range(1, 51))
    assert totals(store) == {"x": sum(range(50))}


def test_clock_follows_foreign_clocks(store):
    future = hlc.encode(hlc.now_ms() + 3_600_000, 7)
    foreign = Op.make(domain="count", kind="add", target="x", origin="zz99", clock=future,
                      actor="zz99/you", payload={"n": 1}, created=0)
    store.insert([foreign])
    mine = store.append("count", "add", "x", "ab12/me", {"n": 1})
    assert mine.clock > future


def test_clock_tick_rules():
    assert hlc.tick(None, 1000) == hlc.encode(1000, 0)
    assert hlc.tick(hlc.encode(1000, 0), 2000) == hlc.encode(2000, 0)
    assert hlc.tick(hlc.encode(5000, 3), 2000) == hlc.encode(5000, 4)
    assert hlc.tick(hlc.encode(5000, 0xFFFF), 2000) == hlc.encode(5001, 0)
    assert hlc.decode(hlc.encode(123, 45)) == (123, 45)


def test_reinserting_an_op_is_a_no_op(store):
    op = store.append("count", "add", "x", "ab12/me", {"n": 5})
    copy = Op.from_wire(op.to_wire())
    assert store.insert([copy, copy]) == []
    assert store.count() == 1 and totals(store) == {"x": 5}


def test_op_ids_verify_and_tampering_shows(store):
    op = store.append("count", "add", "x", "ab12/me", {"n": 5})
    wire = op.to_wire()
    wire["payload"] = {"n": 6}
    assert not Op.from_wire(wire).verify()
    with pytest.raises(ValueError):
        Op.from_wire({"id": "x"})


def test_unknown_domain_is_stored_not_folded_and_kept(store):
    op = store.append("flow", "create", "f-1", "ab12/me", {"title": "x"})
    assert store.get_op(op.id).payload == {"title": "x"}
    assert totals(store) == {}
    assert [o.id for o in store.ops(domain="flow")] == [op.id]


def test_bad_shape_is_kept_and_not_folded(store):
    bad = store.append("count", "add", "x", "ab12/me", {"n": "five"})
    store.append("count", "add", "x", "ab12/me", {"n": 2})
    assert totals(store) == {"x": 2}
    assert store.get_op(bad.id) is not None


def test_a_reducer_that_raises_is_rolled_back_to_its_savepoint(store):
    boom = store.append("count", "boom", "x", "ab12/me", {})
    store.append("count", "add", "y", "ab12/me", {"n": 1})
    assert totals(store) == {"y": 1}  # the row written before the raise is gone
    assert store.get_op(boom.id) is not None


def test_ops_since_is_the_watermark_read_and_skips_local_ops(store):
    for i in range(10):
        store.append("count", "add", "x", "ab12/me", {"n": i}, local=(i % 3 == 0))
    page = store.ops_since(0, limit=4)
    assert [o.seq for o in page] == [2, 3, 5, 6]
    rest = store.ops_since(page[-1].seq)
    assert [o.seq for o in rest] == [8, 9]
    assert len(store.ops_since(0, include_local=True)) == 10
    assert store.max_seq() == 10


def test_refold_rebuilds_identical_views(store):
    for i in range(30):
        store.append("count", "add", f"t{i % 4}", "ab12/me", {"n": i})
    before = totals(store)
    assert store.refold() == {"count": 30}
    assert totals(store) == before


def test_a_new_reducer_version_rebuilds_its_views_on_open(store, tmp_path):
    store.append("count", "add", "x", "ab12/me", {"n": 3})
    store.conn.execute("DELETE FROM count_totals")  # views damaged or outdated

    class V2(CountReducer):
        version = 2

    with LogStore.open(store.path, [V2()]) as again:
        assert totals(again) == {"x": 3}
        assert again.get_meta("views:count") == "2"


def test_a_reducer_registered_later_folds_what_was_stored_before(tmp_path):
    ws, _ = init_workspace(tmp_path)
    with LogStore.open(ws.db_path) as plain:
        plain.append("count", "add", "x", "me/me", {"n": 4})
    with LogStore.open(ws.db_path, [CountReducer()]) as s:
        assert totals(s) == {"x": 4}


def test_transaction_rolls_back_everything_on_error(store):
    with pytest.raises(RuntimeError), store.transaction() as txn:
        txn.append("count", "add", "x", "ab12/me", {"n": 1})
        raise RuntimeError("crash mid-write")
    assert store.count() == 0 and totals(store) == {}


def _flock_is_free(path: str) -> bool:
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock taken here
    return True


def test_a_failed_transaction_releases_the_writer_lock(store):
    with pytest.raises(RuntimeError), store.transaction() as txn:
        txn.append("count", "add", "x", "ab12/me", {"n": 1})
        assert not _flock_is_free(store.path + ".lock")  # held while the transaction runs
        raise RuntimeError("crash mid-write")
    assert _flock_is_free(store.path + ".lock")
    assert not store.conn.in_transaction
    store.append("count", "add", "x", "ab12/me", {"n": 2})  # the next writer goes through
    assert totals(store) == {"x": 2}


def test_a_log_locked_past_the_busy_timeout_is_a_store_error(store):
    import apsw

    from nixx.errors import StoreError

    holder = apsw.Connection(store.path)  # a writer that does not take the flock
    holder.execute("BEGIN IMMEDIATE")
    try:
        store.conn.set_busy_timeout(50)  # instead of the full 60 s
        with pytest.raises(StoreError, match="stayed locked"):
            store.append("count", "add", "x", "ab12/me", {"n": 1})
        assert _flock_is_free(store.path + ".lock")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.append("count", "add", "x", "ab12/me", {"n": 1})
    assert totals(store) == {"x": 1}


def test_watcher_sees_commits_from_other_connections(store):
    with DataVersionWatcher(store.path, poll_interval=0.01) as watcher:
        assert not watcher.changed()
        assert watcher.wait(0.05) is False

        def write():
            with LogStore.open(store.path) as other:
                other.append("count", "add", "x", "ab12/me", {"n": 1})

        t = threading.Thread(target=write)
        t.start()
        assert watcher.wait(30) is True
        t.join()
        assert not watcher.changed()


def test_create_store_is_idempotent(tmp_path):
    path = tmp_path / "db.sqlite"
    create_store(path, "aaaa")
    create_store(path, "bbbb")
    with LogStore.open(path) as s:
        assert s.replica == "aaaa"


def test_op_id_is_the_hash_of_the_canonical_json_of_the_identity_fields():
    import hashlib

    from nixx.log.op import canonical_json, compute_id

    fields = {"domain": "message", "kind": "post", "target": "m-1", "origin": "ab12",
              "clock": "0123456789abcdef", "actor": 'ab12/ünï "q"',
              "payload": {"b": [1, {"z": "é\n"}], "a": None}, "created": 123}
    body = canonical_json(fields)
    expected = "o" + hashlib.sha256(body.encode()).hexdigest()[:32]
    assert compute_id(**fields) == expected
    assert Op.make(**fields).id == expected


def test_malformed_foreign_ops_are_refused_and_nothing_of_the_batch_is_stored(store):
    good = Op.make(domain="count", kind="add", target="x", origin="zz99",
                   clock=hlc.encode(1000, 0), actor="zz99/you", payload={"n": 1}, created=0)
    forged = Op.from_wire({**good.to_wire(), "payload": {"n": 100}})
    bad_clock = Op.make(domain="count", kind="add", target="x", origin="zz99",
                        clock="not-a-clock", actor="zz99/you", payload={"n": 1}, created=0)
    for bad in (forged, bad_clock):
        with pytest.raises(ValidationError, match="malformed"):
            store.insert([good, bad])
        assert store.count() == 0 and totals(store) == {}
    assert store.insert([good]) == [good]
