"""`NixxService`: the memory services behind every shell (the server's routes, and any
other front end). It holds the settings, the store, the embedder, the LLM client and the
tool registry, and runs blocking store and embedder calls in worker threads so that the
event loop never waits on them.

    service = NixxService(settings, store, embedder, llm, tools)
    ctx = await service.context(query)          # the system prompt of a turn
    async for event in service.turn(body, origin="api"): ...
    await service.summarise_now(tags=["db"])
    await service.close()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import numpy as np
from anyio import to_thread

from nixx.config import Settings
from nixx.embed.base import Embedder
from nixx.errors import BackendError, NixxError, NotFound, ValidationError
from nixx.llm.client import ChatClient
from nixx.memory import intent as intent_state
from nixx.memory import semantic
from nixx.memory.background import BackgroundJobs
from nixx.memory.episodic import Episodic
from nixx.memory.prompts import SOURCE_SUMMARY_PROMPT, SYSTEM_PROMPT
from nixx.memory.recall import RecallContext, build_system_prompt, default_threshold
from nixx.memory.row_vectors import RowVectors
from nixx.memory.summarize import merge_tags, select_window, summarise
from nixx.store.base import MemoryStore
from nixx.store.records import BufferHit, BufferRow, MemoryHit, Source, Summary, SummaryHit

log = logging.getLogger(__name__)
T = TypeVar("T")

SUMMARY_JOB = "summary"
INTENT_JOB = "intent"


class NixxService:
    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        embedder: Embedder,
        llm: ChatClient,
        tools: Any | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.tools = tools
        self.episodic = Episodic(settings, store)
        self.jobs = BackgroundJobs()
        # every buffer row's vector, made in a thread of its own (started by the server)
        self.row_vectors = RowVectors(store, self._embed_sync)
        self._bound = False
        self._models: list[str] | None = None
        self.recall_error: str | None = None
        self._writes: set[asyncio.Task[Any]] = set()
        self._summary_failures = 0
        self._summary_skip = 0

    async def close(self) -> None:
        await self.run(self.row_vectors.close)
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        await self.jobs.close()

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run `coro` as its own task, kept alive until done (writes that must finish
        even when the request that started them is cancelled)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    # ---- helpers ----------------------------------------------------------------------
    @staticmethod
    async def run(fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking call in a worker thread."""
        return await to_thread.run_sync(fn, *args)

    @property
    def base_prompt(self) -> str:
        return self.settings.system_prompt or SYSTEM_PROMPT

    @property
    def threshold(self) -> float:
        if self.settings.recall_threshold is not None:
            return self.settings.recall_threshold
        return default_threshold(self.embedder.model)

    def _embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.embedder.embed(list(texts))
        if not self._bound:
            self.store.bind_embedder(self.embedder.model, int(vectors.shape[1]))
            self._bound = True
        return vectors

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self.run(self._embed_sync, texts)

    async def resolve_model(self, requested: str | None) -> str:
        """NIXX_CHAT_MODEL, else the model the client asked for, else the backend's first."""
        if self.settings.chat_model:
            return self.settings.chat_model
        if requested:
            return requested
        if not self._models:
            data = await self.llm.list_models()
            self._models = [str(m.get("id")) for m in data["data"] if m.get("id")]
        if not self._models:
            raise BackendError(
                f"the LLM backend at {self.llm.base_url} lists no models; set NIXX_CHAT_MODEL"
            )
        return self._models[0]

    async def models(self) -> dict[str, Any]:
        data = await self.llm.list_models()
        self._models = [str(m.get("id")) for m in data["data"] if m.get("id")]
        return data

    async def model(self, model_id: str) -> dict[str, Any]:
        """One model of the backend's list, in OpenAI's `model` shape."""
        data = await self.models()
        for entry in data["data"]:
            if str(entry.get("id")) == model_id:
                return {"object": "model", "created": 0, "owned_by": "nixx", **entry}
        known = ", ".join(self._models) or "none"
        raise NotFound(
            f"the backend at {self.settings.chat_base_url} has no model {model_id!r} "
            f"(it has: {known})",
            param="model",
        )

    # ---- recall -----------------------------------------------------------------------
    def _context_sync(
        self, query_vec: np.ndarray | None, before_id: int | None, query: str | None
    ) -> RecallContext:
        intent = intent_state.text(self.store)
        enabled = self.episodic.recall_enabled()
        hits: list[SummaryHit] = []
        if enabled and query_vec is not None and self.settings.recall_limit > 0:
            hits = self._recall(query_vec, before_id)
        return self.recall_context(intent, enabled, hits, before_id, query)

    def recall_context(
        self,
        intent: str | None,
        enabled: bool,
        hits: list[SummaryHit],
        before_id: int | None,
        query: str | None,
    ) -> RecallContext:
        return RecallContext(
            system_prompt=build_system_prompt(self.base_prompt, intent, hits),
            base_prompt=self.base_prompt,
            intent=intent,
            hits=hits,
            threshold=self.threshold,
            recall_enabled=enabled,
            query=query,
            before_buffer_id=before_id,
        )

    # Filtering by buffer id inside the store costs far more than a plain vector search
    # (measured: bench/bench_turn.py), and the summaries it leaves out — those of the
    # history the client sent — are few. So recall runs a plain search for 4x the limit
    # (`recall_wide`), filters it here (`recall_pick`), and uses the store's filter only
    # when that left too few (`recall_filtered`).
    def recall_wide(self, query_vec: np.ndarray) -> tuple[list[SummaryHit], int]:
        """(the best 4 x limit summaries at or above the threshold, last summarised id)."""
        limit = self.settings.recall_limit
        wide = self.store.search_summaries(query_vec, limit=limit * 4, threshold=self.threshold)
        return wide, self.store.last_summarised_id()

    def recall_pick(
        self, wide: list[SummaryHit], last_summarised: int, before_id: int | None
    ) -> list[SummaryHit] | None:
        """The recalled summaries from `recall_wide`'s answer, or None when only the
        store's filtered search can tell."""
        limit = self.settings.recall_limit
        if before_id is None or before_id > last_summarised:
            return wide[:limit]
        kept = [h for h in wide if h.summary.end_buffer_id < before_id]
        if len(kept) >= limit or len(wide) < limit * 4:
            return kept[:limit]
        return None

    def recall_filtered(self, query_vec: np.ndarray, before_id: int) -> list[SummaryHit]:
        return self.store.search_summaries(
            query_vec,
            limit=self.settings.recall_limit,
            threshold=self.threshold,
            before_buffer_id=before_id,
        )

    def _recall(self, query_vec: np.ndarray, before_id: int | None) -> list[SummaryHit]:
        """Summaries at or above the threshold ending before `before_id`, best first."""
        wide, last = self.recall_wide(query_vec)
        hits = self.recall_pick(wide, last, before_id)
        if hits is None:
            assert before_id is not None
            hits = self.recall_filtered(query_vec, before_id)
        return hits

    def embed_query_sync(self, query: str | None) -> np.ndarray | None:
        """The query vector for recall, or None (no query, or the embedder failing: a turn
        goes on without recall rather than fail; `recall_error` says why)."""
        if not query or not query.strip():
            return None
        try:
            vec = self._embed_sync([query])[0]
        except NixxError as exc:
            self.recall_error = exc.message
            log.warning("recall skipped: %s", exc.message)
            return None
        self.recall_error = None
        return vec

    async def embed_query(self, query: str | None) -> np.ndarray | None:
        return await self.run(self.embed_query_sync, query)

    async def context(
        self,
        query: str | None = None,
        *,
        history_messages: int | None = None,
        query_vec: np.ndarray | None = None,
        before_id: int | None = None,
    ) -> RecallContext:
        """The system prompt a turn sends. With no `query`, the newest user message of the
        current session is used (what the next turn would recall against)."""
        if query is None:
            # the newest user message of the session; a client continuing the session
            # sends all of it, so summaries from the session start on are left out
            start = await self.run(self.episodic.session_start)
            rows = await self.run(lambda: self.store.last_buffer_rows(20, after_id=start - 1))
            users = [r for r in rows if r.role == "user"]
            query = users[-1].content if users else None
            if before_id is None and history_messages is None:
                before_id = start
        if before_id is None:
            before_id = await self.run(self.episodic.oldest_in_history, history_messages or 0)
        if query_vec is None and await self.run(self.episodic.recall_enabled):
            query_vec = await self.embed_query(query)
        return await self.run(self._context_sync, query_vec, before_id, query)

    # ---- the chat turn ----------------------------------------------------------------
    def turn(
        self,
        body: dict[str, Any],
        origin: str = "api",
        info: dict[str, Any] | None = None,
        *,
        agent: str | None = None,
    ) -> AsyncIterator[Any]:
        """Run one chat turn; yields `nixx.memory.turn` events (see there). `agent`: the nxc
        persona the turn runs for (recorded on its buffer rows; no nixx tools offered)."""
        from nixx.memory.turn import run_turn

        return run_turn(self, body, origin, info, agent=agent)

    def after_turn(self) -> None:
        """Schedule the background work a new buffer row may make due."""
        self.jobs.schedule(SUMMARY_JOB, self._auto_summary)
        self.jobs.schedule(INTENT_JOB, self._auto_intent)
        self.row_vectors.notify()

    # ---- summaries --------------------------------------------------------------------
    def _max_transcript_chars(self) -> int:
        # Leave a quarter of the context for the prompt and the answer.
        return max(2000, self.settings.chat_context_length * 3)

    async def _summarise_window(self, rows: Any, tags: Sequence[str]) -> Summary:
        model = await self.resolve_model(None)
        draft = await summarise(self.llm, model, rows, max_chars=self._max_transcript_chars())
        vector = (await self.embed([draft.summary]))[0]
        return await self.run(
            lambda: self.store.add_summary(
                draft.summary,
                vector,
                tags=merge_tags(tags, draft.tags),
                entities=draft.entities,
                start_buffer_id=rows[0].id,
                end_buffer_id=rows[-1].id,
            )
        )

    async def _auto_summary(self) -> None:
        """Summarise every due window, oldest first; stop at the first failure (the window
        stays unsummarised and is retried after a later turn). After consecutive failures
        the automatic attempts back off: 1, 3, 7 … (at most 63) turns are skipped, so a
        broken backend is not asked three times per turn; a manual summary always tries."""
        if self._summary_skip > 0:
            self._summary_skip -= 1
            return
        try:
            await self._summarise_due()
        except Exception:
            self._summary_failures += 1
            self._summary_skip = min(2 ** (self._summary_failures - 1) - 1, 63)
            raise
        self._summary_failures = 0

    async def _summarise_due(self) -> None:
        for _ in range(100):  # bounded: each pass consumes at least one row
            due, rows = await self.run(self.episodic.summary_due)
            if not due:
                return
            interval = await self.run(self.episodic.interval)
            window = select_window(rows, min_words=interval, max_chars=self._max_transcript_chars())
            summary = await self._summarise_window(window, [])
            log.info(
                "summary %s covers buffer %s..%s",
                summary.id,
                summary.start_buffer_id,
                summary.end_buffer_id,
            )

    async def summarise_now(self, tags: Sequence[str] = ()) -> Summary:
        """Summarise the unsummarised window now (waits for a running background summary
        first, so two never overlap)."""
        await self._wait_for(SUMMARY_JOB)
        rows = await self.run(self.store.unsummarised)
        if not rows:
            raise ValidationError(
                "nothing to summarise: every buffer message is already in a summary"
            )
        window = select_window(rows, min_words=None, max_chars=self._max_transcript_chars())
        return await self._summarise_window(window, list(tags))

    async def _wait_for(self, kind: str) -> None:
        while self.jobs.running(kind):
            await asyncio.sleep(0.02)

    # ---- intent -----------------------------------------------------------------------
    async def _auto_intent(self) -> None:
        start = await self.run(self.episodic.session_start)
        due = await self.run(
            lambda: intent_state.due(
                self.store, session_start=start, interval=self.settings.intent_interval
            )
        )
        if due:
            await self.derive_intent()

    async def derive_intent(self) -> dict[str, Any]:
        start = await self.run(self.episodic.session_start)
        rows = await self.run(
            lambda: self.store.last_buffer_rows(self.settings.intent_lookback, after_id=start - 1)
        )
        if not rows:
            raise ValidationError("no messages in the current session to derive an intent from")
        model = await self.resolve_model(None)
        data = await self.llm.create(
            {
                "model": model,
                "messages": intent_state.intent_messages(rows),
                "temperature": intent_state.TEMPERATURE,
            }
        )
        answer = (data["choices"][0].get("message") or {}).get("content") or ""
        text = intent_state.clean_answer(answer)

        def save() -> dict[str, Any]:
            value = intent_state.set_intent(self.store, text, source="derived")
            intent_state.mark_derived(self.store, rows[-1].id)
            return value

        return await self.run(save)

    async def get_intent(self) -> dict[str, Any] | None:
        return await self.run(intent_state.get, self.store)

    async def set_intent(self, text: str) -> dict[str, Any]:
        return await self.run(lambda: intent_state.set_intent(self.store, text))

    async def clear_intent(self) -> None:
        await self.run(intent_state.clear, self.store)

    # ---- episodic search and status ----------------------------------------------------
    async def status(self) -> dict[str, Any]:
        data = await self.run(self.episodic.status)
        data["threshold"] = self.threshold
        data["recall_limit"] = self.settings.recall_limit
        data["context_length"] = self.settings.chat_context_length
        data["summary_running"] = self.jobs.running(SUMMARY_JOB)
        data["summary_error"] = self.jobs.last_error.get(SUMMARY_JOB)
        data["intent_error"] = self.jobs.last_error.get(INTENT_JOB)
        data["recall_error"] = self.recall_error
        data["buffer_vectors"] = await self.run(self.row_vectors.status)
        return data

    async def search(self, query: str, limit: int) -> tuple[list[BufferHit], list[SummaryHit]]:
        """Full-text over the buffer and vectors over summaries (both, as the seed says)."""
        buffer_hits = await self.run(self.store.search_buffer, query, limit)
        vector = (await self.embed([query]))[0]
        summary_hits = await self.run(
            lambda: self.store.search_summaries(vector, limit=limit, threshold=None)
        )
        return buffer_hits, summary_hits

    # ---- sources ----------------------------------------------------------------------
    async def create_source(
        self, name: str, start_id: int | None, end_id: int | None
    ) -> tuple[Source, str | None]:
        """Store a buffer range as a named source; returns (source, summary problem)."""
        plan = await self.run(semantic.plan_source, self.store, name, start_id, end_id)
        chunks = await self.run(lambda: semantic.embed_chunks(_BoundEmbedder(self), plan))
        summary: str | None = None
        problem: str | None = None
        try:
            model = await self.resolve_model(None)
            data = await self.llm.create(
                {
                    "model": model,
                    "messages": [
                        {"role": "system", "content": SOURCE_SUMMARY_PROMPT},
                        {"role": "user", "content": plan.text[: self._max_transcript_chars()]},
                    ],
                    "temperature": 0.3,
                }
            )
            summary = ((data["choices"][0].get("message") or {}).get("content") or "").strip()
            summary = summary or None
        except BackendError as exc:
            problem = exc.message
        source = await self.run(
            lambda: self.store.add_source(
                plan.name,
                "buffer",
                chunks,
                summary=summary,
                start_id=plan.start_id,
                end_id=plan.end_id,
            )
        )
        return source, problem

    async def search_sources(self, query: str, limit: int) -> list[MemoryHit]:
        vector = (await self.embed([query]))[0]
        return await self.run(lambda: self.store.search_memories(vector, limit=limit))


    # ---- one door per use case for the shells (routes, web page, CLI, MCP) -------------
    async def ingest(
        self,
        *,
        path: str | None = None,
        url: str | None = None,
        text: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | str | None = None,
        progress: Callable[[Any], None] | None = None,
    ) -> tuple[Any, str | None]:
        """Ingest one of `path` (inside the workspace), `url` or `text` (needs `name`),
        then ask the LLM for the source's display summary. Returns the
        `nixx.ingest.pipeline.IngestResult` and why there is no summary (None if fine)."""
        from nixx.ingest.pipeline import Ingestor
        from nixx.ingest.summary import summarise as summarise_source

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
        if path is not None:
            result = await self.run(
                lambda: ingestor.ingest_path(path, name=name, tags=tags, root=self.settings.workspace)
            )
        elif url is not None:
            result = await self.run(lambda: ingestor.ingest_url(url, name=name, tags=tags))
        else:
            result = await self.run(
                lambda: ingestor.ingest_text(text or "", name=name or "", tags=tags)
            )
        problem = None
        if result.summary_input:  # changed, or unchanged but still without a summary
            try:
                model = await self.resolve_model(None)
                summary = await summarise_source(
                    self.llm, model, result.source.name, result.summary_input
                )
            except BackendError as exc:
                problem = exc.message
            else:
                if summary:
                    source_id = result.source.id
                    await self.run(self.store.set_source_summary, source_id, summary)
                    result.source = await self.run(self.store.get_source, source_id)
        return result, problem

    async def list_sources(self) -> list[Source]:
        return await self.run(self.store.list_sources)

    async def get_source(self, source_id: int) -> Source:
        return await self.run(self.store.get_source, source_id)

    async def source_chunks(self, source_id: int) -> list[Any]:
        return await self.run(self.store.source_chunks, source_id)

    async def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        return await self.run(lambda: self.store.list_summaries(limit=limit, offset=offset))

    async def configure(
        self, *, interval: int | None = None, recall: bool | None = None
    ) -> dict[str, Any]:
        """Change the summary interval and/or recall (kept across restarts); the status after."""
        await self.run(lambda: self.episodic.configure(interval=interval, recall=recall))
        if interval is not None:
            self.after_turn()  # a lower interval may make a summary due now
        return await self.status()

    async def buffer_page(self, *, before_id: int | None, limit: int) -> list[BufferRow]:
        """The newest `limit` buffer rows (markers included) with id < `before_id`, oldest
        first: keyset paging by id, as fast on the last page of 100,000 rows as the first."""

        def work() -> list[BufferRow]:
            end = (before_id if before_id is not None else self.store.buffer_stats()["max_id"] + 1) - 1
            width = limit
            while True:
                start = max(1, end - width + 1)
                rows = self.store.get_buffer(start, end) if end >= 1 else []
                if len(rows) >= limit or start == 1:
                    return rows[-limit:]
                width *= 4  # ids have gaps where rows were deleted

        return await self.run(work)

    async def buffer_around(self, row_id: int, *, before: int = 10, after: int = 10) -> list[BufferRow]:
        """The rows around `row_id` (markers included), for a transcript view of a hit."""
        start = max(1, row_id - before)
        return await self.run(self.store.get_buffer, start, row_id + after)


class _BoundEmbedder(Embedder):
    """The service's embedder, binding the store on first use (for sync helpers)."""

    def __init__(self, service: NixxService) -> None:
        self._service = service
        self.model = service.embedder.model

    @property  # type: ignore[override]
    def dim(self) -> int:  # type: ignore[override]
        return int(self._service.embedder.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._service._embed_sync(texts)


__all__ = ["NixxService"]
