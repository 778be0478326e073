"""Transcript tools: let the model search and read the episodic buffer.

`search_transcript` is full-text over the buffer (`MemoryStore.search_buffer`);
`view_transcript` reads a range of rows (`MemoryStore.get_buffer`), at most
`VIEW_MAX_ROWS` rows per call, and says how to continue when it stopped early.
"""

from __future__ import annotations

from nixx.errors import ValidationError
from nixx.store.base import MemoryStore
from nixx.store.records import BufferRow
from nixx.values import MAX_ID

SEARCH_MAX_LIMIT = 50
SNIPPET_CHARS = 500
VIEW_MAX_ROWS = 50
ROW_MAX_CHARS = 4000


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" […{len(text) - limit} more characters]"


def _line(row: BufferRow, limit: int) -> str:
    flag = " (incomplete)" if row.meta.get("incomplete") else ""
    return f"[{row.id}] {row.role}{flag} {row.created_at}: {_clip(row.content, limit)}"


def search_transcript(store: MemoryStore, query: str, limit: int = 10) -> str:
    """Best-first buffer rows matching `query`, one per line with their ids."""
    if not query.strip():
        raise ValidationError("query is empty: give words to search the transcript for")
    if limit < 1:
        raise ValidationError("limit must be at least 1")
    limit = min(limit, SEARCH_MAX_LIMIT)
    hits = store.search_buffer(query, limit=limit)
    if not hits:
        return f"no transcript rows match {query!r}"
    lines = [f"{len(hits)} rows match {query!r} (best first; view_transcript shows context):"]
    lines += [_line(hit.row, SNIPPET_CHARS) for hit in hits]
    return "\n".join(lines)


def view_transcript(store: MemoryStore, start: int, end: int | None = None) -> str:
    """Buffer rows `start`..`end` (inclusive), at most `VIEW_MAX_ROWS` of them."""
    if start < 1:
        raise ValidationError("start must be a buffer id of 1 or more")
    if end is not None and end < start:
        raise ValidationError(f"end ({end}) is before start ({start})")
    capped_end = min(start + VIEW_MAX_ROWS - 1, MAX_ID)  # ids end at 2^63-1: so does the range
    want_end = capped_end if end is None else min(end, capped_end)
    rows = store.get_buffer(start, want_end)
    if not rows:
        newest = store.buffer_stats().get("max_id", 0)
        return f"no transcript rows from id {start} (the newest row is {newest})"
    lines = [_line(row, ROW_MAX_CHARS) for row in rows]
    last = rows[-1].id
    newest = store.buffer_stats().get("max_id", last)
    if last < (newest if end is None else min(end, newest)) and last >= want_end:
        lines.append(
            f"[stopped after {len(rows)} rows; call view_transcript with start={last + 1} for more]"
        )
    return "\n".join(lines)
