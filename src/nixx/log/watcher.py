"""Change notification without a daemon: `PRAGMA data_version`.

SQLite bumps a connection's `data_version` whenever another connection commits to the
file. `DataVersionWatcher` keeps one idle read connection and polls that counter (a
cheap call that reads no table), so a long-lived caller (`nxc wait`, a TUI) learns that
the log changed without anyone holding a socket or a daemon.
"""

from __future__ import annotations

import os
import time

import apsw


class DataVersionWatcher:
    def __init__(self, path: str | os.PathLike[str], *, poll_interval: float = 0.05) -> None:
        self.path = os.fspath(path)
        self.poll_interval = poll_interval
        self._conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
        self._conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        self._last = self._version()

    def _version(self) -> int:
        row = self._conn.execute("PRAGMA data_version").fetchone()
        return int(row[0]) if row else 0

    def changed(self) -> bool:
        """True (once) if another connection committed since the last call."""
        version = self._version()
        if version != self._last:
            self._last = version
            return True
        return False

    def wait(self, timeout: float | None) -> bool:
        """Block until a change (True) or until `timeout` seconds pass (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.changed():
                return True
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(self.poll_interval, left))
            else:
                time.sleep(self.poll_interval)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> DataVersionWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
