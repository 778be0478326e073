"""The fence between forgetting and background writes.

A summary, an intent or a source rebuild reads rows, asks the LLM (seconds), then
writes what it made. A forget that ran in between must win: the job's text may quote a
deleted row. So every forget (and every hand correction a re-summary must not undo)
passes the fence (`ForgetFence.forgetting`: the lock held, the epoch moved on), and a
job writes only through `store_if_current(epoch, fn)`, with the epoch it read under —
a newer epoch raises `Stale` and the job drops its result (and reads again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from anyio import to_thread

T = TypeVar("T")


class Stale(Exception):
    """A forget ran while a background job read the rows it was about to store."""


class ForgetFence:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """Read before a job reads its rows; handed back to `store_if_current`."""
        return self._epoch

    @contextlib.asynccontextmanager
    async def forgetting(self) -> AsyncIterator[None]:
        """Hold the fence for a deletion or a correction: no job stores meanwhile, and
        none that read before it stores after."""
        async with self._lock:
            self._epoch += 1
            yield

    async def store_if_current(self, epoch: int, fn: Callable[[], T]) -> T:
        """Run the blocking write `fn` in a worker thread unless a forget ran since
        `epoch` (then `Stale`)."""
        async with self._lock:
            if epoch != self._epoch:
                raise Stale
            return await to_thread.run_sync(fn)

    async def store_or_skip(self, epoch: int, fn: Callable[[], Any]) -> None:
        """`store_if_current`, a stale write dropped quietly."""
        with contextlib.suppress(Stale):
            await self.store_if_current(epoch, fn)
