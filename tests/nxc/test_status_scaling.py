"""`nxc status` stays one query per view as work piles up: the number of SQL statements it
runs (counted by apsw's exec tracer on the real log and device-local store) does not grow
with the number of threads; and the human view shows what is live."""

from __future__ import annotations

import os

from nixx.nxc.delivery import outcomes, sessions
from nixx.nxc.delivery.dispatch import LiveDelivery
from nixx.nxc.engine import Engine

from .conftest import cli_env, run


def _pile_up(ws, n: int) -> None:
    """`n` operations of three threads each (alice → coder → reviewer → coder), every
    second one finished, a session and an outcome per thread."""
    eng = {who: Engine(ws, env={"NXC_ACTOR": who}, delivery=LiveDelivery())
           for who in ("alice", "coder", "reviewer")}
    d = eng["alice"].delivery.deliverer(eng["alice"])
    for i in range(n):
        root = eng["alice"].send("coder", f"task {i}")
        child = eng["coder"].send("reviewer", f"review {i}", parent=root["thread_id"])
        leaf = eng["reviewer"].send("coder", f"check {i}", parent=child["thread_id"])
        for t in (root, child, leaf):
            sessions.create(d.local, persona=t["expects"][0], thread_id=t["thread_id"],
                            runtime={}, hop=1, max_hops=8, parent_session=None)
            outcomes.record(eng["alice"].store, "spawned", t["thread_id"], "ab12/alice", {
                "thread": t["thread_id"], "persona": t["expects"][0]})
        if i % 2:
            eng["coder"].reply(f"checked {i}", thread=leaf["thread_id"])
            eng["reviewer"].reply(f"reviewed {i}", thread=child["thread_id"])
            eng["coder"].reply(f"done {i}", thread=root["thread_id"])
    for e in eng.values():
        e.close()


def _statements(ws, **kwargs) -> tuple[int, dict]:
    engine = Engine(ws, env={"NXC_ACTOR": "alice"}, delivery=LiveDelivery())
    count = [0]

    def trace(cursor, sql, bindings):
        count[0] += 1
        return True

    engine.conn.exec_trace = trace
    engine.delivery.deliverer(engine).local.conn.exec_trace = trace
    out = engine.status(**kwargs)
    engine.close()
    return count[0], out


def test_status_runs_the_same_few_statements_for_10_or_40_operations(ws):
    _pile_up(ws, 10)
    small, out = _statements(ws, include_finished=True)
    assert len(out["operations"]) == 10
    _pile_up(ws, 30)
    large, out = _statements(ws, include_finished=True)
    assert len(out["operations"]) == 40
    assert large == small <= 8
    live, out = _statements(ws)
    assert live == small and len(out["operations"]) == 20
    # the batched reads fill in what the per-thread reads did
    t = out["operations"][0]["threads"][2]
    assert t["depth"] == 2 and t["session_state"] in ("running", "lost")
    assert [o["outcome"] for o in t["deliveries"]] == ["spawned"]


def test_the_human_view_shows_what_is_live(ws):
    eng = {who: Engine(ws, env={"NXC_ACTOR": who}) for who in ("alice", "coder", "reviewer")}
    root = eng["alice"].send("coder", "the big task")
    done = eng["coder"].send("reviewer", "a finished part", parent=root["thread_id"])
    eng["reviewer"].reply("part done", thread=done["thread_id"])
    live = eng["coder"].send("reviewer", "a part in progress", parent=root["thread_id"])
    for e in eng.values():
        e.close()
    env = cli_env(NXC_ACTOR="alice")
    text = run("nxc", "status", cwd=ws.root, env=env).stdout
    assert root["thread_id"] in text and live["thread_id"] in text
    assert done["thread_id"] not in text
    assert "1 answered threads not shown (--all shows them)" in text
    everything = run("nxc", "status", "--all", cwd=ws.root, env=env).stdout
    assert done["thread_id"] in everything
    # --json is the whole tree either way, compact when piped
    piped = run("nxc", "status", "--json", cwd=ws.root, env=env).stdout
    assert done["thread_id"] in piped and "\n  " not in piped
    assert os.linesep not in piped.rstrip("\n")
