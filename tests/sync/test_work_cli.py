"""Tasks and leases through the real CLIs (`nxc task`, `nxc lease`, `nxs sync run`) across
two clones of a bare git repository, and the pre-commit hook `nxs init` installs refusing
a real `git commit` (issue 43)."""

from __future__ import annotations

import json
import os
import subprocess

from .conftest import GIT_ENV, cli_env, run
from .test_cli import CHANNELS, _clones, as_, ok_json


def failing(tool: str, *args: str, cwd, env=None) -> dict:
    proc = run(tool, *args, "--json", cwd=cwd, env=env)
    assert proc.returncode != 0, (args, proc.stdout)
    return json.loads(proc.stdout)["error"]


def sync_both(a, b) -> None:
    for folder in (a, b, a):
        ok_json("nxs", "sync", "run", cwd=folder)


def tasks_on(folder, who: str) -> dict[str, dict]:
    return {t["id"]: t for t in ok_json("nxc", "task", "list", cwd=folder, env=as_(who))["tasks"]}


def test_a_claim_race_is_won_the_same_way_on_both_clones_and_a_dependency_blocks(tmp_path):
    _, a, b = _clones(tmp_path, {"channels.yaml": CHANNELS})
    for folder in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=folder)
    first = ok_json("nxc", "task", "add", "migrate the schema", cwd=a, env=as_("alice"))
    second = ok_json("nxc", "task", "add", "deploy", "--after", first["id"], cwd=a,
                     env=as_("alice"))
    assert second["blocked_by"] == [first["id"]]
    sync_both(a, b)
    # apart: both take the first task, each clone sees its own claim
    assert ok_json("nxc", "task", "claim", first["id"], cwd=a, env=as_("alice"))["holder"] == \
        "aaaa/alice"
    assert ok_json("nxc", "task", "claim", first["id"], cwd=b, env=as_("bob"))["holder"] == \
        "bbbb/bob"
    # the dependency: the second waits on the first
    error = failing("nxc", "task", "claim", second["id"], cwd=b, env=as_("bob"))
    assert error["kind"] == "conflict" and "waits on" in error["msg"]
    sync_both(a, b)
    on_a, on_b = tasks_on(a, "alice"), tasks_on(b, "bob")
    assert on_a == on_b  # one winner, the same on both
    holder = on_a[first["id"]]["holder"]
    loser = "bbbb/bob" if holder == "aaaa/alice" else "aaaa/alice"
    assert [c["by"] for c in on_a[first["id"]]["conflicts"]] == [loser]
    # the loser cannot finish it; the holder can, and then the second is claimable
    win_dir, win_as = (a, "alice") if holder == "aaaa/alice" else (b, "bob")
    lose_dir, lose_as = (b, "bob") if holder == "aaaa/alice" else (a, "alice")
    assert failing("nxc", "task", "done", first["id"], cwd=lose_dir,
                   env=as_(lose_as))["kind"] == "conflict"
    assert ok_json("nxc", "task", "done", first["id"], cwd=win_dir, env=as_(win_as))["state"] == "done"
    sync_both(a, b)
    taken = ok_json("nxc", "task", "claim", second["id"], cwd=lose_dir, env=as_(lose_as))
    assert (taken["state"], taken["holder"]) == ("claimed", loser)
    listed = run("nxc", "task", "list", cwd=a, env=as_("alice"))
    assert "refused claim by" in listed.stdout and "migrate the schema" in listed.stdout
    # the operations view says who holds what
    status = ok_json("nxc", "status", cwd=lose_dir, env=as_(lose_as))
    assert [(t["id"], t["holder"]) for t in status["held"]] == [(second["id"], loser)]
    shown = run("nxc", "status", cwd=lose_dir, env=as_(lose_as))
    assert f"task {second['id']} held by {loser}: deploy" in shown.stdout


def commit(folder, message: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "commit", "-qm", message], cwd=folder, capture_output=True,
                          text=True, env={**os.environ, **GIT_ENV, **env})


def test_the_pre_commit_hook_refuses_a_path_leased_to_another_handle_until_released(tmp_path):
    _, a, b = _clones(tmp_path, {"channels.yaml": CHANNELS})
    for folder in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=folder)
    hook = a / ".git" / "hooks" / "pre-commit"
    assert hook.is_file() and os.access(hook, os.X_OK) and "lease-check" in hook.read_text()
    leased = ok_json("nxc", "lease", "src/*.py", "--for", "2h", "--thread", "t-refactor",
                     cwd=b, env=as_("bob"))
    assert leased["holder"] == "bbbb/bob" and leased["paths"] == ["src/*.py"]
    sync_both(a, b)
    assert [x["id"] for x in ok_json("nxc", "leases", cwd=a, env=as_("alice"))["leases"]] == \
        [leased["id"]]
    # alice's clone: a commit touching the leased path is refused by the real hook
    (a / "src").mkdir()
    (a / "src" / "app.py").write_text("print('hi')\n")
    (a / "README.txt").write_text("notes\n")
    subprocess.run(["git", "add", "."], cwd=a, check=True)
    refused = commit(a, "touch the leased file", cli_env(NXC_ACTOR="alice"))
    assert refused.returncode != 0
    assert "src/app.py is leased to bbbb/bob" in refused.stderr
    assert leased["id"] in refused.stderr and "t-refactor" in refused.stderr
    assert "NXC_LEASE_OVERRIDE=1" in refused.stderr
    # the holder's own commit is not refused, nor alice's over other paths
    assert run("nxc", "lease-check", "src/app.py", cwd=b, env=as_("bob")).returncode == 0
    assert run("nxc", "lease-check", "README.txt", cwd=a, env=as_("alice")).returncode == 0
    # alice cannot take the path, nor end bob's lease from her clone
    assert failing("nxc", "lease", "src/app.py", cwd=a, env=as_("alice"))["kind"] == "conflict"
    assert failing("nxc", "release", leased["id"], cwd=a, env=as_("alice"))["kind"] == "conflict"
    # released on bob's clone and synced: the same commit goes through
    ok_json("nxc", "release", leased["id"], cwd=b, env=as_("bob"))
    sync_both(a, b)
    done = commit(a, "touch the file, lease released", cli_env(NXC_ACTOR="alice"))
    assert done.returncode == 0, done.stderr


def test_an_expired_lease_no_longer_refuses(tmp_path):
    """A lease expires by itself: taken for one second, it refuses while it holds and,
    with the clock past its end (waited for, not assumed), allows the commit."""
    import time

    _, a, _b = _clones(tmp_path, {"channels.yaml": CHANNELS})
    leased = ok_json("nxc", "lease", "notes.md", "--for", "1s", cwd=a, env=as_("carol"))
    (a / "notes.md").write_text("x\n")
    subprocess.run(["git", "add", "."], cwd=a, check=True)
    held = run("nxc", "lease-check", "--staged", cwd=a, env=as_("alice"))
    if time.time() * 1000 < leased["until"]:  # still held when checked
        assert held.returncode == 1 and "leased to aaaa/carol" in held.stderr
    while time.time() * 1000 <= leased["until"]:
        time.sleep(0.05)
    assert commit(a, "after the lease", cli_env(NXC_ACTOR="alice")).returncode == 0


# a persona's runtime: answers its thread with `nxc reply` (the thread is in its prompt)
AGENT = r'''
import re, subprocess, sys
thread = re.search(r"Thread (t-[0-9a-z-]+) awaits", sys.argv[1]).group(1)
subprocess.run([sys.executable, "-m", "nixx.cli.nxc", "reply", "--thread", thread,
                "deployed to staging"], check=True)
'''


def test_an_approval_given_on_clone_b_moves_the_operation_opened_on_clone_a(tmp_path):
    import sys
    import time

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    deployer = ("handle: aaaa/deployer\nsystem_prompt: You deploy.\napprove: [start]\n"
                f"runtime:\n  start: [{sys.executable}, {agent}, '{{prompt}}']\n")
    _, a, b = _clones(tmp_path, {"channels.yaml": CHANNELS, "deployer.yaml": deployer})
    for folder in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=folder)
    sent = ok_json("nxc", "send", "--to", "deployer", "deploy the release branch", cwd=a,
                   env=as_("alice"))
    approval = sent["approval"]
    assert sent["spawned"] is False
    status = ok_json("nxc", "status", cwd=a, env=as_("alice"))
    (op,) = status["operations"]
    assert op["awaiting_human"] and [x["id"] for x in op["approvals"]] == [approval]
    sync_both(a, b)
    # clone B sees what waits for a person, and bob approves there
    (waiting,) = ok_json("nxc", "approvals", cwd=b, env=as_("bob"))["approvals"]
    assert (waiting["id"], waiting["origin"], waiting["step"]) == (approval, "aaaa", "start")
    decided = ok_json("nxc", "approve", approval, "--note", "ok from the train", cwd=b,
                      env=as_("bob"))
    assert decided["taken"] == []  # held on clone A: taken there when the decision arrives
    shown = run("nxc", "approvals", "--all", cwd=b, env=as_("bob")).stdout
    assert "approved by bbbb/bob (clone bbbb): ok from the train" in shown
    # the decision reaches A by sync; the sync pass takes the held start there
    sync_both(b, a)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        thread = ok_json("nxc", "threads", "show", sent["thread_id"], cwd=a, env=as_("alice"))
        if thread["complete"]:
            break
        time.sleep(0.2)
    assert thread["complete"], thread
    assert [m["body"] for m in thread["messages"] if m["sender"] == "aaaa/deployer"] == [
        "deployed to staging"]
    # the decision is an op like any other: who, when, from where — the same on both
    sync_both(a, b)
    on_a = ok_json("nxc", "approvals", "--all", cwd=a, env=as_("alice"))["approvals"]
    on_b = ok_json("nxc", "approvals", "--all", cwd=b, env=as_("bob"))["approvals"]
    assert on_a == on_b and on_a[0]["decided_by"] == "bbbb/bob"
    assert on_a[0]["decided_origin"] == "bbbb" and on_a[0]["decided"] > on_a[0]["asked"]


# a persona's runtime that claims the task its prompt names, and logs every prompt it gets
CLAIMER = r'''
import json, re, subprocess, sys
log, prompt = sys.argv[1], sys.argv[-1]
print(json.dumps({"type": "system", "subtype": "init", "session_id": "rt-1"}), flush=True)
with open(log, "a") as fh:
    fh.write(json.dumps({"prompt": prompt}) + "\n")
found = re.search(r"claim (k-[0-9a-z]+-[0-9a-z]+)", prompt)
if found and not prompt.startswith("New messages"):
    subprocess.run([sys.executable, "-m", "nixx.cli.nxc", "task", "claim", found.group(1)],
                   check=True, capture_output=True)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False}), flush=True)
'''


def test_a_session_whose_claim_lost_a_race_is_woken_with_the_fact_once(tmp_path):
    import sys
    import time

    agent, log = tmp_path / "claimer.py", tmp_path / "claimer.jsonl"
    agent.write_text(CLAIMER)
    argv = f"[{sys.executable}, {agent}, {log}, '{{prompt}}']"
    coder = (f"handle: aaaa/coder\nsystem_prompt: You code.\n"
             f"runtime:\n  start: {argv}\n  resume: {argv}\n")
    _, a, b = _clones(tmp_path, {"channels.yaml": CHANNELS, "coder.yaml": coder})
    for folder in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=folder)
    task = ok_json("nxc", "task", "add", "fix the parser", cwd=a, env=as_("alice"))["id"]
    sync_both(a, b)
    # apart: bob claims on B first; then alice's agent claims on A (it cannot know)
    ok_json("nxc", "task", "claim", task, cwd=b, env=as_("bob"))
    sent = ok_json("nxc", "send", "--to", "coder", f"please claim {task} and fix it", cwd=a,
                   env=as_("alice"))

    def prompts() -> list[str]:
        return [json.loads(x)["prompt"] for x in log.read_text().splitlines()] \
            if log.exists() else []

    def settled(n: int) -> bool:
        sessions = ok_json("nxc", "session", "state", cwd=a, env=as_("alice"))["sessions"]
        return len(prompts()) >= n and all(s["state"] != "running" for s in sessions)

    def until(check, what: str) -> None:
        give_up = time.monotonic() + 120
        while not check():
            assert time.monotonic() < give_up, what
            time.sleep(0.1)

    until(lambda: settled(1), "the coder's first run to end")
    claimed = tasks_on(a, "alice")[task]
    assert claimed["holder"] == "aaaa/coder"  # on A, before the sync: the agent holds it
    sync_both(a, b)  # B's earlier claim arrives: the agent's claim lost
    until(lambda: settled(2), "the coder to be woken with the fact")
    woken = prompts()[1]
    assert woken.startswith("New messages for you")
    assert f"Your claim on task {task} (fix the parser) lost: bbbb/bob claimed it first" in woken
    assert "--- from bbbb/bob" in woken
    assert tasks_on(a, "alice")[task]["holder"] == "bbbb/bob"
    sync_both(a, b)  # told once: another pass wakes nobody
    until(lambda: settled(2), "the sessions to stay idle")
    assert len(prompts()) == 2
    del sent
