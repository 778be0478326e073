"""`Sources`: semantic memory behind `NixxService` — a buffer range stored as a named
source, files, folders, pages and text ingested, the LLM's display summary of each,
the rebuild of a buffer source a forget took rows from, and the search over the chunks.

The chunking and the synchronous parts are `nixx.memory.semantic` and
`nixx.ingest.pipeline`; here they run in worker threads, with the display summaries as
nixx's own LLM calls (`nixx.memory.own_calls`) and the rebuilds through the forget
fence (`nixx.memory.fence`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from anyio import to_thread

from nixx.embed.base import Embedder
from nixx.errors import BackendError, NotFound, ValidationError
from nixx.memory import search as fused
from nixx.memory import semantic
from nixx.memory.fence import ForgetFence, Stale
from nixx.memory.prompts import SOURCE_SUMMARY_PROMPT
from nixx.store.forgetting import REBUILD_KEY
from nixx.store.records import MemoryHit, NewChunk, Source

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.ingest.pipeline import IngestResult
    from nixx.memory.background import BackgroundJobs
    from nixx.memory.own_calls import OwnCalls
    from nixx.store.base import MemoryStore

JOB = "sources"  # the background job's kind


class BoundEmbedder(Embedder):
    """The service's embedder, binding the store on first use (for the sync helpers)."""

    def __init__(self, embedder: Embedder, embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        self._embedder = embedder
        self._embed = embed
        self.model = embedder.model

    @property
    def dim(self) -> int:  # type: ignore[override]
        return int(self._embedder.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)


@dataclass(frozen=True)
class IngestSpec:
    """What to ingest: exactly one of `path` (inside the workspace, unless not
    `confined`: the CLI reads any path its user names), `url` or `text` (which needs a
    `name`); `tags` as a list or a comma-separated string; `summarise`: ask the LLM for
    the source's display summary after (`NixxService.summarise_sources`)."""

    path: str | None = None
    url: str | None = None
    text: str | None = None
    name: str | None = None
    tags: Sequence[str] | str | None = None
    confined: bool = True
    summarise: bool = True


class Sources:
    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        embedder: Embedder,
        embed: Callable[[Sequence[str]], np.ndarray],
        embed_queries: Callable[[Sequence[str]], np.ndarray],
        calls: OwnCalls,
        fence: ForgetFence,
        jobs: BackgroundJobs,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder  # the ingest pipeline binds the store itself
        self.bound = BoundEmbedder(embedder, embed)  # `embed` binds it on first use
        self.embed_queries = embed_queries
        self.calls = calls
        self.fence = fence
        self.jobs = jobs

    def schedule_rebuild(self) -> None:
        """After a forget took rows from buffer sources: rebuild them in the background."""
        self.jobs.schedule(JOB, self.rebuild)

    async def create(
        self, name: str, start_id: int | None, end_id: int | None
    ) -> tuple[Source, str | None]:
        """Store a buffer range as a named source; returns (source, summary problem)."""
        plan = await to_thread.run_sync(semantic.plan_source, self.store, name, start_id, end_id)
        chunks = await to_thread.run_sync(semantic.embed_chunks, self.bound, plan)
        summary, problem = await self.summary_of(plan.text)
        source = await to_thread.run_sync(
            lambda: self.store.add_source(
                plan.name, "buffer", chunks, summary=summary,
                start_id=plan.start_id, end_id=plan.end_id,
            )
        )
        return source, problem

    async def summary_of(self, text: str) -> tuple[str | None, str | None]:
        """(the LLM's display summary of a source's text — all of it, in parts when it is
        longer than the context: `nixx.ingest.summary.summarise_text` —, what went wrong)."""
        from nixx.ingest.summary import summarise_text

        try:
            model = await self.calls.model()
            limit = await self.calls.input_chars(model)
            summary = await summarise_text(
                self.calls.llm, model, SOURCE_SUMMARY_PROMPT, text, limit=limit,
                budget=self.calls.budget,
            )
        except BackendError as exc:
            return None, exc.message
        return summary, None

    async def rebuild(self) -> None:
        """Re-chunk and re-embed each buffer source that lost rows to a forget, from the
        rows that remain (state ``forget.rebuild_sources``); then its display summary."""
        for _ in range(1000):
            epoch = self.fence.epoch
            queue = await to_thread.run_sync(self.store.get_state, REBUILD_KEY)
            if not queue:
                return
            await self._rebuild_one(int(queue[0]), epoch)

    async def _rebuild_one(self, source_id: int, epoch: int) -> None:
        def done() -> None:
            self.store.update_state(
                REBUILD_KEY, lambda cur: [i for i in (cur or []) if i != source_id] or None
            )

        try:
            src = await to_thread.run_sync(self.store.get_source, source_id)
            plan = await to_thread.run_sync(
                semantic.plan_source, self.store, src.name, src.start_id, src.end_id
            )
            chunks: list[NewChunk] = await to_thread.run_sync(
                semantic.embed_chunks, self.bound, plan
            )
        except (NotFound, ValidationError):  # gone, or nothing left to chunk
            await self.fence.store_or_skip(epoch, done)
            return

        def replace() -> None:
            self.store.replace_source(source_id, chunks)
            done()

        try:
            await self.fence.store_if_current(epoch, replace)
        except Stale:
            return
        summary, _problem = await self.summary_of(plan.text)
        if summary:
            with contextlib.suppress(Stale, NotFound):
                await self.fence.store_if_current(
                    epoch, functools.partial(self.store.set_source_summary, source_id, summary)
                )

    async def ingest(
        self, spec: IngestSpec, progress: Callable[[Any], None] | None = None
    ) -> tuple[IngestResult, str | None]:
        """`NixxService.ingest` (see there)."""
        from nixx.ingest.pipeline import Ingestor

        path, url, text, name, tags = spec.path, spec.url, spec.text, spec.name, spec.tags
        given = [k for k, v in (("path", path), ("url", url), ("text", text)) if v is not None]
        if len(given) != 1:
            raise ValidationError(
                'give exactly one of "path", "url" or "text"'
                + (f" (got {', '.join(given)})" if given else ""),
                param="path",
            )
        if text is not None and not name:
            raise ValidationError('"text" needs a "name" for the source', param="name")
        ingestor = Ingestor(self.store, self.embedder, self.settings, progress=progress)
        root = self.settings.workspace if spec.confined else None
        if path is not None:
            result = await to_thread.run_sync(
                lambda: ingestor.ingest_path(path, name=name, tags=tags, root=root)
            )
        elif url is not None:
            result = await to_thread.run_sync(
                lambda: ingestor.ingest_url(url, name=name, tags=tags)
            )
        else:
            result = await to_thread.run_sync(
                lambda: ingestor.ingest_text(text or "", name=name or "", tags=tags)
            )
        problem = await self.summarise([result]) if spec.summarise else None
        return result, problem

    async def summarise(self, results: Sequence[IngestResult]) -> str | None:
        """`NixxService.summarise_sources` (see there)."""
        from nixx.ingest.summary import summarise as summarise_source

        todo = [r for r in results if r.summary_input]
        if not todo:
            return None
        result = todo[0]
        try:
            model = await self.calls.model()
            limit = await self.calls.input_chars(model)
            for result in todo:
                summary = await summarise_source(
                    self.calls.llm, model, result.source.name, result.summary_input,
                    limit=limit, budget=self.calls.budget,
                )
                if summary:
                    source_id = result.source.id
                    await to_thread.run_sync(self.store.set_source_summary, source_id, summary)
                    result.source = await to_thread.run_sync(self.store.get_source, source_id)
        except BackendError as exc:
            result.summary_error = exc.message  # the source being summarised
            return exc.message
        return None

    async def search(self, query: str, limit: int) -> list[MemoryHit]:
        """The nearest chunks by vectors, re-ranked with their words
        (`nixx.memory.search.fuse_memories`), best first."""
        vector = (await to_thread.run_sync(self.embed_queries, [query]))[0]

        def find() -> list[MemoryHit]:
            depth = max(limit, fused.SOURCE_CANDIDATES)
            hits = self.store.search_memories(vector, limit=depth)
            return fused.fuse_memories(query, hits, limit=limit)

        return await to_thread.run_sync(find)

    async def listed(self, name: str | None = None) -> list[Source]:
        """Every source, newest first; with `name`, those whose name contains it
        (case-insensitive)."""
        items = await to_thread.run_sync(self.store.list_sources)
        if name is not None and name.strip():
            needle = name.strip().casefold()
            items = [s for s in items if needle in s.name.casefold()]
        return items
