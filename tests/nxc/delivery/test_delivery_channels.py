"""Channel rounds with scripted runtimes in real subprocesses: parallel and sequential
rounds run to a complete quorum and the supervisor hands the answers back; a round that
runs out of time goes stale; a ping-pong pair stops at the hop limit."""

from __future__ import annotations

from .harness import all_idle, make_workspace, poll, runs


def _supervisor_post(ws, thread_id, channel):
    thread = ws.nxc_json("threads", "show", thread_id)
    posts = [m for m in thread["messages"] if m["sender"] == f"ab12/__channel-{channel}"]
    return posts[0] if posts else None


def test_parallel_channel_completes_and_collects_answers(tmp_path):
    ws = make_workspace(tmp_path)
    logs = {n: ws.scripted(n, reply=f"{n} thinks yes") for n in ("ann", "ben", "cy")}
    ws.channel(name="panel", members=["ann", "ben", "cy"], flow="parallel",
               description="three opinions")
    receipt = ws.nxc_json("send", "--to", "panel", "should we ship?")
    assert receipt["target"] == "channel" and receipt["spawned"] is True
    assert len(receipt["sessions"]) == 3
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    thread = ws.nxc_json("threads", "show", receipt["thread_id"])
    assert thread["complete"] and sorted(thread["replied"]) == ["ab12/ann", "ab12/ben", "ab12/cy"]
    for log in logs.values():
        (run,) = runs(log)
        assert run["thread"] == receipt["thread_id"] and run["hop"] == "1"
    post = poll(lambda: _supervisor_post(ws, receipt["thread_id"], "panel"),
                what="the supervisor's reply")
    for n in ("ann", "ben", "cy"):
        assert f'<message from="ab12/{n}">\n{n} thinks yes\n</message>' in post["body"]
    poll(lambda: all_idle(ws), what="every session to end")
    status = ws.nxc_json("status", "--all")
    op = next(o for o in status["operations"] if o["root"] == receipt["thread_id"])
    assert op["awaiting_human"] is True


def test_sequential_channel_hands_earlier_answers_to_later_members(tmp_path):
    ws = make_workspace(tmp_path)
    first = ws.scripted("drafter", reply="draft: use SQLite")
    second = ws.scripted("reviewer", reply="review: agreed")
    ws.channel(name="pipeline", members=["drafter", "reviewer"], flow="sequential",
               timeout="5m")
    receipt = ws.nxc_json("send", "--to", "pipeline", "pick a database")
    assert len(receipt["sessions"]) == 1  # only the first member starts
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (d_run,) = runs(first)
    (r_run,) = runs(second)
    assert "Earlier answers" not in d_run["prompt"]
    assert '<message from="ab12/drafter">\ndraft: use SQLite\n</message>' in r_run["prompt"]
    spawned = [o for o in ws.outcomes() if o["kind"] == "spawned"]
    assert [o["payload"]["persona"] for o in spawned] == ["ab12/drafter", "ab12/reviewer"]
    post = poll(lambda: _supervisor_post(ws, receipt["thread_id"], "pipeline"),
                what="the supervisor's reply")
    assert post["body"].index("drafter") < post["body"].index("reviewer")


def test_round_timeout_goes_stale(tmp_path):
    ws = make_workspace(tmp_path)
    ws.scripted("quick", reply="quick answer")
    ws.scripted("sloth", sleep=600, reply="too late")
    ws.channel(name="race", members=["quick", "sloth"], flow="parallel", timeout="3s")
    receipt = ws.nxc_json("send", "--to", "race", "answer fast")
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", "--json",
                    check=False)
    assert waited.returncode == 3, waited.stdout + waited.stderr  # stale
    thread = ws.nxc_json("threads", "show", receipt["thread_id"])
    assert thread["stale"] is True and thread["outstanding"] == ["ab12/sloth"]
    # the sloth's run is killed at the round timeout and recorded
    killed = poll(lambda: [o for o in ws.outcomes() if o["kind"] == "exited"
                           and o["payload"]["persona"] == "ab12/sloth"], what="sloth's exit")
    assert "round timeout" in killed[0]["payload"]["reason"]
    post = poll(lambda: _supervisor_post(ws, receipt["thread_id"], "race"),
                what="the supervisor's reply")
    assert "quick answer" in post["body"] and "No answer from: ab12/sloth" in post["body"]
    status = ws.nxc_json("status", "--all")
    op = next(o for o in status["operations"] if o["root"] == receipt["thread_id"])
    assert op["threads"][0]["state"] == "stale"


def test_round_timeout_as_an_instant_kills_the_run_at_that_instant(tmp_path):
    import time

    from nixx.nxc.durations import iso

    ws = make_workspace(tmp_path)
    ws.scripted("quick", reply="quick answer")
    ws.scripted("sloth", sleep=600, reply="too late")
    at = iso(time.time_ns() // 1_000_000 + 10_000)  # an RFC3339 instant, 10 s from now
    ws.channel(name="race", members=["quick", "sloth"], flow="parallel", timeout=at)
    receipt = ws.nxc_json("send", "--to", "race", "answer before the bell")
    assert receipt["deadline"] == at  # the thread's deadline is the instant itself
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", "--json",
                    check=False)
    assert waited.returncode == 3, waited.stdout + waited.stderr  # stale
    # the sloth (asleep for 600 s) is killed at the instant, not left running
    killed = poll(lambda: [o for o in ws.outcomes() if o["kind"] == "exited"
                           and o["payload"]["persona"] == "ab12/sloth"], what="sloth's exit")
    assert killed[0]["payload"]["reason"] == f"killed at the round timeout ({at})"
    assert killed[0]["payload"]["code"] != 0
    post = poll(lambda: _supervisor_post(ws, receipt["thread_id"], "race"),
                what="the supervisor's reply")
    assert "ab12/sloth" in post["body"].split("No answer from:")[1]
    poll(lambda: all_idle(ws), what="every session to end")


def test_ping_pong_stops_at_the_hop_limit(tmp_path):
    ws = make_workspace(tmp_path, NXC_MAX_HOPS="3")
    ping = ws.scripted("ping", send_to=["pong"])
    pong = ws.scripted("pong", send_to=["ping"])
    receipt = ws.nxc_json("send", "--to", "ping", "start the rally")

    def refusal():
        status = ws.nxc_json("status")
        for op in status["operations"]:
            if op["root"] == receipt["thread_id"] and op["refusals"]:
                return op["refusals"]
        return None

    refusals = poll(refusal, what="the hop-limit refusal in nxc status")
    assert len(refusals) == 1
    assert refusals[0]["reason"] == "hop_limit"
    assert refusals[0]["hop"] == 4 and refusals[0]["limit"] == 3
    assert refusals[0]["persona"] == "ab12/pong"
    poll(lambda: all_idle(ws), what="every session to end")
    hops = sorted(int(r["hop"]) for r in runs(ping) + runs(pong))
    assert hops == [1, 2, 3]  # nothing ran past the limit
    assert len(ws.sessions()) == 3
    human = ws.nxc("status")
    assert "refused" in human.stdout and "hop_limit" in human.stdout


def test_settled_round_wakes_an_agent_opener(tmp_path):
    ws = make_workspace(tmp_path)
    coord = ws.scripted("coord", send_to=["duo"], on_resume="coord collected:")
    ws.scripted("left", reply="left view")
    ws.scripted("right", reply="right view")
    ws.channel(name="duo", members=["left", "right"])
    receipt = ws.nxc_json("send", "--to", "coord", "ask the duo")
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    final = ws.nxc_json("threads", "show", receipt["thread_id"])["messages"][-1]
    assert final["sender"] == "ab12/coord" and final["body"].startswith("coord collected:")
    assert '<message from="ab12/left">\nleft view\n</message>' in final["body"]
    assert '<message from="ab12/right">\nright view\n</message>' in final["body"]
    assert [r["resumed"] for r in runs(coord)] == [False, True]
    # the round's thread hangs under coord's thread
    round_thread = runs(coord)[1]["prompt"]
    assert "ab12/__channel-duo" in round_thread


def test_escalation_in_a_round_wakes_the_requester(tmp_path):
    ws = make_workspace(tmp_path)
    coord = ws.scripted("coord", send_to=["duo"], on_resume="coord decided:")
    ws.scripted("asker", reply="need a decision: A or B?", reply_args=["--escalate"])
    ws.scripted("other", reply="other view")
    ws.channel(name="duo", members=["asker", "other"])
    receipt = ws.nxc_json("send", "--to", "coord", "ask the duo")
    # handed over as asker's own message (not only quoted later in the round's hand-back)
    poll(lambda: any("--- from ab12/asker in thread" in r["prompt"]
                     and "need a decision: A or B?" in r["prompt"]
                     for r in runs(coord) if r["resumed"]), what="coord woken by the escalation")
    poll(lambda: all_idle(ws), what="every session to end")
    # coord answered its own thread after the escalation woke it
    final = ws.nxc_json("threads", "show", receipt["thread_id"])["messages"][-1]
    assert final["sender"] == "ab12/coord" and final["body"].startswith("coord decided:")
    status = ws.nxc_json("status", "--all", env={"NXC_ACTOR": "coord"})
    escalated = [t for op in status["operations"] for t in op["threads"] if t["escalated"]]
    assert len(escalated) == 1 and escalated[0]["opener"] == "ab12/coord"


def test_summarize_round_asks_the_backend_with_the_summary_prompt(tmp_path):
    from nixx.testing.fake_llm import FakeLLM, Reply

    with FakeLLM() as llm:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        ws.scripted("north", reply="north: go")
        ws.scripted("south", reply="south: wait")
        ws.channel(name="poll", members=["north", "south"], on_complete="summarize",
                   summary_prompt="Summarise the votes in one line.")
        llm.queue(Reply(content="one go, one wait"))
        receipt = ws.nxc_json("send", "--to", "poll", "vote")
        assert ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                      check=False).returncode == 0
        post = poll(lambda: _supervisor_post(ws, receipt["thread_id"], "poll"),
                    what="the supervisor's summary")
        assert post["body"] == "one go, one wait"
        (request,) = llm.chat_requests
        assert request["messages"][0] == {"role": "system",
                                          "content": "Summarise the votes in one line."}
        assert '<message from="ab12/north">' in request["messages"][1]["content"]
