"""Every agent loop is bounded: two personas whose runtimes always answer each other in a
thread are stopped by the resume bounds (per thread, per chain), the bound that fires is a
`refused` outcome (reason `resume_limit`) visible in `nxc status`. Real `nxc` processes,
real supervisors, scripted runtimes that always reply."""

from __future__ import annotations

import json

import pytest

from .harness import PYTHON, all_idle, make_workspace, poll

pytestmark = pytest.mark.slow  # chains of real supervisors and runtimes

# argv: LOG PROMPT. A fresh run with a `--to` in the prompt sends the task on; any other
# run answers in the thread the newest message came from — forever.
PINGPONG = r'''
import json, os, re, subprocess, sys
log, prompt = sys.argv[1], sys.argv[2]
def nxc(*args):
    r = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", *args, "--json"],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr
with open(log, "a") as fh:
    fh.write(json.dumps({"session": os.environ["NXC_SESSION"],
                         "actor": os.environ["NXC_ACTOR"], "hop": os.environ["NXC_HOP"],
                         "resumed": prompt.startswith("New messages")}) + "\n")
m = re.search(r"forward to (\w+)", prompt)
if m and not prompt.startswith("New messages"):
    nxc("send", "--to", m.group(1), "ping")
else:
    found = re.findall(r"in thread (t-[0-9a-z-]+):", prompt) or re.findall(
        r"Thread (t-[0-9a-z-]+) awaits", prompt)
    nxc("reply", "--thread", found[-1], "pong from " + os.environ["NXC_ACTOR"])
'''


def _pair(ws):
    script = ws.root / "pingpong.py"
    script.write_text(PINGPONG)
    log = ws.root / "runs.jsonl"
    for name in ("alice", "bob"):
        ws.persona(name, runtime={"start": [PYTHON, str(script), str(log), "{prompt}"]})
    return log


def _runs(log):
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _refused(ws):
    return [o for o in ws.outcomes() if o["kind"] == "refused"
            and o["payload"]["reason"] == "resume_limit"]


def test_a_ping_pong_in_one_thread_stops_at_the_thread_bound(tmp_path):
    ws = make_workspace(tmp_path, NXC_MAX_THREAD_RESUMES="4")
    log = _pair(ws)
    receipt = ws.nxc_json("send", "--to", "alice", "forward to bob")
    refused = poll(lambda: _refused(ws), what="the resume bound to fire")
    poll(lambda: all_idle(ws), what="every session to end")
    payload = refused[0]["payload"]
    assert payload["scope"] == "thread" and payload["limit"] == 4 and payload["count"] == 4
    assert "NXC_MAX_THREAD_RESUMES=4" in payload["msg"]
    runs = _runs(log)
    assert sum(r["resumed"] for r in runs) == 4  # exactly the bound, then nothing
    assert len(runs) == 6  # alice and bob once each, then four resumes
    assert {r["hop"] for r in runs if r["actor"] == "ab12/bob"} == {"2"}  # resumes keep depth
    assert len(_refused(ws)) == 1

    status = ws.nxc_json("status", "--all")
    op = next(o for o in status["operations"] if o["root"] == receipt["thread_id"])
    assert any(r["reason"] == "resume_limit" for r in op["refusals"])
    human = ws.nxc("status", "--all").stdout
    assert "refused:" in human and "(resume_limit)" in human


def test_the_chain_bound_stops_a_loop_across_threads(tmp_path):
    ws = make_workspace(tmp_path, NXC_MAX_CHAIN_RESUMES="3")
    log = _pair(ws)
    ws.nxc_json("send", "--to", "alice", "forward to bob")
    refused = poll(lambda: _refused(ws), what="the chain bound to fire")
    poll(lambda: all_idle(ws), what="every session to end")
    assert refused[0]["payload"]["scope"] == "chain" and refused[0]["payload"]["limit"] == 3
    assert sum(r["resumed"] for r in _runs(log)) == 3


def test_an_agent_cannot_lift_the_bound_from_inside(tmp_path):
    """The bound is recorded on the session by the shell that started the chain; an agent
    setting a higher NXC_MAX_THREAD_RESUMES in its own `nxc` calls changes nothing."""
    ws = make_workspace(tmp_path, NXC_MAX_THREAD_RESUMES="2")
    script = ws.root / "pingpong.py"
    script.write_text(PINGPONG.replace('[sys.executable, "-m", "nixx.cli.nxc"',
                                       '["env", "NXC_MAX_THREAD_RESUMES=50", sys.executable, '
                                       '"-m", "nixx.cli.nxc"'))
    log = ws.root / "runs.jsonl"
    for name in ("alice", "bob"):
        ws.persona(name, runtime={"start": [PYTHON, str(script), str(log), "{prompt}"]})
    ws.nxc_json("send", "--to", "alice", "forward to bob")
    poll(lambda: _refused(ws), what="the resume bound to fire")
    poll(lambda: all_idle(ws), what="every session to end")
    assert sum(r["resumed"] for r in _runs(log)) == 2
