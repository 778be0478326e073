"""The display summary of an ingested source, written by the LLM when one answers.

The summary is for lists of sources only: search works on the chunks, so a source is
stored and searchable whether or not a summary could be made. `summarise` is async (the
server calls it with its shared `ChatClient`); `summarise_sync` is for one-shot shells.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nixx.errors import BackendError

if TYPE_CHECKING:
    from nixx.config import Settings
    from nixx.llm.client import ChatClient

DOCUMENT_SUMMARY_PROMPT = """\
Summarise the following document for a reader who will pick it from a list of saved \
sources, in 2-4 sentences: state what it contains and what it is for (its subject, key \
facts, decisions or code), not that it is a document. For a folder or repository, say \
what the project is and what its main parts do. Answer with the summary text only."""


def summary_messages(name: str, text: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": DOCUMENT_SUMMARY_PROMPT},
        {"role": "user", "content": f"Source: {name}\n\n{text}"},
    ]


async def summarise(llm: ChatClient, model: str, name: str, text: str) -> str | None:
    """The LLM's summary of `text`, or None when it answered nothing. Raises `BackendError`
    (or `BackendUnavailable`) when the backend fails."""
    data: dict[str, Any] = await llm.create(
        {"model": model, "messages": summary_messages(name, text), "temperature": 0.3}
    )
    message = data["choices"][0].get("message") or {}
    content = message.get("content")
    return content.strip() or None if isinstance(content, str) else None


async def resolve_model(llm: ChatClient, settings: Settings) -> str:
    if settings.chat_model:
        return settings.chat_model
    data = await llm.list_models()
    ids = [str(m.get("id")) for m in data["data"] if isinstance(m, dict) and m.get("id")]
    if not ids:
        raise BackendError(
            f"the LLM backend at {llm.base_url} lists no models; set NIXX_CHAT_MODEL"
        )
    return ids[0]


def summarise_sync(settings: Settings, items: list[tuple[str, str]]) -> list[str | None]:
    """Summaries for (name, text) pairs with one client; raises `BackendError` on the first
    failure (the caller keeps its sources without summaries)."""
    import asyncio

    from nixx.llm.client import ChatClient

    async def run() -> list[str | None]:
        llm = ChatClient(
            settings.chat_base_url, api_key=settings.chat_api_key, timeout=settings.chat_timeout
        )
        try:
            model = await resolve_model(llm, settings)
            return [await summarise(llm, model, name, text) for name, text in items]
        finally:
            await llm.aclose()

    return asyncio.run(run())
