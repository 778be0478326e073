"""The deliverer: start a persona's session for a thread, wake a session with answers.

Used by `LiveDelivery` (in the process that sent or replied) and by the supervisor (in
the process that watched a runtime end). Every outcome is recorded in the log
(`outcomes`); process state goes to the device-local store (`sessions`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nixx.nxc.delivery import outcomes, sessions
from nixx.nxc.delivery.chain import chain_bounds, hop_limit
from nixx.nxc.delivery.localstore import LocalStore
from nixx.nxc.delivery.spawn import (
    child_env,
    enclosing_sessions,
    find_executable,
    launch_supervisor,
    session_dir,
    write_private,
)

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.log.store import LogStore
    from nixx.log.workspace import Workspace
    from nixx.nxc.declarations import Declarations, Persona
    from nixx.nxc.delivery.session_prompt import SessionPrompt
    from nixx.nxc.delivery.shapes import (
        Backend,
        Launched,
        Refusal,
        RunSpec,
        Said,
        SessionRecord,
        StoredRuntime,
        Wake,
    )
    from nixx.nxc.shapes import Delivered, Resumed

BACKEND_FILE = "backend.json"


class Deliverer:
    def __init__(self, *, workspace: Workspace, store: LogStore, decls: Declarations,
                 origin: str, env: Mapping[str, str], local: LocalStore | None = None) -> None:
        self.workspace = workspace
        self.store = store
        self.decls = decls
        self.origin = origin
        self.env = env
        self._local = local
        self._current: SessionRecord | None = None
        self._current_known = False  # current_session() is looked up once

    @classmethod
    def open(cls, db: str, env: Mapping[str, str]) -> Deliverer:
        """A deliverer of the workspace whose log is `db`, opened on its own (no engine):
        the supervisor's, and a sync pass's moving rounds on. Its store folds every view
        (`nixx.nxc.installed`)."""
        from nixx.log.store import LogStore
        from nixx.log.workspace import Workspace
        from nixx.nxc.declarations import declared_origin, load_declarations
        from nixx.nxc.handles import resolve_origin
        from nixx.nxc.installed import reducers

        ws = Workspace.for_db(db)
        store = LogStore.open(ws.db_path, reducers())
        origin = resolve_origin(store.replica, env,
                                declared_origin(ws.personas_dir, cache_dir=ws.state_dir))
        decls = load_declarations(ws.personas_dir, origin, cache_dir=ws.state_dir)
        return cls(workspace=ws, store=store, decls=decls, origin=origin, env=env)

    @property
    def local(self) -> LocalStore:
        """Opened on first use: a send to a persona without a runtime never touches it."""
        if self._local is None:
            self._local = LocalStore.for_workspace(self.workspace)
        return self._local

    # -- where the caller stands ----------------------------------------------------------

    def current_session(self) -> SessionRecord | None:
        """The session this process runs in. The process tree decides (`spawn.
        enclosing_sessions`: the innermost ancestor that is the recorded supervisor of a
        session), so an agent that unsets or rewrites `NXC_SESSION` is still inside its
        session; `NXC_SESSION` is used only where no supervisor is an ancestor (no /proc)."""
        if self._current_known:
            return self._current
        found = None
        enclosing = enclosing_sessions(self.workspace.state_dir)
        for sid, pid in enclosing:
            row = sessions.get(self.local, sid)
            if row is not None and row["pid"] == pid:
                found = row
                break
        if found is None and self.env.get("NXC_SESSION"):
            found = sessions.get(self.local, self.env["NXC_SESSION"])
        self._current, self._current_known = found, True
        return found

    def in_session(self) -> bool:
        """Cheap: whether this process may run inside a session (no store opened when a
        person's process has no supervisor ancestor and no `NXC_SESSION`)."""
        return bool(self.env.get("NXC_SESSION")) or bool(
            enclosing_sessions(self.workspace.state_dir))

    # -- backend for the built-in runtime -------------------------------------------------

    def backend(self, persona: Persona | None, *, round_thread: str | None = None) -> Backend:
        """The built-in runtime's backend: inherited down the chain (a child's env holds no
        NIXX_* settings), else the round's, else this process's nixx settings."""
        import json

        candidates = []
        current = self.current_session()
        if current is not None:
            candidates.append(os.path.join(self.workspace.state_dir, "sessions",
                                           current["session"], BACKEND_FILE))
        if round_thread is not None:
            candidates.append(os.path.join(self.workspace.state_dir, "rounds",
                                           f"{round_thread}.{BACKEND_FILE}"))
        base: Backend | None = None
        for path in candidates:
            try:
                with open(path, encoding="utf-8") as fh:
                    base = json.load(fh)
                break
            except (OSError, ValueError):
                continue
        if base is None:
            from nixx.nxc.delivery.llm_backend import from_settings

            base = from_settings()
        out = base.copy()
        if persona is not None:
            out["persona"] = persona.handle
            out["shared_memory"] = persona.shared_memory
            out["persona_model"] = persona.model
            out["tools"] = None if persona.tools is None else list(persona.tools)
        out["workspace"] = self.workspace.root
        return out

    # -- starting ------------------------------------------------------------------------

    def start(
        self, persona: Persona, *, thread_id: str, task: str, sender: str, channel: str | None = None,
        earlier: list[Said] | None = None, timeout_ms: int | None = None,
        round_thread: str | None = None, round_opener: str | None = None,
        kill_at_ms: int | None = None,
    ) -> Delivered:
        """Start a fresh session of `persona` answering `thread_id`; its run is killed
        `timeout_ms` after it starts, or at the instant `kill_at_ms` (epoch ms). A round's
        member names the round's thread (`round_thread`) and the session that opened the
        round (`round_opener`, None: a person), whose hop it runs one below.
        → {session, spawned, warnings}."""
        actor = sender
        if persona.runtime is None:
            return {"session": None, "spawned": False, "warnings": [
                f"{persona.handle} declares no `runtime` in {persona.file}: nobody was "
                "started; the message waits in the thread for whoever acts as it"]}
        from nixx.nxc.delivery.runtimes import runtime_dict
        from nixx.nxc.delivery.session_prompt import session_prompt

        # who spawns: the round's opener for a round's member (every member runs at the
        # round's depth + 1, whichever process starts it), else the session we run in
        if round_thread is not None:
            current = sessions.get(self.local, round_opener) if round_opener else None
            hop, limit = hop_limit(self.env if current else {}, current, env_hop=False)
        else:
            current = self.current_session()
            hop, limit = hop_limit(self.env, current)
        if hop > limit:
            msg = (f"not started: {persona.handle} would run at hop {hop}, past the limit of "
                   f"{limit} (NXC_MAX_HOPS); the message stays in thread {thread_id}")
            outcomes.record(self.store, "refused", thread_id, actor, {
                "thread": thread_id, "persona": persona.handle, "reason": "hop_limit",
                "hop": hop, "limit": limit, "msg": msg})
            return {"session": None, "spawned": False, "warnings": [msg], "refused": "hop_limit"}
        runtime = runtime_dict(persona.runtime)
        sid = sessions.create(
            self.local, persona=persona.handle, thread_id=thread_id, runtime=runtime, hop=hop,
            max_hops=limit, parent_session=current["session"] if current else None,
            **chain_bounds(self.env, current))
        folder = session_dir(self.workspace.state_dir, sid)
        builtin = bool(runtime.get("builtin"))
        summary = {"thread_id": thread_id}
        prompt = session_prompt(persona=persona, decls=self.decls, thread=summary, task=task,
                                sender=sender, builtin=builtin, earlier=earlier, channel=channel)
        backend_file = None
        if builtin:
            backend_file = write_private(os.path.join(folder, BACKEND_FILE),
                                         self.backend(persona, round_thread=round_thread))
        spec = self._run_spec(sid, persona.handle, thread_id, runtime, hop, mode="start",
                              prompt=prompt, backend_file=backend_file, timeout_ms=timeout_ms,
                              round_thread=round_thread, kill_at_ms=kill_at_ms)
        launched = self._launch(spec, actor=actor)
        result: Delivered = {"session": sid, "spawned": launched["spawned"],
                             "warnings": launched["warnings"]}
        if "failed" in launched:
            result["failed"] = launched["failed"]
        return result

    def _values(self, sid: str, persona: str, thread_id: str | None, prompt_text: str,
                runtime_session: str | None) -> dict[str, str]:
        return {"prompt": prompt_text, "session": sid, "runtime_session": runtime_session or "",
                "thread": thread_id or "", "handle": persona, "db": self.workspace.db_path,
                "workspace": self.workspace.root}

    def _run_spec(self, sid: str, persona: str, thread_id: str | None, runtime: StoredRuntime,
                  hop: int, *, mode: str, prompt: str | SessionPrompt, backend_file: str | None,
                  timeout_ms: int | None, round_thread: str | None,
                  runtime_session: str | None = None,
                  kill_at_ms: int | None = None) -> RunSpec:
        from nixx.nxc.delivery.runtimes import build_argv

        folder = session_dir(self.workspace.state_dir, sid)
        n = len([f for f in os.listdir(folder) if f.startswith("prompt-")]) + 1
        prompt_file = os.path.join(folder, f"prompt-{n}.json")
        if isinstance(prompt, str):
            write_private(prompt_file, {"user": prompt})
            text = prompt
        else:
            write_private(prompt_file, {"system": prompt.system, "user": prompt.user})
            text = prompt.render()
        argv = build_argv(runtime, mode=mode,
                          values=self._values(sid, persona, thread_id, text, runtime_session),
                          prompt_file=prompt_file, backend_file=backend_file)
        env = child_env(origin=self.origin, db=self.workspace.db_path, session=sid,
                        actor=persona, hop=hop, shell=self.env)
        return {"session": sid, "persona": persona, "thread": thread_id, "mode": mode,
                "argv": argv, "env": env, "cwd": self.workspace.root,
                "format": runtime.get("format", "stream-json"), "db": self.workspace.db_path,
                "timeout_ms": timeout_ms, "kill_at_ms": kill_at_ms, "round": round_thread,
                "run": n,
                "backend_file": backend_file,
                "keep_days": self.env.get("NXC_TRANSCRIPT_KEEP_DAYS")}

    def _launch(self, spec: RunSpec, *, actor: str) -> Launched:
        sid, persona = spec["session"], spec["persona"]
        thread_id = spec["thread"] or sid  # a session without a thread: its outcomes by id
        path = spec["env"].get("PATH")
        if find_executable(spec["argv"][0], path, spec["cwd"]) is None:
            reason = (f"runtime executable {spec['argv'][0]!r} not found"
                      + (" on the PATH the child gets" if os.sep not in spec["argv"][0] else ""))
            sessions.fail(self.local, sid, reason)
            outcomes.record(self.store, "failed", thread_id, actor, {
                "thread": thread_id, "session": sid, "persona": persona, "reason": reason})
            return {"spawned": False, "warnings": [f"{persona}: failed to start: {reason}"],
                    "failed": reason}
        folder = session_dir(self.workspace.state_dir, sid)
        run_file = write_private(os.path.join(folder, f"run-{spec['run']}.json"), spec)
        outcomes.record(self.store, "spawned", thread_id, actor, {
            "thread": thread_id, "session": sid, "persona": persona, "mode": spec["mode"],
            "hop": int(spec["env"]["NXC_HOP"]), "argv0": spec["argv"][0]})
        try:
            pid = launch_supervisor(run_file, spec["env"], spec["cwd"],
                                    os.path.join(folder, "supervisor.log"))
        except OSError as exc:
            reason = f"could not start the supervisor: {exc}"
            sessions.fail(self.local, sid, reason)
            outcomes.record(self.store, "failed", thread_id, actor, {
                "thread": thread_id, "session": sid, "persona": persona, "reason": reason})
            return {"spawned": False, "warnings": [f"{persona}: {reason}"], "failed": reason}
        sessions.set_pid(self.local, sid, pid)
        return {"spawned": True, "warnings": []}

    # -- waking --------------------------------------------------------------------------

    def wake(self, sid: str, *, thread_id: str, message_id: str | None, sender: str,
             body: str, messages: list[Wake] | None = None) -> Resumed:
        """Deliver answers to a session: resume it now, or queue them while it runs.

        `messages` ({thread_id, message_id, sender, body}, default: just the one given)
        are handed over once each (the wake queue is keyed by message id): a wake whose
        messages were all handed to the session already is dropped (`dropped: true`)."""
        row = sessions.get(self.local, sid)
        if row is None:
            return {"resumed": None, "warnings": [f"session {sid} is not on this machine"]}
        if messages is None:
            messages = [{"thread_id": thread_id, "message_id": message_id, "sender": sender,
                         "body": body}]
        try:
            outcome, fresh = sessions.deliver(self.local, sid, messages,
                                              agents=self.decls.personas)
        except sessions.ResumeRefused as refused:
            self.record_refusal(refused.info, actor=sender)
            return {"resumed": None, "refused": "resume_limit",
                    "warnings": [refused.info["msg"]]}
        if outcome == "dropped":
            return {"resumed": None, "dropped": True, "warnings": []}
        if outcome == "queued":
            outcomes.record(self.store, "queued", thread_id, sender, {
                "thread": thread_id, "session": sid, "persona": row["persona"],
                "messages": [m.get("message_id") for m in fresh]})
            return {"resumed": sid, "queued": True, "warnings": [
                f"{row['persona']} is busy (session {sid}): the answer is queued for its "
                "next wake"]}
        return self.resume(row, fresh, actor=sender)

    def record_refusal(self, info: Refusal, *, actor: str) -> None:
        """A resume refused by a loop bound: a `refused` outcome in the log (the message
        stays in its thread)."""
        outcomes.record(self.store, "refused", info["thread"], actor, {**info})

    def turn_answers(self, thread_id: str, opener: str) -> list[Wake]:
        """What the opener of `thread_id` is woken with: every message of the current turn
        (after the expectation was declared) not its own, in order."""
        from nixx.nxc.reducer import turn_messages

        return [{"thread_id": thread_id, "message_id": mid, "sender": sender, "body": body}
                for mid, sender, body in turn_messages(self.store.conn, thread_id, opener)]

    def resume(self, row: SessionRecord, wakes: list[Wake], *,
               actor: str) -> Resumed:
        """Start a resume run for a session already claimed (state running)."""
        from nixx.nxc.delivery.session_prompt import resume_prompt

        sid = row["session"]
        runtime = row["runtime"]
        builtin = bool(runtime.get("builtin"))
        own = self._still_owed(row)
        prompt = resume_prompt(wakes, own_thread=own, builtin=builtin)
        folder = session_dir(self.workspace.state_dir, sid)
        backend_file = os.path.join(folder, BACKEND_FILE) if builtin else None
        spec = self._run_spec(sid, row["persona"], row["thread_id"], runtime, row["hop"],
                              mode="resume", prompt=prompt, backend_file=backend_file,
                              timeout_ms=None, round_thread=None,
                              runtime_session=row.get("runtime_session"))
        result = self._launch(spec, actor=actor)
        return {"resumed": sid if result["spawned"] else None, "warnings": result["warnings"]}

    def _still_owed(self, row: SessionRecord) -> str | None:
        from nixx.nxc import threads

        tid: str | None = row.get("thread_id")
        if not tid:
            return None
        summary = threads.get_thread(self.store.conn, tid, _now_ms())
        if summary and row["persona"] in summary["outstanding"] and not summary["stale"]:
            return tid
        return None


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
