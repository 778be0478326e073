"""`IntentJob`: deriving the intent behind `NixxService` — after a turn when it is due,
on request, and again after a forget cleared it (the repair).

The derivation reads the current session's last rows, asks the LLM for one or two
sentences (`nixx.memory.intent`: the prompt, the answer's cleaning, the state), and
stores them through the forget fence (`nixx.memory.fence`): a forget that ran meanwhile
wins and the rows are read again. A manual intent is never replaced automatically.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING

from anyio import to_thread

from nixx.errors import BackendError, ValidationError
from nixx.memory import intent as intent_state
from nixx.memory.background import SKIPPED
from nixx.memory.fence import ForgetFence, Stale
from nixx.memory.intent import IntentValue
from nixx.store.records import BufferRow

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.memory.background import BackgroundJobs
    from nixx.memory.episodic import Episodic
    from nixx.memory.own_calls import OwnCalls
    from nixx.store.base import MemoryStore

JOB = "intent"  # the background job's kind


class IntentJob:
    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        episodic: Episodic,
        calls: OwnCalls,
        fence: ForgetFence,
        jobs: BackgroundJobs,
    ) -> None:
        self.settings = settings
        self.store = store
        self.episodic = episodic
        self.calls = calls
        self.fence = fence
        self.jobs = jobs

    def schedule(self) -> None:
        """After a turn: derive the intent in the background when it is due."""
        self.jobs.schedule(JOB, self.auto)

    def schedule_repair(self) -> None:
        """After a forget cleared the intent: derive it from what remains."""
        self.jobs.schedule(JOB, self.rederive)

    async def auto(self) -> object:
        current = await to_thread.run_sync(intent_state.get, self.store)
        if current and current.get("source") == "manual":
            return None  # a manual intent stays until it is cleared or re-derived on request
        start = await to_thread.run_sync(self.episodic.session_start)
        due = await to_thread.run_sync(
            lambda: intent_state.due(
                self.store, session_start=start, interval=self.settings.intent_interval
            )
        )
        if not due:
            return SKIPPED  # a failure before stays shown until the next derivation
        return await self.derive()

    async def derive(self) -> IntentValue:
        """Derive the intent from the current session's last rows now; the new value."""
        for _ in range(10):
            epoch = self.fence.epoch
            start = await to_thread.run_sync(self.episodic.session_start)
            rows = await to_thread.run_sync(
                functools.partial(
                    self.store.last_buffer_rows, self.settings.intent_lookback, after_id=start - 1
                )
            )
            if not rows:
                raise ValidationError("no messages in the current session to derive an intent from")
            model = await self.calls.model()
            context = (await self.calls.context_length(model))[0]
            body = {"model": model, "messages": intent_state.intent_messages(rows),
                    "temperature": intent_state.TEMPERATURE,
                    "max_tokens": intent_state.MAX_TOKENS}
            # on a one-slot backend, the newest rows that let it continue the conversation
            # (the older ones are in that conversation anyway): never alone for its length
            room = self.calls.llm.continuation_room(body, context)
            fitted = intent_state.newest_that_fit(rows, room) if room is not None else []
            if fitted and len(fitted) < len(rows):
                rows = fitted
                body["messages"] = intent_state.intent_messages(rows)
            data = await self.calls.llm.background(
                body, budget=self.calls.budget, what="the intent", context=context)
            answer = (data["choices"][0].get("message") or {}).get("content") or ""
            text = intent_state.clean_answer(answer)
            try:
                intent_state.check_grounded(text, rows)
            except BackendError:
                # these rows were tried: the next derivation waits for the next interval
                last = rows[-1].id
                await to_thread.run_sync(intent_state.mark_derived, self.store, last)
                raise

            def save(rows: list[BufferRow] = rows, text: str = text) -> IntentValue:
                value = intent_state.set_intent(
                    self.store, text, source="derived", rows=(rows[0].id, rows[-1].id)
                )
                intent_state.mark_derived(self.store, rows[-1].id)
                return value

            try:
                return await self.fence.store_if_current(epoch, save)
            except Stale:
                continue
        raise ValidationError("messages kept being forgotten while deriving the intent; try again")

    async def rederive(self) -> None:
        """Derive again (or leave it cleared when the session has no message left)."""
        with contextlib.suppress(ValidationError):
            await self.derive()
