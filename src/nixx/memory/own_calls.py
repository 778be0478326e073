"""What nixx's own LLM calls share — summaries, the intent, sources' display summaries:
the client, the model they run on, how much input one may send, their time budget.

Those calls run in the background, through the client's gate
(`ChatClient.background`), so they never stand in a user's way (`nixx.llm.gate`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nixx.memory.summarize import MAX_TOKENS as SUMMARY_MAX_TOKENS
from nixx.memory.summarize import PROMPT_TOKENS as SUMMARY_PROMPT_TOKENS

if TYPE_CHECKING:
    from nixx.llm.client import ChatClient


@dataclass(frozen=True)
class OwnCalls:
    llm: ChatClient
    # NIXX_CHAT_MODEL, else the client's, else the backend's first (`NixxService`)
    resolve_model: Callable[[str | None], Awaitable[str]]
    # (the model's context length in tokens, where that came from)
    context_length: Callable[[str], Awaitable[tuple[int, str]]]
    budget: float  # seconds one call may take (``background_timeout``)

    async def model(self) -> str:
        return await self.resolve_model(None)

    async def continuing_chars(self, instructions: str, max_tokens: int) -> int | None:
        """On a one-slot backend: the characters of material a call with `instructions`
        may carry and still continue the user's conversation (`ChatClient.continuation_room`);
        None where it would not continue it anyway."""
        model = await self.model()
        length, _ = await self.context_length(model)
        body = {"model": model, "max_tokens": max_tokens,
                "messages": [{"role": "system", "content": instructions}]}
        return self.llm.continuation_room(body, length)

    async def input_chars(self, model: str | None = None) -> int:
        """The input one call may send: the context less the answer's bound and the
        prompt, at a cautious 3 characters a token (small models' tokenisers give fewer
        than English's 4)."""
        model = model or await self.model()
        length, _ = await self.context_length(model)
        room = length - SUMMARY_MAX_TOKENS - SUMMARY_PROMPT_TOKENS
        return max(1000, room * 3)
