"""Ingests started from the page: each runs as a task of the server while its page
(``/ui/ingest/<id>``) refreshes itself once a second to show the progress the
pipeline reports. Kept in memory: the 20 newest jobs of this server process."""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from nixx.errors import NixxError
from nixx.memory.sources import IngestSpec

KEEP = 20


@dataclass
class IngestJob:
    id: int
    target: str
    state: str = "running"  # running | done | failed
    stage: str = "starting"
    files_done: int = 0
    files_total: int = 0
    chunks: int = 0
    embedded: int = 0
    error: str | None = None
    summary_error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)

    def update(self, event: Any) -> None:
        """The pipeline's progress callback (called from a worker thread: plain stores)."""
        self.stage = event.stage
        self.files_done, self.files_total = event.files_done, event.files_total
        self.chunks, self.embedded = event.chunks, event.embedded


class IngestJobs:
    def __init__(self) -> None:
        self._jobs: OrderedDict[int, IngestJob] = OrderedDict()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, job_id: int) -> IngestJob | None:
        return self._jobs.get(job_id)

    def start(self, service: Any, *, path: str | None, url: str | None) -> IngestJob:
        job = IngestJob(next(self._ids), path or url or "")
        self._jobs[job.id] = job
        while len(self._jobs) > KEEP:
            self._jobs.popitem(last=False)

        async def run() -> None:
            try:
                result, problem = await service.ingest(IngestSpec(path=path, url=url),
                                                        progress=job.update)
            except NixxError as exc:
                job.state, job.error = "failed", exc.message
                return
            except Exception as exc:  # a bug: shown on the page, logged by the task
                job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"
                raise
            job.result = {"status": result.status, "source_id": result.source.id,
                          "name": result.source.name, "chunks": result.chunks,
                          "files": result.files}
            job.summary_error = problem
            job.state, job.stage = "done", "done"

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
