"""Channel rounds with scripted runtimes in real subprocesses: a round is a tree (the
round's thread expects the channel's supervisor; one slot thread per member under it,
where that member answers); parallel and sequential rounds run to the supervisor's
hand-back in member order; a round that runs out of time goes stale; a ping-pong pair
stops at the hop limit, a round of nine members does not."""

from __future__ import annotations

import pytest

from .harness import all_idle, make_workspace, poll, runs, slots


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
    root = receipt["thread_id"]
    assert receipt["target"] == "channel" and receipt["spawned"] is True
    assert receipt["expects"] == ["ab12/__channel-panel"]
    assert receipt["members"] == ["ab12/ann", "ab12/ben", "ab12/cy"]
    assert len(receipt["sessions"]) == 3
    waited = ws.nxc("wait", "--thread", root, "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    thread = ws.nxc_json("threads", "show", root)
    assert thread["complete"] and thread["replied"] == ["ab12/__channel-panel"]
    by_member = slots(ws, root)
    assert sorted(by_member) == ["ab12/ann", "ab12/ben", "ab12/cy"]
    for n, log in logs.items():
        slot = by_member[f"ab12/{n}"]
        (run,) = runs(log)
        assert run["thread"] == slot["thread_id"] and run["hop"] == "1"
        shown = ws.nxc_json("threads", "show", slot["thread_id"])
        assert shown["parent"] == root and shown["opener"] == "ab12/__channel-panel"
        assert shown["complete"] and shown["replied"] == [f"ab12/{n}"]
        assert [m["body"] for m in shown["messages"]] == [f"{n} thinks yes"]
    post = _supervisor_post(ws, root, "panel")
    for n in ("ann", "ben", "cy"):
        assert f'<message from="ab12/{n}">\n{n} thinks yes\n</message>' in post["body"]
    poll(lambda: all_idle(ws), what="every session to end")
    status = ws.nxc_json("status", "--all")
    op = next(o for o in status["operations"] if o["root"] == root)
    assert op["awaiting_human"] is True and op["live"] is False
    assert [(t["depth"], t["awaiting_human"]) for t in op["threads"]] == [
        (0, True), (1, False), (1, False), (1, False)]
    assert all(t["parent"] == root for t in op["threads"][1:])
    assert {t["session"] for t in op["threads"][1:]} == set(receipt["sessions"])


def test_parallel_round_answers_in_member_order_not_arrival_order(tmp_path):
    ws = make_workspace(tmp_path)
    flags = {n: tmp_path / f"{n}.answered" for n in ("ann", "ben", "cy")}
    # cy answers first, then ben (after cy), then ann (after ben): the reverse of the order
    ws.scripted("ann", reply="ann: A", wait_for=str(flags["ben"]), touch=str(flags["ann"]))
    ws.scripted("ben", reply="ben: B", wait_for=str(flags["cy"]), touch=str(flags["ben"]))
    ws.scripted("cy", reply="cy: C", touch=str(flags["cy"]))
    ws.channel(name="panel", members=["ann", "ben", "cy"], flow="parallel")
    receipt = ws.nxc_json("send", "--to", "panel", "one letter each")
    root = receipt["thread_id"]
    assert ws.nxc("wait", "--thread", root, "--timeout", "120", check=False).returncode == 0
    answers = [o for o in ws.log_ops("message") if o["kind"] == "post"
               and o["actor"] in ("ab12/ann", "ab12/ben", "ab12/cy")]
    assert [o["actor"] for o in answers] == ["ab12/cy", "ab12/ben", "ab12/ann"]  # arrival
    body = _supervisor_post(ws, root, "panel")["body"]
    assert body == ('<message from="ab12/ann">\nann: A\n</message>\n\n'
                    '<message from="ab12/ben">\nben: B\n</message>\n\n'
                    '<message from="ab12/cy">\ncy: C\n</message>')
    (posted,) = [o for o in ws.outcomes() if o["kind"] == "round"]
    assert posted["payload"]["answered"] == ["ab12/ann", "ab12/ben", "ab12/cy"]


def test_sequential_channel_hands_earlier_answers_to_later_members(tmp_path):
    ws = make_workspace(tmp_path)
    first = ws.scripted("drafter", reply="draft: use SQLite")
    second = ws.scripted("reviewer", reply="review: agreed")
    ws.channel(name="pipeline", members=["drafter", "reviewer"], flow="sequential",
               timeout="5m")
    receipt = ws.nxc_json("send", "--to", "pipeline", "pick a database")
    root = receipt["thread_id"]
    assert len(receipt["sessions"]) == 1  # only the first member starts
    waited = ws.nxc("wait", "--thread", root, "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (d_run,) = runs(first)
    (r_run,) = runs(second)
    by_member = slots(ws, root)
    assert d_run["thread"] == by_member["ab12/drafter"]["thread_id"]
    assert r_run["thread"] == by_member["ab12/reviewer"]["thread_id"]
    assert "Earlier answers" not in d_run["prompt"]
    assert '<message from="ab12/drafter">\ndraft: use SQLite\n</message>' in r_run["prompt"]
    spawned = [o for o in ws.outcomes() if o["kind"] == "spawned"]
    assert [o["payload"]["persona"] for o in spawned] == ["ab12/drafter", "ab12/reviewer"]
    assert [o["payload"]["hop"] for o in spawned] == [1, 1]  # both at the round's depth + 1
    post = _supervisor_post(ws, root, "pipeline")
    assert post["body"].index("drafter") < post["body"].index("reviewer")
    # each slot has its own deadline: the timeout from the moment it opened
    assert all(t["deadline"] for t in by_member.values())


def test_a_sequential_round_passes_a_member_that_cannot_start_on_at_once(tmp_path):
    # two members in a row whose runtime is missing: the turn goes on to the third in the
    # same send, and the receipt carries both failures and the one session that started
    ws = make_workspace(tmp_path)
    ws.persona("ghost", runtime={"start": ["no-such-agent-cli", "{prompt}"]})
    ws.persona("shade", runtime={"start": ["no-such-agent-cli", "{prompt}"]})
    third = ws.scripted("reviewer", reply="review: agreed")
    ws.channel(name="line", members=["ghost", "shade", "reviewer"], flow="sequential",
               timeout="5m")
    receipt = ws.nxc_json("send", "--to", "line", "pick a database")
    assert receipt["spawned"] is True and len(receipt["sessions"]) == 1
    assert receipt["session"] == receipt["sessions"][0]
    failed = [w for w in receipt["warnings"] if "failed to start" in w]
    assert [w.split(":")[0] for w in failed] == ["ab12/ghost", "ab12/shade"]
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (run,) = runs(third)
    assert run["thread"] == slots(ws, receipt["thread_id"])["ab12/reviewer"]["thread_id"]


@pytest.mark.slow
def test_sequential_round_of_nine_members_completes_under_the_default_hop_limit(tmp_path):
    ws = make_workspace(tmp_path)
    names = [f"m{i}" for i in range(1, 10)]
    logs = [ws.scripted(n, reply=f"{n} done") for n in names]
    ws.channel(name="relay", members=names, flow="sequential")
    receipt = ws.nxc_json("send", "--to", "relay", "pass it on")
    root = receipt["thread_id"]
    waited = ws.nxc("wait", "--thread", root, "--timeout", "300", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert [run["hop"] for log in logs for run in runs(log)] == ["1"] * 9
    assert not [o for o in ws.outcomes() if o["kind"] == "refused"]
    body = _supervisor_post(ws, root, "relay")["body"]
    assert [body.index(f'from="ab12/{n}"') for n in names] == sorted(
        body.index(f'from="ab12/{n}"') for n in names)
    assert "No answer from" not in body
    poll(lambda: all_idle(ws), what="every session to end")
    assert [s["hop"] for s in ws.sessions()] == [1] * 9


def test_round_timeout_goes_stale(tmp_path):
    ws = make_workspace(tmp_path)
    ws.scripted("quick", reply="quick answer")
    ws.scripted("sloth", sleep=600, reply="too late")
    ws.channel(name="race", members=["quick", "sloth"], flow="parallel", timeout="3s")
    receipt = ws.nxc_json("send", "--to", "race", "answer fast")
    sloth = slots(ws, receipt["thread_id"])["ab12/sloth"]["thread_id"]
    waited = ws.nxc("wait", "--thread", sloth, "--timeout", "120", "--json", check=False)
    assert waited.returncode == 3, waited.stdout + waited.stderr  # stale
    thread = ws.nxc_json("threads", "show", sloth)
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
    states = {t["thread_id"]: t["state"] for t in op["threads"]}
    assert states[sloth] == "stale" and states[receipt["thread_id"]] == "answered"


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
    sloth = slots(ws, receipt["thread_id"])["ab12/sloth"]
    assert sloth["deadline"] == at  # and every slot's
    waited = ws.nxc("wait", "--thread", sloth["thread_id"], "--timeout", "120", "--json",
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
    assert "ab12/__channel-duo" in runs(coord)[1]["prompt"]
    # the round's thread hangs under coord's thread, its slots under it; coord runs at
    # hop 1, both members at hop 2
    poll(lambda: all_idle(ws), what="every session to end")
    (op,) = ws.nxc_json("status", "--thread", receipt["thread_id"])["operations"]
    assert [t["depth"] for t in op["threads"]] == [0, 1, 2, 2]
    assert op["threads"][1]["opener"] == "ab12/coord"
    assert {t["opener"] for t in op["threads"][2:]} == {"ab12/__channel-duo"}
    assert sorted(s["hop"] for s in ws.sessions()) == [1, 2, 2]


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
    # the escalation is in asker's slot, under the round coord opened
    assert len(escalated) == 1 and escalated[0]["expects"] == ["ab12/asker"]
    assert escalated[0]["opener"] == "ab12/__channel-duo" and escalated[0]["depth"] == 2


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
        assert request["max_tokens"] == 400  # nixx's own call: bounded


def test_a_round_summary_waits_while_a_users_turn_runs(tmp_path):
    """With `nixx serve` reachable, a round's summary is one of the server's own calls
    (`POST /v1/background/completions`): bounded, and run only once the user's turn that
    holds the backend is done — never beside it."""
    import threading

    import httpx

    from nixx.config import load_settings
    from nixx.server.app import create_app
    from nixx.testing.fake_llm import FakeLLM, Reply
    from nixx.testing.live_server import LiveServer

    release = threading.Event()
    seen_during_turn = []

    with FakeLLM() as llm:
        def respond(body):
            if body["messages"][0]["content"] == "Summarise the votes in one line.":
                seen_during_turn.append(not release.is_set())
                return Reply(content="one go, one wait")
            release.wait(60)  # the user's turn holds the backend
            return Reply(content="the user's answer")

        llm.responder = respond
        settings = load_settings(chat_base_url=llm.base_url, embed_provider="openai",
                                 embed_base_url=llm.base_url, embed_model="fake-embed",
                                 workspace=tmp_path, intent_interval=10_000)
        with LiveServer(create_app(settings)) as server:
            try:
                ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url,
                                    NIXX_PORT=str(server.port))
                ws.scripted("north", reply="north: go")
                ws.scripted("south", reply="south: wait")
                ws.channel(name="poll", members=["north", "south"], on_complete="summarize",
                           summary_prompt="Summarise the votes in one line.")
                turn = threading.Thread(target=lambda: httpx.post(
                    f"{server.base_url}/v1/chat/completions", timeout=120,
                    json={"model": "m", "messages": [{"role": "user", "content": "hello"}]}))
                turn.start()
                poll(lambda: len(llm.chat_requests) == 1, what="the user's turn")
                receipt = ws.nxc_json("send", "--to", "poll", "vote")
                # the summary is asked for, and waits at the server's gate for the turn
                poll(lambda: server.service._llm.gate.waiting == 1, what="the summary to wait")
                assert len(llm.chat_requests) == 1
                release.set()
                turn.join(60)
                assert ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                              check=False).returncode == 0
                post = poll(lambda: _supervisor_post(ws, receipt["thread_id"], "poll"),
                            what="the supervisor's summary")
                assert post["body"] == "one go, one wait"
                assert seen_during_turn == [False]
                assert llm.peak_in_flight == 1
                summary = llm.chat_requests[1]
                assert summary["max_tokens"] == 400  # bounded
                # nothing of it went into the memory
                rows = server.service._store.last_buffer_rows(100)
                assert [r.content for r in rows] == ["hello", "the user's answer"]
            finally:
                release.set()


def test_sequential_round_waits_for_a_member_without_a_runtime(tmp_path):
    """docs/sync.md: a member without a runtime (a person, or an agent in another clone)
    answers in its slot; a sequential round waits for that answer before the next member
    starts, and the hand-back holds it (it used to move on at once: the next member ran,
    the round settled without the person's answer)."""
    ws = make_workspace(tmp_path)
    ws.persona("person")  # no runtime: a mailbox
    second = ws.scripted("reviewer", reply="review: agreed")
    ws.channel(name="pair", members=["person", "reviewer"], flow="sequential")
    receipt = ws.nxc_json("send", "--to", "pair", "pick a database")
    root = receipt["thread_id"]
    assert receipt["sessions"] == []  # nobody started: the round waits for the person
    assert runs(second) == []
    slot = slots(ws, root)["ab12/person"]["thread_id"]
    ws.nxc_json("reply", "--thread", slot, "person: use SQLite",
                env={**ws.env, "NXC_ACTOR": "ab12/person"})
    waited = ws.nxc("wait", "--thread", root, "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (r_run,) = runs(second)
    assert '<message from="ab12/person">\nperson: use SQLite\n</message>' in r_run["prompt"]
    post = _supervisor_post(ws, root, "pair")
    assert "person: use SQLite" in post["body"] and "review: agreed" in post["body"]
