"""One write transaction on an apsw connection: ``BEGIN IMMEDIATE`` … ``COMMIT``.

Every SQLite file nixx writes goes through `immediate(conn)`: the memory store
(`nixx.store.sqlite`) and its migrations, the workspace log (`nixx.log.store`) and the
device-local store (`nixx.nxc.localstore`).

    with immediate(conn, error=to_store_error) as conn:
        conn.execute(...)

- ``BEGIN IMMEDIATE`` takes the write lock up front, so a writer waits on the
  connection's busy timeout (set where the connection is opened) instead of failing
  half-way on a lock upgrade; two writers never interleave.
- ``COMMIT`` when the block ends normally; ``ROLLBACK`` when it raises anything,
  `BaseException` included (a KeyboardInterrupt or a cancelled thread leaves no
  half-written transaction open on the connection). A failed ``COMMIT`` is rolled back too.
- Nested: opened while the connection is already inside a transaction, it is a
  ``SAVEPOINT`` (``RELEASE`` on success, ``ROLLBACK TO`` on error), so a helper that
  writes can be called alone or inside a larger write.
- `error(exc, phase)` maps an `apsw.Error` met at ``"begin"``, in the ``"body"`` or at
  ``"commit"`` to the exception the caller's users should see (each store names its own
  file and what to do); it returns None to let the apsw error through unchanged.

A class, not `contextlib.contextmanager`: `nxc` and `nxs` are one-shot commands whose
start-up is measured, and importing contextlib or typing costs every one of them.
"""

from __future__ import annotations

import apsw

TYPE_CHECKING = False  # `typing` costs a CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Callable

    #: (the apsw error, "begin" | "body" | "commit") → what to raise, or None: re-raise
    ErrorMap = Callable[[apsw.Error, str], BaseException | None]

__all__ = ["Immediate", "immediate"]


class Immediate:
    """The context manager `immediate` returns (see the module docstring)."""

    __slots__ = ("conn", "error", "savepoint")

    def __init__(self, conn: apsw.Connection, error: ErrorMap | None = None) -> None:
        self.conn = conn
        self.error = error
        self.savepoint: str | None = None

    def __enter__(self) -> apsw.Connection:
        conn = self.conn
        if conn.in_transaction:
            self.savepoint = f"nixx_tx_{id(self):x}"
            conn.execute(f"SAVEPOINT {self.savepoint}")
            return conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            mapped = self._mapped(exc, "begin")
            if mapped is exc:
                raise
            raise mapped from exc
        return conn

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        conn = self.conn
        if exc is None:
            try:
                conn.execute(f"RELEASE {self.savepoint}" if self.savepoint else "COMMIT")
            except apsw.Error as err:
                self._abort()
                mapped = self._mapped(err, "commit")
                if mapped is err:
                    raise
                raise mapped from err
            return
        self._abort()
        if isinstance(exc, apsw.Error):
            mapped = self._mapped(exc, "body")
            if mapped is not exc:
                raise mapped from exc
        # anything else (and an unmapped apsw error) propagates as it is

    def _abort(self) -> None:
        conn = self.conn
        if not conn.in_transaction:  # SQLite rolled back already (I/O error, disk full)
            return
        if self.savepoint:
            conn.execute(f"ROLLBACK TO {self.savepoint}")
            conn.execute(f"RELEASE {self.savepoint}")
        else:
            conn.execute("ROLLBACK")

    def _mapped(self, exc: apsw.Error, phase: str) -> BaseException:
        mapped = self.error(exc, phase) if self.error is not None else None
        return exc if mapped is None else mapped


def immediate(conn: apsw.Connection, *, error: ErrorMap | None = None) -> Immediate:
    """``with immediate(conn) as conn:`` — one write transaction (module docstring)."""
    return Immediate(conn, error)
