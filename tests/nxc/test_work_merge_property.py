"""The merge rules of claims and leases (`nixx.nxc.work`), with clocks the test chooses:
three clones write claims, releases, dones, leases and releases of leases at chosen
hybrid clocks (so races, expiries and releases land on both sides of each other), every
clone receives all of it in its own order — partial batches, duplicates — and then:

- every clone shows the same tasks, holders, lost claims, active and lost leases, read at
  any instant, and a re-fold shows the same;
- a claim race goes to the least position (clock, clone, op id): the first claim of a task
  with no dependencies is never the one that lost, and a task that waits on another is
  held only after that one was done;
- two exclusive leases of different handles over the same paths are never active at once
  (read at any instant not before they were taken); the least lease never loses, a lost
  lease names an earlier, overlapping, unshared lease of another handle; a release counts
  only from the lease's own clone.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nixx.log.clock import encode
from nixx.log.op import Op
from nixx.log.store import LogStore
from nixx.nxc.work import DOMAIN, lease_state, lost_claims, overlaps, tasks

from .clones import assert_alike, delivered_apart

REPLICAS = ("aaaa", "bbbb", "cccc")
HANDLES = {"aaaa": ("aaaa/ann", "aaaa/dee"), "bbbb": ("bbbb/bob",), "cccc": ("cccc/cy",)}
T1, T2, T3 = (f"k-{i:026d}-aaaa" for i in range(3))
PATHS = ("src/*.py", "src/app.py", "docs", "docs/x.md", "README")

claim_step = st.tuples(st.sampled_from(["task_claim", "task_release", "task_done"]),
                       st.sampled_from([T1, T2, T3]))
lease_step = st.tuples(st.just("lease"),
                       st.lists(st.sampled_from(PATHS), min_size=1, max_size=2, unique=True),
                       st.booleans(),  # shared
                       st.integers(1, 60))  # lasts, in ms of the chosen clock
release_step = st.tuples(st.just("lease_release"), st.integers(0, 30))  # which lease
event = st.tuples(st.integers(0, 2),  # the clone writing
                  st.integers(0, 1),  # which of its handles
                  st.integers(0, 60),  # its wall clock, ms past the start
                  st.integers(0, 2),  # the counter
                  st.one_of(claim_step, claim_step, lease_step, release_step))


def build(events: list) -> list[Op]:
    """The ops the events stand for, each at the clock its event chose."""
    ops = []
    for i, (origin, title, deps) in enumerate((("aaaa", "one", []), ("aaaa", "two", [T1]),
                                                ("aaaa", "three", []))):
        ops.append(Op.make(domain=DOMAIN, kind="task_add", target=(T1, T2, T3)[i], origin=origin,
                           clock=encode(1_000, i), actor="aaaa/ann", created=1_000,
                           payload={"title": title, "depends_on": deps, "thread": None}))
    leases: list[str] = []
    for n, (r, who, wall, counter, step) in enumerate(events):
        origin = REPLICAS[r]
        actor = HANDLES[origin][who % len(HANDLES[origin])]
        clock, payload = encode(2_000 + wall, counter), {}
        if step[0] == "lease":
            _, paths, shared, lasts = step
            target = f"l-{n:026d}-{origin}"
            leases.append(target)
            payload = {"paths": paths, "thread": None, "until": 2_000 + wall + lasts,
                       "shared": shared}
        elif step[0] == "lease_release":
            if not leases:
                continue
            target = leases[step[1] % len(leases)]  # from any clone: only its own counts
        else:
            target = step[1]
        ops.append(Op.make(domain=DOMAIN, kind=step[0], target=target, origin=origin,
                           clock=clock, actor=actor, payload=payload, created=2_000 + wall))
    return ops


NOWS = (2_000, 2_030, 2_061, 2_090, 2_200)


def state(store: LogStore) -> tuple:
    found = tasks(store.conn)
    return (sorted((t.id, t.state, t.holder, t.holder_origin, repr(t.conflicts))
                   for t in found.values()),
            repr(lost_claims(found)),
            [repr(lease_state(store.conn, now)) for now in NOWS])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(event, max_size=25), st.lists(st.randoms(use_true_random=False), min_size=3,
                                             max_size=3),
       st.lists(st.integers(1, 8), min_size=3, max_size=3))
def test_every_delivery_order_settles_claims_and_leases_alike(events, orders, cuts):
    ops = build(events)
    with delivered_apart(ops, orders, cuts) as stores:
        assert_alike(stores, state)
        check_claims(stores[0], ops)
        check_leases(stores[0], ops)


def check_claims(store: LogStore, ops: list[Op]) -> None:
    found = tasks(store.conn)
    for task in (T1, T3):  # no dependencies: the least claim always wins
        claims = sorted((op for op in ops if op.kind == "task_claim" and op.target == task),
                        key=lambda op: op.pos)
        steps = [op for op in ops if op.kind in ("task_release", "task_done")
                 and op.target == task]
        if not claims:
            assert (found[task].state, found[task].holder) == ("open", None)
            continue
        first = (claims[0].actor, claims[0].origin)
        if not steps:
            assert (found[task].holder, found[task].holder_origin) == first
        if [(c.actor, c.origin) for c in claims].count(first) == 1:
            assert first not in [(c["by"], c["origin"]) for c in found[task].conflicts
                                 if c["kind"] == "claim"]
    if found[T2].state != "open":  # claimable only once T1 was done
        assert found[T1].state == "done"
    for t in found.values():
        assert (t.holder is None) == (t.state == "open")
        for c in lost_claims(found):
            assert (c["by"], c["origin"]) != (found[c["task"]].holder,
                                              found[c["task"]].holder_origin)


def check_leases(store: LogStore, ops: list[Op]) -> None:
    lease_ops = {op.target: op for op in sorted(ops, key=lambda op: op.pos, reverse=True)
                 if op.kind == "lease"}  # the least pos of each id
    released = {op.target for op in ops if op.kind == "lease_release"
                and op.origin == op.target.rsplit("-", 1)[1]}
    latest = max((int(op.clock[:12], 16) for op in lease_ops.values()), default=0)
    for now in NOWS:
        live, lost = lease_state(store.conn, now)
        ids = [x["id"] for x in live + lost]
        assert len(ids) == len(set(ids))  # active or lost, never both
        for x in live + lost:
            assert x["id"] not in released and x["until"] > now
        if now >= latest:
            for i, a in enumerate(live):
                for b in live[i + 1:]:
                    assert not (a["holder"] != b["holder"] and not (a["shared"] and b["shared"])
                                and overlaps(a, b)), (a, b)
        by_id = {x["id"]: x for x in live}
        for x in lost:
            winner = lease_ops[x["lost_to"]]
            assert winner.pos < lease_ops[x["id"]].pos and winner.actor != x["holder"]
            assert not (winner.payload["shared"] and x["shared"])
            assert overlaps({"paths": winner.payload["paths"]}, x)
            assert x["lost_to"] in by_id or x["lost_to"] in released or \
                winner.payload["until"] <= now
    if lease_ops:  # the least lease of all never loses
        least = min(lease_ops.values(), key=lambda op: op.pos)
        _, lost = lease_state(store.conn, 0)
        assert least.target not in [x["id"] for x in lost]
    kept = store.conn.execute("SELECT count(*) FROM work_ops WHERE kind = 'lease_release' "
                              "AND origin != substr(target, -4)").fetchone()[0]
    assert kept == 0  # a release from another clone is refused by the fold
