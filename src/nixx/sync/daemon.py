"""The sync daemon: a foreground loop, and its optional per-user service.

`SyncDaemon.run()` runs a pass at start, then:

- **after local writes** (the log's `PRAGMA data_version` watcher sees another connection
  commit): a pass `debounce` seconds after the first change, so a burst of sends costs
  one pass;
- **every `interval` seconds** otherwise, to pull what other workspaces pushed;
- **on an error** (remote unreachable, lock busy, ...): the next pass waits 2, 4, 8, ...
  seconds, at most `max_backoff`; the first success resets it. The error is reported
  and the loop goes on.

A pass writes to the log itself (pulled ops, watermarks), which the watcher also sees;
those changes are consumed after each pass, and a pass that ends with ops still unpushed
(written while it ran) schedules the next one after the debounce.

`install_service` writes a systemd ``--user`` unit running ``nxs sync daemon`` for one
workspace and enables it when `systemctl` is there; otherwise it says how to run the
loop by hand.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from typing import Literal

    from nixx.log.reducer import Reducer
    from nixx.log.workspace import Workspace
    from nixx.sync.engine import PassJson

    # what `SyncDaemon.emit` is handed (the `nxs sync daemon` CLI prints them); defined for
    # the type checker only: the engine is imported when a pass runs, not with this module
    class PassEvent(PassJson):
        """A pass that ran: its result and what started it."""

        event: Literal["pass"]
        reason: str  # "start", "change", "retry", "poll"

    class ErrorEvent(TypedDict):
        """A pass that failed; the next one is tried after `retry_in_s`."""

        event: Literal["error"]
        reason: str
        error: str
        kind: str  # the nixx error's kind, or the exception's class name
        retry_in_s: float

    DaemonEvent = PassEvent | ErrorEvent


class SyncDaemon:
    def __init__(
        self, ws: Workspace, reducers: Sequence[Reducer], *, interval: float = 30.0,
        debounce: float = 2.0, max_backoff: float = 300.0, passes: int | None = None,
        emit: Callable[[DaemonEvent], None] | None = None, poll: float = 0.1,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.ws = ws
        self.reducers = list(reducers)
        self.interval = interval
        self.debounce = debounce
        self.max_backoff = max_backoff
        self.passes = passes
        self.emit = emit or (lambda event: None)
        self.poll = poll
        self.options = options or {}
        self.failures = 0
        self.done = 0

    def backoff(self) -> float:
        return min(self.max_backoff, 2.0 ** self.failures)

    def _pass(self, reason: str) -> bool:
        """One pass; True when it left ops unpushed (written while it ran)."""
        from nixx.sync.engine import sync_workspace

        self.done += 1
        try:
            result = sync_workspace(self.ws, self.reducers, lock_wait=5.0, **self.options)
        except Exception as exc:  # the loop survives anything a pass meets
            self.failures += 1
            self.emit({"event": "error", "reason": reason, "error": str(exc),
                       "kind": getattr(exc, "kind", type(exc).__name__),
                       "retry_in_s": self.backoff()})
            return False
        self.failures = 0
        self.emit({"event": "pass", "reason": reason, **result.to_dict()})
        return result.unpushed > 0

    def run(self) -> int:
        from nixx.log.watcher import DataVersionWatcher

        watcher = DataVersionWatcher(self.ws.db_path, poll_interval=self.poll)
        try:
            due = time.monotonic()  # a pass at start
            reason = "start"
            change_at: float | None = None
            while self.passes is None or self.done < self.passes:
                now = time.monotonic()
                if change_at is not None and now >= change_at and self.failures == 0:
                    due, reason = min(due, now), "change"
                if now >= due:
                    again = self._pass(reason)
                    watcher.changed()  # this pass's own writes
                    change_at = None
                    now = time.monotonic()
                    if self.failures:
                        due, reason = now + self.backoff(), "retry"
                    else:
                        due, reason = now + self.interval, "poll"
                        if again:
                            change_at = now + self.debounce
                    continue
                # backing off: a local write waits for the retry too (no busy loop)
                wake = due if change_at is None or self.failures else min(due, change_at)
                if watcher.wait(max(0.0, min(wake - now, 1.0))) and change_at is None:
                    change_at = time.monotonic() + self.debounce
        finally:
            watcher.close()
        return 0


# -- the user service -----------------------------------------------------------------------

def unit_name(ws: Workspace) -> str:
    digest = hashlib.sha256(os.path.abspath(ws.db_path).encode()).hexdigest()[:12]
    return f"nxs-sync-{digest}.service"


def unit_text(ws: Workspace, python: str | None = None) -> str:
    python = python or sys.executable
    return (
        "[Unit]\n"
        f"Description=nxs sync daemon for {ws.root}\n"
        "After=network-online.target\n\n"
        "[Service]\n"
        "Type=simple\n"
        f"WorkingDirectory={ws.root}\n"
        f"ExecStart={python} -m nixx.cli.nxs sync daemon --db {ws.db_path}\n"
        "Restart=on-failure\n"
        "RestartSec=30\n\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def manual_hint(ws: Workspace) -> str:
    return (f"run `nxs sync daemon` in {ws.root} (a foreground loop; e.g. in tmux), or "
            "`nxs sync run` by hand or from cron")


class ServiceInstall(TypedDict):
    """What `install_service` did: `nxs sync bind` answers it as its ``daemon`` key."""

    installed: bool
    unit: str | None  # the unit file written (None: none is left)
    enabled: bool
    detail: str  # what `systemctl` said when it failed ("" when it did not)
    how: NotRequired[str]  # how to run the daemon by hand, when no unit runs it


def install_service(ws: Workspace, *, home: str | None = None,
                    systemctl: str | None = None) -> ServiceInstall:
    """Write and enable the systemd user unit for this workspace's daemon. `systemctl` is
    the binary to use (None: not available, nothing is written). When the per-user
    service manager does not answer, the unit is removed again: nothing is left behind
    and the result says so (`installed: false`, `how`)."""
    if systemctl is None:
        return {"installed": False, "unit": None, "enabled": False,
                "detail": "systemctl not found", "how": manual_hint(ws)}
    home = home or os.path.expanduser("~")
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    folder = os.path.join(config, "systemd", "user")
    os.makedirs(folder, exist_ok=True)
    name = unit_name(ws)
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(unit_text(ws))
    detail = ""
    enabled = False
    try:
        for args in (["daemon-reload"], ["enable", "--now", name]):
            proc = subprocess.run([systemctl, "--user", *args], capture_output=True,
                                  text=True, timeout=30)
            if proc.returncode != 0:
                detail = (proc.stderr or proc.stdout).strip()
                break
        else:
            enabled = True
    except (OSError, subprocess.TimeoutExpired) as exc:
        detail = str(exc)
    if not enabled:
        # no per-user service manager answered (no user session, a container, ssh without
        # lingering): a unit nobody runs is clutter that looks like a running daemon
        with contextlib.suppress(OSError):
            os.unlink(path)
        return {"installed": False, "unit": None, "enabled": False,
                "detail": detail or "no per-user service manager",
                "how": (f"no per-user service manager runs here (`systemctl --user` "
                        f"failed: {detail or 'no user session'}), so no unit was left "
                        f"behind; {manual_hint(ws)}")}
    return {"installed": True, "unit": path, "enabled": True, "detail": detail}
