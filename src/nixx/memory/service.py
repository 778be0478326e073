"""`NixxService`: the memory services behind every shell (the server's routes, and any
other front end). It holds the settings, the store, the embedder, the LLM client and the
tool registry, and runs blocking store and embedder calls in worker threads so that the
event loop never waits on them.

    service = NixxService(settings, store, embedder, llm, tools)
    ctx = await service.context(query)          # the system prompt of a turn
    async for event in service.turn(body, origin="api"): ...
    await service.summarise_now(tags=["db"])
    await service.close()

    async with open_service(settings) as service: ...   # opens and closes all of it

It builds its collaborators once — the `Episodic` buffer, the per-turn `Recall`
(`nixx.memory.recall`) and the `TurnParts` each turn is handed (`nixx.memory.turn`) — and
is the one door of every shell: a shell calls a method named for its use case, never
what the service holds (`tests/test_architecture.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from anyio import to_thread

from nixx.config import Settings, config_file_note
from nixx.embed.base import Embedder
from nixx.errors import BackendError, NotFound, ValidationError
from nixx.llm.client import ChatClient
from nixx.memory import forget as forgetting
from nixx.memory import intent as intent_state
from nixx.memory import search as fused
from nixx.memory import semantic
from nixx.memory.background import BackgroundJobs
from nixx.memory.episodic import Episodic
from nixx.memory.layout import MemoryTrail
from nixx.memory.prompts import SOURCE_SUMMARY_PROMPT
from nixx.memory.recall import Recall, RecallContext
from nixx.memory.row_vectors import RowVectors
from nixx.memory.summarize import MAX_TOKENS as SUMMARY_MAX_TOKENS
from nixx.memory.summarize import PROMPT_TOKENS as SUMMARY_PROMPT_TOKENS
from nixx.memory.summarize import merge_tags, select_window, summarise
from nixx.memory.turn import TurnParts, run_turn
from nixx.priority import Foreground
from nixx.store.base import MemoryStore
from nixx.store.forgetting import REBUILD_KEY, RESUMMARISE_KEY, ForgetLogEntry, ForgetResult
from nixx.store.records import BufferHit, BufferRow, MemoryHit, Source, Summary, SummaryHit

log = logging.getLogger(__name__)
T = TypeVar("T")

SUMMARY_JOB = "summary"
# A search result that shares no word with the query needs this share of the recall row
# floor as cosine (0.16 with MiniLM: bench/bench_recall.py loses no evidence row at 0.15,
# 0.011 of R@10 at 0.2; docs/performance.md)
SEARCH_FLOOR_SHARE = 0.4
INTENT_JOB = "intent"
SOURCES_JOB = "sources"
RESPONSE_KEY = "response:"  # state key prefix: a stored response id -> its answer row id
MAX_RESPONSE_CHAIN = 10_000  # previous_response_id links walked at most


@contextlib.asynccontextmanager
async def open_service(settings: Settings, *, tools: bool = False) -> AsyncIterator[NixxService]:
    """The service over what `settings` name — the store (``NIXX_DB_URL``), the embedder,
    one LLM client and, with `tools`, the tool registry — all closed after. The server's
    lifespan opens one (with tools); so does each one-shot CLI verb (`nixx ingest`, `nixx
    forget`)."""
    from nixx.embed import make_embedder
    from nixx.store import open_store

    store = await to_thread.run_sync(open_store, settings.database_url)
    embedder = None
    llm = None
    try:
        embedder = make_embedder(settings)
        llm = ChatClient(
            settings.chat_base_url,
            api_key=settings.chat_api_key,
            timeout=settings.chat_timeout,
            slots=settings.chat_slots or None,
            quiet=settings.background_quiet,
            where=config_file_note("chat_base_url"),
        )
        registry = None
        if tools:
            from nixx.tools.registry import ToolRegistry

            registry = ToolRegistry(settings, store)
        service = NixxService(settings, store, embedder, llm, registry)
        try:
            yield service
        finally:
            await service.close()
    finally:
        if llm is not None:
            await llm.aclose()
        if embedder is not None:
            embedder.close()
        await to_thread.run_sync(store.close)


class _Stale(Exception):
    """A forget ran while a background job read the rows it was about to store."""


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
        # searches and recalls are marked busy here; background embedding waits them out
        self.foreground = Foreground()
        self.recall = Recall(
            settings, store, self.episodic, self._embed_queries_sync, embedder.model,
            lambda: self.ranker_pool, self.foreground,
        )
        self._turn_parts = TurnParts(
            settings=settings,
            recall=self.recall,
            episodic=self.episodic,
            llm=llm,
            tools=tools,
            intent=functools.partial(intent_state.text, store),
            resolve_model=self.resolve_model,
            spawn=self._spawn,
            after_turn=self._after_turn,
            trail=MemoryTrail(),
            context_length=self.context_length,
        )
        self.jobs = BackgroundJobs()
        # every buffer row's vector, made in a thread of its own (started by the server)
        self.row_vectors = RowVectors(store, self._embed_sync, foreground=self.foreground)
        self._bound = False
        self._models: list[str] | None = None
        self._last_model = ""  # the model of the newest turn or own call (for the status)
        self._writes: set[asyncio.Task[Any]] = set()
        self._summary_failures = 0
        self._summary_skip = 0
        # Forgetting vs. background writes: a forget bumps the epoch under the lock; a job
        # that read rows under an older epoch drops its result instead of storing text
        # from a deleted row (`_store_if_current`).
        self._forget_lock = asyncio.Lock()
        self._forget_epoch = 0
        self._ranker_pool: ThreadPoolExecutor | None = None

    @property
    def ranker_pool(self) -> ThreadPoolExecutor:
        """Threads for the rankers that run beside a search's embedding (full text, the
        summary vectors: `nixx.memory.search.run_rankers`). Its tasks never wait for
        each other, so a few threads serve any number of concurrent searches."""
        if self._ranker_pool is None:
            self._ranker_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="nixx-rank")
        return self._ranker_pool

    async def start(self) -> None:
        """What the server does once when it starts: the thread that embeds buffer rows
        without a vector (backfill), the repairs a forget left queued, and the vector
        indexes warmed (not in the first search after a restart)."""
        self.row_vectors.start()
        await self.resume_repairs()
        self.store.warm_vector_indexes()

    async def close(self) -> None:
        await self.run(self.row_vectors.close)
        if self._ranker_pool is not None:
            self._ranker_pool.shutdown(wait=False)
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        await self.jobs.close()

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
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

    def _embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        return self._bind(self.embedder.embed(list(texts)))

    def _embed_queries_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries (`Embedder.embed_queries`: maybe cheaper weights)."""
        return self._bind(self.embedder.embed_queries(list(texts)))

    def _bind(self, vectors: np.ndarray) -> np.ndarray:
        if not self._bound:
            self.store.bind_embedder(self.embedder.model, int(vectors.shape[1]))
            self._bound = True
        return vectors

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self.run(self._embed_sync, texts)

    @property
    def embedding_model(self) -> str:
        return self.embedder.model

    async def embed_for_client(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for a client's texts (`POST /v1/embeddings`): the embedder only, the
        store is not bound to it."""
        return await self.run(self.embedder.embed, texts)

    async def resolve_model(self, requested: str | None) -> str:
        """NIXX_CHAT_MODEL, else the model the client asked for, else the backend's first."""
        if self.settings.chat_model:
            return self.settings.chat_model
        if requested:
            return requested
        if not self._models:
            data = await self.llm.list_models(fresh=False)
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
        known = ", ".join(self._models or []) or "none"
        raise NotFound(
            f"the backend at {self.settings.chat_base_url} has no model {model_id!r} "
            f"(it has: {known})",
            param="model",
        )

    # ---- recall -----------------------------------------------------------------------
    async def context(
        self,
        query: str | None = None,
        *,
        history_messages: int | None = None,
        before_id: int | None = None,
    ) -> RecallContext:
        """The system prompt a turn sends (`Recall.for_next_turn`). With no `query`, the
        newest user message of the current session is used (what the next turn would
        recall against)."""
        return await self.run(
            lambda: self.recall.for_next_turn(
                query, history_messages=history_messages, before_id=before_id
            )
        )

    # ---- the chat turn ----------------------------------------------------------------
    def turn(
        self,
        body: dict[str, Any],
        origin: str = "api",
        info: dict[str, Any] | None = None,
        *,
        agent: str | None = None,
        answer_meta: dict[str, Any] | None = None,
        remembered: Callable[[str], str] | None = None,
    ) -> AsyncIterator[Any]:
        """Run one chat turn; yields `nixx.memory.turn` events (see there). `agent`: the nxc
        persona the turn runs for (recorded on its buffer rows; no nixx tools offered).
        `answer_meta`: more keys for the answer's row (`save_response` reads ``response``);
        `remembered`: what of the user's text is stored and recalled against (see there)."""
        return run_turn(
            self._turn_parts, body, origin, info, agent=agent, answer_meta=answer_meta,
            remembered=remembered,
        )

    # ---- stored responses (the Responses API's `previous_response_id`) ----------------
    async def save_response(self, response_id: str, row_id: int) -> None:
        """Let `response_id` be continued: a pointer to the answer's buffer row, whose
        ``meta.response`` (``previous``: the response it continued, ``input``: the messages
        the request added) was written by the turn. The text lives only in the buffer
        rows, so forgetting a row forgets the response with it."""
        await self.run(self.store.set_state, RESPONSE_KEY + response_id, row_id)

    async def response_history(self, response_id: str) -> list[dict[str, Any]]:
        """The conversation up to and including stored response `response_id` (chat
        messages, oldest first), by walking ``previous`` back. A response nixx does not
        hold (never stored, or its row forgotten) is `NotFound`; an older link that was
        forgotten ends the walk there (what is forgotten stays forgotten)."""

        def work() -> list[dict[str, Any]]:
            parts: list[list[dict[str, Any]]] = []
            rid: str | None = response_id
            seen: set[str] = set()
            while rid and rid not in seen and len(seen) < MAX_RESPONSE_CHAIN:
                seen.add(rid)
                row_id = self.store.get_state(RESPONSE_KEY + rid)
                rows = self.store.get_buffer(row_id, row_id) if isinstance(row_id, int) else []
                record = rows[0].meta.get("response") if rows else None
                if not isinstance(record, dict) or record.get("id") != rid:
                    break
                calls = [
                    {"id": c.get("id"), "type": "function",
                     "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
                    for c in rows[0].meta.get("tool_calls") or []
                ]
                answer: dict[str, Any] = {"role": "assistant", "content": rows[0].content or None}
                if calls:
                    answer["tool_calls"] = calls
                parts.append([*(record.get("input") or []), answer])
                rid = record.get("previous")
            if not parts:
                raise NotFound(
                    f"no stored response {response_id!r}: it was never stored (store: false, "
                    "or another server), or it was forgotten",
                    param="previous_response_id",
                )
            return [m for part in reversed(parts) for m in part]

        return await self.run(work)

    def _after_turn(self) -> None:
        """Schedule the background work a new buffer row may make due."""
        self.jobs.schedule(SUMMARY_JOB, self._auto_summary)
        self.jobs.schedule(INTENT_JOB, self._auto_intent)
        self.row_vectors.notify()

    async def context_length(self, model: str) -> tuple[int, str]:
        """(the model's context length in tokens, where that came from): what the backend
        says (`nixx.llm.facts`; the smaller of it and ``chat_context_length`` when that is
        set), else ``chat_context_length``."""
        self._last_model = model
        facts = await self.llm.facts(model)
        return self.context_length_of((facts.context_length, facts.source))

    def context_length_of(self, learned: tuple[int | None, str]) -> tuple[int, str]:
        setting = self.settings.chat_context_length
        explicit = "chat_context_length" in self.settings.model_fields_set
        length, source = learned
        if length:
            if explicit and setting < length:
                return setting, "chat_context_length"
            return length, source
        return setting, "chat_context_length" if explicit else "chat_context_length (default)"

    # ---- summaries --------------------------------------------------------------------
    async def _max_transcript_chars(self, model: str | None = None) -> int:
        """The input one of nixx's own calls may send: the context less the answer's
        bound and the prompt, at a cautious 3 characters a token (small models' tokenisers
        give fewer than English's 4)."""
        model = model or await self.resolve_model(None)
        length, _ = await self.context_length(model)
        room = length - SUMMARY_MAX_TOKENS - SUMMARY_PROMPT_TOKENS
        return max(1000, room * 3)

    async def _summarise_window(
        self,
        rows: Any,
        tags: Sequence[str],
        epoch: int,
        then: Callable[[], Any] | None = None,
    ) -> Summary:
        model = await self.resolve_model(None)
        draft, rows = await summarise(
            self.llm,
            model,
            rows,
            max_chars=await self._max_transcript_chars(model),
            budget=self.settings.background_timeout,
        )
        vector = (await self.embed([draft.summary]))[0]

        def store() -> Summary:
            summary = self.store.add_summary(
                draft.summary,
                vector,
                tags=merge_tags(tags, draft.tags),
                entities=draft.entities,
                start_buffer_id=rows[0].id,
                end_buffer_id=rows[-1].id,
            )
            if then is not None:
                then()
            return summary

        return await self._store_if_current(epoch, store)

    async def _store_if_current(self, epoch: int, fn: Callable[[], T]) -> T:
        """Run the write `fn` unless a forget ran since `epoch` (then `_Stale`)."""
        async with self._forget_lock:
            if epoch != self._forget_epoch:
                raise _Stale
            return await self.run(fn)

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
        await self._resummarise_pending()
        for _ in range(100):  # bounded: each pass consumes at least one row
            epoch = self._forget_epoch
            due, rows = await self.run(self.episodic.summary_due)
            if not due:
                return
            interval = await self.run(self.episodic.interval)
            window = select_window(
                rows, min_words=interval, max_chars=await self._max_transcript_chars()
            )
            try:
                summary = await self._summarise_window(window, [], epoch)
            except _Stale:
                continue
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
        await self._resummarise_pending()
        for _ in range(10):
            epoch = self._forget_epoch
            rows = await self.run(self.store.unsummarised)
            if not rows:
                raise ValidationError(
                    "nothing to summarise: every buffer message is already in a summary"
                )
            window = select_window(
                rows, min_words=None, max_chars=await self._max_transcript_chars()
            )
            try:
                return await self._summarise_window(window, list(tags), epoch)
            except _Stale:
                continue
        raise ValidationError("messages kept being forgotten while summarising; try again")

    async def _resummarise_pending(self) -> None:
        """Summarise again, oldest first, each window whose summary was removed because
        it covered a forgotten row, from the rows that remain (state ``forget.resummarise``,
        so the work survives a restart). A window with no row left is dropped."""
        for _ in range(1000):
            epoch = self._forget_epoch
            queue = await self.run(self.store.get_state, RESUMMARISE_KEY)
            if not queue:
                return
            start, end = int(queue[0][0]), int(queue[0][1])

            def done(window: tuple[int, int] = (start, end)) -> None:
                self.store.update_state(
                    RESUMMARISE_KEY,
                    lambda cur: [w for w in (cur or []) if tuple(w) != window] or None,
                )

            rows = [
                r for r in await self.run(self.store.get_buffer, start, end) if r.role != "marker"
            ]
            try:
                if not rows:
                    await self._store_if_current(epoch, done)
                    continue
                summary = await self._summarise_window(rows, [], epoch, then=done)
            except _Stale:
                continue
            log.info(
                "summary %s re-covers buffer %s..%s after a forget",
                summary.id,
                summary.start_buffer_id,
                summary.end_buffer_id,
            )

    async def _wait_for(self, kind: str) -> None:
        while self.jobs.running(kind):
            await asyncio.sleep(0.02)

    # ---- intent -----------------------------------------------------------------------
    async def _auto_intent(self) -> None:
        current = await self.run(intent_state.get, self.store)
        if current and current.get("source") == "manual":
            return  # a manual intent stays until it is cleared or re-derived on request
        start = await self.run(self.episodic.session_start)
        due = await self.run(
            lambda: intent_state.due(
                self.store, session_start=start, interval=self.settings.intent_interval
            )
        )
        if due:
            await self.derive_intent()

    async def derive_intent(self) -> dict[str, Any]:
        for _ in range(10):
            epoch = self._forget_epoch
            start = await self.run(self.episodic.session_start)
            rows = await self.run(
                functools.partial(
                    self.store.last_buffer_rows, self.settings.intent_lookback, after_id=start - 1
                )
            )
            if not rows:
                raise ValidationError("no messages in the current session to derive an intent from")
            model = await self.resolve_model(None)
            data = await self.llm.background(
                {
                    "model": model,
                    "messages": intent_state.intent_messages(rows),
                    "temperature": intent_state.TEMPERATURE,
                    "max_tokens": intent_state.MAX_TOKENS,
                },
                budget=self.settings.background_timeout,
                what="the intent",
            )
            answer = (data["choices"][0].get("message") or {}).get("content") or ""
            text = intent_state.clean_answer(answer)

            def save(rows: list[BufferRow] = rows, text: str = text) -> dict[str, Any]:
                value = intent_state.set_intent(
                    self.store, text, source="derived", rows=(rows[0].id, rows[-1].id)
                )
                intent_state.mark_derived(self.store, rows[-1].id)
                return value

            try:
                return await self._store_if_current(epoch, save)
            except _Stale:
                continue
        raise ValidationError("messages kept being forgotten while deriving the intent; try again")

    async def own_completion(
        self, messages: list[dict[str, Any]], *, max_tokens: int, what: str,
        model: str | None = None,
    ) -> tuple[str, str]:
        """(the answer, the model) of one of nixx's own completions that another process
        asks for (a channel round's summary, from nxc): through the backend gate like the
        server's own summaries — bounded by `max_tokens` and ``background_timeout``, run
        only while no user's turn runs. Nothing is stored."""
        chosen = await self.resolve_model(model)
        data = await self.llm.background(
            {"model": chosen, "messages": messages, "max_tokens": max_tokens},
            budget=self.settings.background_timeout,
            what=what,
        )
        content = (data["choices"][0].get("message") or {}).get("content") or ""
        return str(content), str(data.get("model") or chosen)

    async def _rederive_intent(self) -> None:
        """After a forget cleared the intent: derive it from what remains (or leave it
        cleared when the session has no message left)."""
        with contextlib.suppress(ValidationError):
            await self.derive_intent()

    async def get_intent(self) -> dict[str, Any] | None:
        return await self.run(intent_state.get, self.store)

    async def set_intent(self, text: str) -> dict[str, Any]:
        return await self.run(lambda: intent_state.set_intent(self.store, text))

    async def clear_intent(self) -> None:
        await self.run(intent_state.clear, self.store)

    def failing(self) -> dict[str, tuple[str, int]]:
        """The background work whose last run failed: kind -> (why, failures in a row)."""
        return {
            kind: (error, self.jobs.failures.get(kind, 1))
            for kind in (SUMMARY_JOB, INTENT_JOB)
            if (error := self.jobs.last_error.get(kind))
        }

    # ---- episodic search and status ----------------------------------------------------
    async def status(self) -> dict[str, Any]:
        data = await self.run(self.episodic.status)
        data["threshold"] = self.recall.threshold
        data["recall_limit"] = self.settings.recall_limit
        # what is known already: a status is never the one to ask the backend
        model = self.settings.chat_model or self._last_model
        known = self.llm.known_context(model)
        length, source = self.context_length_of(known)
        data["context_length"] = length
        data["context_length_source"] = source
        data["backend_slots"] = self.llm.gate.slots
        data["prefix_restores"] = self.llm.gate.restores
        data["summary_running"] = self.jobs.running(SUMMARY_JOB)
        data["summary_error"] = self.jobs.last_error.get(SUMMARY_JOB)
        data["intent_error"] = self.jobs.last_error.get(INTENT_JOB)
        data["summary_failures"] = self.jobs.failures.get(SUMMARY_JOB, 0)
        data["intent_failures"] = self.jobs.failures.get(INTENT_JOB, 0)
        data["recall_error"] = self.recall.error
        data["buffer_vectors"] = await self.run(self.row_vectors.status)
        return data

    async def search(self, query: str, limit: int) -> SearchAnswer:
        """The fused search (`nixx.memory.search`), plus the two lists the seed's API had:
        full text over the buffer and vectors over summaries. The rankers overlap
        (`nixx.memory.search.run_rankers`)."""
        depth = max(limit, fused.DEFAULT_PARAMS.depth)

        def search() -> SearchAnswer:
            with self.foreground.busy():
                # A summary ranked below `limit` among summaries can never be in the fused
                # top `limit` (rank fusion scores a summary by its rank alone): `limit` are
                # enough.
                answers = fused.run_rankers(
                    self.store,
                    query,
                    self._embed_queries_sync,
                    lambda vector: self.store.search_summaries(
                        vector, limit=limit, threshold=None
                    ),
                    pool=self.ranker_pool,
                    depth=depth,
                )
                summaries = answers.summaries or []
                results = answers.combine(
                    summaries,
                    store=self.store,
                    limit=limit,
                    min_cosine=self.recall.row_floor * SEARCH_FLOOR_SHARE,
                    params=self.recall.params,
                )
            return SearchAnswer(answers.fts[:limit], summaries[:limit], results)

        return await self.run(search)

    # ---- sources ----------------------------------------------------------------------
    async def create_source(
        self, name: str, start_id: int | None, end_id: int | None
    ) -> tuple[Source, str | None]:
        """Store a buffer range as a named source; returns (source, summary problem)."""
        plan = await self.run(semantic.plan_source, self.store, name, start_id, end_id)
        chunks = await self.run(lambda: semantic.embed_chunks(_BoundEmbedder(self), plan))
        summary, problem = await self._source_summary(plan.text)
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

    async def _source_summary(self, text: str) -> tuple[str | None, str | None]:
        """(the LLM's display summary of a source's text — all of it, in parts when it is
        longer than the context: `nixx.ingest.summary.summarise_text` —, what went wrong)."""
        from nixx.ingest.summary import summarise_text

        try:
            model = await self.resolve_model(None)
            limit = await self._max_transcript_chars(model)
            summary = await summarise_text(
                self.llm, model, SOURCE_SUMMARY_PROMPT, text, limit=limit,
                budget=self.settings.background_timeout,
            )
        except BackendError as exc:
            return None, exc.message
        return summary, None

    async def search_sources(self, query: str, limit: int) -> list[MemoryHit]:
        """Semantic memory: the nearest chunks by vectors, re-ranked with their words
        (`nixx.memory.search.fuse_memories`), best first."""
        vector = (await self.run(self._embed_queries_sync, [query]))[0]

        def find() -> list[MemoryHit]:
            depth = max(limit, fused.SOURCE_CANDIDATES)
            hits = self.store.search_memories(vector, limit=depth)
            return fused.fuse_memories(query, hits, limit=limit)

        return await self.run(find)

    async def list_sources(self, name: str | None = None) -> list[Source]:
        """Every source, newest first; with `name`, those whose name contains it
        (case-insensitive)."""
        items = await self.run(self.store.list_sources)
        if name is not None and name.strip():
            needle = name.strip().casefold()
            items = [s for s in items if needle in s.name.casefold()]
        return items

    # ---- forgetting and correcting -------------------------------------------------------
    async def forget_buffer_row(self, row_id: int) -> dict[str, Any]:
        return await self._forget("buffer", buffer_ids=[row_id])

    async def forget_buffer_range(self, start_id: int, end_id: int) -> dict[str, Any]:
        """Every row with start_id <= id <= end_id (markers included)."""
        if end_id < start_id:
            raise ValidationError(
                f"end_id ({end_id}) must be >= start_id ({start_id})", param="end_id"
            )
        rows = await self.run(self.store.get_buffer, start_id, end_id)
        if not rows:
            raise NotFound(f"the buffer has no rows between ids {start_id} and {end_id}")
        return await self._forget("buffer", buffer_ids=[r.id for r in rows])

    async def forget_summary(self, summary_id: int) -> dict[str, Any]:
        return await self._forget("summary", summary_ids=[summary_id])

    async def forget_source(self, source_id: int) -> dict[str, Any]:
        return await self._forget("source", source_ids=[source_id])

    async def forget_refs(self, refs: Sequence[str]) -> dict[str, Any]:
        """Delete the items named by references such as ``buffer:12``, ``summary:3``,
        ``source:2``, ``memory:40`` (all or nothing)."""
        if not refs:
            raise ValidationError("name at least one item (buffer:ID, summary:ID, ...)")
        grouped = forgetting.group_refs(refs)
        kinds = [k for k, arg in forgetting.REF_KINDS.items() if grouped[arg]]
        return await self._forget(kinds[0] if len(kinds) == 1 else "query", **grouped)

    async def forget_matches(self, query: str) -> dict[str, Any]:
        """A dry run: what `query` matches (buffer rows, summaries, memories)."""
        return await self.run(forgetting.matches, self.store, query)

    async def forget_query(self, query: str, ids: Sequence[str]) -> dict[str, Any]:
        """Delete exactly `ids`, each of which `query` must still match (``intent:1``:
        clear the intent, set by hand or derived, whose text matched)."""
        grouped = await self.run(forgetting.confirmed_refs, self.store, query, list(ids))
        _, with_intent = forgetting.split_intent(ids)
        if not any(grouped.values()):  # the intent alone
            async with self._forget_lock:
                self._forget_epoch += 1
                await self.run(intent_state.clear, self.store)
                scrub = await self.run(self.store.scrub)
            empty: dict[str, Any] = {"log_id": None, "kind": "query", "at": None, "buffer_ids": [],
                     "summary_ids": [], "source_ids": [], "memory_ids": [],
                     "memories_removed": 0, "resummarise": [], "rebuild_source_ids": []}
            return {"forgotten": empty, "intent_cleared": True, "disk": scrub}
        return await self._forget("query", with_intent, **grouped)

    async def forget_log(self, limit: int = 100) -> list[ForgetLogEntry]:
        return await self.run(self.store.forget_log, limit)

    async def get_summary(self, summary_id: int) -> Summary:
        return await self.run(self.store.get_summary, summary_id)

    async def update_summary(
        self,
        summary_id: int,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        entities: dict[str, list[str]] | None = None,
    ) -> Summary:
        """Correct a summary; new content is embedded again (recall finds the new text)."""
        if content is None and tags is None and entities is None:
            raise ValidationError("give at least one of content, tags, entities")
        if content is not None and not content.strip():
            raise ValidationError("content must be non-empty text", param="content")
        await self.run(self.store.get_summary, summary_id)  # 404 before embedding
        vector = None if content is None else (await self.embed([content]))[0]
        async with self._forget_lock:
            self._forget_epoch += 1  # a re-summary in flight must not undo the edit
            summary = await self.run(
                lambda: self.store.update_summary(
                    summary_id, content=content, embedding=vector, tags=tags, entities=entities
                )
            )
            await self.run(self.store.scrub)
        return summary

    async def _forget(self, kind: str, clear_intent: bool = False, /,
                      **ids: Sequence[int]) -> dict[str, Any]:
        """One deletion: the store's transaction, then the intent, then the files on
        disk; the repairs (re-summaries, source chunks, intent) run in the background.
        `clear_intent`: the intent matched the forget query and goes too (no
        re-derivation: the rows it came from may still say what was forgotten)."""
        async with self._forget_lock:
            self._forget_epoch += 1

            def work() -> tuple[ForgetResult, bool, dict[str, Any]]:
                result = self.store.forget(kind, **ids)
                cleared = forgetting.intent_from_deleted(self.store, result.buffer_ids)
                if clear_intent:
                    intent_state.clear(self.store)
                return result, cleared, self.store.scrub()

            result, intent_cleared, scrub = await self.run(work)
            self.episodic.forget_cache()
        if result.resummarise:
            self.jobs.schedule(SUMMARY_JOB, self._auto_summary_now)
        if result.rebuild_source_ids:
            self.jobs.schedule(SOURCES_JOB, self._rebuild_sources)
        if intent_cleared:
            self.jobs.schedule(INTENT_JOB, self._rederive_intent)
        return {"forgotten": result.to_dict(), "intent_cleared": intent_cleared or clear_intent,
                "disk": scrub}

    async def resume_repairs(self) -> None:
        """Schedule the repairs a forget left queued (say `nixx forget` while the LLM
        backend was down): the server calls this when it starts."""
        if await self.run(self.store.get_state, RESUMMARISE_KEY):
            self.jobs.schedule(SUMMARY_JOB, self._auto_summary_now)
        if await self.run(self.store.get_state, REBUILD_KEY):
            self.jobs.schedule(SOURCES_JOB, self._rebuild_sources)

    async def _auto_summary_now(self) -> None:
        """The summary job, without the back-off wait (a forget asked for it)."""
        self._summary_skip = 0
        await self._auto_summary()

    async def _rebuild_sources(self) -> None:
        """Re-chunk and re-embed each buffer source that lost rows to a forget, from the
        rows that remain (state ``forget.rebuild_sources``); then its display summary."""
        for _ in range(1000):
            epoch = self._forget_epoch
            queue = await self.run(self.store.get_state, REBUILD_KEY)
            if not queue:
                return
            source_id = int(queue[0])

            def done(source_id: int = source_id) -> None:
                self.store.update_state(
                    REBUILD_KEY, lambda cur: [i for i in (cur or []) if i != source_id] or None
                )

            try:
                src = await self.run(self.store.get_source, source_id)
                plan = await self.run(
                    semantic.plan_source, self.store, src.name, src.start_id, src.end_id
                )
                chunks = await self.run(semantic.embed_chunks, _BoundEmbedder(self), plan)
            except (NotFound, ValidationError):  # gone, or nothing left to chunk
                await self._store_if_current_or_skip(epoch, done)
                continue

            def replace(source_id: int = source_id, chunks: Any = chunks) -> None:
                self.store.replace_source(source_id, chunks)
                done()

            try:
                await self._store_if_current(epoch, replace)
            except _Stale:
                continue
            summary, _problem = await self._source_summary(plan.text)
            if summary:
                with contextlib.suppress(_Stale, NotFound):
                    await self._store_if_current(
                        epoch, functools.partial(self.store.set_source_summary, source_id, summary)
                    )

    async def _store_if_current_or_skip(self, epoch: int, fn: Callable[[], Any]) -> None:
        with contextlib.suppress(_Stale):
            await self._store_if_current(epoch, fn)

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
        confined: bool = True,
        summarise: bool = True,
    ) -> tuple[Any, str | None]:
        """Ingest one of `path` (inside the workspace, unless not `confined`: the CLI
        reads any path its user names), `url` or `text` (needs `name`), then, when
        `summarise`, ask the LLM for the source's display summary (`summarise_sources`).
        Returns the `nixx.ingest.pipeline.IngestResult` and why there is no summary
        (None if fine)."""
        from nixx.ingest.pipeline import Ingestor

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
        root = self.settings.workspace if confined else None
        if path is not None:
            result = await self.run(
                lambda: ingestor.ingest_path(path, name=name, tags=tags, root=root)
            )
        elif url is not None:
            result = await self.run(lambda: ingestor.ingest_url(url, name=name, tags=tags))
        else:
            result = await self.run(
                lambda: ingestor.ingest_text(text or "", name=name or "", tags=tags)
            )
        problem = await self.summarise_sources([result]) if summarise else None
        return result, problem

    async def summarise_sources(self, results: Sequence[Any]) -> str | None:
        """Write the display summary of each ingested source that needs one (changed,
        or unchanged but still without a summary: `IngestResult.summary_input`), asking
        the LLM (`nixx.ingest.summary`); each result's `source` is re-read after. Stops
        at the first backend failure and returns what went wrong (the sources stay
        stored and searchable without summaries; the next ingest makes them)."""
        from nixx.ingest.summary import summarise as summarise_source

        todo = [r for r in results if r.summary_input]
        if not todo:
            return None
        result = todo[0]
        try:
            model = await self.resolve_model(None)
            limit = await self._max_transcript_chars(model)
            for result in todo:
                summary = await summarise_source(
                    self.llm,
                    model,
                    result.source.name,
                    result.summary_input,
                    limit=limit,
                    budget=self.settings.background_timeout,
                )
                if summary:
                    source_id = result.source.id
                    await self.run(self.store.set_source_summary, source_id, summary)
                    result.source = await self.run(self.store.get_source, source_id)
        except BackendError as exc:
            result.summary_error = exc.message  # the source being summarised
            return exc.message
        return None

    async def get_source(self, source_id: int) -> Source:
        return await self.run(self.store.get_source, source_id)

    async def source_chunks(self, source_id: int) -> list[Any]:
        return await self.run(self.store.source_chunks, source_id)

    async def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        return await self.run(lambda: self.store.list_summaries(limit=limit, offset=offset))

    async def summaries_page(self, limit: int, offset: int) -> tuple[list[Summary], int]:
        """(stored summaries newest first, from `offset`; how many there are in all)."""

        def work() -> tuple[list[Summary], int]:
            return self.store.list_summaries(limit, offset), self.store.count_summaries()

        return await self.run(work)

    async def transcript(self, start_id: int, end_id: int) -> list[BufferRow]:
        """Buffer rows with start_id <= id <= end_id (markers included), oldest first."""
        return await self.run(self.store.get_buffer, start_id, end_id)

    async def session(self) -> tuple[int, list[BufferRow]]:
        """(the first buffer id of the current session, its non-marker rows oldest first)."""

        def work() -> tuple[int, list[BufferRow]]:
            return self.episodic.session_start(), self.episodic.session_rows()

        return await self.run(work)

    async def clear_session(self, origin: str) -> BufferRow:
        """End the session: a ``session_clear`` marker row (nothing is deleted)."""
        return await self.run(self.episodic.clear_session, origin)

    async def wait_for_repairs(self, timeout: float) -> dict[str, str]:
        """Wait up to `timeout` seconds for the background repairs (re-summaries, source
        rebuilds, intent); what failed, by job (they stay queued for later)."""
        with contextlib.suppress(TimeoutError):
            await self.jobs.wait_idle(timeout)
        return dict(self.jobs.last_error)

    async def configure(
        self, *, interval: int | None = None, recall: bool | None = None
    ) -> dict[str, Any]:
        """Change the summary interval and/or recall (kept across restarts); the status after."""
        await self.run(lambda: self.episodic.configure(interval=interval, recall=recall))
        if interval is not None:
            self._after_turn()  # a lower interval may make a summary due now
        return await self.status()

    async def buffer_page(self, *, before_id: int | None, limit: int) -> list[BufferRow]:
        """The newest `limit` buffer rows (markers included) with id < `before_id`, oldest
        first: keyset paging by id, as fast on the last page of 100,000 rows as the first."""

        def work() -> list[BufferRow]:
            end = (
                before_id if before_id is not None else self.store.buffer_stats()["max_id"] + 1
            ) - 1
            width = limit
            while True:
                start = max(1, end - width + 1)
                rows = self.store.get_buffer(start, end) if end >= 1 else []
                if len(rows) >= limit or start == 1:
                    return rows[-limit:]
                width *= 4  # ids have gaps where rows were deleted

        return await self.run(work)

    async def buffer_around(
        self, row_id: int, *, before: int = 10, after: int = 10
    ) -> list[BufferRow]:
        """The rows around `row_id` (markers included), for a transcript view of a hit."""
        start = max(1, row_id - before)
        return await self.run(self.store.get_buffer, start, row_id + after)


@dataclass(frozen=True)
class SearchAnswer:
    buffer: list[BufferHit]  # full text over the buffer, best first
    summaries: list[SummaryHit]  # vectors over summaries, best first
    results: list[Any]  # the fused list (`nixx.memory.search.Result`), best first


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


__all__ = ["NixxService", "open_service"]
