"""Two personas, real subprocesses: a human asks A, A asks B, B's answer wakes A, A
answers the human. Plus the cleared environment, addressable refusals and a runtime that
cannot start."""

from __future__ import annotations

import json

from .harness import all_idle, make_workspace, poll, runs


def test_two_persona_exchange_runs_to_a_complete_quorum(tmp_path):
    ws = make_workspace(tmp_path)
    a_log = ws.scripted("alice", send_to=["bob"], send_body="what is 6*7?",
                        on_resume="alice relays:")
    b_log = ws.scripted("bob", reply="bob says 42")
    receipt = ws.nxc_json("send", "--to", "alice", "find out 6*7")
    assert receipt["spawned"] is True and receipt["session"].startswith("s-")
    t1 = receipt["thread_id"]

    waited = ws.nxc("wait", "--thread", t1, "--timeout", "120", "--json", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    thread = ws.nxc_json("threads", "show", t1)
    assert thread["complete"] is True
    answer = thread["messages"][-1]
    assert answer["sender"] == "ab12/alice"
    assert "alice relays:" in answer["body"] and "bob says 42" in answer["body"]

    # alice ran twice in ONE session: started, then resumed with bob's answer
    alice_runs = runs(a_log)
    assert [r["resumed"] for r in alice_runs] == [False, True]
    assert alice_runs[0]["session"] == alice_runs[1]["session"] == receipt["session"]
    bob_runs = runs(b_log)
    assert len(bob_runs) == 1 and bob_runs[0]["hop"] == "2" and alice_runs[0]["hop"] == "1"

    # bob's thread hangs under alice's (parent resolved from where alice's session stood)
    t2 = bob_runs[0]["thread"]
    as_alice = ws.nxc_json("threads", "show", t2, env={"NXC_ACTOR": "alice"})
    assert as_alice["parent"] == t1 and as_alice["opener"] == "ab12/alice"

    poll(lambda: all_idle(ws), what="every session to end")
    status = ws.nxc_json("status", "--all")
    op = next(o for o in status["operations"] if o["root"] == t1)
    assert op["awaiting_human"] is True and op["live"] is False
    root = op["threads"][0]
    assert root["session"] == receipt["session"] and root["session_state"] == "exited"
    kinds = [d["outcome"] for d in root["deliveries"]]
    assert kinds.count("spawned") == 2 and "exited" in kinds  # start + resume

    # transcript: the stream-json was normalised, runtime id bound from the init line
    shown = ws.nxc_json("transcript", "show", receipt["session"])
    kinds = [e["kind"] for e in shown["entries"]]
    assert kinds[0] == "session_init" and "thinking" in kinds and "tool_use" in kinds
    assert [e["seq"] for e in shown["entries"]] == list(range(1, len(kinds) + 1))
    assert kinds.count("session_init") == 2  # the resumed run continues the same sequence
    state = ws.nxc_json("session", "state", receipt["session"])
    assert state["runtime_session"] == "rt-" + receipt["session"]
    hits = ws.nxc_json("search", "--transcripts", "bob says")
    assert any(h["session"] == receipt["session"] for h in hits)
    # transcripts are device-local: nothing of them is in the (synced) log
    everything = json.dumps(ws.nxc_json_nxs("log"))
    assert "let me think" not in everything and "tool_use" not in everything


def test_answers_arriving_while_busy_are_delivered_together(tmp_path):
    ws = make_workspace(tmp_path)
    a_log = ws.scripted("lead", send_to=["x", "y"], sleep=4, on_resume="lead got:")
    ws.scripted("x", reply="x answer")
    ws.scripted("y", reply="y answer")
    receipt = ws.nxc_json("send", "--to", "lead", "ask x and y")
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    lead = runs(a_log)
    # both answers came while lead slept: queued, then ONE resume carried both
    assert [r["resumed"] for r in lead] == [False, True]
    assert "x answer" in lead[1]["prompt"] and "y answer" in lead[1]["prompt"]
    queued = [o for o in ws.outcomes() if o["kind"] == "queued"]
    assert len(queued) == 2


def test_child_environment_is_the_allowlist_only(tmp_path):
    ws = make_workspace(tmp_path, OPERATOR_SECRET="hunter2", NIXX_CHAT_API_KEY="sk-secret")
    dump = tmp_path / "env.json"
    ws.scripted("envy", dump_env=str(dump), reply="ok")
    receipt = ws.nxc_json("send", "--to", "envy", "dump your env")
    assert ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                  check=False).returncode == 0
    env = json.loads(dump.read_text())
    assert "OPERATOR_SECRET" not in env and "NIXX_CHAT_API_KEY" not in env
    assert "hunter2" not in json.dumps(env)
    allowed = {"NXC_ORIGIN", "NXC_DB", "NXC_SESSION", "NXC_ACTOR", "NXC_HOP", "PATH", "HOME"}
    # LC_CTYPE: Python's own C-locale coercion (PEP 538) adds it inside the child
    assert set(env) - {"LC_CTYPE"} <= allowed
    assert allowed - {"HOME"} <= set(env)
    assert env["NXC_ACTOR"] == "ab12/envy"
    assert env["NXC_SESSION"] == receipt["session"]
    assert env["NXC_HOP"] == "1"
    assert env["NXC_ORIGIN"] == "ab12"
    assert env["NXC_DB"] == str(ws.root / ".nxs" / "db.sqlite")
    assert env["PATH"] == ws.env["PATH"]


def test_address_refused_by_addressable_is_recorded(tmp_path):
    ws = make_workspace(tmp_path)
    ws.scripted("vault", reply="never", persona_fields={
        "addressable": {"personas": ["ab12/keeper"], "humans": False}})
    refused = ws.nxc("send", "--to", "vault", "open up", "--json", check=False)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["kind"] == "forbidden"
    recorded = [o for o in ws.outcomes() if o["kind"] == "refused"]
    assert len(recorded) == 1
    assert recorded[0]["payload"]["reason"] == "addressable"
    assert recorded[0]["payload"]["persona"] == "ab12/vault"
    assert ws.sessions() == []  # nothing was started

    # from inside a session the refusal lands in the sender's operation, shown by status
    log = ws.scripted("intruder", send_to=["vault"], reply="tried")
    receipt = ws.nxc_json("send", "--to", "intruder", "try the vault")
    assert ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                  check=False).returncode == 0
    assert len(runs(log)) == 1
    entries = ws.nxc_json("transcript", "show", receipt["session"])["entries"]
    failed_send = [e for e in entries if e["kind"] == "tool_result" and e["data"]["is_error"]]
    assert len(failed_send) == 1 and "forbidden" in failed_send[0]["data"]["content"]
    status = ws.nxc_json("status", "--all")
    op = next(o for o in status["operations"] if o["root"] == receipt["thread_id"])
    assert [r["reason"] for r in op["refusals"]] == ["addressable"]


def test_runtime_that_fails_to_start_is_reported_and_recorded(tmp_path):
    ws = make_workspace(tmp_path)
    ws.persona("ghost", runtime={"start": ["nxc-no-such-agent-cli", "-p", "{prompt}"]})
    receipt = ws.nxc_json("send", "--to", "ghost", "anyone there?")
    assert receipt["spawned"] is False
    assert any("failed to start" in w and "nxc-no-such-agent-cli" in w
               for w in receipt["warnings"])
    failed = [o for o in ws.outcomes() if o["kind"] == "failed"]
    assert len(failed) == 1 and failed[0]["target"] == receipt["thread_id"]
    assert ws.nxc_json("session", "state", receipt["session"])["state"] == "failed"
    status = ws.nxc_json("status")
    op = next(o for o in status["operations"] if o["root"] == receipt["thread_id"])
    assert op["refusals"][0]["outcome"] == "failed"
    # human rendering says it too
    human = ws.nxc("send", "--to", "ghost", "again?")
    assert "failed to start" in human.stderr


def test_declared_resume_template_gets_the_runtime_session_id(tmp_path):
    """`resume` argv with {runtime_session}: bound from the stream's init line (alice) or
    by the runtime itself with `nxc session bind` (carol, who prints no init line)."""
    ws = make_workspace(tmp_path)
    logs = {
        "alice": ws.scripted("alice", resume_template=True, send_to=["bob"],
                             on_resume="alice relays:"),
        "carol": ws.scripted("carol", resume_template=True, send_to=["bob"], bind_as="carol-rt-7",
                             on_resume="carol relays:"),
    }
    ws.scripted("bob", reply="bob says 42")
    for name, log in logs.items():
        receipt = ws.nxc_json("send", "--to", name, "ask bob")
        waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        first, second = runs(log)
        assert first["resumed_as"] is None and second["resumed"] is True
        expected = "rt-" + receipt["session"] if name == "alice" else "carol-rt-7"
        assert second["resumed_as"] == expected  # the resume argv carried the bound id
        assert ws.nxc_json("session", "state", receipt["session"])["runtime_session"] == expected
        answer = ws.nxc_json("threads", "show", receipt["thread_id"])["messages"][-1]
        assert "bob says 42" in answer["body"]


def test_send_wait_blocks_until_the_answer_or_the_timeout(tmp_path):
    ws = make_workspace(tmp_path)
    ws.scripted("oracle", reply="the answer is 42")
    out = ws.nxc("send", "--to", "oracle", "--wait", "--timeout", "120", "the question",
                 "--json", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    waited = json.loads(out.stdout)
    assert waited["outcome"] == "complete" and waited["session"].startswith("s-")
    assert waited["thread"]["messages"][-1]["body"] == "the answer is 42"
    human = ws.nxc("send", "--to", "oracle", "--wait", "--timeout", "120", "again", check=False)
    assert human.returncode == 0 and "the answer is 42" in human.stdout

    ws.scripted("sleeper", sleep=20, reply="late")
    out = ws.nxc("send", "--to", "sleeper", "--wait", "--timeout", "0.5", "quick?", "--json",
                 check=False)
    assert out.returncode == 4, out.stdout + out.stderr  # --timeout passed first
    assert json.loads(out.stdout)["outcome"] == "timeout"
    ws.persona("mailbox")
    out = ws.nxc("send", "--to", "mailbox", "--expect", "", "--wait", "note", "--json",
                 check=False)
    error = json.loads(out.stdout)["error"]
    assert out.returncode == 1 and error["kind"] == "validation"
    assert "nothing to wait for" in error["msg"]
