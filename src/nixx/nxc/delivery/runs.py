"""One run of a session's runtime: prepared, launched, resumed — the one place a run is
built.

A session runs its runtime once per start or wake. `Deliverer.start` decides whether a
session may start (`chain`) and mints it (`sessions`); everything after that is here:

    prepare      the run's prompt file, its argv (`runtimes`), the child's environment
                 (`chain.child_env`) → a `Run`, which holds the run's hop and files
    launch       a run started by a new supervisor process: the runtime's executable
                 found on the PATH the child gets, the run file, the `spawned` outcome,
                 the detached supervisor (`spawn`), its pid on the session
    resume_run   the next run of a session already claimed (state running), whoever
                 resumes it: a sender's process waking it (`Deliverer.resume`, then
                 `launch`) or the session's own supervisor, when answers were queued
                 while it ran (then `record_in_place`: it runs the run itself)

A run is written to ``run-<n>.json`` (`Run.to_json`, a `shapes.RunSpec`) beside its
prompt (`folders.SessionFolder`), and read back by the supervisor (`Run.read`).
"""

from __future__ import annotations

import json
import os

from nixx.nxc.delivery import outcomes, sessions
from nixx.nxc.delivery.chain import child_env
from nixx.nxc.delivery.folders import SessionFolder, write_private
from nixx.nxc.delivery.spawn import find_executable, launch_supervisor

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.delivery.launcher import Deliverer
    from nixx.nxc.delivery.session_prompt import SessionPrompt
    from nixx.nxc.delivery.shapes import Launched, RunSpec, SessionRecord, StoredRuntime, Wake


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
        self.env = env  # the cleared child environment (`chain.child_env`)
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
            backend_file: str | None, timeout_ms: int | None = None,
            round_thread: str | None = None, runtime_session: str | None = None,
            kill_at_ms: int | None = None) -> Run:
    """The session's next run: its prompt file written, its argv and environment made."""
    from nixx.nxc.delivery.runtimes import build_argv

    folder = SessionFolder(d.workspace.state_dir, session)
    number = folder.next_run()
    prompt_file = folder.prompt_file(number)
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
    folder = SessionFolder(d.workspace.state_dir, row["session"])
    return prepare(d, session=row["session"], persona=row["persona"], thread=row["thread_id"],
                   runtime=runtime, hop=row["hop"], mode="resume", prompt=prompt,
                   backend_file=folder.backend_file if builtin else None,
                   runtime_session=row.get("runtime_session"))
