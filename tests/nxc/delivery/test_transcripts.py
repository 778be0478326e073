"""Transcripts: the stream-json parser, caps, nesting, sequence, atomic batches and
retention with a controlled clock; the session and transcript CLI verbs."""

from __future__ import annotations

import json

import pytest

from nixx.errors import AlreadyRunning, NotFound, ValidationError
from nixx.nxc.delivery import sessions
from nixx.nxc.delivery.localstore import LocalStore
from nixx.nxc.delivery.stream_claude import StreamJsonParser
from nixx.nxc.delivery.transcripts import DAY_MS, TranscriptStore

from .harness import make_workspace

CLAUDE_STREAM = [
    {"type": "system", "subtype": "init", "session_id": "cc-1", "model": "claude-x",
     "tools": ["Bash", "Task"], "cwd": "/w"},
    {"type": "assistant", "message": {"content": [
        {"type": "thinking", "thinking": "t" * 5000},
        {"type": "text", "text": "I will delegate"},
        {"type": "tool_use", "id": "task1", "name": "Task",
         "input": {"subagent_type": "researcher", "prompt": "look"}}]},
     "parent_tool_use_id": None, "session_id": "cc-1"},
    {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "sub-bash", "name": "Bash", "input": {"command": "ls"}}]},
     "parent_tool_use_id": "task1", "session_id": "cc-1"},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "sub-bash",
         "content": [{"type": "text", "text": "r" * 9000}]}]},
     "parent_tool_use_id": "task1", "session_id": "cc-1"},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "task1", "content": "found it",
         "is_error": False}]}, "parent_tool_use_id": None},
    {"type": "stream_event", "event": {"delta": "x"}},
    {"type": "result", "subtype": "success", "is_error": False, "result": "all done",
     "num_turns": 2, "session_id": "cc-1"},
]


def _parse(lines):
    parser = StreamJsonParser()
    out = []
    for line in lines:
        out.extend(parser.parse_line(line if isinstance(line, str) else json.dumps(line)))
    return out


def test_stream_json_normalised_capped_and_nested(tmp_path):
    entries = _parse(CLAUDE_STREAM + ["this is not json"])
    assert [e["kind"] for e in entries] == [
        "session_init", "thinking", "assistant", "tool_use", "tool_use", "tool_result",
        "tool_result", "stream_event", "result", "error"]
    assert entries[4]["parentToolUseId"] == "task1"
    assert entries[4]["subagentType"] == "researcher"
    local = LocalStore(str(tmp_path / "local.sqlite"))
    store = TranscriptStore(local, now=lambda: 10 * DAY_MS)
    out = store.append("s-1", entries)
    assert (out["first_seq"], out["last_seq"]) == (1, 10)
    shown = store.show("s-1")
    top = shown["entries"]
    assert [e["kind"] for e in top] == [
        "session_init", "thinking", "assistant", "tool_use", "tool_result", "stream_event",
        "result", "error"]
    thinking = top[1]["data"]
    assert len(thinking["text"]) == 4000 and thinking["truncated"] == 5000
    task = top[3]
    assert [c["kind"] for c in task["children"]] == ["tool_use", "tool_result"]
    sub_result = task["children"][1]["data"]
    assert len(sub_result["content"]) == 8000 and sub_result["truncated"] == 9000
    assert top[5]["data"]["event"] == {"delta": "x"}  # unknown kind kept as given
    assert top[7]["data"]["raw"] == "this is not json"


def test_seq_continues_and_a_bad_batch_stores_nothing(tmp_path):
    local = LocalStore(str(tmp_path / "local.sqlite"))
    store = TranscriptStore(local, now=lambda: 1_000)
    store.append("s-1", [{"kind": "assistant", "data": {"text": "one"}}])
    with pytest.raises(ValidationError, match="entry 2"):
        store.append("s-1", [{"kind": "assistant", "data": {"text": "two"}}, {"data": {}}])
    out = store.append("s-1", [{"kind": "result", "data": {"text": "three"}},
                               {"kind": "mine", "at": "2026-01-01T00:00:00Z", "data": [1]}])
    assert (out["first_seq"], out["last_seq"]) == (2, 3)
    assert [e["seq"] for e in store.entries("s-1")] == [1, 2, 3]
    assert [e["data"] for e in store.entries("s-1")][0] == {"text": "one"}
    assert store.entries("s-1")[2]["at"].startswith("2026-01-01T00:00:00")


def test_retention_prunes_whole_sessions_on_the_first_flush_of_a_new_session(tmp_path):
    local = LocalStore(str(tmp_path / "local.sqlite"))
    clock = {"now": 60 * DAY_MS}
    store = TranscriptStore(local, now=lambda: clock["now"])
    store.append("old", [{"kind": "assistant", "at": 50 * DAY_MS, "data": {"text": "a"}}])
    store.append("old", [{"kind": "assistant", "at": 60 * DAY_MS, "data": {"text": "b"}}])
    clock["now"] = 85 * DAY_MS
    store.append("recent", [{"kind": "assistant", "data": {"text": "c"}}])
    # "old" last wrote at day 60; at day 89 it is 29 days old: kept
    clock["now"] = 89 * DAY_MS
    assert store.append("new1", [{"kind": "assistant", "data": {"text": "x"}}])["pruned"][
        "sessions"] == []
    # a later flush of an EXISTING session never prunes
    clock["now"] = 200 * DAY_MS
    assert "pruned" not in store.append("new1", [{"kind": "result", "data": {}}])
    assert len(store.entries("old")) == 2
    # dry run lists, removes nothing
    dry = store.prune(dry_run=True)
    assert [s["session"] for s in dry["sessions"]] == ["old", "recent"]
    assert len(store.entries("old")) == 2
    # day 91 after "old"'s last entry: the first flush of a new session removes it whole
    clock["now"] = 91 * DAY_MS
    pruned = store.append("new2", [{"kind": "assistant", "data": {"text": "y"}}])["pruned"]
    assert [s["session"] for s in pruned["sessions"]] == ["old"] and pruned["entries"] == 2
    assert store.entries("old") == [] and len(store.entries("recent")) == 1
    assert store.search("b") == [] and store.search("c")[0]["session"] == "recent"


def test_sessions_claim_queue_and_already_running(tmp_path):
    import os

    local = LocalStore(str(tmp_path / "local.sqlite"))
    sid = sessions.create(local, persona="ab12/p", thread_id="t-1", runtime={"builtin": "nixx"},
                          hop=1, max_hops=8, parent_session=None)
    sessions.set_pid(local, sid, os.getpid())  # a live process runs it
    with pytest.raises(AlreadyRunning):
        sessions.claim(local, sid)
    assert sessions.claim_or_queue(local, sid, thread_id="t-2", message_id="m-1",
                                   sender="ab12/q", body="first") is False
    assert sessions.claim_or_queue(local, sid, thread_id="t-3", message_id="m-2",
                                   sender="ab12/r", body="second") is False
    taken = sessions.finish_or_take(local, sid, 0)
    assert [w["body"] for w in taken] == ["first", "second"]
    assert sessions.get(local, sid)["state"] == "running"  # resumed in place
    assert sessions.finish_or_take(local, sid, 0) == []
    assert sessions.get(local, sid)["state"] == "exited"
    sessions.claim(local, sid)  # exited: may run again
    # a running session whose process is gone counts as lost, and can be claimed
    sessions.set_pid(local, sid, 2**22 + 12345)
    assert sessions.get(local, sid)["state"] == "lost"
    assert sessions.claim_or_queue(local, sid, thread_id="t-4", message_id=None,
                                   sender="ab12/q", body="x") is True
    with pytest.raises(NotFound):
        sessions.claim(local, "s-nope")


def test_session_and_transcript_cli(tmp_path):
    ws = make_workspace(tmp_path)
    ws.persona("mailbox")  # no runtime: nobody is started
    receipt = ws.nxc_json("send", "--to", "mailbox", "hello")
    assert receipt["spawned"] is False and receipt["session"] is None
    assert "declares no `runtime`" in receipt["warnings"][0]

    missing = ws.nxc("session", "bind", "s-unknown", "rt-1", "--json", check=False)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"]["kind"] == "not_found"
    missing = ws.nxc("transcript", "append", "s-unknown", "--json", stdin="", check=False)
    assert json.loads(missing.stdout)["error"]["kind"] == "not_found"

    ws.persona("ext", runtime={"start": ["nxc-missing-cli", "{prompt}"]})
    sid = ws.nxc_json("send", "--to", "ext", "go")["session"]
    bound = ws.nxc_json("session", "bind", sid, "claude-abc")
    assert bound["runtime_session"] == "claude-abc" and bound["state"] == "failed"
    stream = "\n".join(json.dumps(x) for x in CLAUDE_STREAM) + "\n"
    out = ws.nxc_json("transcript", "append", sid, "--format", "stream-json", stdin=stream)
    assert out["stored"] == 9
    bad = ws.nxc("transcript", "append", sid, "--json", stdin='{"kind": "assistant"}\nnope\n',
                 check=False)
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["kind"] == "validation"
    shown = ws.nxc_json("transcript", "show", sid)
    assert shown["count"] == 9  # the bad batch stored nothing
    human = ws.nxc("transcript", "show", sid).stdout
    assert "[researcher]" in human and "tool_use" in human
    hits = ws.nxc_json("search", "--transcripts", "delegate")
    assert hits[0]["session"] == sid and hits[0]["persona"] == "ab12/ext"
    dry = ws.nxc_json("transcript", "prune", "--dry-run", "--keep-days", "0")
    assert [s["session"] for s in dry["sessions"]] == [sid] and dry["dry_run"] is True
    assert ws.nxc_json("transcript", "show", sid)["count"] == 9
    listed = ws.nxc_json("session", "state")["sessions"]
    assert [s["session"] for s in listed] == [sid]
    assert ws.nxc("session", "state", "s-nope", check=False).returncode == 1
