"""The named shapes the memory store answers with besides its records: counts and the
reports of its disk-level chores (plain dicts at run time, typed for their readers)."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class BufferStats(TypedDict):
    """`MemoryStore.buffer_stats()`: rows stored and the newest id (0: none)."""

    rows: int
    max_id: int


class BufferVectorStats(TypedDict):
    """`MemoryStore.buffer_vector_stats()`: non-marker rows with and without a vector."""

    embedded: int
    pending: int


class Checkpoint(TypedDict):
    """SQLite's ``wal_checkpoint(TRUNCATE)``: ``busy`` 1 when a reader held it back."""

    busy: int
    wal_frames: int
    checkpointed: int


class ScrubReport(TypedDict, total=False):
    """What `MemoryStore.scrub()` did to the files on disk (SQLite) or why it cannot
    (PostgreSQL: `backend` and `note`)."""

    checkpoint: Checkpoint
    sidecars_removed: list[str]
    backend: str
    note: str


class VacuumReport(TypedDict, total=False):
    """`MemoryStore.vacuum()`: the storage's size before and after."""

    backend: str
    bytes_before: int
    bytes_after: int
    checkpoint: Checkpoint


# ---- the maintenance verbs (`nixx db …`, `nixx reindex`: store/maintenance.py) ------------
class EmbedderJson(TypedDict):
    model: str
    dim: int


class StoreCounts(TypedDict):
    buffer: int
    summaries: int
    sources: int
    memories: int


class DbInit(TypedDict):
    db_url: str
    created: bool
    applied: list[int]
    schema_version: int


class DbMigrate(TypedDict):
    db_url: str
    from_version: int
    applied: list[int]
    schema_version: int


class DbVacuum(VacuumReport, total=False):
    db_url: str


class DbStatus(TypedDict):
    db_url: str
    backend: str
    schema_version: int
    latest_version: int
    pending: list[int]
    embedder: EmbedderJson | None
    counts: StoreCounts | None
    size_bytes: NotRequired[int]  # SQLite: the file and its WAL


#: `nixx reindex`: vectors written, the embedder before and after.
ReindexReport = TypedDict(
    "ReindexReport",
    {"db_url": str, "vectors": int, "from": EmbedderJson | None, "to": EmbedderJson},
)
