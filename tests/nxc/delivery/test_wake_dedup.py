"""A completed quorum wakes its opener once, with every answer of the turn.

Two replies that complete a quorum at the same moment both see it complete and both wake
the opener. The wake carries the whole turn's answers, and the wake queue is keyed by
message id, so the second wake finds nothing new and is dropped."""

from __future__ import annotations

import os
import subprocess

from nixx.nxc.delivery import sessions
from nixx.nxc.delivery.localstore import LocalStore

from .harness import PYTHON, all_idle, make_workspace, poll, runs


def test_wake_queue_is_keyed_by_message_id(tmp_path):
    local = LocalStore(str(tmp_path / "local.sqlite"))
    sid = sessions.create(local, persona="ab12/lead", thread_id="t-1", runtime={"start": ["x"]},
                          hop=1, max_hops=8, parent_session=None)
    sessions.finish_or_take(local, sid, 0)  # the first run ended: exited
    a = {"thread_id": "t-2", "message_id": "m-a", "sender": "ab12/x", "body": "a"}
    b = {"thread_id": "t-2", "message_id": "m-b", "sender": "ab12/y", "body": "b"}
    outcome, fresh = sessions.deliver(local, sid, [a, b])
    assert outcome == "resume" and [m["message_id"] for m in fresh] == ["m-a", "m-b"]
    sessions.set_pid(local, sid, os.getpid())  # its process runs now
    # the same two answers again (the other replier's wake): nothing new, dropped
    assert sessions.deliver(local, sid, [a, b]) == ("dropped", [])
    assert sessions.deliver(local, sid, [b]) == ("dropped", [])
    # a new message is queued, the known one beside it is not queued twice
    c = {"thread_id": "t-2", "message_id": "m-c", "sender": "ab12/x", "body": "c"}
    outcome, fresh = sessions.deliver(local, sid, [b, c])
    assert outcome == "queued" and [m["message_id"] for m in fresh] == ["m-c"]
    assert sessions.queued(local, sid) == 1
    assert [w["message_id"] for w in sessions.finish_or_take(local, sid, 0)] == ["m-c"]
    assert sessions.delivered(local, sid) == ["m-a", "m-b", "m-c"]
    local.close()


def _lead_with_two_repliers(tmp_path, threads: int):
    """lead (scripted) opens `threads` threads to x, each expecting x AND y; x and y are
    mailboxes (no runtime) a test answers for by hand."""
    ws = make_workspace(tmp_path)
    ws.persona("x")
    ws.persona("y")
    lead = ws.scripted("lead", send_to=["x"] * threads, send_args=["--expect", "x,y"],
                       on_resume="lead got:")
    receipt = ws.nxc_json("send", "--to", "lead", "ask x and y together")
    poll(lambda: runs(lead) and all_idle(ws), what="lead's first run to end")
    opened = ws.nxc_json("threads", "list", "--open", env={"NXC_ACTOR": "y"})
    assert len(opened) == threads and all(t["expects"] == ["ab12/x", "ab12/y"] for t in opened)
    return ws, lead, receipt, [t["thread_id"] for t in reversed(opened)]


def test_simultaneous_completion_wakes_the_opener_once(tmp_path):
    """Deterministic: both replies are in the log before either reply's delivery runs, as
    when two repliers finish together; the delivery hooks then run one after the other."""
    from nixx.nxc.delivery.dispatch import LiveDelivery
    from nixx.nxc.engine import Engine
    from nixx.nxc.threads import get_thread

    ws, lead, receipt, (tid,) = _lead_with_two_repliers(tmp_path, 1)
    db = str(ws.root / ".nxs" / "db.sqlite")

    class Held(LiveDelivery):
        """Posts go to the log; the delivery hook is held back."""

        held: list = []

        def on_reply(self, ctx):
            self.held.append(ctx)
            return {"resumed": None, "warnings": []}

    engines = [Engine.open(db=db, env={**ws.env, "NXC_ACTOR": who}, delivery=Held())
               for who in ("x", "y")]
    try:
        for engine, who in zip(engines, ("x", "y"), strict=True):
            engine.reply(f"{who} answers FIRSTTURN", thread=tid)
        live = LiveDelivery()
        results = []
        for ctx in Held.held:
            # both see the quorum complete, as both racing processes would
            ctx.thread = get_thread(ctx.engine.conn, tid, ctx.engine.now_ms())
            assert ctx.thread["complete"] is True
            results.append(live.on_reply(ctx))
    finally:
        for engine in engines:
            engine.close()
    assert results[0]["resumed"] == receipt["session"]
    assert results[1]["resumed"] is None and results[1]["warnings"] == []
    poll(lambda: len(runs(lead)) >= 2 and all_idle(ws), what="lead's resume to end")
    lead_runs = runs(lead)
    assert [r["resumed"] for r in lead_runs] == [False, True]
    assert "x answers FIRSTTURN" in lead_runs[1]["prompt"]
    assert "y answers FIRSTTURN" in lead_runs[1]["prompt"]
    assert [o for o in ws.outcomes() if o["kind"] == "queued"] == []


def test_concurrent_repliers_wake_the_opener_once_per_quorum(tmp_path):
    """Real concurrent `nxc reply` processes, three quorums in a row."""
    ws, lead, receipt, tids = _lead_with_two_repliers(tmp_path, 3)
    for n, tid in enumerate(tids, 1):
        procs = [subprocess.Popen(
            [PYTHON, "-m", "nixx.cli.nxc", "reply", "--thread", tid, f"{who} answers turn{n}",
             "--json"], cwd=ws.root, env={**ws.env, "NXC_ACTOR": who},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for who in ("x", "y")]
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, out + err
        # every wake was issued by the repliers before they exited: once lead is idle,
        # nothing more will run for this quorum
        poll(lambda n=n: len(runs(lead)) >= n + 1 and all_idle(ws),
             what=f"lead's resume for quorum {n}")
    lead_runs = runs(lead)
    assert [r["resumed"] for r in lead_runs] == [False, True, True, True]
    for n, run in enumerate(lead_runs[1:], 1):
        assert f"x answers turn{n}" in run["prompt"] and f"y answers turn{n}" in run["prompt"]
    # one start + three resumes, each message handed over exactly once
    state = ws.nxc_json("session", "state", receipt["session"])
    assert state["runs"] == 4 and state["queued"] == 0
