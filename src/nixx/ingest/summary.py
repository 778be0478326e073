"""The display summary of an ingested source, written by the LLM when one answers.

The summary is for lists of sources only: search works on the chunks, so a source is
stored and searchable whether or not a summary could be made. `NixxService.summarise_sources`
calls `summarise` with the service's `ChatClient` for the server, the web page and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


MAX_TOKENS = 300  # 2-4 sentences


async def summarise(
    llm: ChatClient, model: str, name: str, text: str, *, budget: float = 120.0
) -> str | None:
    """The LLM's summary of `text`, or None when it answered nothing. One of nixx's own
    calls (`ChatClient.background`: bounded by `MAX_TOKENS` and `budget` seconds, after
    the users' turns); the caller cuts `text` to fit the context. Raises `BackendError`
    (or `BackendUnavailable`) when the backend fails."""
    data: dict[str, Any] = await llm.background(
        {
            "model": model,
            "messages": summary_messages(name, text),
            "temperature": 0.3,
            "max_tokens": MAX_TOKENS,
        },
        budget=budget,
        what="a source's summary",
    )
    message = data["choices"][0].get("message") or {}
    content = message.get("content")
    return content.strip() or None if isinstance(content, str) else None
