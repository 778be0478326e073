"""Starting a runtime, the mechanism: the chain identity read from the process tree,
finding the runtime's executable, the detached launch. Whether a spawn may happen at
all (the hop guard, the resume bounds) and the environment a child gets are the chain's
(`nixx.nxc.delivery.chain`); what a run is made of, `nixx.nxc.delivery.runs`.

Chain identity. Which session a process runs in is read from the process tree
(`enclosing_sessions`: the innermost ancestor that is a session's recorded supervisor;
supervisors are child subreapers, so detached descendants stay below them), not from
`NXC_SESSION`, which an agent can unset or forge.

Launch. The runtime does not run under the sender: nxc writes a run file (0600, under
`.nxs/sessions/<session>/`: `folders`) and starts `python -m nixx.nxc.delivery.supervisor
RUNFILE` in a new session (detached, stdio closed), with the child's cleared
environment. The supervisor starts the runtime, reads its stdout into the transcript,
records its exit and resumes it with answers that were queued while it ran. The sender
returns at once.
"""

from __future__ import annotations

import os

SUPERVISOR_MODULE = "nixx.nxc.delivery.supervisor"


def _proc_parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _supervised_session(pid: int, state_dir: str) -> str | None:
    """The session whose supervisor process `pid` is (from its command line), or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return None
    if len(argv) < 4 or argv[-4:-2] != [b"-m", SUPERVISOR_MODULE.encode()]:
        return None
    # only a supervisor's run file is read as a path (a person's shell imports no more)
    from nixx.nxc.delivery.folders import session_of_run_file

    return session_of_run_file(os.fsdecode(argv[-2]), state_dir)


def enclosing_sessions(state_dir: str, pid: int | None = None) -> list[tuple[str, int]]:
    """The sessions whose supervisors are ancestors of process `pid` (default: this one),
    innermost first, as (session id, supervisor pid) — read from the process tree, which an
    agent cannot edit the way it edits its environment. Each supervisor is a child
    subreaper (Linux), so a process that detaches (double fork, `setsid -f`) is re-parented
    to it and stays inside. Empty where /proc is not available."""
    out: list[tuple[str, int]] = []
    current: int | None = os.getpid() if pid is None else pid
    seen: set[int] = set()
    while current and current > 1 and current not in seen:
        seen.add(current)
        sid = _supervised_session(current, state_dir)
        if sid is not None:
            out.append((sid, current))
        current = _proc_parent(current)
    return out


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux `prctl(PR_SET_CHILD_SUBREAPER)`): its
    orphaned descendants are re-parented to it instead of init."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER = 36
    except (OSError, AttributeError):
        return False


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
    import sys

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nixx.nxc.delivery.supervisor", run_file],
            env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True, close_fds=True,
        )
    return proc.pid
