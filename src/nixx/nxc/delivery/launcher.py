"""The deliverer: start a persona's session for a thread, wake a session with answers.

Used by `LiveDelivery` (in the process that sent or replied) and by the supervisor (in
the process that watched a runtime end). The `Deliverer` decides: where the caller
stands (`here`), whether a session may start (`chain`) or waits for a
person (`gates`), whether answers resume a session or wait in its queue (`sessions`),
which backend the built-in runtime inherits. Each session it starts and each run it
resumes is made and launched by `runs`. Every outcome
is recorded in the log (`outcomes`); process state goes to the device-local store
(`sessions`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nixx.nxc.delivery import chain, gates, outcomes, sessions
from nixx.nxc.delivery.chain import NxcEnv
from nixx.nxc.delivery.localstore import LocalStore, local_db_path
from nixx.nxc.delivery.spawn import enclosing_sessions

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.log.store import LogStore
    from nixx.log.workspace import Workspace
    from nixx.nxc.declarations import Declarations, Persona
    from nixx.nxc.delivery.shapes import Backend, HeldArgs, Refusal, Said, SessionRecord, Wake
    from nixx.nxc.shapes import Delivered, Resumed


class Deliverer:
    def __init__(self, *, workspace: Workspace, store: LogStore, decls: Declarations,
                 origin: str, env: Mapping[str, str], local: LocalStore | None = None) -> None:
        self.workspace = workspace
        self.store = store
        self.decls = decls
        self.origin = origin
        self.nxc_env = NxcEnv.parse(env)  # all delivery reads of the environment
        self._local = local
        self._here: SessionRecord | None = None
        self._here_known = False  # `here` is looked up once

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

    def has_local(self) -> bool:
        """Whether a device-local store exists here (no session ever ran here: it does
        not), without opening one."""
        return self._local is not None or os.path.exists(
            local_db_path(self.workspace.state_dir))

    # -- where the caller stands ----------------------------------------------------------

    @property
    def here(self) -> SessionRecord | None:
        """The session this process runs in (None: a person's process), looked up once.
        The process tree decides (`spawn.enclosing_sessions`: the innermost ancestor that
        is the recorded supervisor of a session), so an agent that unsets or rewrites
        `NXC_SESSION` is still inside its session; `NXC_SESSION` is used only where no
        supervisor is an ancestor (no /proc)."""
        if not self._here_known:
            self._here, self._here_known = self._find_here(), True
        return self._here

    def _find_here(self) -> SessionRecord | None:
        for sid, pid in enclosing_sessions(self.workspace.state_dir):
            row = sessions.get(self.local, sid)
            if row is not None and row["pid"] == pid:
                return row
        if self.nxc_env.session:
            return sessions.get(self.local, self.nxc_env.session)
        return None

    def in_session(self) -> bool:
        """Cheap: whether this process may run inside a session (no store opened when a
        person's process has no supervisor ancestor and no `NXC_SESSION`)."""
        return bool(self.nxc_env.session) or bool(
            enclosing_sessions(self.workspace.state_dir))

    # -- backend for the built-in runtime -------------------------------------------------

    def backend(self, persona: Persona | None, *, inherit: SessionRecord | None,
                round_thread: str | None = None) -> Backend:
        """The built-in runtime's backend: inherited down the chain from `inherit`, the
        session the caller stands in (a child's env holds no NIXX_* settings), else the
        round's, else this process's nixx settings."""
        import json

        from nixx.nxc.delivery.folders import SessionFolder, round_backend_file

        candidates = []
        if inherit is not None:
            state = self.workspace.state_dir
            candidates.append(SessionFolder(state, inherit["session"]).backend_file)
        if round_thread is not None:
            candidates.append(round_backend_file(self.workspace.state_dir, round_thread))
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

    def keep_round_backend(self, round_thread: str, opener: SessionRecord | None) -> None:
        """Write the backend a round's members and its summary use, in the process of
        the round's `opener` (None: a person's): whoever settles the round may be a
        member's process, whose environment holds no NIXX_* settings."""
        from nixx.nxc.delivery.folders import round_backend_file
        from nixx.nxc.delivery.runs import write_private

        backend = self.backend(None, inherit=opener)
        path = round_backend_file(self.workspace.state_dir, round_thread, make=True)
        write_private(path, backend)

    # -- starting ------------------------------------------------------------------------

    def start(
        self, persona: Persona, *, thread_id: str, task: str, sender: str, channel: str | None = None,
        earlier: list[Said] | None = None, timeout_ms: int | None = None,
        round_thread: str | None = None, round_opener: str | None = None,
        kill_at_ms: int | None = None, approved: str | None = None,
        spawned_by: str | None = None,
    ) -> Delivered:
        """Start a fresh session of `persona` answering `thread_id`; its run is killed
        `timeout_ms` after it starts, or at the instant `kill_at_ms` (epoch ms). A round's
        member names the round's thread (`round_thread`) and the session that opened the
        round (`round_opener`, None: a person), whose hop it runs one below.

        A persona that declares `approve: [start]` is held for a person (`gates.hold`):
        nothing starts, the receipt names the approval. Once approved, the start is run
        again with `approved` (its id) and `spawned_by` (the session that sent, held with
        it: the process that approves is a person's, not the sender's).
        → {session, spawned, warnings}."""
        actor = sender
        if persona.runtime is None:
            return {"session": None, "spawned": False, "warnings": [
                f"{persona.handle} declares no `runtime` in {persona.file}: nobody was "
                "started; the message waits in the thread for whoever acts as it"]}
        from nixx.nxc.delivery import runs
        from nixx.nxc.delivery.session_prompt import session_prompt

        builtin = bool(persona.runtime.builtin)
        # the backend is inherited from the session this process runs in
        backend = (self.backend(persona, inherit=self.here, round_thread=round_thread)
                   if builtin else None)
        prompt = session_prompt(persona=persona, decls=self.decls, thread={"thread_id": thread_id},
                                task=task, sender=sender, builtin=builtin, earlier=earlier,
                                channel=channel)
        # the hop counts from who spawns: the round's opener for a round's member (every
        # member runs at the round's depth + 1, whichever process starts it), the session
        # that sent a start a person approved, else the session we run in
        spawner = round_opener if round_thread is not None else spawned_by
        if round_thread is not None or approved is not None:
            current = sessions.get(self.local, spawner) if spawner else None
        else:
            current = self.here
        hop, limit, bounds = chain.place(self.nxc_env, current,
                                         round_member=round_thread is not None)
        if hop > limit:
            msg = (f"not started: {persona.handle} would run at hop {hop}, past the limit of "
                   f"{limit} (NXC_MAX_HOPS); the message stays in thread {thread_id}")
            outcomes.record(self.store, "refused", thread_id, actor, {
                "thread": thread_id, "persona": persona.handle, "reason": "hop_limit",
                "hop": hop, "limit": limit, "msg": msg})
            return {"session": None, "spawned": False, "warnings": [msg], "refused": "hop_limit"}
        if approved is None and {"start", "run"} & set(persona.approve):
            args: HeldArgs = {"persona": persona.handle, "thread_id": thread_id, "task": task,
                    "sender": sender, "channel": channel, "earlier": earlier,
                    "timeout_ms": timeout_ms, "round_thread": round_thread,
                    "round_opener": round_opener, "kill_at_ms": kill_at_ms,
                    "spawned_by": current["session"] if current else None}
            shown = " ".join(persona.runtime.start or [str(persona.runtime.builtin)])
            approval = gates.hold(
                self, step="start", subject=persona.handle, thread=thread_id, actor=actor,
                action="start", args=args,
                what=(f"start {persona.handle} ({shown[:200]}) for thread {thread_id}, asked "
                      f"by {sender}"))  # no body: who may read it is the thread's rule
            return {"session": None, "spawned": False, "approval": approval, "warnings": [
                f"{persona.handle} starts once a person approves: nxc approve {approval} "
                f"(or nxc deny {approval}), on any clone"]}
        runtime = sessions.stored_runtime(persona.runtime)
        sid = sessions.create(
            self.local, persona=persona.handle, thread_id=thread_id, runtime=runtime, hop=hop,
            max_hops=limit, parent_session=current["session"] if current else None, **bounds)
        return runs.first_run(self, session=sid, persona=persona.handle, thread=thread_id,
                              runtime=runtime, hop=hop, prompt=prompt, backend=backend,
                              timeout_ms=timeout_ms, round_thread=round_thread,
                              kill_at_ms=kill_at_ms, actor=actor)

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
               actor: str, approved: str | None = None) -> Resumed:
        """Start a resume run for a session already claimed (state running) — unless its
        persona declares `approve: [run]` and no person `approved` it yet: then it is held
        (`hold_resume`)."""
        from nixx.nxc.delivery import runs

        held = None if approved is not None else self.hold_resume(row, wakes, actor=actor)
        if held is not None:
            return {"resumed": None, "approval": held, "warnings": [
                f"{row['persona']} resumes once a person approves: nxc approve {held} (or "
                f"nxc deny {held}), on any clone"]}
        result = runs.launch(self, runs.resume_run(self, row, wakes), actor=actor)
        return {"resumed": row["session"] if result["spawned"] else None,
                "warnings": result["warnings"]}

    def hold_resume(self, row: SessionRecord, wakes: list[Wake], *, actor: str) -> str | None:
        """When the session's persona declares `approve: [run]`: let the claimed session
        go, its answers back in its queue, and ask a person (`gates`). → the approval id,
        or None (nothing is held)."""
        persona = self.decls.personas.get(row["persona"])
        if persona is None or "run" not in persona.approve:
            return None
        sessions.requeue(self.local, row["session"], wakes)
        senders = ", ".join(sorted({w["sender"] for w in wakes}))
        return gates.hold(
            self, step="run", subject=persona.handle, thread=row["thread_id"] or "",
            actor=actor, action="resume", args={"session": row["session"], "actor": actor},
            what=(f"resume {persona.handle} (session {row['session']}) with {len(wakes)} "
                  f"message(s) from {senders}"))

    def still_owed(self, row: SessionRecord) -> str | None:
        """The session's own thread while it still awaits the session's persona (not
        stale), else None: a resume prompt then repeats the obligation."""
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
