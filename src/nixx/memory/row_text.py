"""What a buffer row's vector is made from.

`embedding_text(row, neighbours)` is the one place that decides; the background queue
(`nixx.memory.row_vectors`) calls it for every row, `nixx reindex` too. `neighbours` are
up to two non-marker rows before and two after the row in the same session (id order),
as far as they were written when the row is embedded.

The variants below were measured on the labelled benchmark (`bench/bench_recall.py
--variants`, figures in docs/performance.md); `embedding_text` is the one chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nixx.store.records import BufferRow

# A neighbour is cut to this many characters: it gives context, the row gives the meaning.
CONTEXT_CHARS = 300


def _clip(text: str, limit: int = CONTEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0]


def _before(row: BufferRow, neighbours: Sequence[BufferRow]) -> list[BufferRow]:
    return [n for n in neighbours if n.id < row.id and n.role != "marker"]


def _after(row: BufferRow, neighbours: Sequence[BufferRow]) -> list[BufferRow]:
    return [n for n in neighbours if n.id > row.id and n.role != "marker"]


def row_alone(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    return row.content


def with_previous(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    """The row after the one before it (what it answers or follows on from)."""
    before = _before(row, neighbours)
    if not before:
        return row.content
    return f"{_clip(before[-1].content)}\n{row.content}"


def with_window(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    """One row before, the row, one row after."""
    before, after = _before(row, neighbours), _after(row, neighbours)
    parts = [_clip(before[-1].content)] if before else []
    parts.append(row.content)
    if after:
        parts.append(_clip(after[0].content))
    return "\n".join(parts)


def exchange(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    """The user/assistant exchange the row belongs to: a user row with the answer after
    it, an assistant row with the user row before it."""
    if row.role == "assistant":
        before = _before(row, neighbours)
        if before and before[-1].role == "user":
            return f"{_clip(before[-1].content)}\n{row.content}"
        return row.content
    after = _after(row, neighbours)
    if after and after[0].role == "assistant":
        return f"{row.content}\n{_clip(after[0].content)}"
    return row.content


# A row shorter than this carries little meaning alone ("yes, Tuesday", "ok, do that"):
# its vector also covers the row before it.
SHORT_CHARS = 60


def short_with_previous(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    """The row alone; a short row after the one before it."""
    if len(row.content.strip()) >= SHORT_CHARS:
        return row.content
    return with_previous(row, neighbours)


def short_answer_with_question(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    """The row alone; a short row after a question, after that question ("Luna — it
    just suited him" after "What's the name?")."""
    before = _before(row, neighbours)
    if len(row.content.strip()) >= SHORT_CHARS or not before:
        return row.content
    if not before[-1].content.rstrip().endswith("?"):
        return row.content
    return with_previous(row, neighbours)


def with_speaker(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    return f"{row.role}: {with_previous(row, neighbours)}"


def with_date(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    return f"{row.created_at[:10]}: {with_previous(row, neighbours)}"


VARIANTS: dict[str, Callable[[BufferRow, Sequence[BufferRow]], str]] = {
    "row": row_alone,
    "row, short rows +prev": short_with_previous,
    "row, short answers +question": short_answer_with_question,
    "prev+row": with_previous,
    "prev+row+next": with_window,
    "exchange": exchange,
    "speaker+prev+row": with_speaker,
    "date+prev+row": with_date,
}


CHOSEN = "row"  # the variant `embedding_text` is


def embedding_text(row: BufferRow, neighbours: Sequence[BufferRow]) -> str:
    """The text a buffer row's vector is made from: the row alone. Measured, adding the
    neighbours (or the exchange) to the vector made fused R@10 worse (0.82-0.87 against
    0.90): a neighbour is often on another topic, or a long answer that drowns a short row,
    and acknowledgements ("ok, thanks") became near-copies of the rows they follow. The
    neighbours' contribution is taken at query time instead (`nixx.memory.search`: a row
    borrows part of its neighbours' scores), which keeps each vector about one row.
    A row can therefore be embedded as soon as it is written."""
    return row_alone(row, neighbours)


__all__ = ["CHOSEN", "VARIANTS", "embedding_text"]
