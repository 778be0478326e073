"""Runtime presets (`runtime: claude-code | codex | gemini`) with scripted stand-ins: a small
Python program named like the real CLI, put on the PATH by the test, that checks it was
called with the preset's start or resume argv, prints exactly that tool's machine-readable
output (Claude Code stream-json, `codex exec --json`, Gemini `stream-json`), and answers
with `nxc reply` like the real agent would. Each test asserts the transcript entries the
supervisor parsed, the answer posted in the thread, the runtime's own session id bound
from the output, and the resume argv naming it on a follow-up."""

from __future__ import annotations

import json
import os
import sys

import pytest

from .harness import all_idle, make_workspace, poll

# Shared by every stand-in: argv check, prompt → thread, `nxc reply`, a log line per run.
COMMON = r'''
import json, os, re, subprocess, sys
LOG = {log!r}
def emit(obj):
    print(json.dumps(obj), flush=True)
def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)
def thread_of(prompt):
    m = re.search(r"Thread (t-[0-9a-z-]+) awaits", prompt) or re.search(
        r"in thread (t-[0-9a-z-]+):", prompt)
    return m.group(1) if m else fail("no thread in the prompt")
def reply(thread, body):
    r = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", "reply", "--thread", thread,
                        body, "--json"], capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()
def log(**fields):
    with open(LOG, "a") as fh:
        fh.write(json.dumps({{"argv": sys.argv[1:], **fields}}) + "\n")
'''

CLAUDE = COMMON + r'''
args = sys.argv[1:]
if args[:1] != ["-p"] or "--output-format" not in args or args[args.index("--output-format") + 1] != "stream-json" or "--verbose" not in args:
    fail("usage: claude -p PROMPT --output-format stream-json --verbose")
prompt = args[1]
resumed = args[args.index("--resume") + 1] if "--resume" in args else None
sid = resumed or "cc-sess-1"
log(resumed=resumed)
thread = thread_of(prompt)
emit({{"type": "system", "subtype": "init", "session_id": sid, "model": "claude-standin",
      "cwd": os.getcwd(), "tools": ["Bash"]}})
emit({{"type": "assistant", "message": {{"content": [
    {{"type": "thinking", "thinking": "the task is clear"}},
    {{"type": "tool_use", "id": "toolu_1", "name": "Bash",
     "input": {{"command": "nxc reply --thread " + thread}}}}]}}, "parent_tool_use_id": None,
     "session_id": sid}})
code, out = reply(thread, "claude: again" if resumed else "claude: done")
emit({{"type": "user", "message": {{"content": [{{"type": "tool_result", "tool_use_id": "toolu_1",
      "content": out, "is_error": code != 0}}]}}, "parent_tool_use_id": None, "session_id": sid}})
emit({{"type": "assistant", "message": {{"content": [{{"type": "text", "text": "answered"}}]}},
      "parent_tool_use_id": None, "session_id": sid}})
emit({{"type": "result", "subtype": "success", "is_error": False, "result": "answered",
      "num_turns": 2, "session_id": sid, "total_cost_usd": 0.0}})
'''

CODEX = COMMON + r'''
args = sys.argv[1:]
if args[:2] != ["exec", "--json"] or "--skip-git-repo-check" not in args:
    fail("usage: codex exec --json [--full-auto] [--skip-git-repo-check] [resume ID] PROMPT")
rest = [a for a in args[2:] if not a.startswith("--")]
resumed = rest[1] if rest[:1] == ["resume"] else None
prompt = rest[-1]
log(resumed=resumed)
thread = thread_of(prompt)
emit({{"type": "thread.started", "thread_id": resumed or "cx-thread-1"}})
emit({{"type": "turn.started"}})
emit({{"type": "item.completed", "item": {{"id": "item_0", "type": "reasoning",
      "text": "**Answering** in the thread"}}}})
cmd = "nxc reply --thread " + thread
emit({{"type": "item.started", "item": {{"id": "item_1", "type": "command_execution",
      "command": cmd, "aggregated_output": "", "exit_code": None, "status": "in_progress"}}}})
code, out = reply(thread, "codex: again" if resumed else "codex: done")
emit({{"type": "item.completed", "item": {{"id": "item_1", "type": "command_execution",
      "command": cmd, "aggregated_output": out, "exit_code": code,
      "status": "completed" if code == 0 else "failed"}}}})
emit({{"type": "item.completed", "item": {{"id": "item_2", "type": "agent_message",
      "text": "answered"}}}})
emit({{"type": "turn.completed", "usage": {{"input_tokens": 10, "cached_input_tokens": 0,
      "output_tokens": 5}}}})
'''

GEMINI = COMMON + r'''
args = sys.argv[1:]
if "--output-format=stream-json" not in args or "-p" not in args:
    fail("usage: gemini [--resume ID] --output-format=stream-json -p PROMPT")
prompt = args[args.index("-p") + 1]
resumed = args[args.index("--resume") + 1] if "--resume" in args else None
sid = resumed or "gm-sess-1"
log(resumed=resumed)
thread = thread_of(prompt)
emit({{"type": "init", "timestamp": "2026-12-01T00:00:00Z", "session_id": sid,
      "model": "gemini-standin"}})
emit({{"type": "message", "role": "user", "content": "(the prompt)"}})
emit({{"type": "message", "role": "assistant", "content": "I will ", "delta": True}})
emit({{"type": "message", "role": "assistant", "content": "answer.", "delta": True}})
emit({{"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "call-1",
      "parameters": {{"command": "nxc reply --thread " + thread}}}})
code, out = reply(thread, "gemini: again" if resumed else "gemini: done")
emit({{"type": "tool_result", "tool_id": "call-1", "status": "success" if code == 0 else "error",
      "output": out}})
emit({{"type": "error", "severity": "warning", "message": "loop detection is off"}})
emit({{"type": "message", "role": "assistant", "content": "answered", "delta": True}})
emit({{"type": "result", "status": "success", "stats": {{"total_tokens": 15}}}})
'''

CASES = {
    "claude-code": ("claude", CLAUDE, "cc-sess-1", [
        "session_init", "thinking", "tool_use", "tool_result", "assistant", "result"]),
    "codex": ("codex", CODEX, "cx-thread-1", [
        "session_init", "thinking", "tool_use", "tool_result", "assistant", "result"]),
    "gemini": ("gemini", GEMINI, "gm-sess-1", [
        "session_init", "user", "assistant", "tool_use", "tool_result", "error", "assistant",
        "result"]),
}


def _install(tmp_path, name: str, body: str, log) -> str:
    folder = tmp_path / "standin-bin"
    folder.mkdir(exist_ok=True)
    exe = folder / name
    exe.write_text(f"#!{sys.executable}\n" + body.format(log=str(log)))
    exe.chmod(0o755)
    return str(folder)


def _runs(log) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("preset", sorted(CASES))
def test_preset_start_transcript_answer_and_resume(tmp_path, preset):
    exe, body, runtime_sid, kinds = CASES[preset]
    log = tmp_path / f"{exe}.runs.jsonl"
    folder = _install(tmp_path, exe, body, log)
    ws = make_workspace(tmp_path)
    ws.env["PATH"] = folder + os.pathsep + ws.env["PATH"]  # the stand-in is what PATH finds
    ws.persona("helper", runtime=preset)
    listed = ws.nxc_json("list")["personas"][0]["runtime"]
    assert listed["preset"] == preset and listed["start"][0] == exe

    receipt = ws.nxc_json("send", "--to", "helper", "please help")
    tid, sid = receipt["thread_id"], receipt["session"]
    waited = ws.nxc("wait", "--thread", tid, "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    thread = ws.nxc_json("threads", "show", tid)
    assert thread["messages"][-1]["sender"] == "ab12/helper"
    assert thread["messages"][-1]["body"] == f"{exe}: done"
    poll(lambda: all_idle(ws), what="the run to end")
    entries = ws.nxc_json("transcript", "show", sid)["entries"]
    assert [e["kind"] for e in entries] == kinds
    assert entries[0]["data"]["session_id"] == runtime_sid
    use = next(e for e in entries if e["kind"] == "tool_use")
    result = next(e for e in entries if e["kind"] == "tool_result")
    assert use["toolUseId"] == result["toolUseId"] and result["data"]["is_error"] is False
    assert tid in json.dumps(use["data"]["input"]) and '"posted": true' in result["data"][
        "content"].replace('"posted":true', '"posted": true')
    assert ws.nxc_json("session", "state", sid)["runtime_session"] == runtime_sid
    if preset == "gemini":  # streamed chunks joined into one entry
        assert entries[2]["data"]["text"] == "I will answer."

    # a follow-up by the opener resumes the same session with the runtime's own id
    ws.nxc_json("reply", "--thread", tid, "one more thing")
    poll(lambda: len(_runs(log)) == 2, what="the resumed run")
    first, second = _runs(log)
    assert first["resumed"] is None and second["resumed"] == runtime_sid
    poll(lambda: ws.nxc_json("threads", "show", tid)["messages"][-1]["body"] == f"{exe}: again",
         what="the answer to the follow-up")
    poll(lambda: all_idle(ws), what="the resumed run to end")
    kinds_after = [e["kind"] for e in ws.nxc_json("transcript", "show", sid)["entries"]]
    assert kinds_after == kinds + kinds  # the resumed run continues the same transcript


def test_an_unknown_runtime_name_lists_the_presets(tmp_path):
    ws = make_workspace(tmp_path)
    ws.persona("helper", runtime="cursor-agent")
    proc = ws.nxc("list", "--json", check=False)
    err = json.loads(proc.stdout)["error"]
    assert err["kind"] == "validation" and "helper.yaml" in err["msg"]
    assert "claude-code, codex, gemini, nixx" in err["msg"]
