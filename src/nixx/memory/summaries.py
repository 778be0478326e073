"""`Summaries`: the summary job behind `NixxService` — the windows due after a turn,
one on request, and the windows a forget left to summarise again.

A window is summarised by the LLM (`nixx.memory.summarize`), embedded, and stored with
the buffer range it covers, through the forget fence (`nixx.memory.fence`): a forget
that ran meanwhile wins and the window is read again. After consecutive failures the
automatic attempts back off (1, 3, 7 … at most 63 turns skipped), so a broken backend
is not asked three times per turn; a summary on request always tries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from anyio import to_thread

from nixx.errors import ValidationError
from nixx.memory.background import SKIPPED
from nixx.memory.fence import ForgetFence, Stale
from nixx.memory.prompts import SUMMARY_PROMPT
from nixx.memory.summarize import MAX_TOKENS as SUMMARY_MAX_TOKENS
from nixx.memory.summarize import merge_tags, select_window, summarise
from nixx.store.forgetting import RESUMMARISE_KEY
from nixx.store.records import BufferRow, Summary

if TYPE_CHECKING:
    from nixx.memory.background import BackgroundJobs
    from nixx.memory.episodic import Episodic
    from nixx.memory.own_calls import OwnCalls
    from nixx.store.base import MemoryStore

log = logging.getLogger(__name__)

JOB = "summary"  # the background job's kind
MIN_CONTINUED_CHARS = 600  # a window smaller than this goes alone rather than continue


class Summaries:
    def __init__(
        self,
        store: MemoryStore,
        episodic: Episodic,
        calls: OwnCalls,
        embed: Callable[[Sequence[str]], Awaitable[np.ndarray]],
        fence: ForgetFence,
        jobs: BackgroundJobs,
    ) -> None:
        self.store = store
        self.episodic = episodic
        self.calls = calls
        self.embed = embed
        self.fence = fence
        self.jobs = jobs
        self._failures = 0
        self._skip = 0

    def schedule(self) -> None:
        """After a turn: summarise what is due, in the background."""
        self.jobs.schedule(JOB, self.auto)

    def schedule_now(self) -> None:
        """After a forget: summarise again what it removed, without the back-off wait."""
        self.jobs.schedule(JOB, self.auto_now)

    async def auto(self) -> object:
        """Summarise every due window, oldest first; stop at the first failure (the
        window stays unsummarised and is retried after a later turn, backing off: the
        failure stays shown meanwhile)."""
        if self._skip > 0:
            self._skip -= 1
            return SKIPPED
        try:
            await self._due()
        except Exception:
            self._failures += 1
            self._skip = min(2 ** (self._failures - 1) - 1, 63)
            raise
        self._failures = 0
        return None

    async def auto_now(self) -> object:
        self._skip = 0
        return await self.auto()

    async def now(self, tags: Sequence[str] = ()) -> Summary:
        """Summarise the unsummarised window now (waits for a running background summary
        first, so two never overlap)."""
        while self.jobs.running(JOB):
            await asyncio.sleep(0.02)
        await self.resummarise_pending()
        for _ in range(10):
            epoch = self.fence.epoch
            rows = await to_thread.run_sync(self.store.unsummarised)
            if not rows:
                raise ValidationError(
                    "nothing to summarise: every buffer message is already in a summary"
                )
            window = select_window(rows, min_words=None, max_chars=await self.calls.input_chars())
            try:
                return await self._window(window, list(tags), epoch)
            except Stale:
                continue
        raise ValidationError("messages kept being forgotten while summarising; try again")

    async def _due(self) -> None:
        await self.resummarise_pending()
        for _ in range(100):  # bounded: each pass consumes at least one row
            epoch = self.fence.epoch
            due, rows = await to_thread.run_sync(self.episodic.summary_due)
            if not due:
                return
            interval = await to_thread.run_sync(self.episodic.interval)
            limit = await self.calls.input_chars()
            # on a one-slot backend, a window that lets the call continue the conversation
            # (smaller summaries rather than one that costs the next turn its cache)
            room = await self.calls.continuing_chars(SUMMARY_PROMPT, SUMMARY_MAX_TOKENS)
            if room is not None and room >= MIN_CONTINUED_CHARS:
                limit = min(limit, room)
            window = select_window(rows, min_words=interval, max_chars=limit)
            try:
                summary = await self._window(window, [], epoch)
            except Stale:
                continue
            log.info("summary %s covers buffer %s..%s",
                     summary.id, summary.start_buffer_id, summary.end_buffer_id)

    async def resummarise_pending(self) -> None:
        """Summarise again, oldest first, each window whose summary was removed because
        it covered a forgotten row, from the rows that remain (state ``forget.resummarise``,
        so the work survives a restart). A window with no row left is dropped."""
        for _ in range(1000):
            epoch = self.fence.epoch
            queue = await to_thread.run_sync(self.store.get_state, RESUMMARISE_KEY)
            if not queue:
                return
            start, end = int(queue[0][0]), int(queue[0][1])

            def done(window: tuple[int, int] = (start, end)) -> None:
                self.store.update_state(
                    RESUMMARISE_KEY,
                    lambda cur: [w for w in (cur or []) if tuple(w) != window] or None,
                )

            rows = [
                r for r in await to_thread.run_sync(self.store.get_buffer, start, end)
                if r.role != "marker"
            ]
            try:
                if not rows:
                    await self.fence.store_if_current(epoch, done)
                    continue
                summary = await self._window(rows, [], epoch, then=done)
            except Stale:
                continue
            log.info("summary %s re-covers buffer %s..%s after a forget",
                     summary.id, summary.start_buffer_id, summary.end_buffer_id)

    async def _window(
        self,
        rows: list[BufferRow],
        tags: Sequence[str],
        epoch: int,
        then: Callable[[], Any] | None = None,
    ) -> Summary:
        model = await self.calls.model()
        draft, rows = await summarise(
            self.calls.llm,
            model,
            rows,
            max_chars=await self.calls.input_chars(model),
            budget=self.calls.budget,
            context=(await self.calls.context_length(model))[0],
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

        return await self.fence.store_if_current(epoch, store)
