"""The OpenAI-compatible LLM client (chat completions, streaming, tool calls)."""

from nixx.llm.client import ChatClient, SyncChatClient
from nixx.llm.stream import StreamAccumulator

__all__ = ["ChatClient", "StreamAccumulator", "SyncChatClient"]
