"""Forgetting, the service side: `Forgetting`, the collaborator `NixxService` hands
every deletion and hand correction to (the store's transaction, then the intent, then
the files on disk, inside the forget fence; the repairs scheduled after), and its
synchronous helpers: item references such as ``buffer:12``, what a forget query
matches, and the intent that came from a deleted row.

A reference names one stored item: ``buffer:ID``, ``summary:ID``, ``source:ID`` or
``memory:ID``, or ``intent:1`` (the current intent). A query matches every non-marker
buffer row (its text or its `meta`: an assistant row's tool-call arguments and agent),
summary and memory whose text contains all of its words (case-insensitive), every source
whose name, `meta` or display summary does, and the intent (manual or derived) when its
text does; a dry run lists them with a snippet, and a confirmed forget deletes exactly
the references it is given, each of which must still match the query.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from anyio import to_thread

from nixx.errors import NotFound, ValidationError
from nixx.memory import intent as intent_state
from nixx.memory.fence import ForgetFence
from nixx.store.base import MemoryStore
from nixx.store.forgetting import (
    REBUILD_KEY,
    RESUMMARISE_KEY,
    ForgetResult,
    ForgetResultJson,
    query_terms,
    snippet,
)
from nixx.store.records import Summary
from nixx.store.reports import ScrubReport
from nixx.values import MAX_ID

if TYPE_CHECKING:
    import numpy as np

    from nixx.memory.episodic import Episodic
    from nixx.memory.layout import MemoryTrail

REF_KINDS = {"buffer": "buffer_ids", "summary": "summary_ids", "source": "source_ids",
             "memory": "memory_ids"}  # fmt: skip
_PLURAL = {"summaries": "summary", "sources": "source", "memories": "memory"}
INTENT_REF = "intent:1"  # the current intent (there is one)
MATCH_LIMIT = 200  # per kind, in one dry run


class ForgetAnswer(TypedDict):
    """What a forget did: `ForgetResult.to_dict()` (the log entry: ids by kind, the
    windows to summarise again, the sources to rebuild), whether the intent went too,
    and what was scrubbed from the files on disk (`MemoryStore.scrub`)."""

    forgotten: ForgetResultJson
    intent_cleared: bool
    disk: ScrubReport


class BufferMatch(TypedDict):
    id: str  # the reference, ``buffer:ID``
    buffer_id: int
    role: str
    created_at: str
    snippet: str


class SummaryMatch(TypedDict):
    id: str  # ``summary:ID``
    summary_id: int
    start_buffer_id: int
    end_buffer_id: int
    created_at: str
    snippet: str


class MemoryMatch(TypedDict):
    id: str  # ``memory:ID``
    memory_id: int
    source_id: int
    source_name: str
    created_at: str
    snippet: str


class SourceMatch(TypedDict):
    id: str  # ``source:ID``
    source_id: int
    name: str
    type: str
    created_at: str
    snippet: str


class IntentMatch(TypedDict):
    id: str  # ``intent:1``
    source: str  # "manual" | "derived"
    snippet: str


class Matches(TypedDict):
    """What a forget query matches now (`matches`; the dry run of the API, the CLI and the
    TUI): each item with its reference (``id``) and a snippet, `ids` every reference, in
    that order; `truncated` when a kind reached the limit."""

    query: str
    terms: list[str]
    buffer: list[BufferMatch]
    summaries: list[SummaryMatch]
    memories: list[MemoryMatch]
    sources: list[SourceMatch]
    intent: IntentMatch | None
    ids: list[str]
    truncated: bool


@dataclass(frozen=True)
class SummaryCorrection:
    """What a person corrects in a summary (at least one): its `content` (embedded
    again), `tags`, `entities` (tools, people, concepts, files, urls)."""

    content: str | None = None
    tags: Sequence[str] | None = None
    entities: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class Repairs:
    """The background repairs a forget may leave: each schedules its job."""

    resummarise: Callable[[], None]
    rebuild_sources: Callable[[], None]
    rederive_intent: Callable[[], None]


class Forgetting:
    def __init__(
        self,
        store: MemoryStore,
        episodic: Episodic,
        fence: ForgetFence,
        embed: Callable[[Sequence[str]], Awaitable[np.ndarray]],
        repairs: Repairs,
        trail: MemoryTrail | None,
    ) -> None:
        self.store = store
        self.episodic = episodic
        self.fence = fence
        self.embed = embed
        self.repairs = repairs
        # the memory the `cache` layout carries into a conversation's later requests is
        # held in this process: after a forget it may hold what is gone (None: no trail)
        self.trail = trail

    def _forget_carried(self) -> None:
        if self.trail is not None:
            self.trail.forget()

    async def forget(self, kind: str, clear_intent: bool = False, /,
                     **ids: Sequence[int]) -> ForgetAnswer:
        """One deletion: the store's transaction, then the intent, then the files on
        disk; the repairs (re-summaries, source chunks, intent) run in the background.
        `clear_intent`: the intent matched the forget query and goes too (no
        re-derivation: the rows it came from may still say what was forgotten)."""
        async with self.fence.forgetting():

            def work() -> tuple[ForgetResult, bool, ScrubReport]:
                result = self.store.forget(kind, **ids)
                cleared = intent_from_deleted(self.store, result.buffer_ids)
                if clear_intent:
                    intent_state.clear(self.store)
                return result, cleared, self.store.scrub()

            result, intent_cleared, scrub = await to_thread.run_sync(work)
            self.episodic.forget_cache()
            self._forget_carried()
        if result.resummarise:
            self.repairs.resummarise()
        if result.rebuild_source_ids:
            self.repairs.rebuild_sources()
        if intent_cleared:
            self.repairs.rederive_intent()
        return {"forgotten": result.to_dict(), "intent_cleared": intent_cleared or clear_intent,
                "disk": scrub}

    async def buffer_range(self, start_id: int, end_id: int) -> ForgetAnswer:
        """Every row with start_id <= id <= end_id (markers included)."""
        if end_id < start_id:
            raise ValidationError(
                f"end_id ({end_id}) must be >= start_id ({start_id})", param="end_id"
            )
        rows = await to_thread.run_sync(self.store.get_buffer, start_id, end_id)
        if not rows:
            raise NotFound(f"the buffer has no rows between ids {start_id} and {end_id}")
        return await self.forget("buffer", buffer_ids=[r.id for r in rows])

    async def refs(self, refs: Sequence[str]) -> ForgetAnswer:
        """Delete the items named by references (all or nothing)."""
        if not refs:
            raise ValidationError("name at least one item (buffer:ID, summary:ID, ...)")
        grouped = group_refs(refs)
        kinds = [k for k, arg in REF_KINDS.items() if grouped[arg]]
        return await self.forget(kinds[0] if len(kinds) == 1 else "query", **grouped)

    async def query(self, query: str, ids: Sequence[str]) -> ForgetAnswer:
        """Delete exactly `ids`, each of which `query` must still match (``intent:1``:
        clear the intent, set by hand or derived, whose text matched)."""
        grouped = await to_thread.run_sync(confirmed_refs, self.store, query, list(ids))
        _, with_intent = split_intent(ids)
        if any(grouped.values()):
            return await self.forget("query", with_intent, **grouped)
        async with self.fence.forgetting():  # the intent alone
            await to_thread.run_sync(intent_state.clear, self.store)
            scrub = await to_thread.run_sync(self.store.scrub)
            self._forget_carried()
        empty: ForgetResultJson = {"log_id": None, "kind": "query", "at": None, "buffer_ids": [],
                                 "summary_ids": [], "source_ids": [], "memory_ids": [],
                                 "memories_removed": 0, "resummarise": [],
                                 "rebuild_source_ids": []}
        return {"forgotten": empty, "intent_cleared": True, "disk": scrub}

    async def update_summary(self, summary_id: int, fix: SummaryCorrection) -> Summary:
        """`NixxService.update_summary` (see there)."""
        content, tags, entities = fix.content, fix.tags, fix.entities
        if content is None and tags is None and entities is None:
            raise ValidationError("give at least one of content, tags, entities")
        if content is not None and not content.strip():
            raise ValidationError("content must be non-empty text", param="content")
        await to_thread.run_sync(self.store.get_summary, summary_id)  # 404 before embedding
        vector = None if content is None else (await self.embed([content]))[0]
        async with self.fence.forgetting():  # a re-summary in flight must not undo the edit
            summary = await to_thread.run_sync(
                lambda: self.store.update_summary(
                    summary_id, content=content, embedding=vector, tags=tags, entities=entities
                )
            )
            await to_thread.run_sync(self.store.scrub)
            self._forget_carried()
        return summary

    async def resume_repairs(self) -> None:
        """Schedule the repairs a forget left queued (say `nixx forget` while the LLM
        backend was down): the server calls this when it starts."""
        if await to_thread.run_sync(self.store.get_state, RESUMMARISE_KEY):
            self.repairs.resummarise()
        if await to_thread.run_sync(self.store.get_state, REBUILD_KEY):
            self.repairs.rebuild_sources()


def parse_ref(ref: str) -> tuple[str, int]:
    """``"buffer:12"`` -> ("buffer", 12); `ValidationError` saying the form otherwise."""
    kind, _, number = str(ref).strip().partition(":")
    kind = kind.strip().lower()
    kind = _PLURAL.get(kind, kind)
    if (kind not in REF_KINDS or not number.strip().isascii() or not number.strip().isdigit()
            or not 1 <= int(number) <= MAX_ID):
        raise ValidationError(
            f"{ref!r} is not an item reference: write buffer:ID, summary:ID, source:ID or "
            "memory:ID (ids as shown by search or a forget dry run)",
            param="ids",
        )
    return kind, int(number)


def split_intent(refs: Iterable[str]) -> tuple[list[str], bool]:
    """The references without ``intent:1``, and whether it was among them."""
    rest, intent = [], False
    for ref in refs:
        if str(ref).strip().lower() in (INTENT_REF, "intent"):
            intent = True
        else:
            rest.append(ref)
    return rest, intent


def group_refs(refs: Iterable[str]) -> dict[str, list[int]]:
    """References grouped as `MemoryStore.forget` keyword arguments."""
    out: dict[str, list[int]] = {arg: [] for arg in REF_KINDS.values()}
    for ref in refs:
        kind, number = parse_ref(ref)
        if number not in out[REF_KINDS[kind]]:
            out[REF_KINDS[kind]].append(number)
    return out


def matches(store: MemoryStore, query: str, limit: int = MATCH_LIMIT) -> Matches:
    """What `query` matches now (`Matches`)."""
    terms = query_terms(query)
    rows, summaries, memories = store.find_text(terms, limit)
    names: dict[int, str] = {}
    if memories:
        names = {s.id: s.name for s in store.list_sources()}
    buffer: list[BufferMatch] = [
        {
            "id": f"buffer:{r.id}",
            "buffer_id": r.id,
            "role": r.role,
            "created_at": r.created_at,
            "snippet": snippet(_row_text(r.content, r.meta, terms), terms),
        }
        for r in rows
    ]
    summ: list[SummaryMatch] = [
        {
            "id": f"summary:{s.id}",
            "summary_id": s.id,
            "start_buffer_id": s.start_buffer_id,
            "end_buffer_id": s.end_buffer_id,
            "created_at": s.created_at,
            "snippet": snippet(s.content, terms),
        }
        for s in summaries
    ]
    mems: list[MemoryMatch] = [
        {
            "id": f"memory:{m.id}",
            "memory_id": m.id,
            "source_id": m.source_id,
            "source_name": names.get(m.source_id, ""),
            "created_at": m.created_at,
            "snippet": snippet(m.content, terms),
        }
        for m in memories
    ]
    sources: list[SourceMatch] = []
    for src in store.list_sources():  # name, meta and display summary hold text too
        text = " ".join([src.name, src.summary or "", json.dumps(src.meta, ensure_ascii=False)])
        if _has_all(text, terms):
            sources.append({"id": f"source:{src.id}", "source_id": src.id, "name": src.name,
                            "type": src.type, "created_at": src.created_at,
                            "snippet": snippet(text, terms)})
            if len(sources) >= limit:
                break
    found_intent: IntentMatch | None = None
    value = intent_state.get(store)
    if value and _has_all(str(value["text"]), terms):
        found_intent = {"id": INTENT_REF, "source": value["source"],
                        "snippet": snippet(value["text"], terms)}
    return {
        "query": query,
        "terms": terms,
        "buffer": buffer,
        "summaries": summ,
        "memories": mems,
        "sources": sources,
        "intent": found_intent,
        "ids": [item["id"] for item in (*buffer, *summ, *mems, *sources)]
        + ([INTENT_REF] if found_intent else []),
        "truncated": max(len(rows), len(summaries), len(memories), len(sources)) >= limit,
    }


def _has_all(text: str, terms: Sequence[str]) -> bool:
    low = text.lower()
    return bool(terms) and all(t.lower() in low for t in terms)


def _row_text(content: str, meta: dict[str, Any], terms: Sequence[str]) -> str:
    """What a buffer row matched in: its content, else its content and its meta."""
    if _has_all(content, terms) or not meta:
        return content
    return content + " " + json.dumps(meta, ensure_ascii=False)


def confirmed_refs(store: MemoryStore, query: str, ids: Sequence[str]) -> dict[str, list[int]]:
    """The references to delete for a confirmed forget query: each must be one the
    query matches now (so nothing is deleted that the dry run did not show)."""
    if not ids:
        raise ValidationError(
            "a forget with dry_run false needs the ids to delete: run it with dry_run true "
            "first and pass the ids it listed",
            param="ids",
        )
    grouped = group_refs(split_intent(ids)[0])
    found = set(matches(store, query, limit=max(MATCH_LIMIT, len(ids)))["ids"])
    stale = [ref for ref in ids if _normal(ref) not in found]
    if stale:
        raise ValidationError(
            f"{', '.join(stale[:5])} no longer match {query!r} (deleted or changed since "
            "the dry run); run the dry run again",
            param="ids",
        )
    return grouped


def _normal(ref: str) -> str:
    if str(ref).strip().lower() in (INTENT_REF, "intent"):
        return INTENT_REF
    kind, number = parse_ref(ref)
    return f"{kind}:{number}"


def intent_from_deleted(store: MemoryStore, buffer_ids: Sequence[int]) -> bool:
    """Clear a derived intent that was derived from a deleted row; True when cleared.
    An intent typed by hand is the user's own words and stays."""
    value = intent_state.get(store)
    if not value or value.get("source") != "derived" or not buffer_ids:
        return False
    rows = value.get("rows")
    if isinstance(rows, list) and len(rows) == 2:
        first, last = int(rows[0]), int(rows[1])
    else:  # derived before the rows were recorded: anything up to the derivation
        first, last = 1, int(store.get_state(intent_state.DERIVED_AT_KEY, 0) or 0)
    if not any(first <= i <= last for i in buffer_ids):
        return False
    intent_state.clear(store)
    return True
