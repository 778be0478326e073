"""Helpers for delivery tests: a real workspace, the real `nxc` CLI in subprocesses, and
scripted runtimes — small Python programs that behave like agent CLIs (read the prompt
from argv, call `nxc` through a subprocess, print Claude Code stream-json on stdout)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

PYTHON = sys.executable
BIN = str(Path(sys.executable).parent)

# The scripted runtime. argv: CONFIG_JSON PROMPT. Behaviour comes from the config:
#   log        file to append one JSON line per run to (session, hop, resumed, prompt)
#   dump_env   file to write the whole environment to
#   send_to    list of personas/channels to send a task to (fresh runs only)
#   send_args  extra `nxc send` options for those sends (e.g. ["--expect", "x,y"])
#   sleep      seconds to sleep after sending (answers arrive meanwhile)
#   reply      body to reply with on a fresh run ({prompt} not expanded); null: no reply
#   on_resume  body prefix for the reply on a resumed run (the prompt is appended)
#   reply_args extra `nxc reply` options (e.g. ["--escalate"])
#   bind_as    bind this runtime session id with `nxc session bind` (and print no init line)
#   wait_for   a file to wait for before replying (orders answers without timing)
#   touch      a file to create after replying
#   nxc_first  `nxc` argument lists to run before replying (fresh runs), e.g. a lease
# A persona may declare a `resume` template `[python, script, cfg, --resumed-as,
# {runtime_session}, {prompt}]`; the run's log line then carries `resumed_as`.
SCRIPT = r'''
import json, os, re, subprocess, sys, time
cfg = json.load(open(sys.argv[1]))
resumed_as = None
if sys.argv[2] == "--resumed-as":  # a declared `resume` template: --resumed-as ID PROMPT
    resumed_as, prompt = sys.argv[3], sys.argv[4]
else:
    prompt = sys.argv[2]

def emit(obj):
    print(json.dumps(obj), flush=True)

def nxc(*args):
    r = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", *args, "--json"],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr

session = os.environ.get("NXC_SESSION", "")
if cfg.get("bind_as"):  # no init line: the runtime maps its own id with `nxc session bind`
    nxc("session", "bind", session, cfg["bind_as"])
else:
    emit({"type": "system", "subtype": "init", "session_id": "rt-" + session, "model": "script"})
resumed = prompt.startswith("New messages for you")
m = re.search(r"Thread (t-[0-9a-z-]+) awaits", prompt)
thread = m.group(1) if m else None
if cfg.get("log"):
    with open(cfg["log"], "a") as fh:
        fh.write(json.dumps({"session": session, "hop": os.environ.get("NXC_HOP"),
                             "actor": os.environ.get("NXC_ACTOR"), "resumed": resumed,
                             "thread": thread, "resumed_as": resumed_as,
                             "prompt": prompt}) + "\n")
if cfg.get("dump_env"):
    with open(cfg["dump_env"], "w") as fh:
        json.dump(dict(os.environ), fh)
emit({"type": "assistant", "message": {"content": [
    {"type": "thinking", "thinking": "let me think"},
    {"type": "text", "text": "on it"}]}, "parent_tool_use_id": None})
n = 0
if not resumed:
    for to in cfg.get("send_to", []):
        n += 1
        emit({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": f"tu{n}",
              "name": "Bash", "input": {"command": f"nxc send --to {to}"}}]}})
        code, out = nxc("send", "--to", to, *cfg.get("send_args", []),
                        cfg.get("send_body", "please answer"))
        emit({"type": "user", "message": {"content": [{"type": "tool_result",
              "tool_use_id": f"tu{n}", "content": out, "is_error": code != 0}]}})
    time.sleep(cfg.get("sleep", 0))
for args in ([] if resumed else cfg.get("nxc_first", [])):
    code, out = nxc(*args)
    if cfg.get("log"):
        with open(cfg["log"] + ".nxc", "a") as fh:
            fh.write(json.dumps({"args": args, "code": code, "out": out}) + "\n")
body = None
if resumed and cfg.get("on_resume") is not None:
    body = cfg["on_resume"] + "\n" + prompt
elif not resumed and cfg.get("reply") is not None:
    body = cfg["reply"]
if cfg.get("wait_for"):
    while not os.path.exists(cfg["wait_for"]):
        time.sleep(0.05)
if body is not None and thread:
    code, out = nxc("reply", "--thread", thread, *cfg.get("reply_args", []), body)
    emit({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "r",
          "content": out, "is_error": code != 0}]}})
if cfg.get("touch"):
    open(cfg["touch"], "w").close()
emit({"type": "result", "subtype": "success", "is_error": False, "result": "finished"})
'''


class Workspace:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.personas = root / ".nxs-personas"
        self.personas.mkdir(exist_ok=True)
        self.script = root / "scripted_agent.py"
        self.script.write_text(SCRIPT)
        self.channels: list[dict[str, Any]] = []

    def nxc(self, *args: str, env: dict[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        full = {**self.env, **(env or {})}
        proc = subprocess.run([PYTHON, "-m", "nixx.cli.nxc", *args], cwd=self.root, env=full,
                              capture_output=True, text=True, input=stdin, timeout=180)
        if check and proc.returncode != 0:
            raise AssertionError(f"nxc {args} exited {proc.returncode}: {proc.stdout}{proc.stderr}")
        return proc

    def nxc_json(self, *args: str, **kw: Any) -> Any:
        proc = self.nxc(*args, "--json", **kw)
        return json.loads(proc.stdout)

    def persona(self, name: str, *, runtime: Any = None, **fields: Any) -> None:
        data = {"handle": name, "system_prompt": fields.pop("system_prompt", f"You are {name}.")}
        data.update(fields)
        if runtime is not None:
            data["runtime"] = runtime
        (self.personas / f"{name}.yaml").write_text(yaml.safe_dump(data))

    def scripted(self, name: str, *, resume_template: bool = False, **cfg: Any) -> Path:
        """Declare persona `name` run by the scripted runtime with config `cfg` (with
        `resume_template`, also a `resume` argv naming `{runtime_session}`)."""
        extra = cfg.pop("persona_fields", {})
        log = self.root / f"{name}.log.jsonl"
        cfg.setdefault("log", str(log))
        cfg_path = self.root / f"{name}.cfg.json"
        cfg_path.write_text(json.dumps(cfg))
        runtime: dict[str, Any] = {"start": [PYTHON, str(self.script), str(cfg_path), "{prompt}"]}
        if resume_template:
            runtime["resume"] = [PYTHON, str(self.script), str(cfg_path), "--resumed-as",
                                 "{runtime_session}", "{prompt}"]
        self.persona(name, runtime=runtime, **extra)
        return log

    def channel(self, **decl: Any) -> None:
        self.channels.append(decl)
        (self.personas / "channels.yaml").write_text(yaml.safe_dump(self.channels))

    def log_ops(self, domain: str) -> list[dict[str, Any]]:
        return self.nxc_json_nxs("log", "--domain", domain)

    def nxc_json_nxs(self, *args: str) -> Any:
        proc = subprocess.run([PYTHON, "-m", "nixx.cli.nxs", *args, "--json"], cwd=self.root,
                              env=self.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)

    def outcomes(self) -> list[dict[str, Any]]:
        return self.log_ops("delivery")

    def sessions(self) -> list[dict[str, Any]]:
        return self.nxc_json("session", "state")["sessions"]


def runs(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def poll(fn, *, timeout: float = 90.0, what: str = "condition"):
    """Call `fn` until it returns something truthy; generous timeout, no timing asserts."""
    give_up = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out waiting for {what}; last value: {value!r}")
        time.sleep(0.1)


def slots(ws: Workspace, root: str, **kw: Any) -> dict[str, dict[str, Any]]:
    """The round's slot threads (depth 1 under `root` in `nxc status --json`), by member."""
    status = ws.nxc_json("status", "--thread", root, **kw)
    (op,) = status["operations"]
    return {t["expects"][0]: t for t in op["threads"]
            if t["depth"] == 1 and t["parent"] == root and t["expects"]}


def all_idle(ws: Workspace) -> bool:
    """No session of this workspace has a running process."""
    return all(s["state"] != "running" for s in ws.sessions())


def make_workspace(tmp_path: Path, **extra_env: str) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_",))}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.pop("USER", None)
    env["NXC_ACTOR"] = "operator"
    # no `nixx serve` of this machine (another test's, a developer's on 8420) may answer
    # the built-in runtime: a port nothing listens on, unless a test names one
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        env["NIXX_PORT"] = str(s.getsockname()[1])
    env.update(extra_env)
    proc = subprocess.run([PYTHON, "-m", "nixx.cli.nxs", "init", "--replica", "ab12", "--json"],
                          cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Workspace(root, env)
