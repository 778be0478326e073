"""Which session a process runs in, read from the process tree: the chain identity.

`enclosing_sessions` finds the innermost ancestor that is a session's recorded
supervisor (``python -m nixx.nxc.delivery.supervisor RUNFILE``, whose run file lies in
the session's folder: `folders.session_of_run_file`), not `NXC_SESSION`, which an agent
can unset or forge. Supervisors make themselves child subreapers (`become_subreaper`),
so a runtime's descendants that detach stay below them. How a supervisor is started is
`nixx.nxc.delivery.runs`; whether a spawn may happen at all, `nixx.nxc.delivery.chain`.
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
