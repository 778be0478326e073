"""Approvals with scripted runtimes in real subprocesses (`nixx.nxc.approvals`, `gates`):
a persona that declares `approve: [start]` starts only once a person approves, a denial
tells the thread why (and `nxc wait` exits 5 with it), a channel's round is held before it
starts its members or before it hands back, an agent may not approve, and each held step
is taken once."""

from __future__ import annotations

import json

from .harness import all_idle, make_workspace, poll, runs


def _op(ws, root):
    status = ws.nxc_json("status", "--thread", root)
    (op,) = status["operations"]
    return op


def test_a_persona_starts_only_after_a_person_approves(tmp_path):
    ws = make_workspace(tmp_path)
    log = ws.scripted("coder", reply="patched", persona_fields={"approve": ["start"]})
    receipt = ws.nxc_json("send", "--to", "coder", "fix the flaky test")
    root, approval = receipt["thread_id"], receipt["approval"]
    assert receipt["spawned"] is False and receipt["session"] is None
    assert f"nxc approve {approval}" in receipt["warnings"][0]
    assert runs(log) == [] and ws.sessions() == []
    # the operation awaits a person, and says what is asked (no body: the thread's rule)
    op = _op(ws, root)
    assert op["awaiting_human"] is True and op["live"] is True
    assert op["threads"][0]["awaiting_human"] is True
    (asked,) = op["approvals"]
    assert asked["id"] == approval and asked["step"] == "start"
    assert asked["subject"] == "ab12/coder" and asked["state"] == "pending"
    assert "start ab12/coder" in asked["what"] and "fix the flaky test" not in asked["what"]
    listed = ws.nxc("approvals").stdout
    assert approval in listed and "pending" in listed
    shown = ws.nxc("status").stdout
    assert f"awaiting approval {approval}" in shown
    # the person's prime block says a step waits for them; the agent's does not
    assert ws.nxc_json("prime")["approvals_waiting"] == [approval]
    assert "1 step of your agents waits for your approval" in ws.nxc("prime").stdout
    assert ws.nxc_json("prime", env={"NXC_ACTOR": "coder", "NXC_SESSION": "s-x"})[
        "approvals_waiting"] == []
    # an agent may not approve: the persona itself, or a process claiming a session
    refused = ws.nxc("approve", approval, "--json", env={"NXC_ACTOR": "coder"}, check=False)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["kind"] == "forbidden"
    # a note is one line of printable text (it is printed in a person's terminal)
    bad = ws.nxc("approve", approval, "--note", "fine\x1b[2K", "--json", check=False)
    assert json.loads(bad.stdout)["error"]["kind"] == "validation"
    # a person approves: the held start is taken now, on this clone
    decided = ws.nxc_json("approve", approval, "--note", "go ahead")
    assert (decided["state"], decided["decided_by"], decided["note"]) == (
        "approved", "ab12/operator", "go ahead")
    assert [(t["action"], t["state"]) for t in decided["taken"]] == [("start", "approved")]
    waited = ws.nxc("wait", "--thread", root, "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (run,) = runs(log)
    assert run["thread"] == root and run["hop"] == "1"
    # decided once: a second decision is a conflict, and nothing starts twice
    again = ws.nxc("deny", approval, "--json", check=False)
    assert json.loads(again.stdout)["error"]["kind"] == "conflict"
    poll(lambda: all_idle(ws), what="the session to end")
    assert len(runs(log)) == 1
    assert ws.nxc_json("approvals")["approvals"] == []
    (kept,) = ws.nxc_json("approvals", "--all")["approvals"]
    assert kept["state"] == "approved"
    assert _op(ws, root)["approvals"] == []


def test_a_denied_start_tells_the_thread_why_and_wait_exits_5(tmp_path):
    ws = make_workspace(tmp_path)
    log = ws.scripted("deployer", reply="deployed", persona_fields={"approve": ["start"]})
    receipt = ws.nxc_json("send", "--to", "deployer", "ship it to production")
    decided = ws.nxc_json("deny", receipt["approval"], "--note", "not on a Friday")
    assert decided["state"] == "denied"
    assert [(t["action"], t["state"]) for t in decided["taken"]] == [("start", "denied")]
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--json", check=False)
    assert waited.returncode == 5, waited.stdout
    (failure,) = json.loads(waited.stdout)["failures"]
    assert failure["reason"] == "denied" and "not on a Friday" in failure["msg"]
    assert "ab12/operator denied start" in failure["msg"]
    assert runs(log) == [] and ws.sessions() == []
    assert _op(ws, receipt["thread_id"])["awaiting_human"] is False


def test_a_round_is_held_before_it_hands_back_and_before_it_starts(tmp_path):
    ws = make_workspace(tmp_path)
    logs = {n: ws.scripted(n, reply=f"{n} says yes") for n in ("ann", "ben")}
    ws.channel(name="panel", members=["ann", "ben"], approve=["hand_back"])
    ws.channel(name="board", members=["ann", "ben"], approve=["start"])
    # hand_back: the members run and answer; the answers wait for a person
    receipt = ws.nxc_json("send", "--to", "panel", "should we ship?")
    root = receipt["thread_id"]
    assert receipt["spawned"] is True and "approval" not in receipt
    held = poll(lambda: ws.nxc_json("approvals")["approvals"], what="the hand-back held")
    (asked,) = held
    assert asked["step"] == "hand_back" and asked["thread"] == root
    assert asked["subject"] == "ab12/__channel-panel" and "2 answer(s)" in asked["what"]
    assert not ws.nxc_json("threads", "show", root)["complete"]
    assert _op(ws, root)["awaiting_human"] is True
    ws.nxc_json("approve", asked["id"])
    thread = ws.nxc_json("threads", "show", root)
    assert thread["complete"]
    (post,) = [m for m in thread["messages"] if m["sender"] == "ab12/__channel-panel"]
    assert "ann says yes" in post["body"] and "ben says yes" in post["body"]
    # start: nobody runs until a person decides; denied, the denial is handed back
    poll(lambda: all_idle(ws), what="the panel's sessions to end")
    before = {n: len(runs(log)) for n, log in logs.items()}
    board = ws.nxc_json("send", "--to", "board", "rename the product?")
    assert board["spawned"] is False and board["sessions"] == []
    denied = ws.nxc_json("deny", board["approval"], "--note", "not now")
    assert [(t["action"], t["state"]) for t in denied["taken"]] == [("round", "denied")]
    thread = ws.nxc_json("threads", "show", board["thread_id"])
    assert thread["complete"]
    (post,) = [m for m in thread["messages"] if m["sender"] == "ab12/__channel-board"]
    assert post["body"].startswith("Not handed back: ab12/operator denied start")
    assert "not now" in post["body"]
    assert {n: len(runs(log)) for n, log in logs.items()} == before


def test_an_approved_round_start_runs_its_members(tmp_path):
    ws = make_workspace(tmp_path)
    logs = {n: ws.scripted(n, reply=f"{n} agrees") for n in ("ann", "ben")}
    ws.channel(name="board", members=["ann", "ben"], approve=["start"])
    board = ws.nxc_json("send", "--to", "board", "rename the product?")
    decided = ws.nxc_json("approve", board["approval"])
    (taken,) = decided["taken"]
    assert (taken["action"], taken["state"]) == ("round", "approved")
    waited = ws.nxc("wait", "--thread", board["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert all(len(runs(log)) == 1 for log in logs.values())


def test_a_declaration_naming_an_unknown_step_is_refused(tmp_path):
    ws = make_workspace(tmp_path)
    ws.persona("coder", approve=["hand_back"])
    out = ws.nxc("list", "--json", check=False)
    error = json.loads(out.stdout)["error"]
    assert error["kind"] == "validation" and "approve" in error["msg"]
    assert "start" in error["msg"]


def test_a_lease_taken_inside_a_session_ends_with_the_session(tmp_path):
    ws = make_workspace(tmp_path)
    log = ws.scripted("coder", reply="done", nxc_first=[["lease", "src/db.py", "--for", "2h"]])
    ws.nxc("lease", "docs/", "--for", "2h")  # a person's lease: no session, it stays
    receipt = ws.nxc_json("send", "--to", "coder", "change the schema")
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (taken,) = [json.loads(line) for line in (tmp_path / "ws" / "coder.log.jsonl.nxc")
                .read_text().splitlines()]
    assert taken["code"] == 0, taken
    lease = json.loads(taken["out"])
    assert lease["holder"] == "ab12/coder" and lease["session"] == receipt["session"]
    poll(lambda: all_idle(ws), what="the session to end")
    left = poll(lambda: [x for x in ws.nxc_json("leases")["leases"]
                         if x["holder"] == "ab12/coder"] == [] and ws.nxc_json("leases"),
                what="the session's lease to end")
    assert [(x["holder"], x["paths"]) for x in left["leases"]] == [("ab12/operator", ["docs"])]
    released = [op for op in ws.log_ops("work") if op["kind"] == "lease_release"]
    assert [(op["target"], op["actor"], op["payload"]) for op in released] == [
        (lease["id"], "ab12/coder", {"session": receipt["session"]})]
    assert len(runs(log)) == 1


def test_run_holds_every_run_of_the_declared_command_a_resume_too(tmp_path):
    ws = make_workspace(tmp_path)
    log = ws.scripted("coder", reply="first answer", on_resume="again:",
                      resume_template=True, persona_fields={"approve": ["run"]})
    receipt = ws.nxc_json("send", "--to", "coder", "fix the flaky test")
    root = receipt["thread_id"]
    (start,) = ws.nxc_json("approvals")["approvals"]
    assert start["step"] == "start" and runs(log) == []
    ws.nxc_json("approve", start["id"])
    assert ws.nxc("wait", "--thread", root, "--timeout", "120", check=False).returncode == 0
    poll(lambda: all_idle(ws), what="the first run to end")
    # the opener follows up: the resume waits for a person, the session is let go
    follow = ws.nxc_json("reply", "--thread", root, "and the other one too")
    assert follow["resumed"] is None and "resumes once a person approves" in " ".join(
        follow["warnings"])
    (held,) = ws.nxc_json("approvals")["approvals"]
    assert held["step"] == "run" and held["thread"] == root
    (session,) = ws.sessions()
    assert held["what"] == (f"resume ab12/coder (session {session['session']}) with "
                            "1 message(s) from ab12/operator")
    assert [s["state"] for s in ws.sessions()] == ["exited"] and len(runs(log)) == 1
    # a process inside an agent's session may not decide, whatever handle it claims
    inside = ws.nxc("approve", held["id"], "--json", env={"NXC_SESSION": session["session"]},
                    check=False)
    assert json.loads(inside.stdout)["error"]["kind"] == "forbidden"
    decided = ws.nxc_json("approve", held["id"])
    assert [(t["action"], t["state"]) for t in decided["taken"]] == [("resume", "approved")]
    poll(lambda: len(runs(log)) == 2 and all_idle(ws), what="the approved resume to run")
    second = runs(log)[1]
    assert second["resumed"] is True and "and the other one too" in second["prompt"]
    # denied: the waiting answer is dropped, nothing runs, the thread says why
    ws.nxc_json("reply", "--thread", root, "one last thing")
    (held,) = ws.nxc_json("approvals")["approvals"]
    ws.nxc_json("deny", held["id"], "--note", "enough for today")
    assert len(runs(log)) == 2 and all_idle(ws)
    refused = [o for o in ws.outcomes() if o["kind"] == "refused"]
    assert [o["payload"]["reason"] for o in refused] == ["denied"]
    assert "enough for today" in refused[0]["payload"]["msg"]


def test_a_resume_queued_while_the_session_ran_is_held_when_the_run_ends(tmp_path):
    ws = make_workspace(tmp_path)
    flag = tmp_path / "go"
    log = ws.scripted("coder", reply="done", on_resume="again:", resume_template=True,
                      wait_for=str(flag), persona_fields={"approve": ["run"]})
    receipt = ws.nxc_json("send", "--to", "coder", "fix it")
    ws.nxc_json("approve", ws.nxc_json("approvals")["approvals"][0]["id"])
    poll(lambda: runs(log), what="the first run to start")
    queued = ws.nxc_json("reply", "--thread", receipt["thread_id"], "while you are at it")
    (session,) = ws.sessions()
    assert queued["resumed"] == session["session"]  # queued for the running session
    flag.write_text("")  # the first run answers and ends; the supervisor finds the answer
    held = poll(lambda: ws.nxc_json("approvals")["approvals"], what="the in-place resume held")
    assert held[0]["step"] == "run" and "while you are at it" not in held[0]["what"]
    poll(lambda: all_idle(ws), what="the supervisor to let the session go")
    assert len(runs(log)) == 1
    ws.nxc_json("approve", held[0]["id"])
    poll(lambda: len(runs(log)) == 2 and all_idle(ws), what="the approved resume")
    assert "while you are at it" in runs(log)[1]["prompt"]


def test_a_held_step_is_taken_once_and_one_let_go_is_taken_again(tmp_path):
    """`gates`: a decided step is taken by one process only (compare-and-set); one whose
    action failed is let go (`untake`), and the next process that sees the decision — here
    the sync pass's `catch_up` — takes it and runs it once."""
    from nixx.log.workspace import Workspace
    from nixx.nxc.delivery import gates
    from nixx.nxc.delivery.dispatch import catch_up
    from nixx.nxc.delivery.launcher import Deliverer

    ws = make_workspace(tmp_path)
    db = str(ws.root / ".nxs" / "db.sqlite")
    log = ws.scripted("coder", reply="done", persona_fields={"approve": ["start"]})
    approval = ws.nxc_json("send", "--to", "coder", "fix it")["approval"]
    d = Deliverer.open(db, ws.env)
    try:
        assert gates.take(d, approval) is True and gates.take(d, approval) is False
        assert ws.nxc_json("approve", approval)["taken"] == []  # another process holds it
        gates.untake(d, approval)  # its action failed: let go
    finally:
        d.store.close()
    assert catch_up(Workspace.for_db(db), ws.env) == [approval]
    poll(lambda: len(runs(log)) == 1 and all_idle(ws), what="the start to run")
    assert catch_up(Workspace.for_db(db), ws.env) == []  # taken once
