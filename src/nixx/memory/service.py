"""`NixxService`: the memory services behind every shell (the server's routes, and any
other front end). It holds the settings, the store, the embedder, the LLM client and the
tool registry, and runs blocking store and embedder calls in worker threads so that the
event loop never waits on them.

    service = NixxService(settings, store, embedder, llm, tools)
    ctx = await service.context(query)          # the system prompt of a turn
    async for event in service.turn(TurnInput(body)): ...
    await service.summarise_now(tags=["db"])
    await service.close()

    async with open_service(settings) as service: ...   # opens and closes all of it

It builds its collaborators once and hands each sub-domain to one: the `Episodic`
buffer, the per-turn `Recall` (`nixx.memory.recall`) and the `TurnParts` each turn is
handed (`nixx.memory.turn`); the summaries (`nixx.memory.summaries`), the intent's
derivation (`nixx.memory.intent_job`), the sources (`nixx.memory.sources`) and
forgetting (`nixx.memory.forget.Forgetting`), the last four sharing the forget fence
(`nixx.memory.fence`) and what nixx's own LLM calls need (`nixx.memory.own_calls`). It
is the one door of every shell: a shell calls a method named for its use case, never
what the service holds (`tests/test_architecture.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from anyio import to_thread

from nixx.config import Settings, config_file_note
from nixx.embed.base import Embedder
from nixx.errors import BackendError, NotFound
from nixx.llm.client import ChatClient, ModelEntry, ModelList
from nixx.llm.gate import PATIENCE, GateInfo
from nixx.memory import intent as intent_state
from nixx.memory import model_switch
from nixx.memory import search as fused
from nixx.memory import summaries as summary_job
from nixx.memory.background import BackgroundJobs
from nixx.memory.episodic import Episodic, EpisodicStatus, Sender
from nixx.memory.fence import ForgetFence
from nixx.memory.forget import (
    ForgetAnswer,
    Forgetting,
    Matches,
    Repairs,
    SummaryCorrection,
    matches,
)
from nixx.memory.intent import IntentValue
from nixx.memory.intent_job import JOB as INTENT_JOB
from nixx.memory.intent_job import IntentJob
from nixx.memory.layout import MemoryTrail
from nixx.memory.own_calls import OwnCalls
from nixx.memory.recall import Recall, RecallContext
from nixx.memory.responses import Chain, StoredResponse, StoredResponses
from nixx.memory.row_vectors import RowVectors, VectorStatus
from nixx.memory.sources import IngestSpec, Sources
from nixx.memory.summaries import Summaries
from nixx.memory.turn import TurnParts, run_turn
from nixx.memory.turn_events import TurnEvent, TurnInfo, TurnInput
from nixx.priority import Foreground
from nixx.store.base import MemoryStore
from nixx.store.forgetting import ForgetLogEntry
from nixx.store.records import BufferHit, BufferRow, MemoryHit, Source, Summary, SummaryHit

if TYPE_CHECKING:
    from nixx.ingest.pipeline import IngestResult
    from nixx.tools.registry import ToolRegistry

T = TypeVar("T")

SUMMARY_JOB = summary_job.JOB
# A search result that shares no word with the query needs this share of the recall row
# floor as cosine (0.16 with MiniLM: bench/bench_recall.py loses no evidence row at 0.15,
# 0.011 of R@10 at 0.2; docs/performance.md)
SEARCH_FLOOR_SHARE = 0.4
STALL_SECONDS = 30.0  # an own call waiting this long for a pause counts as held up


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
    target = None
    try:
        embedder = make_embedder(settings)
        # a store whose vectors are another local model's moves to this one in the
        # background; live work keeps the old model meanwhile (nixx.memory.model_switch)
        old = await to_thread.run_sync(model_switch.plan, settings, store, embedder)
        if old is not None:
            target, embedder = embedder, model_switch.SwitchingEmbedder(old)
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
        if target is not None:
            service.prepare_switch(target)
        try:
            yield service
        finally:
            await service.close()
    finally:
        if llm is not None:
            await llm.aclose()
        if embedder is not None:
            embedder.close()
        if target is not None:
            target.close()
        await to_thread.run_sync(store.close)


class NixxService:
    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        embedder: Embedder,
        llm: ChatClient,
        tools: ToolRegistry | None = None,
    ) -> None:
        self.settings = settings
        self._store = store
        self._embedder = embedder
        self._llm = llm
        self._tools = tools
        self._episodic = Episodic(settings, store)
        # searches and recalls are marked busy here; background embedding waits them out
        self._foreground = Foreground()
        self._recall = Recall(
            settings, store, self._episodic, self._embed_queries_sync, embedder.model,
            lambda: self.ranker_pool, self._foreground,
        )
        self._turn_parts = TurnParts(
            settings=settings,
            recall=self._recall,
            episodic=self._episodic,
            llm=llm,
            tools=tools,
            intent=functools.partial(intent_state.text, store),
            resolve_model=self.resolve_model,
            spawn=self._spawn,
            after_turn=self._after_turn,
            trail=MemoryTrail(),
            context_length=self.context_length,
        )
        self._jobs = BackgroundJobs()
        # the Responses API's stored responses (`previous_response_id`, GET, DELETE)
        self._responses = StoredResponses(store)
        # every buffer row's vector, made in a thread of its own (started by the server)
        self._row_vectors = RowVectors(store, self._embed_sync, foreground=self._foreground)
        # forgetting vs. background writes: a job that read rows before a forget drops
        # its result instead of storing text from a deleted row
        fence = ForgetFence()
        calls = OwnCalls(llm, self.resolve_model, self.context_length,
                         settings.background_timeout)
        self._summaries = Summaries(store, self._episodic, calls, self.embed, fence, self._jobs)
        self._intent = IntentJob(settings, store, self._episodic, calls, fence, self._jobs)
        self._sources = Sources(settings, store, embedder, self._embed_sync,
                               self._embed_queries_sync, calls, fence, self._jobs)
        self._forget = Forgetting(store, self._episodic, fence, self.embed, Repairs(
            resummarise=self._summaries.schedule_now,
            rebuild_sources=self._sources.schedule_rebuild,
            rederive_intent=self._intent.schedule_repair,
        ), trail=self._turn_parts.trail)
        self._bound = False
        self._models: list[str] | None = None
        self._last_model = ""  # the model of the newest turn or own call (for the status)
        self._writes: set[asyncio.Task[Any]] = set()
        self._ranker_pool: ThreadPoolExecutor | None = None
        # a move of the store to another embedding model (started by `start`)
        self._switch: model_switch.ModelSwitch | None = None

    def prepare_switch(self, target: Embedder) -> model_switch.ModelSwitch:
        """Move the store to `target`'s model in the background (`start` starts it):
        `self._embedder` must be a `SwitchingEmbedder` on the store's model; it answers
        with `target` once the store is switched."""
        assert isinstance(self._embedder, model_switch.SwitchingEmbedder)
        self._switch = model_switch.ModelSwitch(
            self._store, self._embedder.model, target, foreground=self._foreground,
            on_done=self._switched,
        )
        return self._switch

    def _switched(self, target: Embedder) -> None:
        """The store's vectors are `target`'s now: embed with it, and read its floors."""
        assert isinstance(self._embedder, model_switch.SwitchingEmbedder)
        old = self._embedder.swap(target)
        self._recall.model = target.model
        self._sources.bound.model = target.model
        self._row_vectors.notify()  # a batch the old model made and the store refused: again
        if old is not target:
            old.close()

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
        self._row_vectors.start()
        if self._switch is not None:
            self._switch.start()
        await self._forget.resume_repairs()
        self._store.warm_vector_indexes()

    async def close(self) -> None:
        if self._switch is not None:
            await self.run(self._switch.close)
        await self.run(self._row_vectors.close)
        if self._ranker_pool is not None:
            self._ranker_pool.shutdown(wait=False)
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        await self._jobs.close()

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
        return self._bind(self._embedder.embed(list(texts)))

    def _embed_queries_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries (`Embedder.embed_queries`: maybe cheaper weights)."""
        return self._bind(self._embedder.embed_queries(list(texts)))

    def _bind(self, vectors: np.ndarray) -> np.ndarray:
        if not self._bound:
            self._store.bind_embedder(self._embedder.model, int(vectors.shape[1]))
            self._bound = True
        return vectors

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self.run(self._embed_sync, texts)

    @property
    def embedding_model(self) -> str:
        return self._embedder.model

    async def embed_for_client(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for a client's texts (`POST /v1/embeddings`): the embedder only, the
        store is not bound to it."""
        return await self.run(self._embedder.embed, texts)

    async def resolve_model(self, requested: str | None) -> str:
        """NIXX_CHAT_MODEL, else the model the client asked for, else the backend's first."""
        if self.settings.chat_model:
            return self.settings.chat_model
        if requested:
            return requested
        if not self._models:
            data = await self._llm.list_models(fresh=False)
            self._models = [str(m.get("id")) for m in data["data"] if m.get("id")]
        if not self._models:
            raise BackendError(
                f"the LLM backend at {self._llm.base_url} lists no models; set NIXX_CHAT_MODEL"
            )
        return self._models[0]

    async def models(self) -> ModelList:
        data = await self._llm.list_models(fresh=False)
        self._models = [str(m.get("id")) for m in data["data"] if m.get("id")]
        return data

    async def model(self, model_id: str) -> ModelEntry:
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
            lambda: self._recall.for_next_turn(
                query, history_messages=history_messages, before_id=before_id
            )
        )

    # ---- the chat turn ----------------------------------------------------------------
    def turn(
        self, given: TurnInput, sender: Sender | None = None, info: TurnInfo | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run one chat turn (`nixx.memory.turn.run_turn`); yields its events. `sender`:
        who sent it (default origin ``api``; its client and nxc persona are recorded on
        both rows, and a persona gets no nixx tools)."""
        return run_turn(self._turn_parts, given, sender or Sender(), info)

    # ---- stored responses (the Responses API) -------------------------------------------
    async def response_chain(
        self, response_id: str, window: int, hold: Callable[[int], bool]
    ) -> Chain:
        """The conversation a continuation of `response_id` loads (`StoredResponses.walk`:
        bounded by `window` tokens, each record held in the in-flight budget by `hold`)."""
        return await self.run(self._responses.walk, response_id, window, hold)

    async def save_response(self, response_id: str, row_id: int, said: dict[str, Any]) -> None:
        await self.run(self._responses.save, response_id, row_id, said)

    async def get_response(self, response_id: str) -> StoredResponse:
        return await self.run(self._responses.get, response_id)

    async def delete_response(self, response_id: str) -> None:
        await self.run(self._responses.delete, response_id)

    def _after_turn(self) -> None:
        """Schedule the background work a new buffer row may make due."""
        self._summaries.schedule()
        self._intent.schedule()
        self._row_vectors.notify()

    async def context_length(self, model: str) -> tuple[int, str]:
        """(the model's context length in tokens, where that came from): what the backend
        says (`nixx.llm.facts`; the smaller of it and ``chat_context_length`` when that is
        set), else ``chat_context_length``."""
        self._last_model = model
        facts = await self._llm.facts(model)
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

    # ---- summaries and intent ----------------------------------------------------------
    async def summarise_now(self, tags: Sequence[str] = ()) -> Summary:
        """Summarise the unsummarised window now (`Summaries.now`)."""
        return await self._summaries.now(tags)

    async def derive_intent(self) -> IntentValue:
        return await self._intent.derive()

    async def own_completion(
        self, messages: list[dict[str, Any]], *, max_tokens: int, what: str,
        model: str | None = None,
    ) -> tuple[str, str]:
        """(the answer, the model) of one of nixx's own completions that another process
        asks for (a channel round's summary, from nxc): through the backend gate like the
        server's own summaries — bounded by `max_tokens` and ``background_timeout``, run
        only while no user's turn runs. Nothing is stored."""
        chosen = await self.resolve_model(model)
        data = await self._llm.background(
            {"model": chosen, "messages": messages, "max_tokens": max_tokens},
            budget=self.settings.background_timeout,
            what=what,
        )
        content = (data["choices"][0].get("message") or {}).get("content") or ""
        return str(content), str(data.get("model") or chosen)

    async def get_intent(self) -> IntentValue | None:
        return await self.run(intent_state.get, self._store)

    async def set_intent(self, text: str) -> IntentValue:
        return await self.run(lambda: intent_state.set_intent(self._store, text))

    async def clear_intent(self) -> None:
        await self.run(intent_state.clear, self._store)

    def failing(self) -> dict[str, tuple[str, int]]:
        """The background work whose last run failed: kind -> (why, failures in a row)."""
        return {
            kind: (error, self._jobs.failures.get(kind, 1))
            for kind in (SUMMARY_JOB, INTENT_JOB)
            if (error := self._jobs.last_error.get(kind))
        }

    def stalls(self, backlog: tuple[int, int] | None = None) -> list[str]:
        """What holds nixx's own work up, in words, for the status, `nixx chat`'s status
        line and every /ui page: a call running late (a turn waits for it), calls waiting
        for a pause longer than `STALL_SECONDS`, a summary overdue (twice the interval of
        words unsummarised). `backlog`: (unsummarised words, interval); else as the last
        check after a turn found them."""
        info = self._llm.gate.info()
        out = []
        if info["running"] and info["late"]:
            out.append(f"{info['running']} gave way to {PATIENCE} turns and now runs to its "
                       "end: the next turn waits for it")
        if info["waiting"] and info["waiting_seconds"] >= STALL_SECONDS:
            out.append(f"{', '.join(info['waiting'])} waiting for a pause in the conversation "
                       f"for {info['waiting_seconds']:.0f} s")
        words, interval = backlog or self._episodic.backlog or (0, 0)
        if interval and words >= 2 * interval:
            out.append(f"summary overdue: {words} words unsummarised, one is made every "
                       f"{interval}")
        return out

    # ---- episodic search and status ----------------------------------------------------
    async def status(self) -> MemoryStatus:
        episodic = await self.run(self._episodic.status)
        # what is known already: a status is never the one to ask the backend
        model = self.settings.chat_model or self._last_model
        length, source = self.context_length_of(self._llm.known_context(model))
        facts = self._llm.known_facts(model)
        return {
            **episodic,
            "threshold": self._recall.threshold,
            "recall_limit": self.settings.recall_limit,
            "context_length": length,
            "context_length_source": source,
            "backend_slots": self._llm.gate.slots,
            "chat_tools": self.settings.chat_tools,
            "backend_tool_calls": facts.tool_calls if facts else None,
            "prefix_restores": self._llm.gate.restores,
            "background": self._llm.gate.info(self._llm.slot.continued, self._llm.slot.alone),
            "stalls": self.stalls((episodic["unsummarised_words"], episodic["interval"])),
            "summary_running": self._jobs.running(SUMMARY_JOB),
            "summary_error": self._jobs.last_error.get(SUMMARY_JOB),
            "intent_error": self._jobs.last_error.get(INTENT_JOB),
            "summary_failures": self._jobs.failures.get(SUMMARY_JOB, 0),
            "intent_failures": self._jobs.failures.get(INTENT_JOB, 0),
            "recall_error": self._recall.error,
            "buffer_vectors": await self.run(self._row_vectors.status),
            "embedder_switch": None if self._switch is None else await self.run(self._switch.status),
        }

    async def search(self, query: str, limit: int, sent_by: str | None = None) -> SearchAnswer:
        """The fused search (`nixx.memory.search`), plus the two lists the seed's API had:
        full text over the buffer and vectors over summaries. The rankers overlap
        (`nixx.memory.search.run_rankers`). `sent_by`: only rows a client of that name
        (``meta.client``), or of that origin, wrote — from the whole fused pool, then
        `limit` of them; summaries, which mix clients, are left out."""
        depth = max(limit, fused.DEFAULT_PARAMS.depth)

        def search() -> SearchAnswer:
            with self._foreground.busy():
                # A summary ranked below `limit` among summaries can never be in the fused
                # top `limit` (rank fusion scores a summary by its rank alone): `limit` are
                # enough.
                answers = fused.run_rankers(
                    self._store,
                    query,
                    self._embed_queries_sync,
                    lambda vector: self._store.search_summaries(
                        vector, limit=limit, threshold=None
                    ),
                    pool=self.ranker_pool,
                    depth=depth,
                    piece_floor=self._recall.params.piece_floor,
                )
                summaries = answers.summaries or []
                results = answers.combine(
                    summaries,
                    store=self._store,
                    limit=depth if sent_by else limit,
                    min_cosine=self._recall.row_floor * SEARCH_FLOOR_SHARE,
                    params=self._recall.params,
                )
            if sent_by:
                return SearchAnswer(
                    [h for h in answers.fts if _sent_by(h.row, sent_by)][:limit], [],
                    [r for r in results if r.row is not None and _sent_by(r.row, sent_by)][:limit],
                )
            return SearchAnswer(answers.fts[:limit], summaries[:limit], results)

        return await self.run(search)

    # ---- sources ----------------------------------------------------------------------
    async def create_source(
        self, name: str, start_id: int | None, end_id: int | None
    ) -> tuple[Source, str | None]:
        """Store a buffer range as a named source; returns (source, summary problem)."""
        return await self._sources.create(name, start_id, end_id)

    async def search_sources(self, query: str, limit: int) -> list[MemoryHit]:
        """Semantic memory: the nearest chunks by vectors, re-ranked with their words
        (`nixx.memory.search.fuse_memories`), best first."""
        return await self._sources.search(query, limit)

    async def list_sources(self, name: str | None = None) -> list[Source]:
        """Every source, newest first; with `name`, those whose name contains it
        (case-insensitive)."""
        return await self._sources.listed(name)

    # ---- forgetting and correcting -------------------------------------------------------
    async def forget_buffer_row(self, row_id: int) -> ForgetAnswer:
        return await self._forget.forget("buffer", buffer_ids=[row_id])

    async def forget_buffer_range(self, start_id: int, end_id: int) -> ForgetAnswer:
        """Every row with start_id <= id <= end_id (markers included)."""
        return await self._forget.buffer_range(start_id, end_id)

    async def forget_summary(self, summary_id: int) -> ForgetAnswer:
        return await self._forget.forget("summary", summary_ids=[summary_id])

    async def forget_source(self, source_id: int) -> ForgetAnswer:
        return await self._forget.forget("source", source_ids=[source_id])

    async def forget_refs(self, refs: Sequence[str]) -> ForgetAnswer:
        """Delete the items named by references such as ``buffer:12``, ``summary:3``,
        ``source:2``, ``memory:40`` (all or nothing)."""
        return await self._forget.refs(refs)

    async def forget_matches(self, query: str) -> Matches:
        """A dry run: what `query` matches (buffer rows, summaries, memories)."""
        return await self.run(matches, self._store, query)

    async def forget_query(self, query: str, ids: Sequence[str]) -> ForgetAnswer:
        """Delete exactly `ids`, each of which `query` must still match (``intent:1``:
        clear the intent, set by hand or derived, whose text matched)."""
        return await self._forget.query(query, ids)

    async def forget_log(self, limit: int = 100) -> list[ForgetLogEntry]:
        return await self.run(self._store.forget_log, limit)

    async def get_summary(self, summary_id: int) -> Summary:
        return await self.run(self._store.get_summary, summary_id)

    async def update_summary(self, summary_id: int, fix: SummaryCorrection) -> Summary:
        """Correct a summary's content, tags or entities (`fix`); new content is embedded
        again, so recall finds the new text."""
        return await self._forget.update_summary(summary_id, fix)

    async def resume_repairs(self) -> None:
        """Schedule the repairs a forget left queued (`Forgetting.resume_repairs`)."""
        await self._forget.resume_repairs()

    # ---- one door per use case for the shells (routes, web page, CLI, MCP) -------------
    async def ingest(
        self, spec: IngestSpec, *, progress: Callable[[Any], None] | None = None
    ) -> tuple[IngestResult, str | None]:
        """Ingest what `spec` names (a path, a URL or a text), then, when it says so, ask
        the LLM for the source's display summary (`summarise_sources`). Returns the
        `nixx.ingest.pipeline.IngestResult` and why there is no summary (None if fine)."""
        return await self._sources.ingest(spec, progress)

    async def summarise_sources(self, results: Sequence[IngestResult]) -> str | None:
        """Write the display summary of each ingested source that needs one (changed,
        or unchanged but still without a summary: `IngestResult.summary_input`), asking
        the LLM (`nixx.ingest.summary`); each result's `source` is re-read after. Stops
        at the first backend failure and returns what went wrong (the sources stay
        stored and searchable without summaries; the next ingest makes them)."""
        return await self._sources.summarise(results)

    async def get_source(self, source_id: int) -> Source:
        return await self.run(self._store.get_source, source_id)

    async def source_chunks(self, source_id: int) -> list[Any]:
        return await self.run(self._store.source_chunks, source_id)

    async def list_summaries(self, limit: int = 50, offset: int = 0) -> list[Summary]:
        return await self.run(lambda: self._store.list_summaries(limit=limit, offset=offset))

    async def summaries_page(self, limit: int, offset: int) -> tuple[list[Summary], int]:
        """(stored summaries newest first, from `offset`; how many there are in all)."""

        def work() -> tuple[list[Summary], int]:
            return self._store.list_summaries(limit, offset), self._store.count_summaries()

        return await self.run(work)

    async def transcript(self, start_id: int, end_id: int) -> list[BufferRow]:
        """Buffer rows with start_id <= id <= end_id (markers included), oldest first."""
        return await self.run(self._store.get_buffer, start_id, end_id)

    async def session(self) -> tuple[int, list[BufferRow]]:
        """(the first buffer id of the current session, its non-marker rows oldest first)."""

        def work() -> tuple[int, list[BufferRow]]:
            return self._episodic.session_start(), self._episodic.session_rows()

        return await self.run(work)

    async def clear_session(self, origin: str) -> BufferRow:
        """End the session: a ``session_clear`` marker row (nothing is deleted)."""
        return await self.run(self._episodic.clear_session, origin)

    async def wait_for_repairs(self, timeout: float) -> dict[str, str]:
        """Wait up to `timeout` seconds for the background repairs (re-summaries, source
        rebuilds, intent); what failed, by job (they stay queued for later)."""
        with contextlib.suppress(TimeoutError):
            await self._jobs.wait_idle(timeout)
        return dict(self._jobs.last_error)

    async def settle(self, timeout: float | None = 30.0) -> None:
        """Wait until nothing runs behind the turns: the background jobs (summaries,
        intent, repairs), nixx's own LLM calls, and the row vectors still to embed (a
        script, a benchmark or a test that reads what the turns left behind)."""
        await self._jobs.wait_idle(timeout)
        await self._llm.gate.wait_idle()
        await self._row_vectors.flush()

    async def configure(
        self, *, interval: int | None = None, recall: bool | None = None
    ) -> MemoryStatus:
        """Change the summary interval and/or recall (kept across restarts); the status after."""
        await self.run(lambda: self._episodic.configure(interval=interval, recall=recall))
        if interval is not None:
            self._after_turn()  # a lower interval may make a summary due now
        return await self.status()

    async def buffer_page(self, *, before_id: int | None, limit: int) -> list[BufferRow]:
        """The newest `limit` buffer rows (markers included) with id < `before_id`, oldest
        first: keyset paging by id, as fast on the last page of 100,000 rows as the first."""

        def work() -> list[BufferRow]:
            end = (
                before_id if before_id is not None else self._store.buffer_stats()["max_id"] + 1
            ) - 1
            width = limit
            while True:
                start = max(1, end - width + 1)
                rows = self._store.get_buffer(start, end) if end >= 1 else []
                if len(rows) >= limit or start == 1:
                    return rows[-limit:]
                width *= 4  # ids have gaps where rows were deleted

        return await self.run(work)

    async def buffer_around(
        self, row_id: int, *, before: int = 10, after: int = 10
    ) -> list[BufferRow]:
        """The rows around `row_id` (markers included), for a transcript view of a hit."""
        from nixx.values import MAX_ID

        start = max(1, row_id - before)  # the largest id has no rows after it to show
        return await self.run(self._store.get_buffer, start, min(row_id + after, MAX_ID))


class MemoryStatus(EpisodicStatus):
    """`NixxService.status` (``GET /v1/episodic/status``): the buffer, recall's settings,
    the backend as known, the background jobs and the buffer rows' vectors."""

    threshold: float
    recall_limit: int
    context_length: int
    context_length_source: str
    backend_slots: int | None
    chat_tools: str  # the setting: auto | on | off
    backend_tool_calls: bool | None  # whether the backend parses tool calls (None: not said)
    prefix_restores: int  # times the one-slot backend's cache was given the user's prefix back
    background: GateInfo  # nixx's own calls: running, waiting, yielded, run late
    stalls: list[str]  # what holds them up, in words (`NixxService.stalls`)
    summary_running: bool
    summary_error: str | None
    intent_error: str | None
    summary_failures: int
    intent_failures: int
    recall_error: str | None
    buffer_vectors: VectorStatus
    # a move to another embedding model under way (None: none); nixx.memory.model_switch
    embedder_switch: model_switch.SwitchStatus | None


@dataclass(frozen=True)
class SearchAnswer:
    buffer: list[BufferHit]  # full text over the buffer, best first
    summaries: list[SummaryHit]  # vectors over summaries, best first
    results: list[Any]  # the fused list (`nixx.memory.search.Result`), best first


__all__ = ["NixxService", "open_service"]


def _sent_by(row: BufferRow, name: str) -> bool:
    return (row.meta or {}).get("client") == name or row.origin == name
