"""Bulk-loading an export into PostgreSQL (`MemoryStore.import_records`): COPY for the
rows, binary parameters for the vectors, the HNSW indexes built once at the end."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from nixx.errors import EmbedderMismatch, ValidationError
from nixx.store.portable import record_pieces
from nixx.store.postgres_schema import narrow_vectors, widen_vectors
from nixx.store.records import EmbeddingInfo


class Loader:
    """Bulk-loads validated import batches with COPY, keeping ids."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.dim: int | None = None
        self.embedder: EmbeddingInfo | None = None
        self.widened = False

    def load(self, kind: str, batch: list[dict[str, Any]]) -> None:
        conn = self.conn
        if kind == "embedder":
            rec = batch[-1]
            self.embedder = EmbeddingInfo(model=rec["model"], dim=int(rec["dim"]))
            self.dim = self.embedder.dim
            conn.execute("DELETE FROM embedder")
            conn.execute(
                "INSERT INTO embedder (model, dim) VALUES (%s, %s)",
                (self.embedder.model, self.embedder.dim),
            )
            # Load without the HNSW indexes; `finish` narrows the columns and builds them.
            widen_vectors(conn)
            self.widened = True
            return
        if kind == "state":
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO state (key, value) VALUES (%s, %s)",
                    [(r["key"], Jsonb(r["value"])) for r in batch],
                )
            return
        vectored = batch  # the records carrying a vector
        if kind == "buffer":
            vectored = [
                r for r in batch if r.get("embedding") is not None and r["role"] != "marker"
            ]
        if kind in ("summary", "memory") or (kind == "buffer" and vectored):
            if self.dim is None:  # no embedder record: an unnamed one of this dimension
                self.embedder = EmbeddingInfo(model="", dim=len(vectored[0]["embedding"]))
                self.dim = self.embedder.dim
                conn.execute("INSERT INTO embedder (model, dim) VALUES ('', %s)", (self.dim,))
                widen_vectors(conn)
                self.widened = True
            for r in vectored:
                if len(r["embedding"]) != self.dim:
                    raise EmbedderMismatch(
                        f"{kind} {r['id']} embedding has {len(r['embedding'])} dimensions but "
                        f"the export's vectors have {self.dim}"
                    )
        table, columns, row = _LOAD[kind]
        if kind in ("summary", "memory"):  # vectors go as binary parameters
            marks = ", ".join("%s::vector" if c == "embedding" else "%s" for c in columns)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                    [row(r) for r in batch],
                )
            return
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for r in batch:
                copy.write_row(row(r))
        if kind == "buffer" and vectored:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO buffer_vectors (buffer_id, embedding, pieces) "
                    "VALUES (%s, %s::vector, %s)",
                    [
                        (
                            r["id"],
                            _vector_param(r["embedding"], f"buffer {r['id']}"),
                            record_pieces(r, self.dim),
                        )
                        for r in vectored
                    ],
                )

    def finish(self) -> None:
        conn = self.conn
        for table in ("buffer", "summaries", "sources", "memories", "forget_log"):
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
            )
        if self.widened and self.embedder is not None:
            narrow_vectors(conn, self.embedder.dim)


def _vector_param(values: list[float], what: str) -> np.ndarray:
    try:
        vec = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValidationError(f"{what}: the embedding must be an array of numbers") from None
    if vec.ndim != 1 or not np.isfinite(vec).all():
        raise ValidationError(f"{what}: the embedding must be a flat array of finite numbers")
    return vec


_LOAD: dict[str, tuple[str, tuple[str, ...], Callable[[dict[str, Any]], tuple[Any, ...]]]] = {
    "buffer": (
        "buffer",
        ("id", "role", "content", "origin", "meta", "created_at"),
        lambda r: (
            r["id"],
            r["role"],
            r["content"],
            r["origin"],
            Jsonb(r["meta"]),
            parse_iso(r["created_at"], f"buffer {r['id']}"),
        ),
    ),
    "summary": (
        "summaries",
        (
            "id",
            "content",
            "embedding",
            "tags",
            "entities",
            "start_buffer_id",
            "end_buffer_id",
            "created_at",
        ),
        lambda r: (
            r["id"],
            r["content"],
            _vector_param(r["embedding"], f"summary {r['id']}"),
            list(r["tags"]),
            Jsonb(r["entities"]),
            r["start_buffer_id"],
            r["end_buffer_id"],
            parse_iso(r["created_at"], f"summary {r['id']}"),
        ),
    ),
    "source": (
        "sources",
        ("id", "name", "type", "summary", "start_id", "end_id", "meta", "created_at"),
        lambda r: (
            r["id"],
            r["name"],
            r["source_type"],
            r["summary"],
            r["start_id"],
            r["end_id"],
            Jsonb(r["meta"]),
            parse_iso(r["created_at"], f"source {r['id']}"),
        ),
    ),
    "forget": (
        "forget_log",
        ("id", "forgotten_at", "kind", "ids", "counts"),
        lambda r: (
            r["id"],
            parse_iso(r["at"], f"forget {r['id']}"),
            r["kind"],
            Jsonb(r["ids"]),
            Jsonb(r["counts"]),
        ),
    ),
    "memory": (
        "memories",
        ("id", "content", "embedding", "source_id", "metadata", "created_at"),
        lambda r: (
            r["id"],
            r["content"],
            _vector_param(r["embedding"], f"memory {r['id']}"),
            r["source_id"],
            Jsonb(r["metadata"]),
            parse_iso(r["created_at"], f"memory {r['id']}"),
        ),
    ),
}


def parse_iso(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(f"{what}: created_at must be an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{what}: created_at {value!r} is not ISO 8601") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed
