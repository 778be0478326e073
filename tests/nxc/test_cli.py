"""`nxs` and `nxc` in real subprocesses: every verb, its --json, its errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nixx.log.store import LogStore
from nixx.nxc.handles import resolve_handle
from nixx.nxc.reducer import DOMAIN, ChatReducer

from .conftest import cli_env, run, run_json, write_personas


def env(actor: str | None = None, **extra: str) -> dict[str, str]:
    return cli_env(**({"NXC_ACTOR": actor} if actor else {}), **extra)


def error_of(proc) -> dict:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    return json.loads(proc.stdout)["error"]


# -- nxs --------------------------------------------------------------------------------


def test_nxs_init_log_refold(tmp_path):
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "src"
    sub.mkdir()
    out = run_json("nxs", "init", "--replica", "ab12", cwd=sub)
    assert [h["action"] for h in out.pop("hooks")] == ["created", "created"]  # nixx_mcp/test_install
    # a bare .git folder is no repository git knows: no pre-commit hook (test_work_cli)
    assert out.pop("lease_hook") == "skipped: not a git repository"
    assert out == {"root": str(tmp_path), "db": str(tmp_path / ".nxs" / "db.sqlite"),
                   "replica": "ab12", "created": True}
    again = run_json("nxs", "init", cwd=tmp_path)
    assert again["created"] is False and again["replica"] == "ab12"
    human = run("nxs", "init", cwd=tmp_path)
    assert human.returncode == 0 and "already exists" in human.stdout
    write_personas(tmp_path)
    run_json("nxc", "send", "--to", "coder", "hello log", cwd=sub, env=env("alice"))
    with LogStore.open(tmp_path / ".nxs" / "db.sqlite") as store:
        store.append("flow", "create", "f-1", "ab12/alice", {"title": "not chat"})
    ops = run_json("nxs", "log", cwd=sub)
    assert [o["kind"] for o in ops] == ["channel", "thread_open", "post", "create"]
    assert [o["seq"] for o in ops] == [1, 2, 3, 4]
    assert all(o["origin"] == "ab12" for o in ops)
    chat = run_json("nxs", "log", "--domain", "message", "--after", "1", cwd=sub)
    assert [o["kind"] for o in chat] == ["thread_open", "post"]
    newest = run_json("nxs", "--json", "log", "--limit", "1", cwd=sub)
    assert [o["kind"] for o in newest] == ["create"]
    text = run("nxs", "log", cwd=sub)
    assert text.returncode == 0 and "message/post" in text.stdout and "flow/create" in text.stdout
    folded = run_json("nxs", "refold", cwd=sub)
    assert folded["folded"]["message"] == 3
    assert error_of(run("nxs", "refold", "--domain", "nope", "--json", cwd=sub))["kind"] == "validation"


def test_nxs_errors(tmp_path):
    err = error_of(run("nxs", "log", "--json", cwd=tmp_path))
    assert err["kind"] == "no_workspace" and "nxs init" in err["msg"]
    proc = run("nxs", "log", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "nxs init" in proc.stderr
    err = error_of(run("nxs", "init", "--replica", "NOT/OK", "--json", cwd=tmp_path))
    assert err["kind"] == "workspace"
    assert run("nxs", "frobnicate", cwd=tmp_path).returncode == 2
    assert run("nxs", cwd=tmp_path).returncode == 2


# -- handles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"USER": "bob"},
        {"USER": ""},
        {"USER": "bob", "NXC_ACTOR": "coder"},
        {"USER": "bob", "NXC_ACTOR": ""},
        {"NXC_ORIGIN": "cd34"},
        {"NXC_ORIGIN": "", "NXC_ACTOR": "coder"},
        {"NXC_ACTOR": "zz99/remote"},
    ],
)
def test_cli_and_library_resolve_the_same_handle(ws, variables):
    out = run_json("nxc", "whoami", cwd=ws.root, env=cli_env(**variables))
    assert out["handle"] == resolve_handle("ab12", variables)
    assert out["replica"] == "ab12" and out["db"] == ws.db_path
    listed = run_json("nxc", "list", cwd=ws.root, env=cli_env(**variables))
    assert listed["actor"] == out["handle"]


def test_handle_rules():
    assert resolve_handle("ab12", {}) == "ab12/nxc"
    assert resolve_handle("ab12", {"USER": "bob"}) == "ab12/bob"
    assert resolve_handle("ab12", {"USER": "bob", "NXC_ACTOR": ""}) == "ab12/bob"
    assert resolve_handle("ab12", {"NXC_ACTOR": "coder", "NXC_ORIGIN": "x9"}) == "x9/coder"
    assert resolve_handle("ab12", {"NXC_ORIGIN": ""}) == "ab12/nxc"


# -- nxc verbs --------------------------------------------------------------------------


def test_list(ws):
    out = run_json("nxc", "list", cwd=ws.root, env=env("alice"))
    assert [p["handle"] for p in out["personas"]] == ["ab12/coder", "ab12/reviewer"]
    assert out["personas"][0]["job_title"] == "Coder"
    assert out["personas"][0]["direct"].startswith("dm:")
    assert [c["name"] for c in out["channels"]] == ["front", "team"]
    assert out["declarations"]["files"] == 3
    assert "public_channels" not in out  # nothing public in the log yet
    human = run("nxc", "list", cwd=ws.root, env=env("alice"))
    assert human.returncode == 0 and "ab12/coder" in human.stdout and "team" in human.stdout
    # a public channel arrived by sync: JSON only, under public_channels
    with LogStore.open(ws.db_path, [ChatReducer()]) as store:
        store.append(DOMAIN, "channel", "decl:news", "zz99/x",
                     {"fields": {"name": "news", "kind": "public", "members": ["zz99/x"]}})
    out = run_json("nxc", "list", cwd=ws.root, env=env("alice"))
    assert out["public_channels"] == [{"channel_id": "decl:news", "name": "news",
                                       "members": ["zz99/x"], "description": None,
                                       "declared": False}]
    assert "news" not in run("nxc", "list", cwd=ws.root, env=env("alice")).stdout


def test_list_reports_a_bad_declaration(ws):
    write_personas(__import__("pathlib").Path(ws.root),
                   {"channels.yaml": "- name: dm1\n  kind: direct\n  members: [a, b]\n"})
    err = error_of(run("nxc", "list", "--json", cwd=ws.root, env=env("alice")))
    assert err["kind"] == "validation" and err["param"] == "[dm1].kind"
    assert err["file"].endswith("channels.yaml")


def test_send_reply_threads_prime_status_search(ws, tmp_path):
    r = run_json("nxc", "send", "--to", "coder", "--deadline", "1h", "please fix the parser",
                 cwd=ws.root, env=env("alice"))
    assert set(r) >= {"thread_id", "message_id", "to", "target", "channel", "session",
                      "expects", "deadline", "spawned", "warnings", "await"}
    assert r["session"] is None and r["spawned"] is False and r["deadline"].endswith("Z")
    tid = r["thread_id"]
    human = run("nxc", "send", "--to", "team", "standup at ten", cwd=ws.root, env=env("alice"))
    assert human.returncode == 0 and human.stdout.strip().startswith("t-")

    prime = run_json("nxc", "prime", cwd=ws.root, env=env("coder"))
    assert prime["count"] == 2 and prime["actor"] == "ab12/coder"
    block = run("nxc", "prime", cwd=ws.root, env=env("coder")).stdout
    assert block.startswith("nxc: you are ab12/coder") and "\nUnread: 2 (" in block
    assert f'  {tid} from ab12/alice in ' in block  # a thread coder owes, and how to answer it
    assert f'nxc reply --thread {tid} "<answer>"' in block
    assert tid in [t["thread_id"] for t in prime["owes"]]
    assert "please fix the parser" not in block  # no bodies

    listed = run_json("nxc", "threads", "list", cwd=ws.root, env=env("coder"))
    assert {t["thread_id"] for t in listed} >= {tid}
    assert run_json("nxc", "threads", "list", "--channel", r["channel"], cwd=ws.root,
                    env=env("coder"))[0]["thread_id"] == tid
    assert run_json("nxc", "threads", "list", "--open", cwd=ws.root, env=env("coder"))

    body_file = tmp_path / "answer.md"
    body_file.write_text("fixed in **parser.py**")
    rep = run_json("nxc", "reply", "--thread", tid, "--body-file", str(body_file),
                   cwd=ws.root, env=env("coder"))
    assert rep["posted"] and rep["thread_id"] == tid and rep["complete"] and rep["resumed"] is None

    shown = run_json("nxc", "threads", "show", tid, cwd=ws.root, env=env("alice"))
    assert shown["complete"] and shown["replied"] == ["ab12/coder"]
    assert [m["body"] for m in shown["messages"]] == ["please fix the parser",
                                                       "fixed in **parser.py**"]
    text = run("nxc", "threads", "show", tid, cwd=ws.root, env=env("alice"))
    assert "fixed in **parser.py**" in text.stdout

    # stdin body, reply without --thread (the one open conversation of reviewer)
    rep2 = run_json("nxc", "reply", "-", cwd=ws.root, env=env("reviewer"), stdin="on it\n")
    assert rep2["channel_id"] == "decl:team"

    st = run_json("nxc", "status", "--all", cwd=ws.root, env=env("alice"))
    roots = {op["root"]: op for op in st["operations"]}
    assert roots[tid]["awaiting_human"] is True and roots[tid]["live"] is False
    live = run_json("nxc", "status", cwd=ws.root, env=env("alice"))
    assert tid not in {op["root"] for op in live["operations"]}
    assert run_json("nxc", "status", "--thread", tid, cwd=ws.root,
                    env=env("alice"))["operations"][0]["root"] == tid
    assert all(op["channel_id"] == "decl:team" for op in run_json(
        "nxc", "status", "--channel", "decl:team", "--all", cwd=ws.root,
        env=env("alice"))["operations"])
    assert run("nxc", "status", "--all", cwd=ws.root, env=env("alice")).returncode == 0

    hits = run_json("nxc", "search", "parser", cwd=ws.root, env=env("alice"))
    assert {h["body"] for h in hits} == {"please fix the parser", "fixed in **parser.py**"}
    assert run_json("nxc", "search", "parser", cwd=ws.root, env=env("eve")) == []
    assert "parser" in run("nxc", "search", "parser", cwd=ws.root, env=env("alice")).stdout


def test_expect_is_opener_only(ws):
    r = run_json("nxc", "send", "--to", "team", "vote", "--expect", "coder,reviewer",
                 cwd=ws.root, env=env("alice"))
    assert r["expects"] == ["ab12/__channel-team"]  # a round: its supervisor hands back
    assert r["members"] == ["ab12/coder", "ab12/reviewer"]
    err = error_of(run("nxc", "expect", "--thread", r["thread_id"], "alice", "--json",
                       cwd=ws.root, env=env("coder")))
    assert err["kind"] == "forbidden" and "opener" in err["msg"]
    out = run_json("nxc", "expect", "--thread", r["thread_id"], "reviewer", "--deadline", "5m",
                   cwd=ws.root, env=env("alice"))
    assert out["expects"] == ["ab12/reviewer"] and out["deadline"]
    assert run("nxc", "expect", "--thread", r["thread_id"], "coder", cwd=ws.root,
               env=env("alice")).returncode == 0


@pytest.mark.parametrize(
    ("args", "kind", "needle"),
    [
        (["send", "--to", "nobody", "x"], "not_found", "declared"),
        (["send", "--to", "coder", "  "], "validation", "empty"),
        (["send", "--to", "coder"], "validation", "body"),
        (["send", "--to", "coder", "x", "--deadline", "soonish"], "validation", "duration"),
        (["send", "--to", "coder", "x", "--deadline", "99999999w"], "validation", "a year"),
        (["send", "--to", "coder", "x", "--deadline", "1970-01-01T00:00:00Z"], "validation",
         "not in the future"),
        (["send", "--to", "coder", "x", "--kind", "gossip"], "validation", "kind"),
        (["send", "--to", "dm:0123456789abcdef01234567", "x"], "validation", "persona"),
        (["send", "--to", "coder", "x", "--body-file", "/nonexistent/file"], "validation",
         "body-file"),
        (["reply", "x"], "validation", "open conversations"),
        (["reply", "--thread", "t-missing", "x"], "not_found", "t-missing"),
        (["expect", "--thread", "t-missing", "coder"], "not_found", "t-missing"),
        (["threads", "show", "t-missing"], "not_found", "t-missing"),
        (["status", "--thread", "t-missing"], "not_found", "t-missing"),
        (["search", "?!"], "validation", "words"),
        (["wait", "--thread", "t-missing"], "not_found", "t-missing"),
    ],
)
def test_errors_have_one_shape(ws, args, kind, needle):
    proc = run("nxc", *args, "--json", cwd=ws.root, env=env("alice"))
    err = error_of(proc)
    assert err["kind"] == kind and needle in err["msg"]
    human = run("nxc", *args, cwd=ws.root, env=env("alice"))
    assert human.returncode == 1 and human.stderr.startswith("error: ") and human.stdout == ""


def test_undeclared_channel_in_the_store_is_not_a_target(ws):
    with LogStore.open(ws.db_path, [ChatReducer()]) as store:
        store.append(DOMAIN, "channel", "decl:ghost", "zz99/x",
                     {"fields": {"name": "ghost", "kind": "group", "members": ["ab12/alice"]}})
    err = error_of(run("nxc", "send", "--to", "ghost", "boo", "--json", cwd=ws.root,
                       env=env("alice")))
    assert err["kind"] == "not_found"
    assert err["msg"].count(".nxs-personas/channels.yaml") == 1 and "declare it" in err["msg"]


def test_forbidden_to_read_a_private_thread(ws):
    r = run_json("nxc", "send", "--to", "coder", "secret plan", cwd=ws.root, env=env("alice"))
    err = error_of(run("nxc", "threads", "show", r["thread_id"], "--json", cwd=ws.root,
                       env=env("eve")))
    assert err["kind"] == "forbidden"
    err = error_of(run("nxc", "reply", "--thread", r["thread_id"], "me too", "--json",
                       cwd=ws.root, env=env("eve")))
    assert err["kind"] == "forbidden"


def test_no_workspace_and_bad_nxc_db(tmp_path, ws):
    err = error_of(run("nxc", "list", "--json", cwd=tmp_path))
    assert err["kind"] == "no_workspace" and "nxs init" in err["msg"]
    err = error_of(run("nxc", "list", "--json", cwd=tmp_path, env=cli_env(NXC_DB="rel.sqlite")))
    assert err["kind"] == "workspace" and "absolute" in err["msg"]
    # NXC_DB (absolute) works from anywhere; --db too
    assert run_json("nxc", "whoami", cwd=tmp_path, env=cli_env(NXC_DB=ws.db_path))["db"] == ws.db_path
    assert run_json("nxc", "--db", ws.db_path, "whoami", cwd=tmp_path)["db"] == ws.db_path
    assert run("nxc", "bogus-verb", cwd=tmp_path).returncode == 2
    assert run("nxc", "send", "x", cwd=ws.root).returncode == 2  # --to is required


def test_wait_exit_codes(ws):
    r = run_json("nxc", "send", "--to", "coder", "answer me", cwd=ws.root, env=env("alice"))
    waiter = subprocess.Popen(
        [sys.executable, "-m", "nixx.cli.nxc", "wait", "--thread", r["thread_id"],
         "--timeout", "120", "--json"],
        cwd=ws.root, env=env("alice"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    run_json("nxc", "reply", "--thread", r["thread_id"], "answered", cwd=ws.root, env=env("coder"))
    out, err = waiter.communicate(timeout=150)
    assert waiter.returncode == 0, err
    assert json.loads(out)["outcome"] == "complete"

    stale = run_json("nxc", "send", "--to", "coder", "too late", "--deadline", "1s",
                     cwd=ws.root, env=env("alice"))
    proc = run("nxc", "wait", "--thread", stale["thread_id"], "--timeout", "120", "--json",
               cwd=ws.root, env=env("alice"))
    assert proc.returncode == 3 and json.loads(proc.stdout)["outcome"] == "stale"

    pending = run_json("nxc", "send", "--to", "coder", "no rush", cwd=ws.root, env=env("alice"))
    proc = run("nxc", "wait", "--thread", pending["thread_id"], "--timeout", "0.2",
               cwd=ws.root, env=env("alice"))
    assert proc.returncode == 4 and "timeout" in proc.stdout


@pytest.fixture
def read_only_log(ws):
    """The workspace log made really read-only: `chattr +i` as root (root ignores mode
    bits), mode bits otherwise."""
    import glob
    import os
    import shutil

    run("nxc", "send", "--to", "reviewer", "first, while it is writable", cwd=ws.root)
    files = sorted(glob.glob(ws.db_path + "*"))
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("root and no chattr: no way to make a file read-only here")
        made = subprocess.run(["chattr", "+i", *files], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i refused here: {made.stderr.decode().strip()}")
        yield ws
        subprocess.run(["chattr", "-i", *files], check=True)
    else:
        for f in files:
            os.chmod(f, 0o444)
        os.chmod(os.path.dirname(ws.db_path), 0o555)
        yield ws
        os.chmod(os.path.dirname(ws.db_path), 0o755)
        for f in files:
            os.chmod(f, 0o644)


def test_send_and_reply_on_a_read_only_log_are_a_store_error_not_a_traceback(read_only_log):
    ws = read_only_log
    for args in (["send", "--to", "reviewer", "hello"], ["send", "--to", "team", "hi all"]):
        proc = run("nxc", *args, cwd=ws.root)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("error: the workspace log ") and "read-only" in proc.stderr
        out = run_json("nxc", *args, cwd=ws.root, code=1)
        assert out["error"]["kind"] == "store" and "NXC_DB" in out["error"]["msg"]
    # reading still works
    assert run("nxc", "threads", "list", cwd=ws.root).returncode == 0
