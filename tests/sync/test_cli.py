"""`nxs sync` in real subprocesses: the seed's scenario over a bare git repository and two
clones, every verb with --json, the errors, the daemon and its service install."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import bare_repo, cli_env, clone, git, run

CHANNELS = "- name: team\n  members: [aaaa/alice, bbbb/bob]\n  description: two machines\n"


def ok_json(tool: str, *args: str, cwd, env=None):
    proc = run(tool, *args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def as_(agent: str, **extra: str) -> dict[str, str]:
    return cli_env(NXC_ACTOR=agent, **extra)


def _clones(tmp_path, declarations: dict[str, str]):
    """A bare repository holding `declarations` in `.nxs-personas/`, cloned twice:
    workspaces A (replica aaaa) and B (bbbb)."""
    remote = bare_repo(tmp_path)
    seed = clone(remote, tmp_path / "seed")
    (seed / ".nxs-personas").mkdir()
    for name, text in declarations.items():
        (seed / ".nxs-personas" / name).write_text(text)
    git("add", ".", cwd=seed)
    git("commit", "-qm", "declarations", cwd=seed)
    git("push", "-q", "origin", "HEAD", cwd=seed)
    a, b = clone(remote, tmp_path / "a"), clone(remote, tmp_path / "b")
    for folder, replica in ((a, "aaaa"), (b, "bbbb")):
        ok_json("nxs", "init", "--replica", replica, cwd=folder)
    return remote, a, b


@pytest.fixture
def two_clones(tmp_path):
    """A bare repository with a channel declaration, cloned twice: workspaces A and B."""
    return _clones(tmp_path, {"channels.yaml": CHANNELS})


def test_the_seed_scenario_a_sends_b_reads_and_replies_a_sees_it(two_clones):
    remote, a, b = two_clones
    bound_a = ok_json("nxs", "sync", "bind", "--no-daemon", cwd=a)
    bound_b = ok_json("nxs", "sync", "bind", "--no-daemon", cwd=b)
    assert bound_a["stream"] == bound_b["stream"]  # every clone lands on the same stream
    assert bound_a["derived_from"] == "origin" and bound_a["transport"] == "git"

    sent = ok_json("nxc", "send", "--to", "team", "--expect", "bbbb/bob",
                   "the build is green on A", cwd=a, env=as_("alice"))
    thread = sent["thread_id"]
    # nothing travels before a pass
    proc = run("nxc", "threads", "show", thread, "--json", cwd=b, env=as_("bob"))
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["kind"] == "not_found"

    assert ok_json("nxs", "sync", "run", cwd=a)["pushed"] >= 2
    got = ok_json("nxs", "sync", "run", cwd=b)
    assert got["stored"] == got["pulled"] >= 2
    shown = ok_json("nxc", "threads", "show", thread, cwd=b, env=as_("bob"))
    assert [m["body"] for m in shown["messages"]] == ["the build is green on A"]
    assert shown["outstanding"] == ["aaaa/__channel-team"]  # a round: its supervisor
    # bob answers in his slot of the round (his one open conversation)
    answered = ok_json("nxc", "reply", "thanks, B has it", cwd=b, env=as_("bob"))
    slot = answered["thread_id"]
    assert slot != thread and answered["complete"] is True
    ok_json("nxs", "sync", "run", cwd=b)
    # A's pass stores bob's answer and settles the round A runs: the hand-back is posted
    ok_json("nxs", "sync", "run", cwd=a)
    seen = ok_json("nxc", "threads", "show", thread, cwd=a, env=as_("alice"))
    assert [m["body"] for m in seen["messages"]] == [
        "the build is green on A", '<message from="bbbb/bob">\nthanks, B has it\n</message>']
    assert seen["complete"] is True and seen["outstanding"] == []
    assert ok_json("nxc", "threads", "show", slot, cwd=a, env=as_("alice"))["messages"][0][
        "body"] == "thanks, B has it"
    ok_json("nxs", "sync", "run", cwd=a)  # the hand-back travels back to B
    ok_json("nxs", "sync", "run", cwd=b)
    seen = ok_json("nxc", "threads", "show", thread, cwd=a, env=as_("alice"))

    # a further pass on each side moves nothing, and nothing is doubled
    for ws in (a, b):
        again = ok_json("nxs", "sync", "run", cwd=ws)
        assert (again["pushed"], again["pulled"]) == (0, 0)
    assert seen == ok_json("nxc", "threads", "show", thread, cwd=a, env=as_("alice"))
    refs = git("--git-dir", str(remote), "for-each-ref", "--format=%(refname)",
               "refs/nxs/").split()
    assert sorted(r.rsplit("/", 1)[1] for r in refs) == ["aaaa", "bbbb"]


def test_status_bind_idempotence_and_rebind(two_clones, tmp_path):
    _, a, _ = two_clones
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["bound"] is False and status["unpushed"] == 0
    first = ok_json("nxs", "sync", "bind", "--no-daemon", cwd=a)
    assert first["changed"] is True
    again = ok_json("nxs", "sync", "bind", "--no-daemon", cwd=a)
    assert again["changed"] is False and again["stream"] == first["stream"]
    ok_json("nxc", "send", "--to", "team", "hi", cwd=a, env=as_("alice"))
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["unpushed"] >= 2 and status["pushed_seq"] == 0
    ok_json("nxs", "sync", "run", cwd=a)
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["unpushed"] == 0 and status["pushed_seq"] == status["log_seq"]
    assert status["last_pass"]["ok"] is True

    other = bare_repo(tmp_path, "other.git")
    proc = run("nxs", "sync", "bind", "--no-daemon", "--remote", str(other), "--create",
               "--json", cwd=a)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["kind"] == "conflict"
    moved = ok_json("nxs", "sync", "bind", "--no-daemon", "--remote", str(other), "--create",
                    "--rebind", cwd=a)
    assert moved["changed"] and moved["stream"] != first["stream"]
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["pushed_seq"] == 0 and status["unpushed"] >= 2
    human = run("nxs", "sync", "status", cwd=a)
    assert moved["stream"] in human.stdout and "unpushed" in human.stdout
    # times a person can read: a UTC date and how long ago, never raw epoch ms
    assert "last pass  never" in human.stdout  # the rebind forgot the last pass
    ok_json("nxs", "sync", "run", cwd=a)
    human = run("nxs", "sync", "status", cwd=a)
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["bound_at_iso"].endswith("Z") and status["last_pass"]["at_iso"].endswith("Z")
    assert str(status["bound_at"]) not in human.stdout
    assert " UTC (" in human.stdout and "ago)" in human.stdout


def test_bind_without_origin_fails_loudly_and_join_works(tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    ok_json("nxs", "init", "--replica", "cccc", cwd=lone)
    proc = run("nxs", "sync", "bind", "--no-daemon", cwd=lone)
    assert proc.returncode == 1
    assert "no git `origin` remote" in proc.stderr and "--remote" in proc.stderr
    proc = run("nxs", "sync", "run", "--json", cwd=lone)
    assert proc.returncode == 1 and "nxs sync bind" in json.loads(proc.stdout)["error"]["msg"]
    proc = run("nxs", "sync", "bind", "--no-daemon", "--join", "stream-nope", "--remote",
               str(tmp_path / "r.git"), "--json", cwd=lone)
    assert json.loads(proc.stdout)["error"]["kind"] == "validation"
    stream = "stream-" + "ab" * 12
    joined = ok_json("nxs", "sync", "bind", "--no-daemon", "--join", stream, "--remote",
                     str(bare_repo(tmp_path, "r.git")), cwd=lone)
    assert joined["stream"] == stream and joined["derived_from"] == "join"


def test_run_reports_an_unreachable_remote(two_clones, tmp_path):
    _, a, _ = two_clones
    ok_json("nxs", "sync", "bind", "--no-daemon", "--remote", str(tmp_path / "gone.git"),
            "--create", cwd=a)
    proc = run("nxs", "sync", "run", "--json", cwd=a)
    assert proc.returncode == 1
    err = json.loads(proc.stdout)["error"]
    assert err["kind"] == "sync" and "gone.git" in err["msg"]
    assert ok_json("nxs", "sync", "status", cwd=a)["last_pass"]["ok"] is False


def _fake_systemctl(folder: Path, code: int) -> Path:
    folder.mkdir()
    script = folder / "systemctl"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {folder}/calls\nexit {code}\n")
    script.chmod(0o755)
    return folder


def test_bind_installs_the_user_service_when_systemctl_exists(two_clones, tmp_path):
    _, a, _ = two_clones
    home = tmp_path / "home"
    home.mkdir()
    fake = _fake_systemctl(tmp_path / "bin", 0)
    env = cli_env(HOME=str(home), PATH=f"{fake}:{os.environ['PATH']}")
    env.pop("XDG_CONFIG_HOME", None)
    out = ok_json("nxs", "sync", "bind", cwd=a, env=env)
    daemon = out["daemon"]
    assert daemon["installed"] and daemon["enabled"]
    unit = Path(daemon["unit"])
    assert unit.parent == home / ".config" / "systemd" / "user"
    text = unit.read_text()
    assert "sync daemon --db " + str(a / ".nxs" / "db.sqlite") in text
    assert f"WorkingDirectory={a}" in text
    calls = (fake / "calls").read_text().splitlines()
    assert calls == ["--user daemon-reload", f"--user enable --now {unit.name}"]


def test_bind_says_how_to_run_when_the_service_cannot_start(two_clones, tmp_path):
    _, a, _ = two_clones
    home = tmp_path / "home"
    home.mkdir()
    fake = _fake_systemctl(tmp_path / "bin", 1)
    env = cli_env(HOME=str(home), PATH=f"{fake}:{os.environ['PATH']}")
    proc = run("nxs", "sync", "bind", cwd=a, env=env)
    assert proc.returncode == 0
    assert "nxs sync daemon" in proc.stdout and "not running" in proc.stdout
    # no per-user service manager answered: no unit file is left behind, and it says so
    assert "no per-user service manager" in proc.stdout and "no unit was left" in proc.stdout
    units = home / ".config" / "systemd" / "user"
    assert not units.exists() or list(units.iterdir()) == []
    out = ok_json("nxs", "sync", "bind", cwd=a, env=env)
    assert out["daemon"]["installed"] is False and out["daemon"]["unit"] is None
    # --no-daemon writes nothing
    home2 = tmp_path / "home2"
    home2.mkdir()
    out = ok_json("nxs", "sync", "bind", "--no-daemon", cwd=a,
                  env=cli_env(HOME=str(home2), PATH=f"{fake}:{os.environ['PATH']}"))
    assert out["daemon"]["declined"] and not (home2 / ".config").exists()


def _wait_for(predicate, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def _stopped(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The output of a daemon sent Ctrl+C. One that has not exited 30 s later (seen once
    in CI) is sent SIGABRT, so faulthandler prints where each of its threads was, and
    the test fails with that."""
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"the daemon ignored Ctrl+C for 30 s; its stacks:\n{err}") from None


def test_the_daemons_carry_a_message_without_any_manual_pass(two_clones):
    _, a, b = two_clones
    for ws in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=ws)
    daemons = [
        subprocess.Popen([sys.executable, "-m", "nixx.cli.nxs", "sync", "daemon", "--json",
                          "--interval", "0.5", "--debounce", "0.1"], cwd=ws,
                         env={**cli_env(), "PYTHONFAULTHANDLER": "1"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for ws in (a, b)
    ]
    try:
        sent = ok_json("nxc", "send", "--to", "team", "via the daemons", cwd=a,
                       env=as_("alice"))

        def arrived():
            proc = run("nxc", "threads", "show", sent["thread_id"], "--json", cwd=b,
                       env=as_("bob"))
            return proc.returncode == 0 and json.loads(proc.stdout)["messages"]

        assert _wait_for(arrived)[0]["body"] == "via the daemons"
    finally:
        for proc in daemons:
            proc.send_signal(signal.SIGINT)
        outs = [_stopped(proc) for proc in daemons]
    events = [json.loads(line) for line in outs[0][0].splitlines() if line.strip()]
    assert events and all(e["event"] == "pass" for e in events)
    assert any(e["pushed"] > 0 for e in events)


def test_the_daemon_backs_off_on_errors_and_goes_on(two_clones, tmp_path):
    _, a, _ = two_clones
    ok_json("nxs", "sync", "bind", "--no-daemon", "--remote", str(tmp_path / "gone.git"),
            "--create", cwd=a)
    proc = run("nxs", "sync", "daemon", "--json", "--interval", "0.2", "--max-backoff", "0.5",
               "--passes", "3", cwd=a)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["event"] for e in events] == ["error"] * 3
    assert [e["retry_in_s"] for e in events] == [0.5, 0.5, 0.5]
    assert all(e["kind"] == "sync" for e in events)


def test_sync_without_a_verb_is_a_usage_error(two_clones):
    _, a, _ = two_clones
    proc = run("nxs", "sync", cwd=a)
    assert proc.returncode == 2


def test_the_daemon_backoff_doubles_up_to_the_cap(tmp_path):
    from nixx.log.workspace import Workspace
    from nixx.sync.daemon import SyncDaemon, unit_name, unit_text

    ws = Workspace.for_db(tmp_path / ".nxs" / "db.sqlite")
    daemon = SyncDaemon(ws, [], max_backoff=20)
    waits = []
    for failures in range(1, 7):
        daemon.failures = failures
        waits.append(daemon.backoff())
    assert waits == [2, 4, 8, 16, 20, 20]
    assert unit_name(ws).startswith("nxs-sync-") and unit_name(ws).endswith(".service")
    assert "Restart=on-failure" in unit_text(ws, python="/usr/bin/python3")


def test_sessions_and_transcripts_stay_on_their_machine(two_clones):
    from nixx.log.workspace import find_workspace
    from nixx.nxc.delivery import sessions
    from nixx.nxc.delivery.localstore import LocalStore
    from nixx.nxc.delivery.transcripts import TranscriptStore

    _, a, b = two_clones
    for ws in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=ws)
    sent = ok_json("nxc", "send", "--to", "team", "visible everywhere", cwd=a, env=as_("alice"))
    local = LocalStore.for_workspace(find_workspace(a))
    sid = sessions.create(local, persona="coder", thread_id=sent["thread_id"],
                          runtime={"name": "x"}, hop=1, max_hops=8, parent_session=None)
    TranscriptStore(local).append(sid, [{"kind": "assistant", "data": {"text": "secret plan"}}])
    assert ok_json("nxc", "transcript", "show", sid, cwd=a)["count"] == 1
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)
    assert ok_json("nxc", "threads", "show", sent["thread_id"], cwd=b, env=as_("bob"))["messages"]
    for verb in (("transcript", "show", sid), ("session", "state", sid)):
        proc = run("nxc", *verb, "--json", cwd=b)
        assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["kind"] == "not_found"
    proc = run("nxc", "search", "--transcripts", "secret", "--json", cwd=b)
    assert proc.returncode == 0 and json.loads(proc.stdout) == []
    for name in ("db.sqlite", "db.sqlite-wal"):  # nor anywhere in B's log file
        path = b / ".nxs" / name
        assert not path.exists() or b"secret plan" not in path.read_bytes()
    assert any(b"secret plan" in (a / ".nxs" / n).read_bytes()  # (it is there on A)
               for n in ("local.sqlite", "local.sqlite-wal") if (a / ".nxs" / n).exists())


@pytest.mark.postgres
def test_the_seed_scenario_over_postgres(two_clones, pg_url):
    _, a, b = two_clones
    created = ok_json("nxs", "sync", "bind", "--no-daemon", "--create", "--remote", pg_url,
                      cwd=a)
    assert created["transport"] == "postgres" and created["derived_from"] == "create"
    joined = ok_json("nxs", "sync", "bind", "--no-daemon", "--join", created["stream"],
                     "--remote", pg_url, cwd=b)
    assert joined["stream"] == created["stream"]
    sent = ok_json("nxc", "send", "--to", "team", "--expect", "bbbb/bob", "over postgres",
                   cwd=a, env=as_("alice"))
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)
    shown = ok_json("nxc", "threads", "show", sent["thread_id"], cwd=b, env=as_("bob"))
    assert [m["body"] for m in shown["messages"]] == ["over postgres"]
    ok_json("nxc", "reply", "got it", cwd=b, env=as_("bob"))  # in bob's slot of the round
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)  # stores it and settles the round A runs
    seen = ok_json("nxc", "threads", "show", sent["thread_id"], cwd=a, env=as_("alice"))
    assert [m["body"] for m in seen["messages"]] == [
        "over postgres", '<message from="bbbb/bob">\ngot it\n</message>']
    assert seen["complete"] is True
    ok_json("nxs", "sync", "run", cwd=a)  # the hand-back goes out
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["transport"] == "postgres" and status["unpushed"] == 0


def test_two_clones_one_origin_a_person_in_b_answers_a_thread_sent_in_a(tmp_path):
    """docs/sync.md's story end to end: the repository declares one origin for every clone
    (`.nxs-personas/workspace.yaml`), so `reviewer` is `team/reviewer` in both; a thread
    alice sends to it in clone A is in clone B's `threads list` after a pass each way,
    whoever acts as the reviewer in B answers it, and A sees it complete."""
    _, a, b = _clones(tmp_path, {
        "reviewer.yaml": "handle: reviewer\nsystem_prompt: You review.\n",
        "workspace.yaml": "origin: team\n",  # the one step
    })
    for folder in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=folder)
    assert ok_json("nxc", "whoami", cwd=b, env=as_("alice"))["handle"] == "team/alice"

    sent = ok_json("nxc", "send", "--to", "reviewer", "please review the storage layer",
                   cwd=a, env=as_("alice"))
    thread = sent["thread_id"]
    assert sent["expects"] == ["team/reviewer"]
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)

    # in B: the reviewer's open conversation, and alice's own thread (the same person)
    listed = ok_json("nxc", "threads", "list", "--open", cwd=b, env=as_("reviewer"))
    assert [t["thread_id"] for t in listed] == [thread]
    assert listed[0]["opener"] == "team/alice" and listed[0]["outstanding"] == ["team/reviewer"]
    mine = ok_json("nxc", "threads", "list", cwd=b, env=as_("alice"))
    assert [t["thread_id"] for t in mine] == [thread]
    answered = ok_json("nxc", "reply", "looks good, one nit in the WAL handling", cwd=b,
                       env=as_("reviewer"))  # no --thread: its one open conversation
    assert answered["thread_id"] == thread and answered["complete"] is True

    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)
    waited = run("nxc", "wait", "--thread", thread, "--timeout", "30", "--json", cwd=a,
                 env=as_("alice"))
    assert waited.returncode == 0, waited.stdout + waited.stderr
    seen = ok_json("nxc", "threads", "show", thread, cwd=a, env=as_("alice"))
    assert seen["complete"] is True and seen["replied"] == ["team/reviewer"]
    assert seen["messages"][-1] == {**seen["messages"][-1], "sender": "team/reviewer",
                                    "body": "looks good, one nit in the WAL handling"}
    status = ok_json("nxc", "status", "--all", cwd=a, env=as_("alice"))
    (op,) = [o for o in status["operations"] if o["root"] == thread]
    assert op["awaiting_human"] is True and op["live"] is False
