"""Moving a store to another embedding model in the background, while it keeps answering.

When `nixx serve` starts with an embedder (`NIXX_EMBED_MODEL`) other than the one the
store's vectors were made with, and nixx can run that old model itself (a local model:
`nixx.embed.models`), the server does not refuse the store:

- **Live work keeps the old model** (`SwitchingEmbedder` answers as it): searches and
  recall use the stored vectors with questions embedded by the old model, new rows and
  summaries get old-model vectors — the live vectors are never of two models.
- **The new model's vectors are made apart** (`ModelSwitch`, one thread at the lowest CPU
  priority, batches waiting for a quiet moment of the foreground like the row-vector
  queue): every buffer row (with its sentences), summary and memory is embedded with the
  new model and kept in the store's staging table (`MemoryStore.stage_vectors`); rows
  written meanwhile are picked up by the next pass.
- **Then one transaction switches** (`MemoryStore.finish_switch`): what arrived since the
  last pass is embedded, every live vector replaced by its staged one, the new model and
  dimension recorded; after it the service embeds with the new model (its recall floors
  and fusion scale too). Searches and recalls wait while it runs (`Foreground.exclusive`:
  none embeds its question with one model and meets the other's vectors).

Progress is in `GET /v1/episodic/status` (`embedder_switch`). A restart goes on from what
was staged. A new model whose files are not installed stops the move (its `error` says
the command that installs them); the old model keeps serving. Setting the store's own model again abandons the move (staged vectors
dropped). When the old model is not one nixx runs (a remote model), the store is refused
as before (`embedder_mismatch`) and `nixx reindex` moves it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from nixx.embed.base import Embedder
from nixx.errors import ModelMissing
from nixx.memory.row_vectors import row_texts_for
from nixx.priority import BACKGROUND_NICE, Foreground, lower_thread_priority
from nixx.store.base import MemoryStore
from nixx.store.switching import SwitchItem

if TYPE_CHECKING:
    from nixx.config import Settings

log = logging.getLogger(__name__)

#: Items per embedding call (a buffer row brings its sentences too).
BATCH_SIZE = 32
RETRY_SECONDS = 5.0  # after a failure, doubling up to RETRY_MAX_SECONDS
RETRY_MAX_SECONDS = 300.0


class SwitchingEmbedder(Embedder):
    """The embedder live work uses during a move: the old model until `swap`, then the
    new one. `model` and `dim` follow it."""

    def __init__(self, current: Embedder) -> None:
        self._current = current
        self._lock = threading.Lock()

    @property
    def current(self) -> Embedder:
        return self._current

    @property
    def model(self) -> str:  # type: ignore[override]
        return self._current.model

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self._current.dim

    def swap(self, new: Embedder) -> Embedder:
        with self._lock:
            old, self._current = self._current, new
        return old

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._current.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._current.embed_queries(texts)

    def close(self) -> None:
        self._current.close()


class SwitchStatus(TypedDict):
    source: str  # the model the live vectors are made with
    target: str
    staged: int
    total: int
    running: bool
    done: bool
    error: str | None
    items_per_second: float | None


def plan(settings: Settings, store: MemoryStore, embedder: Embedder) -> Embedder | None:
    """The old model's embedder when `store` must move to `embedder`'s model and nixx can
    run the old one (None: no move, or one nixx cannot make in the background). A move
    back to the store's own model abandons one under way."""
    from nixx.embed.models import is_local_model

    info = store.embedding_info()
    target = store.switch_target()
    if info is None or not info.model or info.model == embedder.model:
        if target is not None:
            store.abandon_switch()
        return None
    if settings.embed_provider != "local" or not is_local_model(info.model):
        return None
    from nixx.embed.local import LocalEmbedder

    engine = None if settings.embed_engine == "auto" else settings.embed_engine
    return LocalEmbedder(engine=engine, query_weights=settings.embed_query_weights,
                         model=info.model)


class ModelSwitch:
    """Embeds the store with `target` apart from its live vectors, then switches (see the
    module docstring). `on_done(target)` runs once the store is bound to it."""

    def __init__(
        self,
        store: MemoryStore,
        source: str,
        target: Embedder,
        *,
        foreground: Foreground | None = None,
        on_done: Callable[[Embedder], None] | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.store = store
        self.source = source
        self.target = target
        self.foreground = foreground
        self.on_done = on_done
        self.batch_size = max(1, batch_size)
        self.error: str | None = None
        self.done = False
        self.embedded = 0
        self.seconds = 0.0
        self._running = False
        self._closed = False
        self._thread: threading.Thread | None = None

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._loop, name="nixx-model-switch",
                                            daemon=True)
            self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the batch in flight (a restart goes on from what was staged)."""
        self._closed = True
        if self._thread is not None:
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def status(self) -> SwitchStatus:
        if self.done:
            staged = total = 0
        else:
            staged, total = self.store.switch_progress()
        rate = self.embedded / self.seconds if self.seconds > 0 else None
        return {
            "source": self.source,
            "target": self.target.model,
            "staged": staged,
            "total": total,
            "running": self._running,
            "done": self.done,
            "error": self.error,
            "items_per_second": None if rate is None else round(rate, 1),
        }

    # ---- work ---------------------------------------------------------------------------
    def _loop(self) -> None:
        lower_thread_priority(BACKGROUND_NICE)
        wait = RETRY_SECONDS
        while not self._closed and not self.done:
            try:
                self.run()
            except ModelMissing as exc:  # the new model is not installed: nothing to retry
                self.error = str(exc)
                log.error("cannot move the store to %s: %s", self.target.model, exc)
                return
            except Exception as exc:  # noqa: BLE001 - shown in the status, tried again
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("moving the store to %s: %s (again in %.0f s)", self.target.model,
                            self.error, wait)
                deadline = time.monotonic() + wait
                while not self._closed and time.monotonic() < deadline:
                    time.sleep(0.1)
                wait = min(wait * 2, RETRY_MAX_SECONDS)

    def run(self) -> bool:
        """Stage everything pending, pass after pass, then switch; True when switched
        (False: closed first). Blocking: the thread's work, callable directly (tests)."""
        self._running = True
        try:
            if not self.store.begin_switch(self.target.model, self.target.dim):
                self._finished()
                return True
            while not self._closed:
                pending = self.store.switch_pending()
                if not pending:
                    break
                log.info("moving the store to %s: %d vectors to make", self.target.model,
                         len(pending))
                for start in range(0, len(pending), self.batch_size):
                    if self._closed:
                        return False
                    self.stage(pending[start : start + self.batch_size])
            if self._closed:
                return False
            # no search or recall runs across the switch: one that embedded its question
            # with the old model would meet the new model's vectors
            guard = self.foreground.exclusive() if self.foreground else contextlib.nullcontext()
            with guard:
                self.store.finish_switch(self.target.model, self.target.embed,
                                         lambda rows: row_texts_for(self.store, rows))
                self._finished()
            return True
        finally:
            self._running = False

    def stage(self, items: Sequence[SwitchItem]) -> int:
        """Embed `items` with the new model and stage them (one batch)."""
        if self.foreground is not None:
            self.foreground.wait_quiet()
        rows = self.store.get_buffer_rows([i.id for i in items if i.kind == "buffer"])
        texts = row_texts_for(self.store, rows) if rows else []
        by_id = {r.id: t for r, t in zip(rows, texts, strict=True)}
        flat: list[str] = []
        kept: list[SwitchItem] = []
        for item in items:
            if item.kind == "buffer":
                if item.id not in by_id:
                    continue  # forgotten meanwhile
                flat += by_id[item.id]
            else:
                flat.append(item.text)
            kept.append(item)
        if not kept:
            return 0
        started = time.monotonic()
        vectors = self.target.embed(flat)
        self.seconds += time.monotonic() - started
        self.embedded += len(flat)
        firsts: list[np.ndarray] = []
        pieces: dict[int, np.ndarray] = {}
        at = 0
        for item in kept:
            size = len(by_id[item.id]) if item.kind == "buffer" else 1
            firsts.append(vectors[at])
            if item.kind == "buffer":
                pieces[item.id] = vectors[at + 1 : at + size]
            at += size
        self.error = None
        return self.store.stage_vectors(self.target.model, kept, firsts, pieces)

    def _finished(self) -> None:
        self.done = True
        log.info("the store's vectors are %s's now", self.target.model)
        if self.on_done is not None:
            self.on_done(self.target)
