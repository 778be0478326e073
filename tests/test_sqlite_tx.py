"""`nixx.sqlite_tx.immediate`, the one write transaction of every SQLite file nixx
writes: on real files, with real connections contending for the write lock."""

from __future__ import annotations

import threading

import apsw
import pytest

from nixx.errors import StoreError
from nixx.sqlite_tx import immediate


def _open(path, busy_ms: int = 60_000) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(busy_ms)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "t.sqlite"
    conn = _open(path)
    conn.execute("CREATE TABLE t(x INTEGER PRIMARY KEY)")
    yield path, conn
    conn.close()


def _rows(path) -> list[int]:
    other = apsw.Connection(str(path))  # another connection: sees only what is committed
    try:
        return [r[0] for r in other.execute("SELECT x FROM t ORDER BY x")]
    finally:
        other.close()


def test_commits_and_yields_the_connection(db):
    path, conn = db
    with immediate(conn) as c:
        assert c is conn
        assert conn.in_transaction
        conn.execute("INSERT INTO t VALUES (1)")
        assert _rows(path) == []  # not yet committed
    assert not conn.in_transaction
    assert _rows(path) == [1]


class Interrupt(BaseException):
    pass


@pytest.mark.parametrize("exc", [ValueError("bad"), KeyboardInterrupt(), Interrupt()])
def test_rolls_back_on_any_exception_and_lets_it_through(db, exc):
    path, conn = db
    with pytest.raises(type(exc)), immediate(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        raise exc
    assert not conn.in_transaction
    assert _rows(path) == []


def test_the_begin_takes_the_write_lock_up_front(db):
    path, conn = db
    other = _open(path, busy_ms=0)
    try:
        with immediate(conn):  # nothing written yet, but the lock is held
            with pytest.raises(apsw.BusyError), immediate(other):
                pass
            assert not other.in_transaction
    finally:
        other.close()


def test_nested_is_a_savepoint(db):
    path, conn = db
    with immediate(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        with immediate(conn):
            conn.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(ValueError), immediate(conn):
            conn.execute("INSERT INTO t VALUES (3)")
            raise ValueError("inner only")
        assert conn.in_transaction  # the outer one goes on
        with immediate(conn), immediate(conn):  # two levels deep
            conn.execute("INSERT INTO t VALUES (4)")
    assert _rows(path) == [1, 2, 4]


def test_an_inner_error_that_escapes_rolls_back_everything(db):
    path, conn = db
    with pytest.raises(ValueError), immediate(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        with immediate(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise ValueError
    assert _rows(path) == []
    assert not conn.in_transaction


def test_error_maps_apsw_errors_by_phase(db):
    path, conn = db
    seen: list[tuple[str, str]] = []

    def error(exc, phase):
        seen.append((type(exc).__name__, phase))
        return StoreError(f"{path}: {phase}") if phase != "body" or "UNIQUE" in str(exc) else None

    with immediate(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    # body: a constraint the mapping turns into a StoreError (rolled back)
    with pytest.raises(StoreError, match="body") as info, immediate(conn, error=error):
        conn.execute("INSERT INTO t VALUES (2)")
        conn.execute("INSERT INTO t VALUES (1)")
    assert isinstance(info.value.__cause__, apsw.ConstraintError)
    # body: an apsw error the mapping leaves alone comes through unchanged
    with pytest.raises(apsw.SQLError), immediate(conn, error=error):
        conn.execute("SELECT * FROM no_such_table")
    # begin: the lock is held elsewhere and the busy timeout is 0
    other = _open(path, busy_ms=0)
    try:
        with immediate(conn), pytest.raises(StoreError, match="begin"), immediate(
            other, error=error
        ):
            pass
    finally:
        other.close()
    # commit: a deferred foreign key broken at COMMIT
    conn.execute("CREATE TABLE child(p INTEGER REFERENCES t(x) DEFERRABLE INITIALLY DEFERRED)")
    conn.execute("PRAGMA foreign_keys=ON")
    with pytest.raises(StoreError, match="commit"), immediate(conn, error=error):
        conn.execute("INSERT INTO child VALUES (99)")
    assert not conn.in_transaction
    assert seen == [("ConstraintError", "body"), ("SQLError", "body"),
                    ("BusyError", "begin"), ("ConstraintError", "commit")]
    assert _rows(path) == [1]
    assert list(conn.execute("SELECT count(*) FROM child")) == [(0,)]


def test_a_second_writer_waits_for_the_first_then_sees_its_write(db):
    """Two connections in two threads: the second `BEGIN IMMEDIATE` waits (busy timeout)
    until the first commits, then runs on top of its write. Ordered by events, not time."""
    path, conn = db
    holding = threading.Event()
    release = threading.Event()
    second_saw: list[list[int]] = []
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with immediate(conn):
                conn.execute("INSERT INTO t VALUES (1)")
                holding.set()
                release.wait(30)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def second() -> None:
        other = _open(path)  # 60 s busy timeout: waits instead of failing
        try:
            with immediate(other):
                second_saw.append([r[0] for r in other.execute("SELECT x FROM t ORDER BY x")])
                other.execute("INSERT INTO t VALUES (2)")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            other.close()

    a = threading.Thread(target=first)
    a.start()
    assert holding.wait(30)
    b = threading.Thread(target=second)
    b.start()
    release.set()
    a.join(30)
    b.join(30)
    assert not errors
    assert second_saw == [[1]]  # it began after the first committed
    assert _rows(path) == [1, 2]
