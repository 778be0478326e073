"""Background jobs: summaries and intent derivation run after a turn, off its path.

Each job kind runs at most once at a time. Asking for a kind that is already running
does not start a second copy: it marks the job to run once more when the current run
ends (the run may have started before the newest turn was written). Failures are
logged and remembered (`last_error`), never raised into a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

JobFn = Callable[[], Awaitable[object]]
# what a job returns when it found nothing due: its last failure stays shown (a summary
# backing off, an intent refused until the next interval), not cleared as by a success
SKIPPED = object()


class BackgroundJobs:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._fns: dict[str, JobFn] = {}
        self.last_error: dict[str, str] = {}
        self.failures: dict[str, int] = {}  # failures in a row, by kind (0: the last run worked)
        self.runs: dict[str, int] = {}
        self._closed = False

    def running(self, kind: str) -> bool:
        task = self._tasks.get(kind)
        return task is not None and not task.done()

    def schedule(self, kind: str, fn: JobFn) -> None:
        """Run `fn` in the background unless a `kind` job runs (then run it again after)."""
        if self._closed:
            return
        self._fns[kind] = fn
        if self.running(kind):
            self._again.add(kind)
            return
        self._tasks[kind] = asyncio.get_running_loop().create_task(
            self._run(kind), name=f"nixx-{kind}"
        )

    async def _run(self, kind: str) -> None:
        while True:
            self._again.discard(kind)
            try:
                if await self._fns[kind]() is not SKIPPED:
                    self.last_error.pop(kind, None)
                    self.failures.pop(kind, None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a background job must never take the server down
                message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                self.last_error[kind] = message
                self.failures[kind] = self.failures.get(kind, 0) + 1
                log.warning("background %s failed: %s", kind, message)
            self.runs[kind] = self.runs.get(kind, 0) + 1
            if kind not in self._again or self._closed:
                return

    async def wait_idle(self, timeout: float | None = 30.0) -> None:
        """Wait until no job runs (tests and shutdown use this)."""
        async with asyncio.timeout(timeout):
            while True:
                tasks = [t for t in self._tasks.values() if not t.done()]
                if not tasks:
                    return
                await asyncio.wait(tasks)

    async def close(self, grace: float = 10.0) -> None:
        """Let running jobs finish (up to `grace` seconds), then cancel the rest."""
        self._closed = True
        with contextlib.suppress(TimeoutError):
            await self.wait_idle(grace)
        for task in self._tasks.values():
            if not task.done():
                task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
