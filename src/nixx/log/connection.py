"""How nxs opens and closes its SQLite files (the workspace log and the device-local
store): one place, because both are opened by every one-shot CLI process.

- `connect`: apsw with a busy timeout, WAL-friendly `synchronous=NORMAL` (a process
  crash loses nothing), and no checkpoint when the connection closes. Closing the last
  connection would otherwise checkpoint the WAL and fsync (~25 ms on this machine's disk)
  in every process; SQLite's auto-checkpoint on commit keeps the WAL bounded instead.
- `close`: truncates the WAL first once it has grown past `WAL_TRUNCATE_BYTES`. Each
  one-shot process is usually the only connection, and SQLite rebuilds the WAL index by
  reading the whole WAL when the first connection opens it, so the WAL is kept small here
  (one fsync every ~1 MB of writes) instead of on every close. A busy database is left
  for a later closer.
"""

from __future__ import annotations

import os

import apsw

BUSY_TIMEOUT_S = 60.0
WAL_TRUNCATE_BYTES = 1 << 20


def connect(path: str) -> apsw.Connection:
    """Open `path`; raises `apsw.Error` (callers name the file in their own error)."""
    conn = apsw.Connection(path)
    try:
        conn.set_busy_timeout(int(BUSY_TIMEOUT_S * 1000))
        conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        conn.execute("PRAGMA synchronous=NORMAL")
    except apsw.Error:
        conn.close()
        raise
    return conn


def close(conn: apsw.Connection, path: str) -> None:
    """Close `conn` (on `path`), truncating an oversized WAL first."""
    try:
        if os.path.getsize(path + "-wal") > WAL_TRUNCATE_BYTES:
            conn.set_busy_timeout(200)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except (OSError, apsw.Error):
        pass  # busy: a later closer will do it
    conn.close()
