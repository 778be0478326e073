"""The supervisor of one session's runs: ``python -m nixx.nxc.delivery.supervisor RUNFILE``.

Started detached by `spawn.launch_supervisor` with the session's cleared environment,
it is the only process that lives while an agent runs (there is no daemon):

1. makes itself a child subreaper (Linux), so whatever the runtime starts stays below it
   in the process tree even if it detaches — the tree, not the environment, says which
   session a process runs in (`spawn.enclosing_sessions`);
   starts the runtime's argv (cwd: the workspace root; env: exactly the allowlist);
2. reads its stdout line by line into the transcript (format `stream-json`: Claude
   Code's JSON lines; `codex-json`, `gemini-json`: those CLIs' JSON lines
   (`nixx.nxc.delivery.stream_formats`); `nixx`: normalised entries; `none`: ignored), binding the
   runtime's own session id from its init line; stderr goes to
   `.nxs/sessions/<session>/stderr.log` (its tail becomes an `error` entry on failure);
3. kills the runtime's process group at a channel round's per-member timeout (a
   duration from the run's start, or the declared RFC3339 instant);
4. records `exited` (with the exit code) in the log, tells the round, and then either
   marks the session `exited` or — when answers were queued while it ran — resumes it
   with all of them together (unless that resume passes a loop bound: then a `refused`
   outcome, reason `resume_limit`), and goes back to 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nixx.nxc.delivery.launcher import Deliverer
    from nixx.nxc.delivery.runs import Run
    from nixx.nxc.delivery.shapes import Entry, Refusal, RunOutcome

FLUSH_EVERY = 20
STDERR_TAIL = 2_000


class _Transcript:
    def __init__(self, d: Deliverer, session: str, fmt: str, keep_days: int) -> None:
        from nixx.nxc.delivery.stream_formats import parser_for
        from nixx.nxc.delivery.transcripts import TranscriptStore

        self.d = d
        self.session = session
        self.fmt = fmt
        self.store = TranscriptStore(d.local, keep_days=keep_days)
        self.parser = parser_for(fmt)
        self.pending: list[Entry] = []
        self.bound = False
        self.last_error: str | None = None  # of the current run: the cause of a failure

    def line(self, text: str) -> None:
        if self.fmt == "none" or not text.strip():
            return
        if self.parser is not None:
            entries = self.parser.parse_line(text)
        else:
            obj: Any
            try:
                obj = json.loads(text)
            except ValueError:
                obj = {"kind": "error", "data": {"msg": "not a JSON line", "raw": text.strip()}}
            if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
                obj = {"kind": "error", "data": {"msg": "not an entry", "raw": text.strip()}}
            entries = [obj]
        for entry in entries:
            if entry.get("kind") == "error":
                msg = (entry.get("data") or {}).get("msg") if isinstance(
                    entry.get("data"), dict) else None
                if isinstance(msg, str) and msg.strip():
                    self.last_error = msg.strip()
            if entry.get("kind") == "session_init" and not self.bound:
                rsid = (entry.get("data") or {}).get("session_id")
                if isinstance(rsid, str) and rsid and rsid != self.session:
                    from nixx.nxc.delivery import sessions

                    sessions.bind(self.d.local, self.session, rsid)
                self.bound = True
        self.pending.extend(entries)
        if len(self.pending) >= FLUSH_EVERY or any(
            e.get("kind") in ("result", "tool_use") for e in entries
        ):
            self.flush()

    def end_of_output(self) -> None:
        """The runtime's stdout closed: what its parser still holds is written."""
        if self.parser is not None:
            self.pending.extend(self.parser.finish())

    def add(self, entry: Entry) -> None:
        self.pending.append(entry)

    def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        try:
            self.store.append(self.session, batch)
        except Exception as exc:  # noqa: BLE001 - a bad batch must not kill the run
            self.store.append(self.session, [{"kind": "error", "data": {
                "msg": f"a batch of {len(batch)} entries was rejected: {exc}"}}])


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _kill_after(run: Run) -> tuple[float | None, str]:
    """Seconds from now until the run is killed (None: never) and why: the round's
    per-member duration (`timeout_ms`, from the run's start) or its RFC3339 instant
    (`kill_at_ms`, epoch ms), whichever comes first; an instant already past kills the
    run at once."""
    options = []
    if timeout_ms := run.timeout_ms:
        options.append((timeout_ms / 1000, f"{timeout_ms / 1000:g}s"))
    if kill_at_ms := run.kill_at_ms:
        from nixx.nxc.durations import iso

        left = (kill_at_ms - time.time_ns() // 1_000_000) / 1000
        options.append((max(0.0, left), iso(kill_at_ms) or ""))
    if not options:
        return None, ""
    return min(options)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_once(d: Deliverer, run: Run, transcript: _Transcript) -> RunOutcome:
    """Run the runtime once (`RunOutcome`: its exit code, why it failed to start or was
    killed, the cause of a non-zero exit in words, its stderr's tail)."""
    stderr_path = run.folder.stderr_log
    transcript.last_error = None
    with open(stderr_path, "ab") as err:
        start = err.tell()
        try:
            proc = subprocess.Popen(
                run.argv, env=run.env, cwd=run.cwd, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=err, start_new_session=True,
            )
        except OSError as exc:
            why = f"failed to start {run.argv[0]!r}: {exc.strerror or exc}"
            return {"code": None, "why": why, "failure": why, "stderr": ""}
        timer = None
        killed: list[str] = []
        delay, why = _kill_after(run)
        if delay is not None:
            def expire() -> None:
                killed.append(f"killed at the round timeout ({why})")
                _kill_group(proc)

            timer = threading.Timer(delay, expire)
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        for raw in proc.stdout:
            transcript.line(raw.decode("utf-8", "replace"))
        transcript.end_of_output()
        code = proc.wait()
        if timer is not None:
            timer.cancel()
    tail, failure = "", None
    if code != 0:
        try:
            with open(stderr_path, "rb") as fh:
                fh.seek(start)
                tail = fh.read().decode("utf-8", "replace")[-STDERR_TAIL:]
        except OSError:
            tail = ""
        if not killed:
            cause = transcript.last_error or _last_line(tail)
            failure = (f"the runtime {run.argv[0]!r} exited with code {code}"
                       + (f": {cause}" if cause else " (it printed nothing on stderr)"))
        transcript.add({"kind": "error", "data": {
            "msg": killed[0] if killed else failure, "code": code, "stderr": tail}})
    transcript.flush()
    return {"code": code, "why": killed[0] if killed else None, "failure": failure,
            "stderr": tail}


def supervise(run_file: str) -> int:
    from nixx.nxc.delivery import outcomes, rounds, runs, sessions
    from nixx.nxc.delivery.transcripts import DEFAULT_KEEP_DAYS

    run = runs.Run.read(run_file)
    from nixx.nxc.delivery.launcher import Deliverer

    d = Deliverer.open(run.db, run.env)
    sid, persona, thread = run.session, run.persona, run.thread
    keep_days = DEFAULT_KEEP_DAYS if run.keep_days is None else run.keep_days
    from nixx.nxc.delivery.spawn import become_subreaper

    # the runtime's descendants stay below this process even when they detach (double
    # fork, `setsid -f`): `spawn.enclosing_sessions` finds their session in the tree
    become_subreaper()
    sessions.set_pid(d.local, sid, os.getpid())
    transcript = _Transcript(d, sid, run.format or "stream-json", keep_days)
    while True:
        sessions.count_run(d.local, sid)
        ran = run_once(d, run, transcript)
        code, why = ran["code"], ran["why"]
        if code is None:
            sessions.fail(d.local, sid, why or "failed to start")
            transcript.add({"kind": "error", "data": {"msg": why}})
            transcript.flush()
            outcomes.record(d.store, "failed", thread or sid, persona, {
                "thread": thread, "session": sid, "persona": persona, "reason": why})
        else:
            payload = {"thread": thread, "session": sid, "persona": persona, "code": code}
            if why:
                payload["reason"] = why
            outcomes.record(d.store, "exited", thread or sid, persona, payload)
            if ran["failure"]:
                outcomes.record(d.store, "failed", thread or sid, persona, {
                    "thread": thread, "session": sid, "persona": persona, "code": code,
                    "reason": ran["failure"]})
        if run.round:
            try:
                rounds.on_member_exit(d, run.round, persona)
            except Exception as exc:  # noqa: BLE001 - recorded, the supervisor carries on
                print(f"round bookkeeping failed: {exc!r}", file=sys.stderr)
        if code is None:
            _end_leases(d, sid, persona)
            return 1
        refused: list[Refusal] = []
        wakes = sessions.finish_or_take(d.local, sid, code, failure=ran["failure"],
                                        stderr_tail=ran["stderr"] or None,
                                        agents=d.decls.personas, refused=refused)
        for info in refused:
            d.record_refusal(info, actor=persona)
        if not wakes:
            _end_leases(d, sid, persona)
            return 0
        row = sessions.require(d.local, sid)
        if d.hold_resume(row, wakes, actor=wakes[-1]["sender"]) is not None:
            _end_leases(d, sid, persona)  # its next run waits for a person
            return 0
        # resumed in place: the session stays claimed (state running)
        run = runs.resume_run(d, row, wakes)
        runs.record_in_place(d, run, actor=wakes[-1]["sender"])


def _end_leases(d: Deliverer, sid: str, persona: str) -> None:
    """The session ended: the leases it took end with it (`work.release_session_leases`)."""
    from nixx.nxc.work import release_session_leases

    try:
        release_session_leases(d.store, sid, persona)
    except Exception as exc:  # noqa: BLE001 - the leases still expire by themselves
        print(f"releasing the session's leases failed: {exc!r}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m nixx.nxc.delivery.supervisor RUNFILE", file=sys.stderr)
        return 2
    try:
        return supervise(args[0])
    except Exception as exc:  # noqa: BLE001 - last resort: say it where it is read
        import traceback

        traceback.print_exc()
        print(f"supervisor failed: {exc!r}", file=sys.stderr)
        return 1
    finally:
        time.sleep(0)


if __name__ == "__main__":
    sys.exit(main())
