"""A channel's `visibility`, enforced on every read, through the real CLI in subprocesses.

`requester_only` (the default): a member sees the opening message, the opener's messages
and its own replies; in a sequential channel also the answers handed to it (the earlier
members'); the requester (the thread's opener) sees everything. `all_members`: members
read each other. A round is a tree: the task and the supervisor's hand-back are in the
round's thread, each member's answer in its own slot thread under it. Members here
declare no runtime: people answer for them by hand (`NXC_ACTOR=<member> nxc reply`, no
`--thread`: the slot is the member's one open conversation), which is what makes the
order of answers exact."""

from __future__ import annotations

from .harness import make_workspace, poll, runs, slots


def _as(ws, who: str, *args: str):
    return ws.nxc_json(*args, env={"NXC_ACTOR": who})


def _bodies(thread: dict) -> list[str]:
    return [m["body"] for m in thread["messages"]]


def _round(ws, *, flow: str, visibility: str | None, members: tuple[str, ...]) -> str:
    for m in members:
        ws.persona(m)
    decl = {"name": "panel", "members": list(members), "flow": flow}
    if visibility is not None:
        decl["visibility"] = visibility
    ws.channel(**decl)
    receipt = ws.nxc_json("send", "--to", "panel", "question for the panel: ship it?")
    tid = receipt["thread_id"]
    for m in members:
        out = _as(ws, m, "reply", f"{m} answer keyword{m}")
        assert out["posted"] is True and out["thread_id"] != tid
    return tid


def _tree(ws, tid: str, who: str | None = None) -> list[tuple[str, str]]:
    """(sender, body) of every message `who` sees in the round: its thread, then each
    slot in member order."""
    env = {"NXC_ACTOR": who} if who else None
    by_member = slots(ws, tid)
    members = ws.channels[-1]["members"]
    order = [tid] + [by_member[f"ab12/{m}"]["thread_id"] for m in members]
    return [(m["sender"], m["body"]) for t in order
            for m in ws.nxc_json("threads", "show", t, env=env)["messages"]]


def test_requester_only_is_the_default_and_hides_members_from_each_other(tmp_path):
    ws = make_workspace(tmp_path)
    tid = _round(ws, flow="parallel", visibility=None, members=("ann", "ben"))

    # the requester sees everything: the task, both answers, the supervisor's hand-back
    mine = ws.nxc_json("threads", "show", tid)
    assert mine["complete"] is True
    assert [m["sender"] for m in mine["messages"]] == ["ab12/operator", "ab12/__channel-panel"]
    assert [s for s, _ in _tree(ws, tid)] == [
        "ab12/operator", "ab12/__channel-panel", "ab12/ann", "ab12/ben"]

    # a member: the opening message and its own reply, nothing of the other member's,
    # nor the supervisor's hand-back (it carries the other answers)
    task = "question for the panel: ship it?"
    assert [b for _, b in _tree(ws, tid, "ann")] == [task, "ann answer keywordann"]
    assert [b for _, b in _tree(ws, tid, "ben")] == [task, "ben answer keywordben"]
    # the quorum (who answered, not what) stays visible
    ben_slot = slots(ws, tid)["ab12/ben"]["thread_id"]
    seen = _as(ws, "ann", "threads", "show", ben_slot)
    assert seen["replied"] == ["ab12/ben"] and seen["complete"] is True
    assert seen["messages"] == []

    # search: a member finds its own answer, not the other's; the requester finds both
    assert _as(ws, "ann", "search", "keywordben") == []
    assert [h["sender"] for h in _as(ws, "ann", "search", "keywordann")] == ["ab12/ann"]
    hits = ws.nxc_json("search", "keywordben")
    assert "ab12/ben" in [h["sender"] for h in hits]

    # unread (prime): the hidden messages are not unread for a member either
    prime = _as(ws, "ben", "prime")
    assert [i["sender"] for i in prime["in_turn"]] == ["ab12/operator"]
    assert prime["count"] == 1

    # a human rendering of the same read
    ann_slot = slots(ws, tid)["ab12/ann"]["thread_id"]
    human = ws.nxc("threads", "show", ann_slot, env={"NXC_ACTOR": "ann"})
    assert "keywordann" in human.stdout
    human = ws.nxc("threads", "show", ben_slot, env={"NXC_ACTOR": "ann"})
    assert "keywordben" not in human.stdout


def test_a_member_posting_in_the_round_thread_is_told_where_it_answers(tmp_path):
    ws = make_workspace(tmp_path)
    for m in ("ann", "ben"):
        ws.persona(m)
    ws.channel(name="panel", members=["ann", "ben"])
    tid = ws.nxc_json("send", "--to", "panel", "ship it?")["thread_id"]
    out = _as(ws, "ann", "reply", "--thread", tid, "yes")
    slot = slots(ws, tid)["ab12/ann"]["thread_id"]
    assert out["posted"] is True and out["complete"] is False
    assert out["warnings"] == [
        f"ab12/ann answers this round in its own thread {slot} (nxc reply --thread {slot}); "
        "this message does not count as its answer"]
    assert slots(ws, tid)["ab12/ann"]["state"] == "open"


def test_requester_follow_ups_reach_every_member(tmp_path):
    ws = make_workspace(tmp_path)
    tid = _round(ws, flow="parallel", visibility="requester_only", members=("ann", "ben"))
    ws.nxc_json("reply", "--thread", tid, "thanks both, one more question")
    ann = _as(ws, "ann", "threads", "show", tid)
    assert _bodies(ann)[-1] == "thanks both, one more question"
    assert "ben answer keywordben" not in _bodies(ann)


def test_all_members_lets_members_read_each_other(tmp_path):
    ws = make_workspace(tmp_path)
    tid = _round(ws, flow="parallel", visibility="all_members", members=("ann", "ben"))
    assert [s for s, _ in _tree(ws, tid, "ann")] == [
        "ab12/operator", "ab12/__channel-panel", "ab12/ann", "ab12/ben"]
    found = sorted(h["sender"] for h in _as(ws, "ann", "search", "keywordben"))
    assert found == ["ab12/__channel-panel", "ab12/ben"]  # the hand-back quotes it
    assert _as(ws, "ann", "prime")["count"] == 3  # the task, ben's answer, the hand-back


def test_sequential_requester_only_hands_earlier_answers_to_later_members(tmp_path):
    ws = make_workspace(tmp_path)
    tid = _round(ws, flow="sequential", visibility="requester_only",
                 members=("drafter", "reviewer", "closer"))
    task = "question for the panel: ship it?"
    assert [b for _, b in _tree(ws, tid, "drafter")] == [task, "drafter answer keyworddrafter"]
    assert [b for _, b in _tree(ws, tid, "reviewer")] == [
        task, "drafter answer keyworddrafter", "reviewer answer keywordreviewer"]
    assert [b for _, b in _tree(ws, tid, "closer")] == [
        task, "drafter answer keyworddrafter", "reviewer answer keywordreviewer",
        "closer answer keywordcloser"]
    # an earlier member never sees what came after it
    assert _as(ws, "drafter", "search", "keywordreviewer keywordcloser") == []
    assert [h["sender"] for h in _as(ws, "closer", "search", "keyworddrafter")] == [
        "ab12/drafter"]  # not the supervisor's hand-back, which quotes it too


def test_member_prompts_follow_the_visibility(tmp_path):
    """Scripted runtimes: in a requester_only parallel round a member's run never sees the
    other's answer, not even when the requester follows up (the resume carries only the
    requester's message); a later member of a sequential round gets the earlier answer."""
    ws = make_workspace(tmp_path)
    logs = {n: ws.scripted(n, reply=f"{n} private view", on_resume=f"{n} again:")
            for n in ("left", "right")}
    ws.channel(name="duo", members=["left", "right"])  # requester_only by default
    receipt = ws.nxc_json("send", "--to", "duo", "give me your view")
    tid = receipt["thread_id"]
    assert ws.nxc("wait", "--thread", tid, "--timeout", "120", check=False).returncode == 0
    poll(lambda: all(len(runs(log)) == 1 for log in logs.values()), what="both first runs")
    ws.nxc_json("reply", "--thread", tid, "follow-up for both")
    poll(lambda: all(len(runs(log)) == 2 for log in logs.values()), what="both resumes")
    for name, other in (("left", "right"), ("right", "left")):
        first, second = runs(logs[name])
        assert f"{other} private view" not in first["prompt"]
        assert second["resumed"] is True and "follow-up for both" in second["prompt"]
        assert f"{other} private view" not in second["prompt"]
    # the requester reads both answers (in the slots) and the hand-back
    assert {"ab12/left", "ab12/right", "ab12/__channel-duo"} <= {s for s, _ in _tree(ws, tid)}
