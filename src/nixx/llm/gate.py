"""The user comes first on a busy backend: nixx's own LLM calls yield to the user's turns.

A local server often serves one request at a time (llama.cpp with one slot, Ollama's
default for a big model, llama-cpp-python always). A summary asked for beside a user's
turn then either makes the turn wait (the user watches a summary being written) or, with
llama-cpp-python's default ``interrupt_requests``, cuts the turn's stream. So
(`BackendGate`):

- a user's turn (`user_turn`) runs at once; where the backend has one slot it stops
  nixx's own call in flight (its connection is closed: the backend stops generating),
  which is sent again, whole, once no turn runs;
- nixx's own calls (`background`: summaries, intent, source summaries, channel round
  summaries) run one at a time, only while no user's turn runs, each within its time
  budget (the caller bounds its answer with ``max_tokens`` as well);
- where the backend is known to have one slot, they start only once no user's turn has
  run for `quiet` seconds (``NIXX_BACKGROUND_QUIET``): a local server cannot stop a prompt
  it has begun to evaluate, so a summary started the moment a turn ended would hold the
  slot — and replace its cache — when the user's next message comes right after.

`slots` is the backend's: learned (llama.cpp's ``/props`` ``total_slots``; llama-cpp-python,
which always has one) or set (``NIXX_CHAT_SLOTS``); unknown counts as one.

**The user's prefix is kept** (`keep`): a backend with one slot holds one evaluated prompt
(its prefix cache). nixx's own call replaces it with a summary's prompt, and the user's
next turn is then evaluated whole — seconds on a CPU model, growing with the history.
So, where the backend is known to have one slot, once nixx's own calls are done and none
waits, the gate sends the latest user request again (its answer appended, one token
asked: `ChatClient.keep_prefix`) while no turn runs: the backend's cache holds the
conversation again when the user's next message comes. A turn that starts meanwhile
stops it (the turn's own prompt is the prefix then) and it is not sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from nixx.errors import BackendError

T = TypeVar("T")

log = logging.getLogger(__name__)


class BackendGate:
    def __init__(self, slots: int | None = None, *, quiet: float = 0.0) -> None:
        self.slots = slots
        self.quiet = quiet
        self._last_user = float("-inf")  # loop time the latest user's turn ended
        self._users = 0
        self._no_users = asyncio.Event()
        self._no_users.set()
        self._running: set[asyncio.Task[object]] = set()
        self._preempted: set[asyncio.Task[object]] = set()
        self._one: asyncio.Lock | None = None
        self._waiting = 0  # nixx's own calls waiting for another of them to end
        self._paused = 0  # nixx's own calls waiting for the users' turns to end
        self.preemptions = 0  # nixx's own calls stopped for a user's turn (status, tests)
        # keeping the user's prefix (`keep`)
        self._restore: Callable[[], Awaitable[object]] | None = None
        self._restore_budget = 120.0
        self._displaced = False  # nixx's own call ran since the user's latest request
        self._restoring: asyncio.Task[None] | None = None
        self.restores = 0  # the user's conversation sent again (status, tests)

    @property
    def users(self) -> int:
        return self._users

    @property
    def waiting(self) -> int:
        """nixx's own calls waiting for their turn (a user's turn, or another of them)."""
        return self._waiting + self._paused

    @property
    def background_running(self) -> bool:
        return bool(self._running)

    @property
    def keeps_prefix(self) -> bool:
        """Whether the backend is known to hold one prompt at a time (one slot)."""
        return self.slots == 1

    def keep(self, restore: Callable[[], Awaitable[object]] | None, *, budget: float) -> None:
        """After a user's turn: `restore` sends its request again (answer appended), for
        when nixx's own calls have taken the backend's one cache; None: nothing to keep."""
        self._restore, self._restore_budget = restore, budget
        self._displaced = False

    async def wait_idle(self) -> None:
        """Until the gate sends nothing more (the prefix restored, if it was due)."""
        while self._restoring is not None and not self._restoring.done():
            await asyncio.wait([self._restoring])

    async def aclose(self) -> None:
        if self._restoring is not None and not self._restoring.done():
            self._restoring.cancel()
            with contextlib.suppress(BaseException):
                await self._restoring

    @contextlib.asynccontextmanager
    async def user_turn(self) -> AsyncIterator[None]:
        """Around the backend calls of a user's turn."""
        self._users += 1
        self._no_users.clear()
        self._displaced = False  # the turn's own prompt is what the backend holds next
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
            self._last_user = asyncio.get_running_loop().time()
            if self._users == 0:
                self._no_users.set()

    async def _free(self) -> None:
        """Until no user's turn runs — on a one-slot backend, none has for `quiet` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            await self._no_users.wait()
            left = self._last_user + self.quiet - loop.time() if self.keeps_prefix else 0.0
            if left <= 0:
                return
            await asyncio.sleep(left)

    async def background(
        self, call: Callable[[], Awaitable[T]], *, budget: float, what: str
    ) -> T:
        """Run `call` (one of nixx's own backend calls) when no user's turn runs, within
        `budget` seconds of running; stopped for a user's turn, it runs again after."""
        if self._one is None:
            self._one = asyncio.Lock()
        self._waiting += 1
        waiting = True
        try:
            async with self._one:
                self._waiting -= 1
                waiting = False
                try:
                    return await self._run(call, budget=budget, what=what)
                finally:
                    if self.keeps_prefix and self._restore is not None:
                        self._displaced = True  # the backend holds nixx's prompt now
        finally:
            if waiting:
                self._waiting -= 1
            self._after_background()

    def _after_background(self) -> None:
        """Once nixx's own calls are done and none waits: the user's prefix back."""
        if self._waiting or not self._displaced or self._restore is None:
            return
        if self._restoring is not None and not self._restoring.done():
            return
        self._restoring = asyncio.ensure_future(self._restore_prefix())

    async def _restore_prefix(self) -> None:
        assert self._one is not None
        async with self._one:
            await self._free()
            restore = self._restore
            if not self._displaced or restore is None or self._waiting:
                return  # a turn ran meanwhile, or more of nixx's own calls come first
            task: asyncio.Task[object] = asyncio.ensure_future(restore())
            self._running.add(task)
            try:
                async with asyncio.timeout(self._restore_budget):
                    await asyncio.shield(task)
                self._displaced = False
                self.restores += 1
            except asyncio.CancelledError:
                if task in self._preempted and not _cancelling():
                    return  # a user's turn took the slot: its own prompt is the prefix now
                task.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - only a cache lost: never a failure
                task.cancel()
                self._displaced = False
                log.info("the conversation could not be sent again for the backend's "
                         "prefix cache: %s", getattr(exc, "message", None) or exc)
            finally:
                self._running.discard(task)
                self._preempted.discard(task)

    async def _run(self, call: Callable[[], Awaitable[T]], *, budget: float, what: str) -> T:
        while True:
            self._paused += 1
            try:
                await self._free()
            finally:
                self._paused -= 1
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
