"""Schema versions, kept one way for every database nixx owns.

The memory store (SQLite and PostgreSQL), the workspace log (`.nxs/db.sqlite`) and the
device-local store (`.nxs/local.sqlite`) each have a `Migrations` list: numbered steps,
``mNNN_what`` functions registered in order (or, for PostgreSQL, SQL scripts). Each
database records the steps it ran in one table,

    nixx_migrations(version PRIMARY KEY, name, applied_at)

and `run` applies the missing ones, each in its own transaction together with the row
recording it (a crash leaves the database at a whole version; two processes migrating at
once apply each step exactly once, since each re-reads the version under the write lock).
A database whose recorded version is above the newest step this nixx knows is refused
with one error (`SchemaError` naming the file and saying to upgrade nixx), never
written to.

To change a schema, append a step; never edit one that has shipped. SQLite files use
`apply_sqlite` (write transactions from `nixx.sqlite_tx`); the PostgreSQL store calls
`run` with its own transaction (an advisory lock) and record statements.

No `typing` or `dataclasses` here: `nxc` and `nxs` open the log and the device-local
store in every one-shot process, and their start-up is measured.
"""

from __future__ import annotations

import time

from nixx.sqlite_tx import immediate

TYPE_CHECKING = False  # `typing` costs a CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import Any

    import apsw

    from nixx.sqlite_tx import ErrorMap

__all__ = ["Migration", "Migrations", "apply_sqlite", "run", "sqlite_version"]


class Migration:
    """Schema version `version`: `apply(conn)` brings the database from the one before."""

    __slots__ = ("apply", "name", "version")

    def __init__(self, version: int, name: str, apply: Callable[[Any], None]) -> None:
        self.version = version
        self.name = name
        self.apply = apply

    def __repr__(self) -> str:
        return f"Migration({self.version}, {self.name!r})"


class Migrations:
    """The numbered steps of one kind of database (`what` names it in errors)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.steps: list[Migration] = []

    def __iter__(self) -> Iterator[Migration]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, index: int) -> Migration:
        return self.steps[index]

    @property
    def head(self) -> int:
        """The newest version this nixx knows."""
        return len(self.steps)

    def add(self, name: str, apply: Callable[[Any], None]) -> Migration:
        """Append the next step (version = its position, from 1)."""
        step = Migration(len(self.steps) + 1, name, apply)
        self.steps.append(step)
        return step

    def register(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """Decorator: register `fn`, named ``mNNN_description``, as version NNN."""
        version = int(fn.__name__[1:4])
        if version != len(self.steps) + 1:  # pragma: no cover - programming error
            raise RuntimeError(f"migration {fn.__name__} must be numbered {len(self.steps) + 1:03d}")
        self.add(fn.__name__, fn)
        return fn

    def refuse_newer(self, version: int, where: str) -> None:
        """The one error for a database newer than this nixx."""
        if version > self.head:
            from nixx.errors import SchemaError

            raise SchemaError(
                f"{self.what} {where} is at schema version {version}, newer than this nixx "
                f"knows ({self.head}): upgrade nixx"
            )


def run(
    migrations: Migrations,
    where: str,
    *,
    transaction: Callable[[], AbstractContextManager[Any]],
    current: Callable[[Any], int],
    record: Callable[[Any, Migration], None],
    target: int | None = None,
) -> list[int]:
    """Apply the steps above the database's version, up to `target` (default: head),
    each in its own `transaction()` (which yields the connection): re-read the version
    with `current(conn)`, refuse a newer database, apply the step, `record` it.
    Returns the versions this call applied."""
    target = migrations.head if target is None else target
    applied: list[int] = []
    while True:
        with transaction() as conn:
            version = current(conn)
            migrations.refuse_newer(version, where)
            if version >= target:
                return applied
            step = migrations[version]
            step.apply(conn)
            record(conn, step)
        applied.append(step.version)


# ---- SQLite ---------------------------------------------------------------------------

TRACKING_SQLITE = """
CREATE TABLE IF NOT EXISTS nixx_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


def _utc_now() -> str:
    """Now as ISO 8601 UTC with microseconds and a Z (the store's timestamp format)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def sqlite_version(conn: apsw.Connection) -> int:
    """The schema version recorded in the SQLite file (0: none recorded). One query."""
    import apsw

    try:
        row = conn.execute("SELECT max(version) FROM nixx_migrations").fetchone()
    except apsw.SQLError:  # no such table: nothing ran yet
        return 0
    return int(row[0] or 0) if row else 0


def apply_sqlite(
    conn: apsw.Connection,
    migrations: Migrations,
    where: str,
    *,
    target: int | None = None,
    error: ErrorMap | None = None,
    legacy: Callable[[apsw.Connection], int] | None = None,
) -> list[int]:
    """`run` on a SQLite file: each step in a `nixx.sqlite_tx.immediate` transaction
    (apsw errors mapped by `error`), recorded in ``nixx_migrations``. Cheap when
    nothing is pending: one read, no write lock. `legacy(conn)` gives the version of a
    file made before its kind recorded versions this way (its rows are written then)."""
    target = migrations.head if target is None else target
    version = sqlite_version(conn)
    if version == target:
        return []
    migrations.refuse_newer(version, where)

    def current(c: apsw.Connection) -> int:
        c.execute(TRACKING_SQLITE)
        found = sqlite_version(c)
        if found == 0 and legacy is not None:
            found = legacy(c)
            for step in migrations.steps[: min(found, migrations.head)]:
                _record_sqlite(c, step)
        return found

    return run(
        migrations, where, transaction=lambda: immediate(conn, error=error), current=current,
        record=_record_sqlite, target=target,
    )


def _record_sqlite(conn: apsw.Connection, step: Migration) -> None:
    conn.execute(
        "INSERT INTO nixx_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (step.version, step.name, _utc_now()),
    )
