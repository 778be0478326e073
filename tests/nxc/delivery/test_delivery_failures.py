"""Failures are visible where the sender looks: a runtime that cannot start, exits non-zero
or cannot reach its backend records a `failed` outcome with the cause in words, shown by
`nxc status`, `threads show`, `send --wait` and `wait` (human and --json); the runtime's
stderr tail is kept with the session. Real `nxc` processes, real supervisors."""

from __future__ import annotations

import socket

from .harness import PYTHON, make_workspace, poll

README_REVIEWER = {"system_prompt": "You review changes and answer in three short bullet points."}


def _dead_url() -> str:
    """A loopback URL where nothing listens (the port was just free)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _failed(ws, thread_id):
    return [o for o in ws.outcomes() if o["kind"] == "failed"
            and o["payload"]["thread"] == thread_id]


def test_readme_persona_with_the_backend_down_shows_the_url_in_status(tmp_path):
    url = _dead_url()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'chat_base_url = "{url}"\n')
    ws = make_workspace(tmp_path, NIXX_HOME=str(home))
    ws.persona("reviewer", runtime="nixx", **README_REVIEWER)
    receipt = ws.nxc_json("send", "--to", "reviewer", "please review the storage layer")
    tid = receipt["thread_id"]
    failed = poll(lambda: _failed(ws, tid), what="the failed outcome")
    reason = failed[0]["payload"]["reason"]
    assert url in reason and "NIXX_CHAT_BASE_URL" in reason
    assert str(home / "config.toml") in reason  # which file to edit

    status = ws.nxc_json("status")
    (op,) = status["operations"]
    (thread,) = op["threads"]
    assert thread["failures"][0]["persona"] == "ab12/reviewer"
    assert url in thread["failures"][0]["reason"]
    assert any(url in r["reason"] for r in op["refusals"] if r["outcome"] == "failed")
    human = ws.nxc("status").stdout
    assert f"failed: ab12/reviewer in {tid}: " in human and url in human

    shown = ws.nxc_json("threads", "show", tid)
    assert shown["failures"][0]["outcome"] == "failed" and url in shown["failures"][0]["reason"]
    assert url in ws.nxc("threads", "show", tid).stdout

    waited = ws.nxc("wait", "--thread", tid, "--timeout", "60", check=False)
    assert waited.returncode == 5, waited.stdout + waited.stderr
    assert "failed" in waited.stdout and url in waited.stdout
    waited_json = ws.nxc_json("wait", "--thread", tid, "--timeout", "60", check=False)
    assert waited_json["outcome"] == "failed" and url in waited_json["failures"][0]["reason"]

    # the session is `failed`, the cause is its detail, the stderr tail is kept with it
    poll(lambda: ws.sessions()[0]["state"] != "running", what="the session to end")
    (session,) = ws.sessions()
    assert session["state"] == "failed" and url in session["detail"]
    assert url in (session["stderr_tail"] or "")


def test_send_wait_returns_with_the_failure_instead_of_waiting(tmp_path):
    ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=_dead_url())
    ws.persona("reviewer", runtime="nixx", **README_REVIEWER)
    proc = ws.nxc("send", "--to", "reviewer", "--wait", "--timeout", "120", "review",
                  check=False)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "failed: ab12/reviewer" in proc.stderr and "no LLM backend answers" in proc.stderr
    out = ws.nxc_json("send", "--to", "reviewer", "--wait", "--timeout", "120", "again",
                      check=False)
    assert out["outcome"] == "failed"
    assert "no LLM backend answers" in out["thread"]["failures"][0]["reason"]


def test_a_runtime_that_exits_non_zero_fails_with_its_stderr(tmp_path):
    ws = make_workspace(tmp_path)
    script = ws.root / "broken_agent.py"
    script.write_text("import sys\nprint('warming up', file=sys.stderr)\n"
                      "print('ANTHROPIC_API_KEY is not set', file=sys.stderr)\nsys.exit(3)\n")
    ws.persona("broken", runtime={"start": [PYTHON, str(script), "{prompt}"]})
    receipt = ws.nxc_json("send", "--to", "broken", "hello")
    failed = poll(lambda: _failed(ws, receipt["thread_id"]), what="the failed outcome")
    payload = failed[0]["payload"]
    assert payload["code"] == 3
    assert payload["reason"].endswith("exited with code 3: ANTHROPIC_API_KEY is not set")
    waited = ws.nxc_json("wait", "--thread", receipt["thread_id"], "--timeout", "60",
                         check=False)
    assert waited["outcome"] == "failed"
    poll(lambda: ws.sessions()[0]["state"] == "failed", what="the session to be failed")
    assert "warming up" in ws.sessions()[0]["stderr_tail"]


def test_a_runtime_that_cannot_start_fails_visibly(tmp_path):
    ws = make_workspace(tmp_path)
    ws.persona("ghost", runtime={"start": ["no-such-agent-cli", "{prompt}"]})
    receipt = ws.nxc_json("send", "--to", "ghost", "hello")
    assert receipt["spawned"] is False
    shown = ws.nxc_json("threads", "show", receipt["thread_id"])
    assert "no-such-agent-cli" in shown["failures"][0]["reason"]
    waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "60", check=False)
    assert waited.returncode == 5 and "not found" in waited.stdout
