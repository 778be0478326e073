"""The display summary of a source (an ingested one, or a buffer range saved as one),
written by the LLM when one answers.

The summary is for lists of sources only: search works on the chunks, so a source is
stored and searchable whether or not a summary could be made. `NixxService.summarise_sources`
calls `summarise` with the service's `ChatClient` for the server, the web page and the CLI;
`NixxService.create_source` calls `summarise_text` with its own prompt.

A source longer than the model's context is summarised whole, never cut (`summarise_text`):
its text is split into parts that each fit (`split_text`, at paragraph, line or word
breaks), each part is summarised, and the parts' summaries are combined into one (in
rounds, when even they do not fit together). Every request fits `limit` characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

PART_PROMPT = """\
The text below is part {part} of {parts} of one longer source, cut where it had to be. \
Summarise what this part contains in 2-4 sentences (its subject, key facts, decisions or \
code), without saying it is a part. Answer with the summary text only."""

COMBINE_NOTE = """\
The source was too long to read at once: what follows are summaries of its consecutive \
parts, in order. Write the summary of the whole source from them."""


def split_text(text: str, limit: int) -> list[str]:
    """`text` in consecutive parts of at most `limit` characters, each cut at the last
    paragraph break in its second half, else a line break, else a space, else anywhere.
    Joined back they are `text` (nothing is dropped)."""
    limit = max(1, limit)
    parts: list[str] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            at = window.rfind(sep, limit // 2)
            if at > 0:
                cut = at + len(sep)
                break
        cut = cut if cut > 0 else limit
        parts.append(text[start : start + cut])
        start += cut
    parts.append(text[start:])
    return [p for p in parts if p]


async def _ask(
    llm: ChatClient, model: str, system: str, user: str, *, budget: float, what: str
) -> str:
    data = await llm.background(
        {
            "model": model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
            "temperature": 0.3,
            "max_tokens": MAX_TOKENS,
        },
        budget=budget,
        what=what,
    )
    message = data["choices"][0].get("message") or {}
    content = message.get("content")
    return content.strip() if isinstance(content, str) else ""


async def summarise_text(
    llm: ChatClient,
    model: str,
    prompt: str,
    text: str,
    *,
    limit: int,
    budget: float = 120.0,
    header: str = "",
    what: str = "a source's summary",
) -> str | None:
    """The summary of all of `text` under `prompt` (its system message), each request's
    user message at most `limit` characters (`header` first, e.g. the source's name);
    None when the backend answered nothing. Raises `BackendError` when it fails."""
    room = max(200, limit - len(header))
    if len(text) <= room:
        return await _ask(llm, model, prompt, header + text, budget=budget, what=what) or None
    parts = split_text(text, room)
    summaries = []
    for n, part in enumerate(parts, 1):
        answer = await _ask(llm, model, PART_PROMPT.format(part=n, parts=len(parts)),
                            header + part, budget=budget, what=f"{what}, part {n}/{len(parts)}")
        if answer:
            summaries.append(answer)
    if not summaries:
        return None
    # combined in rounds: as many consecutive summaries as fit, until one request holds all
    for _ in range(32):
        joined = "\n\n".join(summaries)
        if len(joined) <= room or len(summaries) == 1:
            break
        grouped = split_text(joined, room)
        summaries = [a for group in grouped if (a := await _ask(
            llm, model, f"{prompt}\n\n{COMBINE_NOTE}", header + group,
            budget=budget, what=f"{what}, combining its parts"))]
        if not summaries:
            return None
    combined = "\n\n".join(summaries)[:room]
    return await _ask(llm, model, f"{prompt}\n\n{COMBINE_NOTE}", header + combined,
                      budget=budget, what=f"{what}, combining its parts") or None


async def summarise(
    llm: ChatClient,
    model: str,
    name: str,
    text: str,
    *,
    limit: int | None = None,
    budget: float = 120.0,
) -> str | None:
    """The LLM's summary of `text`, or None when it answered nothing. Nixx's own calls
    (`ChatClient.background`: each bounded by `MAX_TOKENS` and `budget` seconds, after
    the users' turns); a text longer than `limit` characters is summarised in parts
    (`summarise_text`). Raises `BackendError` (or `BackendUnavailable`) when the backend
    fails."""
    return await summarise_text(
        llm, model, DOCUMENT_SUMMARY_PROMPT, text,
        limit=limit if limit is not None else len(text) + len(name) + 16,
        budget=budget, header=f"Source: {name}\n\n",
    )
