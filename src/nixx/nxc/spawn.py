"""Starting a runtime: the cleared environment, the hop guard, the detached launch.

Environment. The child's environment is cleared and refilled from an allowlist —
everything in it is readable by the agent's own tools:

    NXC_ORIGIN   the workspace origin the sender resolved
    NXC_DB       the log, as an absolute path (the working directory never matters)
    NXC_SESSION  the internal session id
    NXC_ACTOR    the persona's own qualified handle
    NXC_HOP      this session's depth in the spawn chain
    PATH, HOME   from the operator's shell (when set) — nothing else from it

Hop guard. A human's send starts hop 1; a send from inside a session starts hop
(that session's recorded hop + 1). The recorded hop is authoritative: `NXC_HOP` can
raise it but never lower it. The limit is `NXC_MAX_HOPS` in the shell of whoever starts
a chain (default 8), recorded on each session and inherited down the chain; a lower
`NXC_MAX_HOPS` further down still lowers it, a higher one cannot raise it. A spawn past
the limit is refused and the refusal is recorded in the thread (`outcomes`).

Launch. The runtime does not run under the sender: nxc writes a run file (0600, under
`.nxs/sessions/<session>/`) and starts `python -m nixx.nxc.supervisor RUNFILE` in a new
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

DEFAULT_MAX_HOPS = 8
FROM_SHELL = ("PATH", "HOME")
SESSIONS_DIR = "sessions"


def _int(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return None
    return number if number >= 0 else None


def hop_limit(env: Mapping[str, str], current: dict[str, Any] | None) -> tuple[int, int]:
    """(the hop a spawn from here gets, the limit that applies to it)."""
    own = current["hop"] if current else 0
    hop = max(own, _int(env.get("NXC_HOP")) or 0) + 1
    limits = [x for x in (_int(env.get("NXC_MAX_HOPS")),
                          current["max_hops"] if current else None) if x is not None]
    return hop, min(limits) if limits else DEFAULT_MAX_HOPS


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
            [sys.executable, "-m", "nixx.nxc.supervisor", run_file],
            env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True, close_fds=True,
        )
    return proc.pid
