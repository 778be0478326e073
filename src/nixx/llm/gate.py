"""The user comes first on a busy backend: nixx's own LLM calls yield to the user's turns.

A local server often serves one request at a time (llama.cpp with one slot, Ollama's
default for a big model, llama-cpp-python always). A summary asked for beside a user's
turn then either makes the turn wait (the user watches a summary being written) or, with
llama-cpp-python's default ``interrupt_requests``, cuts the turn's stream. So
(`BackendGate`):

- nixx's own calls (`background`: summaries, intent, source summaries, channel round
  summaries) run one at a time, only while no user's turn runs, each within its time
  budget (the caller bounds its answer with ``max_tokens`` as well); where the backend is
  known to have one slot, only once no user's turn has run for `quiet` seconds
  (``NIXX_BACKGROUND_QUIET``);
- a call is `Steps`: requests that fill the backend's cache a slice at a time, one token
  asked of each (`nixx.llm.slot`), then the call itself. A user's turn (`user_turn`) that
  comes meanwhile **waits for the slice in flight** — a local server cannot stop a prompt
  it has begun, so stopping the request would waste it and win nothing — and the call
  yields after it; **stops the call itself** while it generates (its connection closed:
  the server stops generating). A call that yielded runs again, whole, once no turn runs;
- **a call that has yielded `PATIENCE` times runs to its end** the next time: a user's
  turn that comes then waits for it (at most its bounded answer) — but no more than one
  turn in `LATE_EVERY` is made to wait so (a model that never gives a usable summary would
  otherwise make one in two wait). Summaries and the intent then happen while a person
  keeps talking, at a bounded cost, instead of never;
- what waits, what runs, how often calls yielded and ran late: `info` (the status).

`slots` is the backend's: learned (llama.cpp's ``/props`` ``total_slots``; llama-cpp-python,
which always has one) or set (``NIXX_CHAT_SLOTS``); unknown counts as one.

**The user's prefix is kept** (`keep`): a backend with one slot holds one evaluated prompt
(its prefix cache). nixx's own calls there continue the conversation (`Steps.continues`),
so the backend still holds it after them. One that could not (no conversation yet, or it
would not fit the context) replaced it; then, once nixx's own calls are done and none
waits, the gate sends the latest user request again (its answer appended), in slices, one
token asked of each, while no turn runs. A turn that starts meanwhile stops it (what the
slices evaluated stays: the turn's prompt begins with it) and it is not sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypedDict, TypeVar

from nixx.errors import BackendError

T = TypeVar("T")

log = logging.getLogger(__name__)

PATIENCE = 2  # times a call yields to users' turns before it runs to its end
LATE_EVERY = 10  # users' turns from one call run late (a turn waited for it) to the next
TURN_WAIT = 300.0  # seconds a user's turn waits at most for a slice or a late call

Step = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Steps(Generic[T]):
    """One attempt at one of nixx's own calls: `warm` fill the backend's cache (one token
    asked of each), then `answer` is the call; `continues`: the backend still holds the
    user's conversation after it (no need to send it again)."""

    warm: Sequence[Step]
    answer: Callable[[], Awaitable[T]]
    continues: bool = False


class GateInfo(TypedDict):
    """What the gate is doing (``background`` in ``GET /v1/episodic/status``)."""

    running: str | None  # the own call in flight ("a summary"), if any
    late: bool  # it yielded PATIENCE times: it runs to its end, a turn waits for it
    waiting: list[str]  # own calls waiting for their turn, oldest first
    waiting_seconds: float  # how long the oldest has waited
    preemptions: int  # times an own call yielded to a user's turn
    late_runs: int  # own calls run to their end past a user's turn
    restores: int  # times the conversation was sent again for the backend's cache
    continued: int  # own calls sent as a continuation of the conversation (one slot)
    alone: int  # own calls sent on their own


@dataclass(eq=False)
class _Ticket:
    """One own call waiting for its turn: what it is, since when (`time.monotonic`)."""

    what: str
    since: float


class _Yielded(Exception):
    """The attempt gave the slot to a user's turn."""


class BackendGate:
    def __init__(self, slots: int | None = None, *, quiet: float = 0.0) -> None:
        self.slots = slots
        self.quiet = quiet
        self._last_user = float("-inf")  # loop time the latest user's turn ended
        self._users = 0
        self._turns = 0  # users' turns begun
        self._no_users = asyncio.Event()
        self._no_users.set()
        # nixx's requests in flight -> whether a user's turn stops it (else waits for it)
        self._running: dict[asyncio.Future[object], bool] = {}
        self._preempted: set[asyncio.Future[object]] = set()
        self._one: asyncio.Lock | None = None
        self._queued: set[_Ticket] = set()  # own calls waiting (for another, or a pause)
        self.current: str | None = None
        self._late = False
        self.preemptions = 0
        self.late_runs = 0
        self._late_turn = -LATE_EVERY  # `_turns` when a turn last waited for a late call
        # keeping the user's prefix (`keep`)
        self._restore: Callable[[], Sequence[Step]] | None = None
        self._restore_budget = 120.0
        self._displaced = False  # an own call replaced the conversation in the cache
        self._restoring: asyncio.Task[None] | None = None
        self.restores = 0  # the user's conversation sent again (status, tests)

    @property
    def users(self) -> int:
        return self._users

    @property
    def waiting(self) -> int:
        """nixx's own calls waiting for their turn (a user's turn, or another of them)."""
        return len(self._queued)

    @property
    def background_running(self) -> bool:
        return bool(self._running)

    @property
    def keeps_prefix(self) -> bool:
        """Whether the backend is known to hold one prompt at a time (one slot)."""
        return self.slots == 1

    def info(self, continued: int = 0, alone: int = 0) -> GateInfo:
        now = time.monotonic()
        queued = sorted(self._queued, key=lambda q: q.since)
        return {
            "running": self.current, "late": self._late,
            "waiting": [q.what for q in queued],
            "waiting_seconds": round(now - queued[0].since, 1) if queued else 0.0,
            "preemptions": self.preemptions, "late_runs": self.late_runs,
            "restores": self.restores, "continued": continued, "alone": alone,
        }

    def keep(self, restore: Callable[[], Sequence[Step]] | None, *, budget: float) -> None:
        """After a user's turn: `restore` gives the requests that send its conversation
        again, in slices (for when an own call has replaced it in the backend's one
        cache); None: nothing to keep."""
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
        self._turns += 1
        self._no_users.clear()
        try:
            if (self.slots or 1) <= 1 and self._running:
                for task, stoppable in list(self._running.items()):
                    if stoppable:
                        self._preempted.add(task)
                        task.cancel()
                # a slice in flight, or a call running late, goes on to its end (the
                # backend evaluates it anyway); a stopped call ends at its next token
                await asyncio.wait(list(self._running), timeout=TURN_WAIT)
            self._displaced = False  # the turn's own prompt is what the backend holds next
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
        self, plan: Callable[[], Steps[T]], *, budget: float, what: str
    ) -> T:
        """Run one of nixx's own calls — `plan` lays out each attempt — when no user's
        turn runs, each attempt within `budget` seconds of running; one that yields to a
        user's turn runs again after it (to its end once it has yielded `PATIENCE` times)."""
        if self._one is None:
            self._one = asyncio.Lock()
        ticket = _Ticket(what, time.monotonic())
        self._queued.add(ticket)
        try:
            async with self._one:
                try:
                    return await self._run(plan, ticket, budget=budget)
                finally:
                    self.current, self._late = None, False
        finally:
            self._queued.discard(ticket)
            self._after_background()

    async def _run(
        self, plan: Callable[[], Steps[T]], ticket: _Ticket, *, budget: float
    ) -> T:
        what, yielded = ticket.what, 0
        while True:
            self._queued.add(ticket)  # waiting (again) for a pause
            try:
                await self._free()
            finally:
                self._queued.discard(ticket)
            steps = plan()
            late = yielded >= PATIENCE and self._turns - self._late_turn >= LATE_EVERY
            self.current, self._late = what, late
            turns = self._turns
            try:
                async with asyncio.timeout(budget):
                    if self._late:
                        result = await self._late_attempt(steps)
                    else:
                        result = await self._attempt(steps, turns)
            except _Yielded:
                yielded += 1
                self.preemptions += 1
                continue
            except TimeoutError:
                raise BackendError(
                    f"nixx's own call to the LLM backend ({what}) took longer than its "
                    f"time budget of {budget:g}s and was stopped "
                    "(NIXX_BACKGROUND_TIMEOUT)",
                    code="timeout",
                ) from None
            if self._late and self._turns != turns:
                self.late_runs += 1  # a user's turn waited for it
                self._late_turn = self._turns
            if self.keeps_prefix and not steps.continues and self._restore is not None:
                self._displaced = True  # the backend holds nixx's prompt now
            return result

    async def _attempt(self, steps: Steps[T], turns: int) -> T:
        """Each slice, then the call, yielding to a user's turn between them; the call
        itself is stopped by one."""
        for warm in steps.warm:
            if self._turns != turns:
                raise _Yielded
            await self._step(warm, stoppable=False)
        if self._turns != turns:
            raise _Yielded
        return await self._step(steps.answer, stoppable=True)

    async def _late_attempt(self, steps: Steps[T]) -> T:
        """The whole attempt as one request in flight that a user's turn waits for."""

        async def whole() -> T:
            for warm in steps.warm:
                await warm()
            return await steps.answer()

        return await self._step(whole, stoppable=False)

    async def _step(self, call: Callable[[], Awaitable[T]], *, stoppable: bool) -> T:
        task: asyncio.Future[T] = asyncio.ensure_future(call())
        self._running[task] = stoppable  # type: ignore[index]
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task in self._preempted and not _cancelling():
                raise _Yielded from None  # a user's turn took the slot: again once it is done
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        finally:
            self._running.pop(task, None)  # type: ignore[arg-type]
            self._preempted.discard(task)  # type: ignore[arg-type]

    def _after_background(self) -> None:
        """Once nixx's own calls are done and none waits: the user's prefix back."""
        if self._queued or not self._displaced or self._restore is None:
            return
        if self._restoring is not None and not self._restoring.done():
            return
        self._restoring = asyncio.ensure_future(self._restore_prefix())

    async def _restore_prefix(self) -> None:
        assert self._one is not None
        async with self._one:
            await self._free()
            restore = self._restore
            if not self._displaced or restore is None or self._queued:
                return  # a turn ran meanwhile, or more of nixx's own calls come first
            turns = self._turns
            try:
                async with asyncio.timeout(self._restore_budget):
                    for warm in restore():
                        if self._turns != turns:
                            return  # the turn's prompt begins with what the slices sent
                        await self._step(warm, stoppable=False)
                self._displaced = False
                self.restores += 1
            except _Yielded:
                return
            except Exception as exc:  # noqa: BLE001 - only a cache lost: never a failure
                self._displaced = False
                log.info("the conversation could not be sent again for the backend's "
                         "prefix cache: %s", getattr(exc, "message", None) or exc)


def _cancelling() -> bool:
    """Whether the current task itself is being cancelled (not the call it awaits)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
