"""Starting a runtime, the mechanism: the cleared environment, the chain identity read
from the process tree, the private files, the detached launch. Whether a spawn may
happen at all (the hop guard, the resume bounds) is policy, in `nixx.nxc.delivery.chain`.

Environment. The child's environment is cleared and refilled from an allowlist —
everything in it is readable by the agent's own tools:

    NXC_ORIGIN   the workspace origin the sender resolved
    NXC_DB       the log, as an absolute path (the working directory never matters)
    NXC_SESSION  the internal session id
    NXC_ACTOR    the persona's own qualified handle
    NXC_HOP      this session's depth in the spawn chain
    PATH, HOME   from the operator's shell (when set) — nothing else from it

Chain identity. Which session a process runs in is read from the process tree
(`enclosing_sessions`: the innermost ancestor that is a session's recorded supervisor;
supervisors are child subreapers, so detached descendants stay below them), not from
`NXC_SESSION`, which an agent can unset or forge.

Launch. The runtime does not run under the sender: nxc writes a run file (0600, under
`.nxs/sessions/<session>/`) and starts `python -m nixx.nxc.delivery.supervisor RUNFILE` in a new
session (detached, stdio closed), with the same cleared environment. The supervisor
starts the runtime, reads its stdout into the transcript, records its exit and resumes
it with answers that were queued while it ran. The sender returns at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

FROM_SHELL = ("PATH", "HOME")
SESSIONS_DIR = "sessions"


SUPERVISOR_MODULE = "nixx.nxc.delivery.supervisor"


def _proc_parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _supervised_session(pid: int, sessions_dir: str) -> str | None:
    """The session whose supervisor process `pid` is (from its command line), or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return None
    if len(argv) < 4 or argv[-4:-2] != [b"-m", SUPERVISOR_MODULE.encode()]:
        return None
    run_file = os.path.realpath(os.fsdecode(argv[-2]))
    folder = os.path.dirname(run_file)
    if os.path.dirname(folder) != sessions_dir:
        return None
    return os.path.basename(folder)


def enclosing_sessions(state_dir: str, pid: int | None = None) -> list[tuple[str, int]]:
    """The sessions whose supervisors are ancestors of process `pid` (default: this one),
    innermost first, as (session id, supervisor pid) — read from the process tree, which an
    agent cannot edit the way it edits its environment. Each supervisor is a child
    subreaper (Linux), so a process that detaches (double fork, `setsid -f`) is re-parented
    to it and stays inside. Empty where /proc is not available."""
    sessions_dir = os.path.join(os.path.realpath(state_dir), SESSIONS_DIR)
    out: list[tuple[str, int]] = []
    current: int | None = os.getpid() if pid is None else pid
    seen: set[int] = set()
    while current and current > 1 and current not in seen:
        seen.add(current)
        sid = _supervised_session(current, sessions_dir)
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


def child_env(
    *, origin: str, db: str, session: str, actor: str, hop: int, shell: Mapping[str, str]
) -> dict[str, str]:
    env = {"NXC_ORIGIN": origin, "NXC_DB": os.path.abspath(db), "NXC_SESSION": session,
           "NXC_ACTOR": actor, "NXC_HOP": str(hop)}
    for name in FROM_SHELL:
        if shell.get(name):
            env[name] = shell[name]
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


def session_dir(state_dir: str, session: str) -> str:
    folder = os.path.join(state_dir, SESSIONS_DIR, session)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def write_private(path: str, data: Any) -> str:
    """Write JSON (or text) readable by this user only."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        if isinstance(data, str):
            fh.write(data)
        else:
            json.dump(data, fh, ensure_ascii=False)
    os.replace(tmp, path)
    return path


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
