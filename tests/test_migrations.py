"""`nixx.migrations`: one way to keep schema versions, for the workspace log and the
device-local store as for the memory store (tests/store/ covers the memory store's own
steps). Real files, written by the statements the code before this runner used."""

from __future__ import annotations

import apsw
import pytest

from nixx.errors import SchemaError
from nixx.log import store as log_store
from nixx.log.store import LogStore, create_store
from nixx.migrations import Migrations, apply_sqlite, sqlite_version
from nixx.nxc import localstore
from nixx.nxc.localstore import LocalStore

# what `create_store` wrote before `nixx_migrations`: meta('schema', '1')
_OLD_LOG = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE ops(
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, domain TEXT NOT NULL,
    kind TEXT NOT NULL, target TEXT NOT NULL, origin TEXT NOT NULL, clock TEXT NOT NULL,
    actor TEXT NOT NULL, payload TEXT NOT NULL, created INTEGER NOT NULL,
    local INTEGER NOT NULL DEFAULT 0);
CREATE INDEX ops_domain_seq ON ops(domain, seq);
CREATE INDEX ops_clock ON ops(clock);
INSERT INTO meta VALUES ('schema', '{schema}');
INSERT INTO meta VALUES ('replica', 'ab12');
INSERT INTO meta VALUES ('created', '1');
"""


def _old_log(path, schema: str = "1") -> None:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(_OLD_LOG.format(schema=schema))
    conn.close()


def _versions(path) -> list[tuple[int, str]]:
    conn = apsw.Connection(str(path))
    try:
        return list(conn.execute("SELECT version, name FROM nixx_migrations ORDER BY 1"))
    finally:
        conn.close()


def test_a_new_log_records_its_steps(tmp_path):
    path = tmp_path / "db.sqlite"
    create_store(path, "ab12")
    assert _versions(path) == [(m.version, m.name) for m in log_store.MIGRATIONS]
    with LogStore.open(path) as store:
        assert store.replica == "ab12"
        assert store.get_meta("schema") is None  # one record of the version, not two


def test_a_log_made_before_the_runner_opens_keeps_its_ops_and_is_recorded(tmp_path):
    path = tmp_path / "db.sqlite"
    _old_log(path)
    with LogStore.open(path) as store:
        op = store.append("message", "post", "t-1", "alice", {"body": "hi"})
        assert store.get_meta("schema") is None
    assert _versions(path) == [(1, "m001_ops")]
    with LogStore.open(path) as store:  # the second open is the common, read-only case
        assert [o.id for o in store.ops()] == [op.id]
        assert store.replica == "ab12"


def test_a_log_newer_than_this_nixx_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "db.sqlite"
    create_store(path, "ab12")
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO nixx_migrations VALUES (99, 'm099_future', 'x')")
    conn.close()
    with pytest.raises(SchemaError, match=r"workspace log .* schema version 99, newer .*"
                                          r"upgrade nixx"):
        LogStore.open(path)
    old = tmp_path / "old.sqlite"
    _old_log(old, schema="7")  # newer in the old way of keeping it
    with pytest.raises(SchemaError, match="schema version 7, newer"):
        LogStore.open(old)
    conn = apsw.Connection(str(old))  # the refusal rolled back: nothing written
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("7",)
    assert sqlite_version(conn) == 0
    conn.close()


def test_a_file_that_is_not_a_log_is_not_migrated(tmp_path):
    path = tmp_path / "db.sqlite"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.close()
    with pytest.raises(SchemaError, match="not a workspace log"):
        LogStore.open(path)
    assert apsw.Connection(str(path)).execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'nixx_migrations'").fetchone() == (0,)


def test_the_device_local_store_records_its_steps_and_refuses_a_newer_file(tmp_path):
    path = str(tmp_path / "local.sqlite")
    LocalStore(path).close()
    assert _versions(path) == [(m.version, m.name) for m in localstore.MIGRATIONS]
    conn = apsw.Connection(path)
    conn.execute("INSERT INTO nixx_migrations VALUES (42, 'm042_future', 'x')")
    conn.close()
    with pytest.raises(SchemaError, match=r"device-local store .* version 42, newer"):
        LocalStore(path)


def test_each_step_runs_once_in_its_own_transaction(tmp_path):
    """A step that fails leaves the file at the version before it, with the steps before
    it recorded; running again applies only what is missing."""
    steps = Migrations("the test file")
    ran: list[str] = []
    boom = {"on": True}

    @steps.register
    def m001_a(conn):
        ran.append("a")
        conn.execute("CREATE TABLE a(x)")

    @steps.register
    def m002_b(conn):
        ran.append("b")
        conn.execute("CREATE TABLE b(x)")
        if boom["on"]:
            raise RuntimeError("half-way")

    conn = apsw.Connection(str(tmp_path / "t.sqlite"))
    with pytest.raises(RuntimeError):
        apply_sqlite(conn, steps, "t")
    assert sqlite_version(conn) == 1
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'b'").fetchone() == (0,)
    boom["on"] = False
    assert apply_sqlite(conn, steps, "t") == [2]
    assert apply_sqlite(conn, steps, "t") == []
    assert ran == ["a", "b", "b"]
    conn.close()
