"""One run of a session's runtime: prepared, launched, resumed — the one place a run is
built.

A session runs its runtime once per start or wake. `Deliverer.start` decides whether a
session may start (`chain`) and mints it (`sessions`); everything after that is here:

    prepare      the run's prompt file, its argv (`build_argv`), the child's environment
                 (`child_env`) → a `Run`, which holds the run's hop and files
    launch       a run started by a new supervisor process: the runtime's executable
                 found on the PATH the child gets, the run file, the `spawned` outcome,
                 the detached supervisor, its pid on the session
    resume_run   the next run of a session already claimed (state running), whoever
                 resumes it: a sender's process waking it (`Deliverer.resume`, then
                 `launch`) or the session's own supervisor, when answers were queued
                 while it ran (then `record_in_place`: it runs the run itself)

A run is written to ``run-<n>.json`` (`Run.to_json`, a `shapes.RunSpec`) beside its
prompt (`folders.SessionFolder`), and read back by the supervisor (`Run.read`).

Environment. The child's environment is cleared and refilled from an allowlist
(`child_env`) — everything in it is readable by the agent's own tools:

    NXC_ORIGIN   the workspace origin the sender resolved
    NXC_DB       the log, as an absolute path (the working directory never matters)
    NXC_SESSION  the internal session id
    NXC_ACTOR    the persona's own qualified handle
    NXC_HOP      this session's depth in the spawn chain (`Run.hop`)
    PATH, HOME   from the operator's shell (when set: `chain.NxcEnv`) — nothing else

Argv. Runtimes are declared, not hard-coded. A persona's `runtime` is the built-in name ``nixx``, a preset for an agent CLI
(``claude-code``, ``codex``, ``gemini``: `nixx.nxc.delivery.presets`), or argv templates:

    runtime:
      start:  [claude, -p, "{prompt}", --output-format, stream-json, --verbose]
      resume: [claude, -p, "{prompt}", --resume, "{runtime_session}",
               --output-format, stream-json, --verbose]
      # optional: how its stdout is read into the transcript
      #   stream-json (Claude Code's JSON lines) | codex-json | gemini-json
      #   | nixx (normalised entries) | none

Placeholders (each argument is formatted on its own, so a value never splits into
several arguments and is never re-parsed): ``{prompt}`` the session prompt,
``{session}`` the internal session id, ``{runtime_session}`` the runtime's own id (bound
with `nxc session bind`, or read from the stream's init line), ``{thread}``,
``{handle}`` (the persona), ``{db}`` (the absolute log path), ``{workspace}`` (its root).

Resume uses `resume` when declared and, if it names ``{runtime_session}``, only once that
id is bound; otherwise it starts the runtime afresh with the resume prompt (which is
self-contained: the thread id and the answers).

The built-in ``nixx`` runtime is `python -m nixx.nxc.delivery.builtin_runtime`: the
persona's model and tools through an OpenAI-compatible backend, plus nxc send/reply.
What a session stores of its runtime is `sessions.stored_runtime` (`shapes.StoredRuntime`).

Launch. The runtime does not run under the sender: the run file is written (0600) and
`python -m nixx.nxc.delivery.supervisor RUNFILE` starts in a new session (detached,
stdio closed) with the same cleared environment. The supervisor starts the runtime,
reads its stdout into the transcript, records its exit and resumes it with answers that
were queued while it ran. The sender returns at once.
"""

from __future__ import annotations

import json
import os
import string
import sys

from nixx.nxc.delivery import outcomes, sessions
from nixx.nxc.delivery.folders import SessionFolder
from nixx.nxc.delivery.spawn import SUPERVISOR_MODULE

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.nxc.delivery.chain import NxcEnv
    from nixx.nxc.delivery.launcher import Deliverer
    from nixx.nxc.delivery.session_prompt import SessionPrompt
    from nixx.nxc.delivery.shapes import (
        Backend,
        Launched,
        RunSpec,
        SessionRecord,
        StoredRuntime,
        Wake,
    )
    from nixx.nxc.shapes import Delivered


class Run:
    """One run of a session's runtime: who runs, at which hop, with which files."""

    __slots__ = ("session", "persona", "thread", "mode", "hop", "number", "folder", "argv",
                 "env", "cwd", "format", "db", "timeout_ms", "kill_at_ms", "round",
                 "backend_file", "keep_days")

    def __init__(self, *, session: str, persona: str, thread: str | None, mode: str, hop: int,
                 number: int, folder: SessionFolder, argv: list[str], env: dict[str, str],
                 cwd: str, format: str, db: str, timeout_ms: int | None,
                 kill_at_ms: int | None, round: str | None, backend_file: str | None,
                 keep_days: int | None) -> None:
        self.session = session
        self.persona = persona
        self.thread = thread
        self.mode = mode  # "start" | "resume"
        self.hop = hop  # its depth in the spawn chain (the child's NXC_HOP says the same)
        self.number = number  # the session's n-th run: prompt-<n>.json, run-<n>.json
        self.folder = folder
        self.argv = argv
        self.env = env  # the cleared child environment (`child_env`)
        self.cwd = cwd
        self.format = format  # the runtime's transcript format (`stream_formats`)
        self.db = db
        self.timeout_ms = timeout_ms  # a round's member: killed this long after it starts
        self.kill_at_ms = kill_at_ms  # … or at this instant (epoch ms)
        self.round = round  # the round's thread, for a round's member
        self.backend_file = backend_file  # the built-in runtime's
        self.keep_days = keep_days  # NXC_TRANSCRIPT_KEEP_DAYS (None: the default)

    @property
    def run_file(self) -> str:
        return self.folder.run_file(self.number)

    @property
    def target(self) -> str:
        """What its outcomes are recorded against: its thread (a session without one: its
        id)."""
        return self.thread or self.session

    def to_json(self) -> RunSpec:
        return {"session": self.session, "persona": self.persona, "thread": self.thread,
                "mode": self.mode, "hop": self.hop, "argv": self.argv, "env": self.env,
                "cwd": self.cwd, "format": self.format, "db": self.db,
                "timeout_ms": self.timeout_ms, "kill_at_ms": self.kill_at_ms,
                "round": self.round, "run": self.number, "backend_file": self.backend_file,
                "keep_days": self.keep_days}

    @classmethod
    def read(cls, run_file: str) -> Run:
        """The run a supervisor is started with (its ``run-<n>.json``)."""
        with open(run_file, encoding="utf-8") as fh:
            spec: RunSpec = json.load(fh)
        return cls(session=spec["session"], persona=spec["persona"], thread=spec["thread"],
                   mode=spec["mode"], hop=spec["hop"], number=spec["run"],
                   folder=SessionFolder.of_file(run_file), argv=spec["argv"],
                   env=spec["env"], cwd=spec["cwd"], format=spec["format"], db=spec["db"],
                   timeout_ms=spec["timeout_ms"], kill_at_ms=spec["kill_at_ms"],
                   round=spec["round"], backend_file=spec["backend_file"],
                   keep_days=spec["keep_days"])


def prepare(d: Deliverer, *, session: str, persona: str, thread: str | None,
            runtime: StoredRuntime, hop: int, mode: str, prompt: str | SessionPrompt,
            backend: Backend | None = None, timeout_ms: int | None = None,
            round_thread: str | None = None, runtime_session: str | None = None,
            kill_at_ms: int | None = None) -> Run:
    """The session's next run: its files written (the built-in runtime's `backend` at its
    start; later runs read the same file), its argv and environment made."""
    folder = SessionFolder(d.workspace.state_dir, session)
    number = folder.next_run()  # (the folder is made here)
    prompt_file = folder.prompt_file(number)
    backend_file = folder.backend_file if runtime.get("builtin") else None
    if backend_file is not None and backend is not None:
        write_private(backend_file, backend)
    if isinstance(prompt, str):
        write_private(prompt_file, {"user": prompt})
        text = prompt
    else:
        write_private(prompt_file, {"system": prompt.system, "user": prompt.user})
        text = prompt.render()
    values = {"prompt": text, "session": session, "runtime_session": runtime_session or "",
              "thread": thread or "", "handle": persona, "db": d.workspace.db_path,
              "workspace": d.workspace.root}
    argv = build_argv(runtime, mode=mode, values=values, prompt_file=prompt_file,
                      backend_file=backend_file)
    env = child_env(origin=d.origin, db=d.workspace.db_path, session=session, actor=persona,
                    hop=hop, shell=d.nxc_env)
    return Run(session=session, persona=persona, thread=thread, mode=mode, hop=hop,
               number=number, folder=folder, argv=argv, env=env, cwd=d.workspace.root,
               format=runtime.get("format", "stream-json"), db=d.workspace.db_path,
               timeout_ms=timeout_ms, kill_at_ms=kill_at_ms, round=round_thread,
               backend_file=backend_file, keep_days=d.nxc_env.transcript_keep_days)


def first_run(d: Deliverer, *, session: str, persona: str, thread: str,
              runtime: StoredRuntime, hop: int, prompt: SessionPrompt, backend: Backend | None,
              timeout_ms: int | None, round_thread: str | None, kill_at_ms: int | None,
              actor: str) -> Delivered:
    """A fresh session's first run (the deliverer decided it may start and recorded it),
    prepared and launched. → {session, spawned, warnings[, failed]}."""
    run = prepare(d, session=session, persona=persona, thread=thread, runtime=runtime,
                  hop=hop, mode="start", prompt=prompt, backend=backend, timeout_ms=timeout_ms,
                  round_thread=round_thread, kill_at_ms=kill_at_ms)
    launched = launch(d, run, actor=actor)
    result: Delivered = {"session": session, "spawned": launched["spawned"],
                         "warnings": launched["warnings"]}
    if "failed" in launched:
        result["failed"] = launched["failed"]
    return result


def launch(d: Deliverer, run: Run, *, actor: str) -> Launched:
    """Start `run` under a new detached supervisor. A runtime that cannot start is a
    `failed` outcome and a failed session (nothing is launched)."""
    argv0 = run.argv[0]
    if find_executable(argv0, run.env.get("PATH"), run.cwd) is None:
        reason = (f"runtime executable {argv0!r} not found"
                  + (" on the PATH the child gets" if os.sep not in argv0 else ""))
        return _failed(d, run, reason, actor=actor, warning=f"failed to start: {reason}")
    record_in_place(d, run, actor=actor)
    try:
        pid = launch_supervisor(run.run_file, run.env, run.cwd, run.folder.supervisor_log)
    except OSError as exc:
        reason = f"could not start the supervisor: {exc}"
        return _failed(d, run, reason, actor=actor, warning=reason)
    sessions.set_pid(d.local, run.session, pid)
    return {"spawned": True, "warnings": []}


def record_in_place(d: Deliverer, run: Run, *, actor: str) -> None:
    """The run file written and the `spawned` outcome recorded: all a supervisor needs
    before it starts `run` (itself, or the one `launch` starts)."""
    write_private(run.run_file, run.to_json())
    outcomes.record(d.store, "spawned", run.target, actor, {
        "thread": run.target, "session": run.session, "persona": run.persona,
        "mode": run.mode, "hop": run.hop, "argv0": run.argv[0]})


def _failed(d: Deliverer, run: Run, reason: str, *, actor: str, warning: str) -> Launched:
    sessions.fail(d.local, run.session, reason)
    outcomes.record(d.store, "failed", run.target, actor, {
        "thread": run.target, "session": run.session, "persona": run.persona,
        "reason": reason})
    return {"spawned": False, "warnings": [f"{run.persona}: {warning}"], "failed": reason}


def resume_run(d: Deliverer, row: SessionRecord, wakes: list[Wake]) -> Run:
    """The next run of session `row`, already claimed (state running), handed `wakes`:
    the resume prompt (with the obligation while its own thread still awaits it), the
    backend file its start wrote."""
    from nixx.nxc.delivery.session_prompt import resume_prompt

    runtime = row["runtime"]
    builtin = bool(runtime.get("builtin"))
    prompt = resume_prompt(wakes, own_thread=d.still_owed(row), builtin=builtin)
    return prepare(d, session=row["session"], persona=row["persona"], thread=row["thread_id"],
                   runtime=runtime, hop=row["hop"], mode="resume", prompt=prompt,
                   runtime_session=row.get("runtime_session"))


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def fill(template: list[str], values: dict[str, str]) -> list[str]:
    return [arg.format_map(values) for arg in template]


def build_argv(
    runtime: StoredRuntime, *, mode: str, values: dict[str, str], prompt_file: str,
    backend_file: str | None,
) -> list[str]:
    """The argv of one run. `mode` is ``start`` or ``resume``."""
    if runtime.get("builtin") == "nixx":
        argv = [sys.executable, "-m", "nixx.nxc.delivery.builtin_runtime", "--session", values["session"],
                "--prompt-file", prompt_file]
        if backend_file:
            argv += ["--backend-file", backend_file]
        if mode == "resume":
            argv.append("--resume")
        return argv
    template = runtime["start"]
    if mode == "resume" and runtime.get("resume"):
        wants_id = any("runtime_session" in _fields(a) for a in runtime["resume"])
        if not wants_id or values.get("runtime_session"):
            template = runtime["resume"]
    return fill(list(template), values)


def child_env(*, origin: str, db: str, session: str, actor: str, hop: int,
              shell: NxcEnv) -> dict[str, str]:
    """The whole environment of a session's supervisor and runtime (the allowlist)."""
    env = {"NXC_ORIGIN": origin, "NXC_DB": os.path.abspath(db), "NXC_SESSION": session,
           "NXC_ACTOR": actor, "NXC_HOP": str(hop)}
    if shell.path:
        env["PATH"] = shell.path
    if shell.home:
        env["HOME"] = shell.home
    return env


def find_executable(argv0: str, path: str | None, cwd: str) -> str | None:
    """Where `argv0` resolves with the child's PATH; None when it does not."""
    if os.sep in argv0:
        full = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
        return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
    for folder in (path or "").split(os.pathsep):
        if not folder:
            continue
        full = os.path.join(folder, argv0)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return None


def launch_supervisor(run_file: str, env: dict[str, str], cwd: str, log_path: str) -> int:
    """Start the detached supervisor; returns its pid. OSError if it cannot start."""
    import subprocess

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", SUPERVISOR_MODULE, run_file],
            env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True, close_fds=True,
        )
    return proc.pid


def write_private(path: str, data: Any) -> str:
    """Write JSON (or text) readable by this user only (a session's and a round's
    files: `folders`)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        if isinstance(data, str):
            fh.write(data)
        else:
            json.dump(data, fh, ensure_ascii=False)
    os.replace(tmp, path)
    return path
