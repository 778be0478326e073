"""The background queue that gives every buffer row a vector.

A turn writes its rows and calls `notify()`; the queue's own thread then embeds the
rows that have no vector yet (oldest first, in batches), off the turn's path: a turn
never waits for it. What is embedded for a row is `nixx.memory.row_text.embedding_text`
of the row and its neighbours, and each of its sentences when it has several (its pieces,
`nixx.memory.pieces`), in the same batch.

- **Backfill**: `start()` (server start) wakes the thread at once, so a store written
  before row vectors existed, or while the embedder was down, is embedded in the
  background; progress goes to the log and to `status()` (`GET /v1/episodic/status`).
- **Failures**: an embedder or store error leaves the rows pending; the thread retries
  after a back-off (1 s, doubling to `retry_max`), or at the next `notify()`, whichever
  comes first. The error is in `status()["error"]` until a batch succeeds.
- **Yielding**: before each batch the thread waits for a quiet moment of the
  `foreground` (`nixx.priority.Foreground`: no search or recall for 50 ms), half a
  second at most; `flush()` does not wait.
- **Work list**: `MemoryStore.buffer_rows_without_vector`, from a cursor below which
  every row is known to have a vector; when the store says rows are still pending
  below it (a `nixx reindex` dropped the vectors, another process wrote rows) the
  cursor goes back to the start.
- **Sentences of older rows**: once no row lacks a vector, the rows that have one but
  were never split (a store from before pieces, an import of an export without them:
  `MemoryStore.buffer_rows_without_pieces`) get their pieces, and a row of one sentence
  is marked as having none; checked at start and at every `flush()`.

    queue = RowVectors(store, service.embed_rows)
    queue.start()
    queue.notify()                 # after a row is written
    await queue.flush()            # embed everything pending now (tests, `nixx reindex`)
    queue.close()
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from typing import TypedDict

import numpy as np

from nixx.memory.pieces import split
from nixx.memory.row_text import embedding_text
from nixx.priority import (
    BACKGROUND_NICE,
    MAX_WAIT_SECONDS,
    QUIET_SECONDS,
    Foreground,
    lower_thread_priority,
)
from nixx.store.base import MemoryStore
from nixx.store.records import BufferRow, EmbedFn

log = logging.getLogger(__name__)


#: Rows per embedding call: big enough for efficient batches, small enough that one
#: batch holds the embedder (and a core) for well under a second.
BATCH_SIZE = 32
#: Neighbours on each side handed to `embedding_text`.
NEIGHBOURS = 2
RETRY_MIN = 1.0
RETRY_MAX = 60.0
#: A backfill logs its progress at most this often (seconds).
LOG_EVERY = 10.0
#: How often (seconds) a drain also counts the rows pending *below* the cursor (vectors
#: dropped by a `nixx reindex` of another process): the count reads every row, too
#: dear for every turn (~10 ms at 100k rows).
RECHECK_EVERY = 300.0


def texts_for(store: MemoryStore, rows: Sequence[BufferRow]) -> list[str]:
    """The text each row's vector is made from (`embedding_text` of the row and up to
    `NEIGHBOURS` rows on each side in the same session, as far as they exist)."""
    if not rows:
        return []
    # a few ids of slack for markers between the rows and their neighbours
    span = store.get_buffer(max(1, rows[0].id - 2 * NEIGHBOURS - 2), rows[-1].id + 2 * NEIGHBOURS)
    position = {r.id: i for i, r in enumerate(span)}
    out = []
    for row in rows:
        at = position.get(row.id)
        if at is None:  # not in the span (cannot happen for rows read from the store)
            out.append(embedding_text(row, []))
            continue
        before: list[BufferRow] = []
        for r in reversed(span[:at]):
            if r.role == "marker" or len(before) == NEIGHBOURS:
                break
            before.insert(0, r)
        after: list[BufferRow] = []
        for r in span[at + 1 :]:
            if r.role == "marker" or len(after) == NEIGHBOURS:
                break
            after.append(r)
        out.append(embedding_text(row, [*before, *after]))
    return out


def row_texts_for(store: MemoryStore, rows: Sequence[BufferRow]) -> list[list[str]]:
    """Each row's texts to embed: its vector's (`texts_for`), then its pieces'
    (`nixx.memory.pieces.split`)."""
    texts = texts_for(store, rows)
    return [[text, *split(row.content)] for row, text in zip(rows, texts, strict=True)]



def embed_per_row(embed: EmbedFn, texts: Sequence[list[str]]) -> list[np.ndarray]:
    """Each row's texts embedded in one call: one (len(texts[i]), dim) matrix a row."""
    flat = [t for row_texts in texts for t in row_texts]
    vectors = embed(flat) if flat else np.empty((0, 0), np.float32)
    ends = np.cumsum([len(row_texts) for row_texts in texts])
    return [vectors[end - len(row_texts) : end] for end, row_texts in zip(ends, texts, strict=True)]


class VectorStatus(TypedDict):
    embedded: int  # non-marker rows with a vector
    pending: int  # and without
    running: bool
    error: str | None
    rows_per_second: float | None
    index_warming: bool

class RowVectors:
    """Embeds buffer rows in a thread of its own (see the module docstring)."""

    def __init__(
        self,
        store: MemoryStore,
        embed: EmbedFn,
        *,
        batch_size: int = BATCH_SIZE,
        retry_min: float = RETRY_MIN,
        retry_max: float = RETRY_MAX,
        nice: int = BACKGROUND_NICE,
        foreground: Foreground | None = None,
    ) -> None:
        self.store = store
        self.embed = embed
        self.foreground = foreground
        self.quiet = QUIET_SECONDS  # what a quiet moment of the foreground is (seconds)
        self.max_wait = MAX_WAIT_SECONDS  # the longest a batch waits for one (seconds)
        self.batch_size = max(1, batch_size)
        self.retry_min = retry_min
        self.retry_max = retry_max
        self.nice = nice
        self.error: str | None = None
        self.embedded_total = 0  # rows embedded by this process
        self.embed_seconds = 0.0  # time spent in embed() for them
        self._cursor = 0  # every non-marker row with id <= cursor has a vector
        self._pieces_cursor = 0  # every row with id <= it that has a vector was split
        self._pieces_done = False  # no row is left to split (until start or flush)
        self._vectors_failed = False  # the last drain's vector pass failed
        self._checked_at = 0.0  # monotonic time of the last count below the cursor
        self._wake = threading.Event()
        self._drain_lock = threading.Lock()  # one drain at a time (thread or flush)
        self._running = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._failures = 0

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread; it backfills at once whatever is pending."""
        if self._thread is not None or self._closed:
            return
        self._thread = threading.Thread(target=self._loop, name="nixx-row-vectors", daemon=True)
        self._thread.start()
        self._wake.set()

    def notify(self) -> None:
        """A buffer row was written: embed it soon (a retry after a failure too)."""
        self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the batch in flight (rows left are embedded at the next start)."""
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # ---- status -------------------------------------------------------------------------
    def status(self) -> VectorStatus:
        """What the buffer rows' vectors are doing (blocking: it counts in the store)."""
        stats = self.store.buffer_vector_stats()
        rate = self.embedded_total / self.embed_seconds if self.embed_seconds > 0 else None
        return {
            "embedded": stats["embedded"],
            "pending": stats["pending"],
            "running": self._running,
            "error": self.error,
            "rows_per_second": None if rate is None else round(rate, 1),
            "index_warming": self.store.vector_indexes_warming(),
        }

    # ---- work ---------------------------------------------------------------------------
    async def flush(self) -> VectorStatus:
        """Embed every row pending now (from the first row: `nixx reindex` may have
        dropped vectors), in a worker thread; returns `status()`. With the embedder
        failing it returns at once with the error set (the rows stay pending)."""
        self._cursor, self._pieces_cursor, self._pieces_done = 0, 0, False
        await asyncio.to_thread(self.drain)
        return await asyncio.to_thread(self._settled_status)

    def _settled_status(self) -> VectorStatus:
        # read while no drain runs: a turn's notify may have started the background
        # thread's drain (of nothing left) just after ours ended
        with self._drain_lock:
            return self.status()

    def drain(self, *, yielding: bool = False) -> int:
        """Embed pending rows until none are left or a batch fails; returns rows embedded.
        Never raises: a failure is kept in `error` (and logged). `yielding`: wait for a
        quiet moment of the foreground before each batch (the background thread does)."""
        with self._drain_lock:
            self._running = True
            try:
                done = self._drain(yielding)
                if not self._vectors_failed and not self._pieces_done:
                    self._split_older(yielding)
                return done
            finally:
                self._running = False

    def _split_older(self, yielding: bool) -> None:
        """Give rows with a vector but no pieces theirs (the module docstring)."""
        done = 0
        while not self._closed:
            try:
                rows = self.store.buffer_rows_without_pieces(
                    self.batch_size, after_id=self._pieces_cursor
                )
                if not rows:
                    self._pieces_done = True
                    break
                if done == 0 and len(rows) == self.batch_size:
                    log.info("giving older buffer rows a vector per sentence in the background")
                if yielding and self.foreground is not None:
                    self.foreground.wait_quiet(self.quiet, self.max_wait)
                    if self._closed:
                        break
                per_row = embed_per_row(self.embed, [split(row.content) for row in rows])
                self.store.add_buffer_pieces(
                    {row.id: m for row, m in zip(rows, per_row, strict=True)}
                )
            except Exception as exc:  # as in `_drain`: retried after a back-off
                self._failed("splitting buffer rows", exc)
                return
            self._pieces_cursor = rows[-1].id
            self.error, self._failures = None, 0
            done += len(rows)
        if done > self.batch_size:
            log.info("sentence vectors: %d older rows split", done)

    def _drain(self, yielding: bool) -> int:
        done = 0
        self._vectors_failed = False
        reset = False
        last_log = time.monotonic()
        total_pending: int | None = None
        while not self._closed:
            try:
                rows = self.store.buffer_rows_without_vector(self.batch_size, after_id=self._cursor)
                if not rows:
                    if reset or self._cursor == 0:
                        break
                    # nothing above the cursor: is anything pending below it? (now and then)
                    if time.monotonic() - self._checked_at < RECHECK_EVERY:
                        break
                    self._checked_at = time.monotonic()
                    if self.store.buffer_vector_stats()["pending"] == 0:
                        break
                    self._cursor, reset = 0, True
                    continue
                if total_pending is None and len(rows) == self.batch_size:
                    total_pending = self.store.buffer_vector_stats()["pending"]
                    if total_pending > 10 * self.batch_size:
                        log.info("embedding %d buffer rows in the background", total_pending)
                if yielding and self.foreground is not None:
                    self.foreground.wait_quiet(self.quiet, self.max_wait)
                    if self._closed:
                        break
                texts = row_texts_for(self.store, rows)
                started = time.perf_counter()
                per_row = embed_per_row(self.embed, texts)
                self.embed_seconds += time.perf_counter() - started
                # a row's first vector is its own, the rest its pieces (it may have none)
                self.store.add_buffer_vectors(
                    [(row.id, m[0]) for row, m in zip(rows, per_row, strict=True)],
                    {row.id: m[1:] for row, m in zip(rows, per_row, strict=True) if len(m) > 1},
                )
            except Exception as exc:  # the queue must never take the server down
                self._failed("embedding buffer rows", exc)
                self._vectors_failed = True
                return done
            self._cursor = rows[-1].id
            self.error = None
            self._failures = 0
            done += len(rows)
            self.embedded_total += len(rows)
            now = time.monotonic()
            if total_pending and now - last_log >= LOG_EVERY:
                last_log = now
                log.info("buffer row vectors: %d of %d embedded", done, total_pending)
        if total_pending and total_pending > 10 * self.batch_size:
            log.info("buffer row vectors: backfill done (%d rows embedded)", done)
        return done

    def _failed(self, what: str, exc: Exception) -> None:
        """A batch failed: keep the error (logged once while it repeats) for the retry."""
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        if message != self.error:
            log.warning("%s failed (will retry): %s", what, message)
        self.error = message
        self._failures += 1

    def _loop(self) -> None:
        lower_thread_priority(self.nice)  # below the request threads: turns come first
        while not self._closed:
            timeout = None
            if self.error is not None:
                timeout = min(self.retry_max, self.retry_min * 2 ** max(0, self._failures - 1))
            self._wake.wait(timeout)
            self._wake.clear()
            if self._closed:
                return
            self.drain(yielding=True)
