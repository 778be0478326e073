"""Follow-ups are answered: the opener's reply to a persona conversation whose expectation
was met opens a new turn for that persona (the expectation re-declared), the persona is
resumed with a prompt saying how to answer, and its second answer lands in the thread."""

from __future__ import annotations

import re

from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall

from .harness import all_idle, make_workspace, poll, runs


def test_a_follow_up_to_an_answered_thread_is_answered_in_it(tmp_path):
    ws = make_workspace(tmp_path)
    log = ws.scripted("reviewer", reply="the storage layer looks fine",
                      on_resume="about the sync layer:")
    receipt = ws.nxc_json("send", "--to", "reviewer", "please review the storage layer")
    tid = receipt["thread_id"]
    assert ws.nxc("wait", "--thread", tid, "--timeout", "120", check=False).returncode == 0
    poll(lambda: all_idle(ws), what="the first run to end")

    out = ws.nxc_json("reply", "--thread", tid, "now look at the sync layer")
    assert out["follow_up"] is True and out["expects"] == ["ab12/reviewer"]
    assert out["complete"] is False and out["resumed"] == receipt["session"]
    assert [o["kind"] for o in ws.log_ops("message")].count("thread_expects") == 1
    waited = ws.nxc("wait", "--thread", tid, "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr

    thread = ws.nxc_json("threads", "show", tid)
    assert [m["sender"] for m in thread["messages"]] == [
        "ab12/operator", "ab12/reviewer", "ab12/operator", "ab12/reviewer"]
    assert thread["messages"][-1]["body"].startswith("about the sync layer:")
    assert thread["complete"] is True
    resumed = runs(log)[1]
    assert resumed["resumed"] is True and resumed["session"] == receipt["session"]
    # the resume prompt carries the follow-up and says how to answer
    assert "now look at the sync layer" in resumed["prompt"]
    assert f"nxc reply --thread {tid}" in resumed["prompt"]
    human = ws.nxc("threads", "show", tid).stdout
    assert human.rstrip().endswith(thread["messages"][-1]["body"].rstrip())


def test_a_reply_while_the_thread_is_still_open_is_not_a_follow_up(tmp_path):
    ws = make_workspace(tmp_path)
    ws.persona("silent")  # no runtime: nobody answers, the thread stays open
    receipt = ws.nxc_json("send", "--to", "silent", "hello")
    out = ws.nxc_json("reply", "--thread", receipt["thread_id"], "are you there?")
    assert out["follow_up"] is False and out["expects"] is None
    kinds = [o["kind"] for o in ws.log_ops("message")]
    assert "post" in kinds and "thread_expects" not in kinds


def test_the_builtin_runtime_answers_a_follow_up_with_its_history(tmp_path):
    with FakeLLM() as llm:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        ws.persona("reviewer", runtime="nixx", tools=[])

        def respond(body):
            msgs = body["messages"]
            last = msgs[-1]
            if last["role"] == "tool":
                return Reply(content="done")
            text = str(last.get("content"))
            tid = re.search(r"Thread (t-[0-9a-z-]+) awaits", text).group(1)
            answer = "sync looks racy" if "sync layer" in text else "storage looks fine"
            return Reply(tool_calls=[ToolCall("nxc_reply", {"thread": tid, "body": answer},
                                              id=f"c{len(msgs)}")])

        llm.responder = respond
        receipt = ws.nxc_json("send", "--to", "reviewer", "please review the storage layer")
        tid = receipt["thread_id"]
        assert ws.nxc("wait", "--thread", tid, "--timeout", "120", check=False).returncode == 0
        poll(lambda: all_idle(ws), what="the first run to end")
        ws.nxc_json("reply", "--thread", tid, "now look at the sync layer")
        assert ws.nxc("wait", "--thread", tid, "--timeout", "120", check=False).returncode == 0
        bodies = [m["body"] for m in ws.nxc_json("threads", "show", tid)["messages"]]
        assert bodies == ["please review the storage layer", "storage looks fine",
                          "now look at the sync layer", "sync looks racy"]
        follow = [b for b in llm.chat_requests if "sync layer" in str(b["messages"][-1])][0]
        assert "storage looks fine" in str(follow["messages"])  # the first run's history
        assert f'nxc_reply tool with thread "{tid}"' in follow["messages"][-1]["content"]
