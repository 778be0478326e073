"""A live nixx server for the chat tests: real uvicorn on a loopback port, in a thread,
backed by the scripted LLM."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from nixx.config import Settings, load_settings
from nixx.testing.fake_llm import FakeLLM


def llm_settings(tmp_path: Path, chat_url: str, embed_url: str, **extra: Any) -> Settings:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return load_settings(
        db_url=f"sqlite:///{tmp_path / 'server.db'}",
        chat_base_url=chat_url,
        # The bundled local embedder (the embedded default): real and deterministic, so
        # summary scores in snapshots do not move. `embed_url` is kept for callers that
        # want the scripted embeddings instead.
        embed_provider="local",
        workspace=workspace,
        **extra,
    )


@dataclass
class LiveServer:
    url: str
    settings: Settings
    llm: FakeLLM

    def get(self, path: str, **kw: Any) -> Any:
        resp = httpx.get(self.url + path, timeout=30, **kw)
        resp.raise_for_status()
        return resp.json()

    def post(self, path: str, body: Any = None, *, origin: str | None = None) -> Any:
        headers = {"X-Nixx-Origin": origin} if origin else None
        resp = httpx.post(self.url + path, json=body, timeout=30, headers=headers)
        resp.raise_for_status()
        return resp.json() if resp.content else None

    def redate(self, day: str) -> None:
        """Set every stored row's and summary's `created_at` to `day` (YYYY-MM-DD), so a
        screen that shows dates does not change with the day the test runs on."""
        import apsw

        path = self.settings.database_url.removeprefix("sqlite:///")
        conn = apsw.Connection(path)
        try:
            conn.setbusytimeout(5_000)
            for table in ("buffer", "summaries"):
                conn.execute(f"UPDATE {table} SET created_at = ?", (f"{day}T12:00:00.000000Z",))
        finally:
            conn.close()

    def embedded(self, timeout: float = 60.0) -> None:
        """Return once the background queue has embedded every buffer row (what search
        and recall find depends on it; waiting for the state, not for a time)."""
        deadline = time.monotonic() + timeout
        while self.get("/v1/episodic/status")["buffer_vectors"]["pending"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"buffer rows still pending after {timeout:.0f} s")
            time.sleep(0.05)


class ThreadedServer:
    """`nixx.server.app.create_app(settings)` under uvicorn in a daemon thread."""

    def __init__(self, settings: Settings) -> None:
        import uvicorn

        from nixx.server.app import create_app

        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the nixx server thread died during start-up")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
