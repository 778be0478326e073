"""Background threads yield the CPU to the threads that answer requests.

A turn waits for its request threads; nothing waits for a row's vector. Two means:

- **Priority.** On Linux a thread can lower its own priority (`setpriority` on its thread
  id); at nice 19 the scheduler gives it about 1/70 of a core that a nice-0 thread also
  wants, and all of an idle one. Measured on bench/bench_turn.py --embed local
  (docs/performance.md): the turn's added time drops when the row-vector queue runs at 19
  rather than 5.
- **Timing** (`Foreground`). Priority does not cover what two threads share besides the
  scheduler: the cores' caches and memory bandwidth (a forward pass streams the model's
  weights through them), a core's sibling hyperthread, the GIL and the store's write
  lock. A turn's recall still took ~5 ms longer at p50 with the queue embedding beside it
  at nice 19 (bench_turn, measured with the queue switched off). So the CPU-heavy part
  of a request (a search, a turn's recall) is marked `busy()`, and background work waits
  for a quiet moment (`wait_quiet`) before each batch — bounded, so work that never finds
  one still runs: a server answering back-to-back requests embeds a batch every
  `max_wait` seconds. A person's turns, or an LLM's seconds of streaming, leave quiet
  moments enough.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

BACKGROUND_NICE = 19


def lower_thread_priority(nice: int = BACKGROUND_NICE) -> None:
    """Give the calling thread (only it) the nice value `nice`; nothing where threads have
    no priority of their own (not Linux) or lowering is refused."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


#: Background work waits until no request has been busy for this long (seconds) ...
QUIET_SECONDS = 0.05
#: ... or this long at most (seconds), then runs anyway.
MAX_WAIT_SECONDS = 0.5


class Foreground:
    """The CPU-heavy parts of requests in flight, for background work to wait out
    (thread-safe; see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._exclusive = 0  # `exclusive` sections held or waiting: new busy ones wait
        self._last = time.monotonic() - 3600.0  # when the last busy section ended

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Mark the block as a request's CPU-heavy work (it waits while an `exclusive`
        section runs)."""
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._last = time.monotonic()
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Run the block with no busy section beside it: it waits for those running to
        end, and those that start meanwhile wait for it (a store switching embedding
        models: no search may embed its question with one model and search the other's
        vectors)."""
        with self._cond:
            self._exclusive += 1
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._exclusive -= 1
                self._cond.notify_all()

    def wait_quiet(
        self, quiet: float = QUIET_SECONDS, max_wait: float = MAX_WAIT_SECONDS
    ) -> bool:
        """Block until nothing has been busy for `quiet` seconds, or `max_wait` seconds
        have passed; returns whether it was quiet."""
        deadline = time.monotonic() + max_wait
        with self._cond:
            while True:
                now = time.monotonic()
                if self._active == 0 and now - self._last >= quiet:
                    return True
                if now >= deadline:
                    return False
                if self._active:
                    timeout = deadline - now
                else:
                    timeout = min(deadline, self._last + quiet) - now
                self._cond.wait(max(timeout, 0.0))
