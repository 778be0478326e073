"""Start-up failures a new user meets are one line naming the file, key or variable and
the fix, with exit code 1, never a traceback (real `nixx` subprocesses)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nixx.testing.live_server import wait_until_serving

NIXX = str(Path(sys.executable).with_name("nixx"))


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NIXX_", "NXC_"))}
    env["NIXX_HOME"] = str(home)
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nixx(home: Path, *args: str, prefix: list[str] | None = None, **extra: str):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [*(prefix or []), NIXX, *args],
        env=_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "Application startup failed" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _without_dac_override() -> list[str]:
    """As root, permission bits are ignored: drop the capability that ignores them."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot make a folder read-only")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def test_corrupt_store_serve_and_db_status(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "nixx.db").write_bytes(b"this is not a database at all\n" * 100)
    for args in (["serve", "--port", str(_free_port())], ["db", "status"], ["db", "migrate"]):
        one_line_error(
            nixx(home, *args), str(home / "nixx.db"), "not a usable SQLite", "nixx db init"
        )
    out = nixx(home, "db", "status", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["kind"] == "store"


def test_read_only_home(tmp_path: Path) -> None:
    prefix = _without_dac_override()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    existing = tmp_path / "existing"
    existing.mkdir()
    assert nixx(existing, "db", "init").returncode == 0
    try:
        for home, verb in ((fresh, "init"), (existing, "status")):
            if (home / "nixx.db").exists():
                (home / "nixx.db").chmod(0o444)
            home.chmod(0o555)
            for args in (["serve", "--port", str(_free_port())], ["db", verb]):
                one_line_error(nixx(home, *args, prefix=prefix), str(home), "writable", "NIXX_HOME")
    finally:
        for home in (fresh, existing):
            home.chmod(0o755)


def test_unknown_url_scheme_and_base_url_without_scheme(tmp_path: Path) -> None:
    port = str(_free_port())
    one_line_error(
        nixx(tmp_path, "serve", "--port", port, NIXX_DB_URL="mysql://me@db/nixx"),
        "NIXX_DB_URL",
        "sqlite:///PATH",
    )
    one_line_error(
        nixx(tmp_path, "serve", "--port", port, NIXX_CHAT_BASE_URL="127.0.0.1:23917"),
        "NIXX_CHAT_BASE_URL",
        "http://127.0.0.1:23917",
    )


def test_typos_in_config_file_and_environment(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("summry_interval = 500\n")
    one_line_error(
        nixx(tmp_path, "db", "status"),
        str(tmp_path / "config.toml"),
        "summry_interval",
        "did you mean summary_interval?",
    )
    (tmp_path / "config.toml").write_text('summary_interval = "lots"\n')
    line = one_line_error(nixx(tmp_path, "db", "status"), "config.toml: summary_interval")
    assert "NIXX_SUMMARY_INTERVAL" not in line
    (tmp_path / "config.toml").unlink()
    one_line_error(
        nixx(tmp_path, "db", "status", NIXX_SUMMRY_INTERVAL="500"),
        "NIXX_SUMMRY_INTERVAL",
        "did you mean NIXX_SUMMARY_INTERVAL?",
    )


def test_export_into_a_missing_folder(tmp_path: Path) -> None:
    assert nixx(tmp_path, "db", "init").returncode == 0
    target = tmp_path / "nowhere" / "memory.jsonl"
    one_line_error(nixx(tmp_path, "export", str(target)), str(target.parent), "mkdir -p")
    out = nixx(tmp_path, "export", str(target), "--json")
    assert json.loads(out.stdout)["error"]["kind"] == "validation"


@pytest.mark.parametrize(
    "args",
    [
        ["version", "--json"],
        ["--json", "version"],
        ["db", "status", "--json"],
        ["--json", "db", "status"],
    ],
)
def test_json_before_or_after_the_verb(tmp_path: Path, args: list[str]) -> None:
    assert nixx(tmp_path, "db", "init").returncode == 0
    out = nixx(tmp_path, *args)
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)


def test_json_after_export_verb(tmp_path: Path) -> None:
    assert nixx(tmp_path, "db", "init").returncode == 0
    out = nixx(tmp_path, "export", str(tmp_path / "m.jsonl"), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["counts"]["buffer"] == 0


def test_second_server_on_the_same_store_is_refused_and_start_line_names_everything(
    tmp_path: Path,
) -> None:
    port = _free_port()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = _env(
        tmp_path,
        NIXX_CHAT_BASE_URL="http://127.0.0.1:9/v1",
        NIXX_CHAT_MODEL="some-model",
        NIXX_EMBED_PROVIDER="openai",
        NIXX_EMBED_MODEL="fake-embed",
        NIXX_EMBED_BASE_URL="http://127.0.0.1:9/v1",
        NIXX_WORKSPACE=str(workspace),
    )
    first = subprocess.Popen(
        [NIXX, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", first)
        second = subprocess.run(
            [NIXX, "serve", "--port", str(_free_port())],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        one_line_error(second, "another nixx server", f"pid {first.pid}", "NIXX_HOME")
    finally:
        first.terminate()
        first.wait(30)
    log = first.stderr.read() if first.stderr else ""
    line = next(line for line in log.splitlines() if "nixx " in line and "store" in line)
    for part in (
        str(tmp_path / "nixx.db"),
        "http://127.0.0.1:9/v1",
        "some-model",
        "fake-embed",
        str(workspace),
    ):
        assert part in line, line


@pytest.mark.slow
def test_a_second_server_on_a_postgres_store_is_warned_about(
    tmp_path: Path, pg_url: str
) -> None:
    import psycopg

    from nixx.server.run import PG_SERVER_LOCK

    port = _free_port()
    env = _env(tmp_path, NIXX_DB_URL=pg_url, NIXX_EMBED_PROVIDER="openai",
               NIXX_EMBED_MODEL="fake-embed", NIXX_EMBED_BASE_URL="http://127.0.0.1:9/v1")
    with psycopg.connect(pg_url, autocommit=True) as held:  # the "first server"
        held.execute("SELECT pg_advisory_lock(%s)", (PG_SERVER_LOCK,))
        proc = subprocess.Popen(
            [NIXX, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_until_serving(f"http://127.0.0.1:{port}", proc)
        finally:
            proc.terminate()
            proc.wait(30)
    log = proc.stderr.read() if proc.stderr else ""
    assert "WARNING:" in log and "another nixx server is serving the store" in log, log


def test_unknown_scheme_on_the_command_line(tmp_path: Path) -> None:
    one_line_error(nixx(tmp_path, "db", "status", "--db-url", "mysql://me@db/nixx"),
                   "--db-url", "sqlite:///PATH")


def test_the_started_server_freezes_what_lives_as_long_as_it() -> None:
    """`nixx serve`'s uvicorn server freezes the objects alive once it has started, so a
    full garbage collection does not walk them on a request's time."""
    import asyncio
    import gc

    import uvicorn

    from nixx.server.run import _server_class

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    server = _server_class()(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    gc.unfreeze()
    assert gc.get_freeze_count() == 0

    async def start_and_stop() -> int:
        server.config.load()
        server.lifespan = server.config.lifespan_class(server.config)
        await server.startup()
        frozen = gc.get_freeze_count()
        await server.shutdown()
        return frozen

    try:
        assert asyncio.run(start_and_stop()) > 10_000
    finally:
        gc.unfreeze()


def test_a_short_api_key_stops_serve_at_start_up(tmp_path: Path) -> None:
    """A key a browser could guess (300 tries in 6 s once worked) is refused before the
    server starts, saying how long it must be and how to make one; the key is not shown."""
    out = nixx(tmp_path, "serve", "--port", str(_free_port()), NIXX_API_KEY="abc12345")
    line = one_line_error(out, "NIXX_API_KEY", "at least 16", "secrets.token_urlsafe")
    assert "abc12345" not in out.stderr and "abc12345" not in line
