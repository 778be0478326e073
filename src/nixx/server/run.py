"""Run the server under uvicorn: refuse unsafe binds, check the store before uvicorn
starts (so a corrupt, unwritable or unknown store is one line, not uvicorn's
"Application startup failed"), hold the store's server lock, log what is used."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nixx.config import Settings
from nixx.errors import AlreadyRunning, ConfigError, StoreError

log = logging.getLogger("nixx")
SHUTDOWN_WRITES_TIMEOUT = 10.0  # seconds a forced shutdown waits for turns to store answers


def check_bind(settings: Settings) -> None:
    """The start-up checks of what `nixx serve` is asked to expose: a non-loopback address
    needs a key, and a key must be long enough not to be guessed."""
    if not settings.is_loopback and not settings.api_key:
        raise ConfigError(
            f"refusing to bind {settings.host}: a non-loopback address needs NIXX_API_KEY "
            "(set it, or bind 127.0.0.1)"
        )
    if settings.api_key:
        from nixx.secret import reveal
        from nixx.server.auth import MIN_KEY_LENGTH

        length = len(reveal(settings.api_key) or "")
        if length < MIN_KEY_LENGTH:
            raise ConfigError(
                f"NIXX_API_KEY is {length} characters; it must be at least {MIN_KEY_LENGTH} "
                "(make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )


#: BLAS thread pools limited to one thread for the server process (an explicit value in
#: the environment wins).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> bool:
    """Make every BLAS call of this process single-threaded, from the start.

    The server embeds one short text per turn (the query) from a worker thread.
    OpenBLAS's threaded GEMM then waits on its second thread, which on a busy machine
    stalled one turn in four by 100-800 ms; limiting it per call with threadpoolctl
    did not reliably take hold (it depends on which thread first used BLAS). Set before
    numpy is first imported, the limit holds for every thread: measured in
    docs/performance.md ("Local embedder stalls"). Bulk embedding is unaffected: the
    local embedder runs one single-threaded BLAS per core in its own threads anyway.
    Returns False when numpy was imported already (too late to take effect)."""
    if "numpy" in sys.modules:
        return False
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    return True


MMAP_THRESHOLD = 128 * 1024  # glibc's default start, held fixed
M_MMAP_THRESHOLD = -3  # <malloc.h>


def return_large_frees() -> bool:
    """Hold glibc's mmap threshold at its 128 KiB default so that every large buffer (a
    request body, its parsed text) gets its own mapping and goes back to the system when
    freed.

    glibc raises the threshold each time a mapped block is freed, up to 32 MiB; after the
    first large request, 15 MiB bodies were carved from the heaps of the threads that
    parsed them and stayed there: two batches of eight concurrent 15 MiB turns left the
    server 4-42 MiB above its idle size, run to run; with the threshold held, 0-4 MiB
    (docs/limits-and-safety.md, "Memory under large requests"). False where the C library
    has no `mallopt` or refuses it."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


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
        with _postgres_lock(settings):
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


PG_SERVER_LOCK = 7_346_104  # pg_try_advisory_lock key held by a serving nixx


@contextlib.contextmanager
def _postgres_lock(settings: Settings) -> Iterator[None]:
    """On PostgreSQL, hold a session advisory lock while serving; when another nixx
    server holds it already, warn (servers may share a database on purpose, but their
    background summaries and intents then race)."""
    import psycopg

    from nixx.store.maintenance import display_url

    try:
        conn = psycopg.connect(settings.database_url, autocommit=True, connect_timeout=10)
    except psycopg.Error:
        yield  # the store itself reports an unreachable server
        return
    try:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (PG_SERVER_LOCK,)).fetchone()
        if not (row and row[0]):
            log.warning(
                "another nixx server is serving the store %s; both write to it "
                "(give this one its own database with NIXX_DB_URL unless you mean it)",
                display_url(settings.database_url),
            )
        yield
    finally:
        conn.close()


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


def _server_class():  # type: ignore[no-untyped-def]
    import asyncio

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn, except that a second Ctrl+C (force exit) still shuts the app down in
        order: the connections still open are closed, so a streaming turn sees its client
        go away and stores its partial answer (marked incomplete); then the lifespan
        closes the store. Plain uvicorn skips the lifespan shutdown then, the store was
        closed under the writes and the partial answer lost.

        And once started, what is alive (modules, routes, schemas, the service: ~90k
        objects, all living as long as the server) is frozen out of the garbage
        collector's sight (`gc.freeze`), so a full collection no longer walks it: ~57 ms
        each, landing on whichever request is running."""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            gc.freeze()

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)
            if not self.force_exit:
                return
            for connection in list(self.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.close()  # the request sees `http.disconnect`
            tasks = list(self.server_state.tasks)
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_WRITES_TIMEOUT)
                for task in pending:  # stuck: cancel (its writes are shielded tasks)
                    task.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=1.0)
            await self.lifespan.shutdown()

    return Server


def _http_protocol() -> type:
    """uvicorn's HTTP/1.1 protocol over httptools (a C parser; a dependency of nixx), or
    over h11 (pure Python) where httptools cannot be imported. httptools answers sooner and
    with less CPU (0.2-0.5 ms a request here: docs/performance.md, "httptools again");
    uvicorn's own "auto" picks the same way, but `nixx serve` passes its own class."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    return HttpToolsProtocol


def _protocol_class(header_timeout: float, base: type | None = None):  # type: ignore[no-untyped-def]
    base = base or _http_protocol()

    class Protocol(base):  # type: ignore[misc,valid-type]
        """uvicorn's HTTP/1.1 (`base`: `_http_protocol`), with a time limit on a
        request's headers: from the moment a connection is made, and again after each
        answer, the next request's headers must arrive within `header_timeout` seconds,
        else the connection is closed. uvicorn has none: a client trickling a header
        line, or sending nothing, held its connection for ever (slow loris). The body has
        its own limit (`nixx.server.limits`). Both of uvicorn's protocols keep the
        request being answered in `cycle`, made once its headers are in."""

        _header_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_request():
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _in_request(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if not self._in_request() and not self.transport.is_closing():
                self.transport.close()

    return Protocol


def serve(settings: Settings) -> None:
    limit_blas_threads()
    return_large_frees()
    import uvicorn

    from nixx.server.app import create_app

    check_bind(settings)
    preflight(settings)
    _log_to_stderr(settings)
    with server_lock(settings):
        app = create_app(settings)
        # proxy headers only from a proxy the user names: uvicorn would otherwise believe
        # X-Forwarded-For from loopback, and any local page or process could pick the
        # address the sign-in throttle counts (docs/limits-and-safety.md)
        proxies = settings.forwarded_allow_ips.strip()
        config = uvicorn.Config(
            app, host=settings.host, port=settings.port, log_level=settings.log_level,
            http=_protocol_class(settings.request_timeout),
            proxy_headers=bool(proxies), forwarded_allow_ips=proxies or None,
        )
        _server_class()(config).run()
