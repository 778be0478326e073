"""One sync pass, on both transports: what travels, what stays, dedupe, watermarks."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from nixx.errors import Conflict, NotFound, SyncError, ValidationError
from nixx.log.op import Op
from nixx.nxc.reducer import snapshot
from nixx.sync import state
from nixx.sync.engine import MAX_OP_BYTES, run_pass, sync_lock
from nixx.sync.transport import encode_op, open_transport, source_id

from .conftest import bind, open_store, sync, workspace


def post(store, n: int, actor: str = "aaaa/ann", thread: str = "t-1") -> list[Op]:
    ops = [store.append("message", "thread_open", thread, actor,
                        {"channel": "decl:team", "parent": None, "expects": [], "deadline": None})]
    for i in range(n):
        ops.append(store.append("message", "post", f"m-{thread}-{i}", actor,
                                {"thread": thread, "channel": "decl:team", "body": f"hello {i}"}))
    return ops


def wire_ids(store) -> set[str]:
    return {op.id for op in store.ops() if not op.local}


def test_a_message_travels_and_the_views_agree(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        post(store, 5)
    ra = sync(a)
    assert (ra.pushed, ra.pulled, ra.unpushed) == (6, 0, 0)
    rb = sync(b)
    assert (rb.pushed, rb.pulled, rb.stored) == (0, 6, 6)
    with open_store(a) as sa, open_store(b) as sb:
        assert wire_ids(sa) == wire_ids(sb)
        assert snapshot(sa.conn) == snapshot(sb.conn)
        assert sb.conn.execute("SELECT count(*) FROM nxc_messages").fetchone()[0] == 5


def test_pulled_ops_are_not_pushed_back_and_a_second_pass_is_a_no_op(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        post(store, 3)
    sync(a)
    sync(b)
    again = sync(b)
    assert (again.pushed, again.pulled, again.stored) == (0, 0, 0)
    with open_store(b) as sb:
        assert state.unpushed_count(sb) == 0
        assert state.pushed_seq(sb) == sb.max_seq()  # stepped over the pulled ops
    assert (sync(a).pulled, sync(a).stored) == (0, 0)


def test_device_local_ops_never_travel(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        store.append("session", "started", "s-1", "aaaa/ann", {"pid": 1}, local=True)
        post(store, 1)
        store.append("session", "ended", "s-1", "aaaa/ann", {"code": 0}, local=True)
        assert state.unpushed_count(store) == 2
    assert sync(a).pushed == 2
    sync(b)
    with open_store(b) as sb:
        assert sb.count("session") == 0
        assert sb.count() == 2


def test_ops_of_domains_nobody_folds_here_travel_and_stay_unfolded(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        flow = store.append("flow", "item_create", "ab12.1", "aaaa/ann", {"title": "x"})
    sync(a)
    sync(b)
    with open_store(b) as sb:
        got = sb.get_op(flow.id)
        assert got is not None and got.payload == {"title": "x"}
    # and B relays them onward: a third workspace that binds late gets them too
    c = remote.workspace("c", "cccc")
    sync(c)
    with open_store(c) as sc:
        assert sc.get_op(flow.id) is not None


def test_three_workspaces_exchange_in_any_order(remote):
    wss = [remote.workspace(n, r) for n, r in (("a", "aaaa"), ("b", "bbbb"), ("c", "cccc"))]
    for i, ws in enumerate(wss):
        with open_store(ws) as store:
            post(store, 2, actor=f"{store.replica}/u", thread=f"t-{i}")
    for ws in (wss[2], wss[0], wss[1], wss[2], wss[0]):
        sync(ws)
    stores = [open_store(ws) for ws in wss]
    try:
        assert wire_ids(stores[0]) == wire_ids(stores[1]) == wire_ids(stores[2])
        assert len(wire_ids(stores[0])) == 9
        assert snapshot(stores[0].conn) == snapshot(stores[1].conn) == snapshot(stores[2].conn)
    finally:
        for s in stores:
            s.close()


def test_partial_passes_and_small_batches_lose_nothing(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        post(store, 49)
    first = sync(a, batch_size=7, batches_per_push=2, max_push=20)
    assert first.pushed == 20 and first.more and first.unpushed == 30
    part = sync(b, pull_batch=5, max_pull=5)
    assert part.more
    assert sync(a, batch_size=7, batches_per_push=2).unpushed == 0
    sync(b, pull_batch=9)
    with open_store(a) as sa, open_store(b) as sb:
        assert wire_ids(sa) == wire_ids(sb)


def test_a_batch_pushed_twice_is_stored_once_on_the_remote(remote):
    """The crash window: the remote got the batch, the watermark did not move."""
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        ops = post(store, 4)
        bound = state.binding(store)
        with open_transport(bound.transport, remote=bound.remote, stream=bound.stream,
                            replica=store.replica, state_dir=a.state_dir,
                            source=source_id(store)) as transport:
            transport.push([ops[:3], ops[3:]])  # a crash would happen here
    assert sync(a).pushed == 5  # re-pushed: the watermark never moved
    with open_store(b) as sb:
        bound = state.binding(sb)
        with open_transport(bound.transport, remote=bound.remote, stream=bound.stream,
                            replica=sb.replica, state_dir=b.state_dir) as transport:
            got = transport.pull(None, 1000, MAX_OP_BYTES)
    assert sorted(op.id for op in got.ops) == sorted(op.id for op in ops)  # once each


def test_invalid_entries_on_the_remote_are_rejected_and_the_rest_arrives(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        good = post(store, 1)
        # an id that does not match the content
        forged = Op.from_wire({**good[1].to_wire(), "id": "o" + "0" * 32})
        # a consistent id, but over a clock that is not a clock (poison for the HLC)
        bad_clock = Op.make(domain="message", kind="post", target="m-x", origin="zzzz",
                            clock="not-a-clock", actor="zzzz/x", payload={}, created=0)
    bad_json = "{not json"
    if remote.kind == "git":
        from nixx.sync.git_transport import GitTransport

        t = GitTransport(remote=remote.url, stream=remote.stream, replica="zzzz",
                         state_dir=str(remote.tmp))
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], env=t._env,
                              input=(encode_op(forged) + "\n" + bad_json + "\n" + encode_op(bad_clock)
                                     + "\n").encode(),
                              capture_output=True, check=True).stdout.decode().strip()
        tree = t._out("mktree", input=f"100644 blob {blob}\tsegment.jsonl\n".encode())
        commit = t._out("commit-tree", tree, "-m", f"nxs segment {blob} ops=3")
        t._run("push", "-q", remote.url, f"{commit}:refs/nxs/{remote.stream}/zzzz")
    else:
        import psycopg

        with psycopg.connect(remote.url) as conn:
            sync(a)  # creates the tables
            conn.execute("INSERT INTO nxs_sync_streams(stream) VALUES (%s) ON CONFLICT DO NOTHING",
                         (remote.stream,))
            for body, op_id in ((encode_op(forged), forged.id), (bad_json, "x"),
                                (encode_op(bad_clock), bad_clock.id)):
                conn.execute(
                    "UPDATE nxs_sync_streams SET last_seq = last_seq + 1 WHERE stream = %s",
                    (remote.stream,))
                conn.execute(
                    "INSERT INTO nxs_sync_ops(stream, seq, id, origin, pusher, op) SELECT %s,"
                    " last_seq, %s, 'zzzz', 'zzzz', %s FROM nxs_sync_streams WHERE stream = %s",
                    (remote.stream, op_id, body, remote.stream))
    sync(a)
    result = sync(b)
    assert result.rejected == 3
    with open_store(b) as sb:
        assert wire_ids(sb) == {op.id for op in good}


def test_rebind_resets_the_watermarks_and_repushes_everything(remote, tmp_path):
    a = remote.workspace("a", "aaaa")
    with open_store(a) as store:
        post(store, 2)
    sync(a)
    other = tmp_path / "other.git"
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    with pytest.raises(Conflict, match="--rebind"):
        bind(a, remote=str(other), create=True)
    same = bind(a, remote=remote.url, join=remote.stream)  # idempotent: nothing changes
    assert same.stream == remote.stream
    with open_store(a) as store:
        assert state.pushed_seq(store) > 0
    bind(a, remote=str(other), create=True, rebind=True)
    with open_store(a) as store:
        assert state.pushed_seq(store) == 0 and state.pulled_cursor(store) is None
        assert state.unpushed_count(store) == 3
    assert sync(a).pushed == 3


def test_an_unbound_workspace_is_told_to_bind(tmp_path):
    ws = workspace(tmp_path / "w", "aaaa")
    with pytest.raises(NotFound, match="nxs sync bind"):
        sync(ws)


def test_bind_without_origin_or_flags_is_a_loud_error(tmp_path):
    ws = workspace(tmp_path / "w", "aaaa")
    with pytest.raises(ValidationError, match="no git `origin` remote"):
        bind(ws)
    with pytest.raises(ValidationError, match="--create"):
        bind(ws, remote="postgresql://u@127.0.0.1:1/x")
    with pytest.raises(ValidationError, match="exclude"):
        bind(ws, remote="/x.git", create=True, join="stream-" + "a" * 24)


def test_an_unreachable_remote_is_a_sync_error_and_recorded(tmp_path):
    ws = workspace(tmp_path / "w", "aaaa")
    bind(ws, remote=str(tmp_path / "missing.git"), create=True)
    with pytest.raises(SyncError, match="missing.git"):
        sync(ws)
    with open_store(ws) as store:
        last = state.last_pass(store)
    assert last["ok"] is False and "missing.git" in last["error"]


@pytest.mark.postgres
def test_an_unreachable_postgres_is_a_sync_error_without_the_password(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = workspace(tmp_path / "w", "aaaa")
    bind(ws, remote=f"postgresql://u:s3cret@127.0.0.1:{port}/x", create=True)
    with pytest.raises(SyncError) as err:
        sync(ws)
    assert "s3cret" not in str(err.value) and "u:***@" in str(err.value)


def test_one_pass_at_a_time_per_workspace(remote):
    a = remote.workspace("a", "aaaa")
    with sync_lock(a.state_dir), pytest.raises(Conflict, match="another sync pass"):
        sync(a)
    sync(a)


def test_git_push_recovers_when_the_local_ref_lost_track_of_the_remote(tmp_path):
    """A deleted .nxs/sync.git (or a restored workspace): the first push is
    non-fast-forward on our own ref; it adopts the remote chain and goes on."""
    import shutil

    from .conftest import Remote

    remote = Remote("git", tmp_path)
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        post(store, 2)
    sync(a)
    shutil.rmtree(os.path.join(a.state_dir, "sync.git"))
    with open_store(a) as store:
        post(store, 2, thread="t-2")
    assert sync(a).pushed == 3
    sync(b)
    with open_store(a) as sa, open_store(b) as sb:
        assert wire_ids(sa) == wire_ids(sb)
    log = subprocess.run(["git", "--git-dir", remote.url, "log", "--format=%s",
                          f"refs/nxs/{remote.stream}/aaaa"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(log) == 2 and all(line.startswith("nxs segment ") for line in log)


def test_git_layout_one_ref_per_origin_with_segment_commits(tmp_path):
    from .conftest import Remote

    remote = Remote("git", tmp_path)
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    for ws in (a, b):
        with open_store(ws) as store:
            post(store, 2, actor=f"{store.replica}/u", thread=f"t-{store.replica}")
        sync(ws, batch_size=2)
    refs = subprocess.run(["git", "--git-dir", remote.url, "for-each-ref", "--format=%(refname)"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert sorted(refs) == [f"refs/nxs/{remote.stream}/aaaa", f"refs/nxs/{remote.stream}/bbbb"]
    seg = subprocess.run(["git", "--git-dir", remote.url, "show",
                          f"refs/nxs/{remote.stream}/aaaa:segment.jsonl"],
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in seg.splitlines()]
    assert len(lines) == 1 and lines[0]["origin"] == "aaaa" and "seq" not in lines[0]
    count = subprocess.run(["git", "--git-dir", remote.url, "rev-list", "--count",
                            f"refs/nxs/{remote.stream}/aaaa"], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert count == "2"  # 3 ops in batches of 2


def test_run_pass_with_a_binding_given_directly(remote):
    a = remote.workspace("a", "aaaa")
    with open_store(a) as store:
        post(store, 1)
        bound = state.binding(store)
        with open_transport(bound.transport, remote=bound.remote, stream=bound.stream,
                            replica=store.replica, state_dir=a.state_dir,
                            source=source_id(store)) as transport:
            result = run_pass(store, transport, bound, pull=False)
    assert result.pushed == 2 and result.pulled == 0


def test_a_workspace_restored_from_a_backup_still_pushes_its_new_ops(remote, tmp_path):
    """The restored log reuses local seqs for new ops; they must not be taken for the
    ops pushed after the backup."""
    import shutil

    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as store:
        post(store, 2)
    sync(a)
    backup = tmp_path / "backup"
    shutil.copytree(a.state_dir, backup)  # the whole .nxs folder: log and sync.git
    with open_store(a) as store:
        post(store, 3, thread="t-lost")
    sync(a)
    shutil.rmtree(a.state_dir)
    shutil.copytree(backup, a.state_dir)
    with open_store(a) as store:
        fresh = post(store, 3, thread="t-new")  # same seqs as t-lost's ops, new ids
    assert sync(a).pushed == 4
    sync(b)
    with open_store(b) as sb:
        assert all(sb.get_op(op.id) is not None for op in fresh)
        assert sb.conn.execute("SELECT count(*) FROM nxc_messages").fetchone()[0] == 2 + 3 + 3
    # what A pushed after the backup comes back with a rebind: the first pass after it
    # reads back this workspace's own pushes too
    with open_store(a) as store:
        assert store.conn.execute("SELECT count(*) FROM nxc_messages").fetchone()[0] == 2 + 3
    bind(a, remote=remote.url, join=remote.stream, rebind=True)
    first = sync(a)
    assert first.stored == 4  # t-lost's open and three posts
    with open_store(a) as sa, open_store(b) as sb:
        assert wire_ids(sa) == wire_ids(sb)
    again = sync(a)  # and from now on its own pushes are not read back
    assert (again.pulled, again.stored) == (0, 0)
