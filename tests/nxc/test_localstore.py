"""The device-local store (`.nxs/local.sqlite`) on apsw: no checkpoint + fsync on close,
the WAL truncated past its bound, the schema upgraded in place, clear errors."""

from __future__ import annotations

import os

import apsw
import pytest

from nixx.errors import StoreError
from nixx.log.connection import WAL_TRUNCATE_BYTES
from nixx.nxc import sessions
from nixx.nxc.localstore import MIGRATIONS, LocalStore
from nixx.nxc.transcripts import TranscriptStore


def _session(local: LocalStore) -> str:
    return sessions.create(local, persona="ab12/coder", thread_id="t-1",
                           runtime={"start": ["x"]}, hop=1, max_hops=8, parent_session=None)


def test_close_does_not_checkpoint_and_nothing_is_lost(tmp_path):
    path = str(tmp_path / "local.sqlite")
    local = LocalStore(path)
    sid = _session(local)
    local.close()
    # the last connection closed without checkpointing: the commit is still in the WAL
    # (the stdlib sqlite3 checkpointed, fsynced and deleted it here)
    assert os.path.getsize(path + "-wal") > 0
    with LocalStore(path) as again:
        assert sessions.require(again, sid)["persona"] == "ab12/coder"
        assert again.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_wal_past_its_bound_is_truncated_on_close(tmp_path):
    path = str(tmp_path / "local.sqlite")
    local = LocalStore(path)
    sid = _session(local)
    words = " ".join(f"w{i}" for i in range(20_000))  # ~140 kB of text per entry
    TranscriptStore(local).append(sid, [{"kind": "text", "data": {"text": words}}] * 12)
    assert os.path.getsize(path + "-wal") > WAL_TRUNCATE_BYTES
    local.close()
    assert os.path.getsize(path + "-wal") == 0
    with LocalStore(path) as again:
        assert len(TranscriptStore(again).entries(sid)) == 12
        assert TranscriptStore(again).search("w19999")[0]["session"] == sid


def test_a_version_1_store_is_upgraded_in_place(tmp_path):
    path = str(tmp_path / "local.sqlite")
    conn = apsw.Connection(path)  # what version 1 wrote: a wake queue without its unique key
    conn.execute(
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
        "INSERT INTO meta VALUES ('schema', '1');"
        "CREATE TABLE wake_queue(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL,"
        " thread_id TEXT NOT NULL, message_id TEXT, sender TEXT NOT NULL, body TEXT NOT NULL,"
        " queued INTEGER NOT NULL, taken INTEGER);"
        "INSERT INTO wake_queue VALUES (1, 's-1', 't-1', 'm-a', 'ab12/x', 'a', 1, NULL);"
        "INSERT INTO wake_queue VALUES (2, 's-1', 't-1', 'm-a', 'ab12/x', 'a', 2, NULL);"
        "INSERT INTO wake_queue VALUES (3, 's-1', 't-1', 'm-b', 'ab12/x', 'b', 3, NULL);"
    )
    conn.close()
    with LocalStore(path) as local:
        # the version is kept in nixx_migrations now (nixx.migrations), meta's row is gone
        assert list(local.conn.execute("SELECT version, name FROM nixx_migrations")) == [
            (m.version, m.name) for m in MIGRATIONS]
        assert local.conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() is None
        assert [r[0] for r in local.conn.execute(
            "SELECT id FROM wake_queue ORDER BY id")] == [1, 3]  # the duplicate went
        assert sessions.delivered(local, "s-1") == ["m-a", "m-b"]
        assert sessions.all_sessions(local) == []  # the tables version 2 added exist


def test_unusable_files_are_store_errors(tmp_path):
    not_db = tmp_path / "local.sqlite"
    not_db.write_bytes(b"this is not a database file, it is text " * 100)
    with pytest.raises(StoreError, match="cannot open the device-local store"):
        LocalStore(str(not_db))
    with pytest.raises(StoreError, match="cannot open the device-local store"):
        LocalStore(str(tmp_path / "no" / "such" / "folder" / "local.sqlite"))


def test_a_store_locked_past_the_busy_timeout_is_a_store_error(tmp_path):
    path = str(tmp_path / "local.sqlite")
    local = LocalStore(path)
    sid = _session(local)
    holder = apsw.Connection(path)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        local.conn.set_busy_timeout(50)  # instead of waiting the full 60 s
        with pytest.raises(StoreError, match="stayed locked"):
            sessions.set_pid(local, sid, 4242)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    sessions.set_pid(local, sid, 4242)  # released: the write goes through
    assert sessions.require(local, sid)["pid"] == 4242
    local.close()


def test_a_version_2_sessions_table_gains_the_stderr_tail(tmp_path):
    path = str(tmp_path / "local.sqlite")
    conn = apsw.Connection(path)  # version 2's sessions table: no stderr_tail column
    conn.execute(
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
        "INSERT INTO meta VALUES ('schema', '2');"
        "CREATE TABLE sessions(session_id TEXT PRIMARY KEY, persona TEXT NOT NULL,"
        " thread_id TEXT, runtime TEXT NOT NULL, runtime_session TEXT, hop INTEGER NOT NULL,"
        " max_hops INTEGER NOT NULL, parent_session TEXT, state TEXT NOT NULL, pid INTEGER,"
        " runs INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, detail TEXT,"
        " created INTEGER NOT NULL, updated INTEGER NOT NULL) WITHOUT ROWID;"
        "INSERT INTO sessions VALUES ('s-old', 'ab12/x', 't-1', '{}', NULL, 1, 8, NULL,"
        " 'exited', NULL, 1, 0, NULL, 1, 1);"
    )
    conn.close()
    with LocalStore(path) as local:
        old = sessions.require(local, "s-old")
        assert old["state"] == "exited" and old["stderr_tail"] is None
        assert sessions.finish_or_take(local, "s-old", 2, failure="it broke",
                                       stderr_tail="Traceback ...") == []
        row = sessions.require(local, "s-old")
        assert (row["state"], row["detail"], row["stderr_tail"]) == (
            "failed", "it broke", "Traceback ...")
