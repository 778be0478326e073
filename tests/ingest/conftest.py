"""Fixtures for the ingest tests: real stores (SQLite files), the real local embedder,
a FakeLLM (for summaries, and as an embeddings endpoint where speed matters), and a real
HTTP server on loopback serving pages."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nixx.config import Settings, load_settings
from nixx.embed.base import Embedder
from nixx.ingest.pipeline import Ingestor
from nixx.store import open_store
from nixx.store.base import MemoryStore
from nixx.testing.fake_llm import FakeLLM


@pytest.fixture(scope="session")
def local_embedder() -> Iterator[Embedder]:
    from nixx.embed.local import LocalEmbedder

    embedder = LocalEmbedder(batch_size=32)
    yield embedder
    embedder.close()


@pytest.fixture
def make_settings(llm: FakeLLM, workspace: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"chat_base_url": llm.base_url, "workspace": workspace}
        values.update(overrides)
        return load_settings(**values)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def store(settings: Settings) -> Iterator[MemoryStore]:
    s = open_store(settings.database_url)
    yield s
    s.close()


class CountingEmbedder(Embedder):
    """The real local embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.dim = inner.dim
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def embedder(local_embedder: Embedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


@pytest.fixture
def ingestor(store: MemoryStore, embedder: CountingEmbedder, settings: Settings) -> Ingestor:
    return Ingestor(store, embedder, settings)


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class Web:
    """A real HTTP server on 127.0.0.1 serving `pages` (path -> Page)."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.hits: list[str] = []
        web = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                web.hits.append(self.path)
                page = web.pages.get(self.path)
                if page is None:
                    page = Page(b"not found", "text/plain", 404)
                self.send_response(page.status)
                self.send_header("Content-Type", page.content_type)
                self.send_header("Content-Length", str(len(page.body)))
                for k, v in page.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(page.body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def web() -> Iterator[Web]:
    w = Web()
    yield w
    w.close()
