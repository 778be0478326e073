"""Run the server under uvicorn: refuse unsafe binds, check the store before uvicorn
starts (so a corrupt, unwritable or unknown store is one line, not uvicorn's
"Application startup failed"), hold the store's server lock, log what is used."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from nixx.config import Settings
from nixx.errors import AlreadyRunning, ConfigError, StoreError

log = logging.getLogger("nixx")


def check_bind(settings: Settings) -> None:
    if not settings.is_loopback and not settings.api_key:
        raise ConfigError(
            f"refusing to bind {settings.host}: a non-loopback address needs NIXX_API_KEY "
            "(set it, or bind 127.0.0.1)"
        )


def lock_path(settings: Settings) -> Path | None:
    """The file `nixx serve` locks for a SQLite store (``nixx.db.serve-lock`` beside
    it); None for PostgreSQL, which many servers may share."""
    url = settings.database_url
    if not url.startswith("sqlite://"):
        return None
    from nixx.store.sqlite import sqlite_path

    db = sqlite_path(url)
    return db.with_name(db.name + ".serve-lock")


@contextlib.contextmanager
def server_lock(settings: Settings) -> Iterator[None]:
    """Hold an exclusive `flock` on the store's lock file while serving: a second
    `nixx serve` on the same SQLite store is refused, naming the first one."""
    path = lock_path(settings)
    if path is None:
        yield
        return
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(
            f"cannot create the server lock {path}: {exc.strerror}; make {path.parent} "
            "writable, or set NIXX_HOME or NIXX_DB_URL to a writable place"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise AlreadyRunning(
                f"another nixx server ({holder}) holds the store {settings.database_url}; "
                "stop it, or give this one its own store (NIXX_HOME or NIXX_DB_URL)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, http://{settings.host}:{settings.port}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def preflight(settings: Settings) -> None:
    """Open (and migrate) the store once before uvicorn starts, so its failures are
    `NixxError`s the CLI prints as one line."""
    from nixx.store import open_store

    open_store(settings.database_url).close()


def _log_to_stderr(settings: Settings) -> None:
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
    log.addHandler(handler)
    log.setLevel(settings.log_level.upper())
    log.propagate = False


def serve(settings: Settings) -> None:
    import uvicorn

    from nixx.server.app import create_app

    check_bind(settings)
    preflight(settings)
    with server_lock(settings):
        _log_to_stderr(settings)
        app = create_app(settings)
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
