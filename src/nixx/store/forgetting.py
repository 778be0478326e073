"""Forgetting, the part both backends share: what a deletion takes with it, the queues
of repair work it leaves, and the record it keeps (never the content).

`MemoryStore.forget()` deletes, in one transaction, the buffer rows, summaries, sources
and memories it is given, and with them everything that would otherwise keep their text:

- every summary whose window covers a deleted buffer row (its window, if it still has
  rows, is queued to be summarised again: state ``forget.resummarise``);
- the memories of every buffer-range source whose range held a deleted row (the source
  keeps its name and id, its range shrinks to the rows that remain, its display summary
  is cleared, and it is queued for its chunks to be rebuilt: ``forget.rebuild_sources``);
  a buffer source with no message left is deleted;
- the memories of every deleted source.

Then one row is added to the forget log: when, what kind of request, which ids, how
many — never any of the text.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from nixx.errors import NotFound, ValidationError

RESUMMARISE_KEY = "forget.resummarise"  # [[start_id, end_id], ...] windows to summarise again
REBUILD_KEY = "forget.rebuild_sources"  # [source_id, ...] buffer sources to re-chunk
KINDS = ("buffer", "summary", "source", "memory", "query", "summary_edit")


class ForgetResultJson(TypedDict):
    """`ForgetResult.to_dict()`: what a forget answers (the API, `nixx forget --json`)."""

    log_id: int | None  # None: only the intent was cleared (nixx.memory.forget), no log entry
    kind: str
    at: str | None
    buffer_ids: list[int]
    summary_ids: list[int]
    source_ids: list[int]
    memory_ids: list[int]
    memories_removed: int
    resummarise: list[list[int]]
    rebuild_source_ids: list[int]


class ForgetLogJson(TypedDict):
    """`ForgetLogEntry.to_dict()`: one row of the forget log, ids and counts only."""

    id: int
    at: str
    kind: str
    ids: dict[str, list[int]]
    counts: dict[str, int]


@dataclass(frozen=True)
class ForgetResult:
    """What one `forget()` removed (ids ascending)."""

    log_id: int
    kind: str
    at: str
    buffer_ids: list[int] = field(default_factory=list)
    summary_ids: list[int] = field(default_factory=list)  # asked for + covering a deleted row
    source_ids: list[int] = field(default_factory=list)  # asked for + left without messages
    memory_ids: list[int] = field(default_factory=list)  # asked for one by one
    memories_removed: int = 0  # every memory row gone (with sources, rebuilds, one by one)
    resummarise: list[tuple[int, int]] = field(default_factory=list)
    rebuild_source_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> ForgetResultJson:
        return {
            "log_id": self.log_id,
            "kind": self.kind,
            "at": self.at,
            "buffer_ids": self.buffer_ids,
            "summary_ids": self.summary_ids,
            "source_ids": self.source_ids,
            "memory_ids": self.memory_ids,
            "memories_removed": self.memories_removed,
            "resummarise": [list(w) for w in self.resummarise],
            "rebuild_source_ids": self.rebuild_source_ids,
        }


@dataclass(frozen=True)
class ForgetLogEntry:
    id: int
    at: str
    kind: str
    ids: dict[str, list[int]]
    counts: dict[str, int]

    def to_dict(self) -> ForgetLogJson:
        return {
            "id": self.id,
            "at": self.at,
            "kind": self.kind,
            "ids": self.ids,
            "counts": self.counts,
        }


def clean_ids(values: Iterable[Any], what: str) -> list[int]:
    out: set[int] = set()
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(f"{what} ids must be whole numbers >= 1 (got {value!r})")
        out.add(int(value))
    return sorted(out)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValidationError(f"forget kind must be one of {', '.join(KINDS)} (got {kind!r})")
    return kind


def covers_any(start: int, end: int, sorted_ids: Sequence[int]) -> bool:
    """Whether some id of `sorted_ids` lies in [start, end]."""
    i = bisect.bisect_left(sorted_ids, start)
    return i < len(sorted_ids) and sorted_ids[i] <= end


@dataclass
class Plan:
    """What a forget takes with it, computed from the rows before anything is deleted."""

    summary_ids: list[int]
    resummarise: list[tuple[int, int]]
    source_ids: list[int]
    rebuild: dict[int, tuple[int, int]]  # source id -> its new (start_id, end_id)


def plan(
    buffer_ids: Sequence[int],
    summary_ids: Sequence[int],
    source_ids: Sequence[int],
    summaries: Iterable[tuple[int, int, int]],
    buffer_sources: Iterable[tuple[int, int | None, int | None]],
    rows_in: Any,
) -> Plan:
    """`summaries`: (id, start, end) of every summary; `buffer_sources`: (id, start, end)
    of every buffer source; `rows_in(start, end)`: [(id, role)] of the buffer rows in a
    range as stored now."""
    gone = set(buffer_ids)
    all_summaries = set(summary_ids)
    windows: list[tuple[int, int]] = []
    for sid, start, end in summaries:
        # covering a deleted row: removed, and its window summarised again from what
        # remains (also when it was asked for: the rest of its window keeps a summary)
        if buffer_ids and covers_any(start, end, buffer_ids):
            all_summaries.add(sid)
            windows.append((start, end))
    sources = set(source_ids)
    rebuild: dict[int, tuple[int, int]] = {}
    for src_id, src_start, src_end in buffer_sources:
        if src_id in sources or src_start is None or src_end is None:
            continue
        if not covers_any(src_start, src_end, buffer_ids):
            continue
        left = [(i, role) for i, role in rows_in(src_start, src_end) if i not in gone]
        if not any(role != "marker" for _, role in left):
            sources.add(src_id)
        else:
            rebuild[src_id] = (left[0][0], left[-1][0])
    return Plan(sorted(all_summaries), sorted(set(windows)), sorted(sources), rebuild)


class Ops(Protocol):
    """What `execute` needs of a backend, all inside one open write transaction."""

    def existing(self, table: str, ids: Sequence[int]) -> set[int]: ...
    def rows_in(self, start: int, end: int) -> list[tuple[int, str]]: ...
    def summary_windows(self) -> Iterable[tuple[int, int, int]]: ...
    def buffer_sources(self) -> Iterable[tuple[int, int | None, int | None]]: ...
    def delete(self, table: str, column: str, ids: Sequence[int]) -> int: ...
    def narrow_source(self, source_id: int, start: int, end: int) -> None: ...
    def update_state(self, key: str, fn: Callable[[Any], Any]) -> Any: ...
    def log(
        self, kind: str, ids: dict[str, list[int]], counts: dict[str, int]
    ) -> tuple[int, str]: ...


def execute(
    ops: Ops,
    kind: str,
    buffer_ids: Iterable[Any],
    summary_ids: Iterable[Any],
    source_ids: Iterable[Any],
    memory_ids: Iterable[Any],
) -> ForgetResult:
    """One forget, on a backend's open transaction (see the module docstring)."""
    kind = check_kind(kind)
    buffer = clean_ids(buffer_ids, "buffer")
    summaries = clean_ids(summary_ids, "summary")
    sources = clean_ids(source_ids, "source")
    memories = clean_ids(memory_ids, "memory")
    for table, asked, what in (
        ("buffer", buffer, "buffer row"),
        ("summaries", summaries, "summary"),
        ("sources", sources, "source"),
        ("memories", memories, "memory"),
    ):
        if asked:
            found = ops.existing(table, asked)
            missing = [i for i in asked if i not in found]
            if missing:
                raise NotFound(f"{what} {missing[0]} does not exist")
    todo = plan(
        buffer, summaries, sources, ops.summary_windows(), ops.buffer_sources(), ops.rows_in
    )
    rebuild = sorted(todo.rebuild)
    # children before parents: the foreign keys are checked statement by statement
    removed = ops.delete("memories", "id", memories)
    removed += ops.delete("memories", "source_id", rebuild)
    for source_id, (start, end) in todo.rebuild.items():
        ops.narrow_source(source_id, start, end)
    ops.delete("summaries", "id", todo.summary_ids)
    removed += ops.delete("memories", "source_id", todo.source_ids)
    ops.delete("sources", "id", todo.source_ids)
    # the row's vector goes with it (buffer_vectors: ON DELETE CASCADE); it is made
    # from the row alone (nixx.memory.row_text), so no other row's vector holds its text
    ops.delete("buffer", "id", buffer)
    if todo.resummarise:
        ops.update_state(RESUMMARISE_KEY, lambda cur: merged_windows(cur, todo.resummarise))
    if rebuild:
        ops.update_state(REBUILD_KEY, lambda cur: merged_ids(cur, rebuild))
    ids = log_ids(buffer, todo.summary_ids, todo.source_ids, memories, rebuild)
    log_id, at = ops.log(kind, ids, log_counts(ids, removed))
    return ForgetResult(
        log_id=log_id,
        kind=kind,
        at=at,
        buffer_ids=buffer,
        summary_ids=todo.summary_ids,
        source_ids=todo.source_ids,
        memory_ids=memories,
        memories_removed=removed,
        resummarise=todo.resummarise,
        rebuild_source_ids=rebuild,
    )


def edit_log(summary_id: int) -> tuple[dict[str, list[int]], dict[str, int]]:
    """The forget-log ids and counts of a summary edit."""
    ids = log_ids([], [summary_id], [], [], [])
    return ids, log_counts(ids, 0)


def log_ids(
    buffer_ids: Sequence[int],
    summary_ids: Sequence[int],
    source_ids: Sequence[int],
    memory_ids: Sequence[int],
    rebuilt: Sequence[int],
) -> dict[str, list[int]]:
    return {
        "buffer": list(buffer_ids),
        "summaries": list(summary_ids),
        "sources": list(source_ids),
        "memories": list(memory_ids),
        "rebuilt_sources": list(rebuilt),
    }


def log_counts(ids: dict[str, list[int]], memories_removed: int) -> dict[str, int]:
    counts = {key: len(value) for key, value in ids.items()}
    counts["memories_removed"] = memories_removed
    return counts


def merged_windows(current: Any, new: Sequence[tuple[int, int]]) -> list[list[int]]:
    """The resummarise queue with `new` windows added (no duplicates, oldest first)."""
    have = {tuple(w) for w in (current or []) if isinstance(w, list) and len(w) == 2}
    have.update(new)
    return [list(w) for w in sorted(have)]


def merged_ids(current: Any, new: Sequence[int]) -> list[int]:
    have = {int(i) for i in (current or []) if isinstance(i, int)}
    have.update(new)
    return sorted(have)


def snippet(text: str, terms: Sequence[str], width: int = 120) -> str:
    """A one-line excerpt of `text` around the first of `terms` it contains."""
    flat = " ".join(text.split())
    low = flat.lower()
    at = min((p for p in (low.find(t.lower()) for t in terms) if p >= 0), default=0)
    start = max(0, at - width // 3)
    piece = flat[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(flat) else "")


def query_terms(query: str) -> list[str]:
    """The words of a forget query: every one must occur (case-insensitive) in a match."""
    terms = [t for t in (query or "").split() if t]
    if not terms:
        raise ValidationError("the forget query must contain some text", param="query")
    if len(terms) > 20:
        raise ValidationError("a forget query takes at most 20 words", param="query")
    return terms
