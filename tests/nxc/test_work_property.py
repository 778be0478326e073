"""Tasks and leases converge: replicas that write claims, releases, dones and leases while
apart, then exchange them in any order (duplicated, partial first), end with the same task
states, holders, refused claims and active leases; a claim is never held by two handles;
a lease's release counts only from its own replica (`nixx.nxc.work`)."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nixx.log.ids import new_thing_id
from nixx.log.op import Op
from nixx.log.store import LogStore
from nixx.log.workspace import init_workspace
from nixx.nxc.work import DOMAIN, WorkReducer, leases, tasks

REPLICAS = ("aaaa", "bbbb", "cccc")
HANDLES = {"aaaa": ("aaaa/ann", "aaaa/dee"), "bbbb": ("bbbb/bob",), "cccc": ("cccc/cy",)}
T1, T2, T3 = (new_thing_id("k", "aaaa", 1_000 + i) for i in range(3))
L1, L2 = new_thing_id("l", "bbbb", 2_000), new_thing_id("l", "cccc", 2_001)
NOW = 10_000

add_ops = [("aaaa", "task_add", T1, {"title": "one", "depends_on": [], "thread": None}),
           ("aaaa", "task_add", T2, {"title": "two", "depends_on": [T1], "thread": None}),
           ("aaaa", "task_add", T3, {"title": "three", "depends_on": [], "thread": "t-x"})]
lease_ops = [("bbbb", "lease", L1, {"paths": ["src/*.py"], "thread": None, "until": 20_000,
                                    "shared": False}),
             ("cccc", "lease", L2, {"paths": ["docs"], "thread": None, "until": 5_000,
                                    "shared": True})]

step = st.tuples(
    st.sampled_from(REPLICAS),
    st.integers(0, 1),
    st.sampled_from(["task_claim", "task_release", "task_done", "lease_release"]),
    st.sampled_from([T1, T2, T3, L1, L2]),
)
script = st.lists(st.tuples(st.sampled_from(["write", "deliver"]), step,
                            st.lists(st.integers(0, 50), max_size=6)), max_size=30)


def state(store: LogStore) -> tuple:
    found = tasks(store.conn)
    return (
        sorted((t.id, t.state, t.holder, t.holder_origin, repr(t.conflicts))
               for t in found.values()),
        [x["id"] for x in leases(store.conn, NOW)],
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script, st.randoms(use_true_random=False))
def test_replicas_agree_on_holders_and_leases_whatever_the_delivery(actions, rnd):
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for i, replica in enumerate(REPLICAS):
            ws, _ = init_workspace(f"{tmp}/{i}", replica=replica)
            stores[replica] = LogStore.open(ws.db_path, [WorkReducer()])
        try:
            for origin, kind, target, payload in add_ops + lease_ops:
                stores[origin].append(DOMAIN, kind, target, HANDLES[origin][0], payload)
            for what, (replica, who, kind, target), picks in actions:
                store = stores[replica]
                if what == "write":
                    handles = HANDLES[replica]
                    store.append(DOMAIN, kind, target, handles[who % len(handles)], {})
                else:  # a partial delivery from this replica to another, shuffled
                    pool = store.ops(after=0)
                    other = stores[REPLICAS[(REPLICAS.index(replica) + 1 + who) % 3]]
                    batch = [Op.from_wire(pool[p % len(pool)].to_wire()) for p in picks] if pool else []
                    rnd.shuffle(batch)
                    other.insert(batch)
            every = {op.id: op for s in stores.values() for op in s.ops(after=0)}
            for store in stores.values():
                batch = [Op.from_wire(op.to_wire()) for op in every.values()] * 2
                rnd.shuffle(batch)
                store.insert(batch)
            states = [state(s) for s in stores.values()]
            assert states[0] == states[1] == states[2]
            found = tasks(stores["aaaa"].conn)
            for t in found.values():
                assert (t.state == "open") == (t.holder is None) or t.state == "done"
                # a task that waits on another is held only after that one was done
                if t.id == T2 and t.state != "open":
                    assert found[T1].state == "done"
            # L1 (bbbb's) is released only by bbbb's own release; L2 has expired by NOW
            released_by_b = any(op.kind == "lease_release" and op.target == L1
                                and op.origin == "bbbb" for op in every.values())
            assert state(stores["cccc"])[1] == ([] if released_by_b else [L1])
            assert stores["aaaa"].conn.execute(
                "SELECT count(*) FROM work_ops WHERE kind = 'lease_release' AND origin != "
                "substr(target, -4)").fetchone()[0] == 0  # a foreign release is not kept
            stores["bbbb"].refold()
            assert state(stores["bbbb"]) == states[0]
        finally:
            for s in stores.values():
                s.close()


def test_two_claims_made_apart_the_least_pos_wins_and_the_other_is_told():
    with tempfile.TemporaryDirectory() as tmp:
        a = LogStore.open(init_workspace(f"{tmp}/a", replica="aaaa")[0].db_path, [WorkReducer()])
        b = LogStore.open(init_workspace(f"{tmp}/b", replica="bbbb")[0].db_path, [WorkReducer()])
        try:
            first = a.append(DOMAIN, "task_add", T1, "aaaa/ann", add_ops[0][3])
            b.insert([Op.from_wire(first.to_wire())])
            mine = a.append(DOMAIN, "task_claim", T1, "aaaa/ann", {})
            theirs = b.append(DOMAIN, "task_claim", T1, "bbbb/bob", {})
            a.insert([Op.from_wire(theirs.to_wire())])
            b.insert([Op.from_wire(mine.to_wire())])
            winner, loser = sorted([mine, theirs], key=lambda op: op.pos)
            for store in (a, b):
                t = tasks(store.conn)[T1]
                assert (t.state, t.holder) == ("claimed", winner.actor)
                assert [(c["by"], c["reason"]) for c in t.conflicts] == [
                    (loser.actor, f"{winner.actor} claimed it first")]
            # the loser's done counts for nothing on either clone; the holder's does
            stores = {"aaaa": a, "bbbb": b}
            forged = stores[loser.origin].append(DOMAIN, "task_done", T1, loser.actor, {})
            stores[winner.origin].insert([Op.from_wire(forged.to_wire())])
            for store in (a, b):
                assert tasks(store.conn)[T1].state == "claimed"
            done = stores[winner.origin].append(DOMAIN, "task_done", T1, winner.actor, {})
            stores[loser.origin].insert([Op.from_wire(done.to_wire())])
            for store in (a, b):
                assert tasks(store.conn)[T1].state == "done"
        finally:
            a.close()
            b.close()


def test_a_lease_expires_by_itself_at_read_time():
    with tempfile.TemporaryDirectory() as tmp:
        s = LogStore.open(init_workspace(f"{tmp}/a", replica="bbbb")[0].db_path, [WorkReducer()])
        try:
            s.append(DOMAIN, "lease", L1, "bbbb/bob", lease_ops[0][3])
            assert [x["id"] for x in leases(s.conn, 19_999)] == [L1]
            assert leases(s.conn, 20_000) == []
        finally:
            s.close()

