"""Hops measure spawn depth, and the chain identity cannot be shed: an agent that unsets
or forges NXC_SESSION / NXC_HOP / NXC_MAX_HOPS, or detaches from its runtime (double fork,
new session), is still inside its session — the process tree says so — so its spawns run
one hop deeper and the limit recorded by the spawner holds. Real processes throughout."""

from __future__ import annotations

import json

import pytest

from .harness import PYTHON, all_idle, make_workspace, poll

pytestmark = pytest.mark.slow  # chains of real supervisors and runtimes

# argv: CFG LOG PROMPT. Each persona sends "relay" to cfg["next"][its name] (if any), with
# its environment edited as cfg["mode"] says, and exits.
RELAY = r'''
import json, os, subprocess, sys, time
cfg, log, prompt = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
me = os.environ["NXC_ACTOR"].split("/")[-1]
with open(log, "a") as fh:
    fh.write(json.dumps({"actor": me, "session": os.environ.get("NXC_SESSION"),
                         "hop": os.environ.get("NXC_HOP")}) + "\n")
target = cfg["next"].get(me)
if target:
    env = dict(os.environ)
    mode = cfg["mode"]
    if mode in ("unset", "detach"):
        env.pop("NXC_SESSION", None)
        env["NXC_MAX_HOPS"] = "50"
    if mode in ("bogus", "detach"):
        env["NXC_SESSION"] = "s-bogus" if mode == "bogus" else ""
        env["NXC_HOP"] = "0"
    argv = [sys.executable, "-m", "nixx.cli.nxc", "send", "--to", target, "relay", "--json"]
    if mode != "detach":
        subprocess.run(argv, env=env, capture_output=True)
    else:
        done = os.path.join(os.path.dirname(log), f"{me}.sent")
        if os.fork() == 0:  # double fork in a new session: the send runs as an orphan
            os.setsid()
            if os.fork() == 0:
                subprocess.run(argv, env=env, capture_output=True)
                open(done, "w").close()
            os._exit(0)
        os.wait()
        give_up = time.monotonic() + 90
        while not os.path.exists(done) and time.monotonic() < give_up:
            time.sleep(0.05)
'''


def _chain(ws, tmp_path, mode: str):
    cfg = tmp_path / "relay.json"
    cfg.write_text(json.dumps({"mode": mode,
                               "next": {"alice": "bob", "bob": "carol", "carol": "dave"}}))
    script = ws.root / "relay.py"
    script.write_text(RELAY)
    log = ws.root / "relay.jsonl"
    for name in ("alice", "bob", "carol", "dave"):
        ws.persona(name, runtime={"start": [PYTHON, str(script), str(cfg), str(log),
                                            "{prompt}"]})
    return log


@pytest.mark.parametrize("mode", ["unset", "bogus", "detach"])
def test_an_agent_cannot_shed_its_depth_or_lift_its_limit(tmp_path, mode):
    ws = make_workspace(tmp_path, NXC_MAX_HOPS="2")
    log = _chain(ws, tmp_path, mode)
    receipt = ws.nxc_json("send", "--to", "alice", "relay")
    refused = poll(lambda: [o for o in ws.outcomes() if o["kind"] == "refused"],
                   what="the hop limit to refuse carol")
    poll(lambda: all_idle(ws), what="every session to end")
    assert refused[0]["payload"]["persona"] == "ab12/carol"
    assert (refused[0]["payload"]["hop"], refused[0]["payload"]["limit"]) == (3, 2)
    by_persona = {s["persona"]: s for s in ws.sessions()}
    assert set(by_persona) == {"ab12/alice", "ab12/bob"}  # two sessions against a limit of 2
    assert by_persona["ab12/bob"]["hop"] == 2 and by_persona["ab12/bob"]["max_hops"] == 2
    alice = by_persona["ab12/alice"]
    assert by_persona["ab12/bob"]["parent_session"] == alice["session"]
    assert by_persona["ab12/bob"]["chain"] == alice["session"] == alice["chain"]
    # the send from inside still hangs under the sender's thread (the tree knew where it stood)
    shown = ws.nxc_json("threads", "show", by_persona["ab12/bob"]["thread_id"],
                        env={"NXC_ACTOR": "alice"})
    assert shown["parent"] == receipt["thread_id"]
    assert [json.loads(x)["hop"] for x in log.read_text().splitlines()] == ["1", "2"]


def test_a_sequential_round_runs_every_member_at_the_rounds_depth(tmp_path):
    ws = make_workspace(tmp_path, NXC_MAX_HOPS="1")
    logs = [ws.scripted(name, reply=f"{name} agrees") for name in ("ann", "ben", "cy")]
    ws.channel(name="line", members=["ann", "ben", "cy"], flow="sequential")
    receipt = ws.nxc_json("send", "--to", "line", "ship it?")
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120", check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    poll(lambda: all_idle(ws), what="every member to end")
    hops = [json.loads(log.read_text())["hop"] for log in logs]
    assert hops == ["1", "1", "1"]  # no member spawned the next: none is deeper
    assert not [o for o in ws.outcomes() if o["kind"] == "refused"]
