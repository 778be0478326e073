"""The portable record format shared by every backend: timestamps, vectors and the
JSONL export/import records (described in docs/storage.md).

    {"type": "header", "format": "nixx-export", "version": 1}
    {"type": "embedder", "model", "dim"}                          (if bound)
    {"type": "state", "key", "value"}
    {"type": "buffer", "id", "role", "content", "origin", "created_at", "meta"[, "embedding"]}
    {"type": "summary", "id", "content", "embedding", "tags", "entities",
     "start_buffer_id", "end_buffer_id", "created_at"}
    {"type": "source", "id", "name", "source_type", "summary", "start_id", "end_id",
     "meta", "created_at"}
    {"type": "memory", "id", "source_id", "content", "embedding", "metadata", "created_at"}
    {"type": "forget", "id", "at", "kind", "ids", "counts"}      (the forget log)

Records come in that order, each type by ascending id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from nixx.errors import EmbedderMismatch, ValidationError
from nixx.store.records import BufferRow, Memory, Source, Summary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nixx.store.forgetting import ForgetLogEntry

EXPORT_FORMAT = "nixx-export"
EXPORT_VERSION = 1
RECORD_TYPES: tuple[str, ...] = (
    "header",
    "embedder",
    "state",
    "buffer",
    "summary",
    "source",
    "memory",
    "forget",
)


class HeaderRecord(TypedDict):
    type: Literal["header"]
    format: str
    version: int


class EmbedderRecord(TypedDict):
    type: Literal["embedder"]
    model: str
    dim: int


class StateRecord(TypedDict):
    type: Literal["state"]
    key: str
    value: Any  # any JSON value


class BufferRecord(TypedDict):
    type: Literal["buffer"]
    id: int
    role: str
    content: str
    origin: str
    created_at: str
    meta: dict[str, Any]  # the row's JSON metadata, as stored
    embedding: NotRequired[list[float]]
    pieces: NotRequired[list[list[float]]]  # its sentences' vectors (nixx.memory.pieces)


class SummaryRecord(TypedDict):
    type: Literal["summary"]
    id: int
    content: str
    embedding: list[float]
    tags: list[str]
    entities: dict[str, list[str]]
    start_buffer_id: int
    end_buffer_id: int
    created_at: str


class SourceRecord(TypedDict):
    type: Literal["source"]
    id: int
    name: str
    source_type: str
    summary: str | None
    start_id: int | None
    end_id: int | None
    meta: dict[str, Any]  # the source's JSON metadata, as stored
    created_at: str


class MemoryRecord(TypedDict):
    type: Literal["memory"]
    id: int
    source_id: int
    content: str
    embedding: list[float]
    metadata: dict[str, Any]  # the chunk's JSON metadata, as stored
    created_at: str


class ForgetRecord(TypedDict):
    type: Literal["forget"]
    id: int
    at: str
    kind: str
    ids: dict[str, list[int]]
    counts: dict[str, int]


#: One parsed line of an export as read back, not yet checked (`export_check.RecordReader`
#: checks its fields by its ``type`` before anything is stored).
RawRecord = Mapping[str, Any]

#: One line of an export (`MemoryStore.export_records`), by its ``type``.
ExportRecord = (
    HeaderRecord
    | EmbedderRecord
    | StateRecord
    | BufferRecord
    | SummaryRecord
    | SourceRecord
    | MemoryRecord
    | ForgetRecord
)


def header_record() -> HeaderRecord:
    return {"type": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION}


def check_header(record: Mapping[str, Any]) -> None:
    """Raise `ValidationError` unless `record` is a header this version can read."""
    if record.get("type") != "header" or record.get("format") != EXPORT_FORMAT:
        raise ValidationError("not a nixx export: the first record must be the nixx-export header")
    if record.get("version") != EXPORT_VERSION:
        raise ValidationError(
            f"nixx export version {record.get('version')!r} is not supported "
            f"(this nixx reads version {EXPORT_VERSION})"
        )


def utc_now() -> str:
    """Now as ISO 8601 UTC with microseconds and a Z: ``2026-11-30T04:48:34.123456Z``."""
    return format_timestamp(datetime.now(UTC))


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: str) -> datetime:
    """Parse the ISO form written by `utc_now()` (any ISO 8601 with an offset or Z)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def as_vector(embedding: Any, dim: int | None, *, what: str = "embedding") -> np.ndarray:
    """`embedding` as a 1-D float32 vector, checked against `dim` when given.

    Raises `EmbedderMismatch` on a wrong dimension, `ValidationError` on a vector that
    is not 1-D or holds NaN/inf.
    """
    vec = np.asarray(embedding, dtype=np.float32)
    if vec.ndim != 1 or vec.size == 0:
        raise ValidationError(f"{what} must be a non-empty 1-D vector, got shape {vec.shape}")
    if dim is not None and vec.shape[0] != dim:
        raise EmbedderMismatch(
            f"{what} has {vec.shape[0]} dimensions but this store holds {dim}-dimensional "
            "vectors; embed with the store's model, or run `nixx reindex` to re-embed "
            "everything with the new one"
        )
    if not np.isfinite(vec).all():
        raise ValidationError(f"{what} contains NaN or infinite values")
    return vec


def pieces_blob(pieces: np.ndarray) -> bytes:
    """A row's piece vectors (k x dim) as stored: float16 little-endian, row after row
    (half the bytes of float32; a piece only lifts a row's cosine, `nixx.memory.pieces`)."""
    return np.ascontiguousarray(pieces, dtype="<f2").tobytes()


def pieces_of(data: bytes, dim: int) -> np.ndarray:
    """`pieces_blob`'s bytes as a (k, dim) float32 matrix."""
    return np.frombuffer(data, dtype="<f2").astype(np.float32).reshape(-1, dim)


def checked_pieces(pieces: Mapping[int, np.ndarray] | None, row_id: int, dim: int) -> bytes | None:
    """Row `row_id`'s pieces from `pieces` (buffer id -> k x dim) as stored, checked like
    its vector: b"" when the row is not in `pieces` or has none (it was split: one
    sentence), None when `pieces` is None (not split yet: the queue splits it later)."""
    if pieces is None:
        return None
    found = pieces.get(row_id)
    if found is None or len(found) == 0:
        return b""
    try:
        matrix = np.asarray(found, dtype=np.float32)
    except (TypeError, ValueError):
        matrix = np.empty((0, 0), np.float32)  # ragged or not numbers: the error below
    if matrix.ndim != 2 or matrix.shape[1] != dim or not np.isfinite(matrix).all():
        raise ValidationError(
            f"buffer row {row_id} pieces must be finite {dim}-dimensional vectors, "
            f"got shape {matrix.shape}"
        )
    return pieces_blob(matrix)


def record_pieces(rec: RawRecord, dim: int | None) -> bytes | None:
    """An imported buffer record's pieces as stored (b"": none, the row was split; None:
    the record has no "pieces", it was not split)."""
    if "pieces" not in rec or rec["pieces"] is None or dim is None:
        return None
    return checked_pieces({int(rec["id"]): rec["pieces"]}, int(rec["id"]), dim)


def vector_to_list(vec: np.ndarray) -> list[float]:
    """JSON floats that round-trip to the same float32 values."""
    values: list[float] = np.asarray(vec, dtype=np.float32).tolist()
    return values


def vectors_from_records(values: Sequence[Sequence[float]]) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def buffer_record(
    b: BufferRow, embedding: np.ndarray | None = None, pieces: np.ndarray | None = None
) -> BufferRecord:
    """A buffer row's record; `embedding` (its row vector) and `pieces` (its sentences'
    vectors) only when it has them."""
    record: BufferRecord = {
        "type": "buffer",
        "id": b.id,
        "role": b.role,
        "content": b.content,
        "origin": b.origin,
        "created_at": b.created_at,
        "meta": b.meta,
    }
    if embedding is not None:
        record["embedding"] = vector_to_list(embedding)
    if embedding is not None and pieces is not None:
        record["pieces"] = [vector_to_list(p) for p in pieces]
    return record


def summary_record(s: Summary) -> SummaryRecord:
    assert s.embedding is not None
    return {
        "type": "summary",
        "id": s.id,
        "content": s.content,
        "embedding": vector_to_list(s.embedding),
        "tags": s.tags,
        "entities": s.entities,
        "start_buffer_id": s.start_buffer_id,
        "end_buffer_id": s.end_buffer_id,
        "created_at": s.created_at,
    }


def source_record(src: Source) -> SourceRecord:
    return {
        "type": "source",
        "id": src.id,
        "name": src.name,
        "source_type": src.type,
        "summary": src.summary,
        "start_id": src.start_id,
        "end_id": src.end_id,
        "meta": src.meta,
        "created_at": src.created_at,
    }


def memory_record(m: Memory) -> MemoryRecord:
    assert m.embedding is not None
    return {
        "type": "memory",
        "id": m.id,
        "source_id": m.source_id,
        "content": m.content,
        "embedding": vector_to_list(m.embedding),
        "metadata": m.metadata,
        "created_at": m.created_at,
    }


def forget_record(entry: ForgetLogEntry) -> ForgetRecord:
    """A forget-log entry (`nixx.store.forgetting.ForgetLogEntry`): ids and counts only."""
    return {
        "type": "forget",
        "id": entry.id,
        "at": entry.at,
        "kind": entry.kind,
        "ids": entry.ids,
        "counts": entry.counts,
    }
