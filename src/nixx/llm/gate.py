"""The user comes first on a busy backend: nixx's own LLM calls yield to the user's turns.

A local server often serves one request at a time (llama.cpp with one slot, Ollama's
default for a big model, llama-cpp-python always). A summary asked for beside a user's
turn then either makes the turn wait (the user watches a summary being written) or, with
llama-cpp-python's default ``interrupt_requests``, cuts the turn's stream. So
(`BackendGate`):

- a user's turn (`user_turn`) runs at once; where the backend has one slot it stops
  nixx's own call in flight (its connection is closed: the backend stops generating),
  which is sent again, whole, once no turn runs;
- nixx's own calls (`background`: summaries, intent, source summaries) run one at a
  time, only while no user's turn runs, each within its time budget (the caller bounds
  its answer with ``max_tokens`` as well).

`slots` is the backend's: learned (llama.cpp's ``/props`` ``total_slots``) or set
(``NIXX_CHAT_SLOTS``); unknown counts as one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from nixx.errors import BackendError

T = TypeVar("T")


class BackendGate:
    def __init__(self, slots: int | None = None) -> None:
        self.slots = slots
        self._users = 0
        self._no_users = asyncio.Event()
        self._no_users.set()
        self._running: set[asyncio.Task[object]] = set()
        self._preempted: set[asyncio.Task[object]] = set()
        self._one: asyncio.Lock | None = None
        self.preemptions = 0  # nixx's own calls stopped for a user's turn (status, tests)

    @property
    def users(self) -> int:
        return self._users

    @property
    def background_running(self) -> bool:
        return bool(self._running)

    @contextlib.asynccontextmanager
    async def user_turn(self) -> AsyncIterator[None]:
        """Around the backend calls of a user's turn."""
        self._users += 1
        self._no_users.clear()
        try:
            if (self.slots or 1) <= 1 and self._running:
                for task in list(self._running):
                    self._preempted.add(task)
                    task.cancel()
                    self.preemptions += 1
                # the cancelled call's connection is closed once its task has ended
                await asyncio.wait(list(self._running), timeout=5.0)
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                self._no_users.set()

    async def background(
        self, call: Callable[[], Awaitable[T]], *, budget: float, what: str
    ) -> T:
        """Run `call` (one of nixx's own backend calls) when no user's turn runs, within
        `budget` seconds of running; stopped for a user's turn, it runs again after."""
        if self._one is None:
            self._one = asyncio.Lock()
        async with self._one:
            while True:
                await self._no_users.wait()
                task: asyncio.Task[T] = asyncio.ensure_future(call())
                self._running.add(task)  # type: ignore[arg-type]
                try:
                    async with asyncio.timeout(budget):
                        return await asyncio.shield(task)
                except TimeoutError:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
                    raise BackendError(
                        f"nixx's own call to the LLM backend ({what}) took longer than its "
                        f"time budget of {budget:g}s and was stopped "
                        "(NIXX_BACKGROUND_TIMEOUT)",
                        code="timeout",
                    ) from None
                except asyncio.CancelledError:
                    if task in self._preempted and not _cancelling():
                        continue  # a user's turn took the slot: again once it is done
                    task.cancel()
                    raise
                finally:
                    self._running.discard(task)  # type: ignore[arg-type]
                    self._preempted.discard(task)  # type: ignore[arg-type]


def _cancelling() -> bool:
    """Whether the current task itself is being cancelled (not the call it awaits)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
