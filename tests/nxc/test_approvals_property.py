"""The merge rule of approvals (`nixx.nxc.approvals`), with clocks the test chooses: asks
and decisions written on three clones — some at clocks before their ask (a forged or
skewed clock), some by the step's own subject — reach every clone in its own order, in
partial batches, with duplicates; every clone then shows the same approvals, a re-fold
shows the same, and the decision that counts is the first after the ask, in the log's
order, by a handle other than the subject; every other decision is listed, none lost."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nixx.log.clock import encode
from nixx.log.op import Op
from nixx.log.store import LogStore
from nixx.log.workspace import init_workspace
from nixx.nxc.approvals import approvals
from nixx.nxc.work import DOMAIN, WorkReducer

from .clones import assert_alike, delivered_apart

REPLICAS = ("aaaa", "bbbb", "cccc")
ACTORS = ("aaaa/ann", "bbbb/bob", "cccc/cy", "aaaa/coder")  # coder: the subject
ASKS = tuple(f"a-{i:026d}-aaaa" for i in range(2))

decision = st.tuples(st.integers(0, 2),  # the clone writing
                     st.integers(0, 3),  # the actor
                     st.integers(0, 80),  # its wall clock, ms past the start
                     st.integers(0, 2),  # the counter
                     st.sampled_from(ASKS),
                     st.sampled_from(["approved", "denied"]))


def build(ask_walls: list[int], decisions: list) -> list[Op]:
    ops = [Op.make(domain=DOMAIN, kind="approval_ask", target=aid, origin="aaaa",
                   clock=encode(1_000 + wall, 0), actor="aaaa/coder", created=1_000 + wall,
                   payload={"step": "start", "subject": "aaaa/coder", "thread": f"t-{i}",
                            "what": "start aaaa/coder"})
           for i, (aid, wall) in enumerate(zip(ASKS, ask_walls, strict=True))]
    for r, who, wall, counter, aid, verdict in decisions:
        ops.append(Op.make(domain=DOMAIN, kind="approval_decide", target=aid,
                           origin=REPLICAS[r], clock=encode(1_000 + wall, counter),
                           actor=ACTORS[who], created=1_000 + wall,
                           payload={"decision": verdict, "note": f"{who}-{wall}"}))
    return ops


def state(store: LogStore) -> list:
    return sorted(repr(a.as_json()) for a in approvals(store.conn).values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 60), min_size=2, max_size=2), st.lists(decision, max_size=12),
       st.lists(st.randoms(use_true_random=False), min_size=3, max_size=3),
       st.lists(st.integers(1, 6), min_size=3, max_size=3))
def test_every_delivery_order_decides_each_approval_alike(ask_walls, decisions, orders, cuts):
    ops = build(ask_walls, decisions)
    with delivered_apart(ops, orders, cuts) as stores:
        assert_alike(stores, state)
        found = approvals(stores[0].conn)
    for aid, ask in zip(ASKS, ops, strict=False):
        a = found[aid]
        after = sorted({op.id: op for op in ops if op.kind == "approval_decide"
                        and op.target == aid and op.pos > ask.pos}.values(),
                       key=lambda op: op.pos)  # the same op written twice is one op
        counted = [op for op in after if op.actor != "aaaa/coder"]
        if not counted:
            assert a.state == "pending" and a.decided_by is None
        else:
            first = counted[0]
            assert (a.state, a.decided_by, a.decided_origin, a.note) == (
                first.payload["decision"], first.actor, first.origin, first.payload["note"])
        # every decision after the ask but the one that counts is listed as a conflict
        assert len(a.conflicts) == len(after) - (1 if counted else 0)


def test_a_clone_cannot_slip_escape_sequences_into_what_a_person_reads(tmp_path):
    """`what` and `note` are printed in a person's terminal (`nxc approvals`, `nxc status`):
    an ask or a decision holding a control character is refused by the fold on every
    clone, and `nxc approve --note` with one is a validation error."""
    store = LogStore.open(init_workspace(tmp_path, replica="r0zz")[0].db_path, [WorkReducer()])
    try:
        whats = ("start aaaa/coder", "start aaaa/coder\x1b[2K\rapproved by you")
        ok, evil = (Op.make(domain=DOMAIN, kind="approval_ask", target=aid, origin="aaaa",
                            clock=encode(1_000, i), actor="aaaa/coder", created=1_000,
                            payload={"step": "start", "subject": "aaaa/coder", "thread": "t-1",
                                     "what": what})
                    for i, (aid, what) in enumerate(zip(ASKS, whats, strict=True)))
        bad_note = Op.make(domain=DOMAIN, kind="approval_decide", target=ASKS[0],
                           origin="bbbb", clock=encode(2_000, 0), actor="bbbb/bob",
                           created=2_000, payload={"decision": "approved", "note": "ok\x07"})
        store.insert([ok, evil, bad_note])
        found = approvals(store.conn)
        assert list(found) == [ASKS[0]] and found[ASKS[0]].state == "pending"
    finally:
        store.close()


def test_task_titles_and_leased_paths_are_printable_text_too(tmp_path):
    """Task titles and leased paths are printed the same way (`nxc task list`, `nxc
    leases`, the pre-commit hook): a forged op holding a control character is refused."""
    store = LogStore.open(init_workspace(tmp_path, replica="r0zz")[0].db_path, [WorkReducer()])
    try:
        def op(kind: str, target: str, payload: dict) -> Op:
            return Op.make(domain=DOMAIN, kind=kind, target=target, origin="aaaa",
                           clock=encode(1_000, 0), actor="aaaa/ann", created=1_000,
                           payload=payload)

        store.insert([
            op("task_add", "k-00000000000000000000000000-aaaa",
               {"title": "fix it\x1b]0;pwned\x07", "depends_on": [], "thread": None}),
            op("lease", "l-00000000000000000000000000-aaaa",
               {"paths": ["src/\x1b[31mx"], "thread": None, "until": 9_999_999_999_999,
                "shared": False}),
        ])
        kinds = [k for (k,) in store.conn.execute("SELECT kind FROM work_ops")]
        assert kinds == []
    finally:
        store.close()
