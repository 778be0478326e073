"""The SQLite engine's vector search: an in-memory index per vector table
(`nixx.store.vector_index`), the engine's collaborator.

The database holds the vectors; each index is built lazily from the stored BLOBs and
kept current before each search by a cheap query (new ids above the watermark; the
change counters of ``vector_state`` for deletions and re-embedding). A large table gets
an HNSW graph whose candidates are re-scored exactly from the stored vectors, saved as a
sidecar file next to the database. `SQLiteVectors.search` returns (row, cosine) pairs,
the rows SELECTed with the table's hit columns (`nixx.store.sqlite_queries`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from nixx.errors import StoreError
from nixx.store.database import VectorQuery
from nixx.store.portable import as_vector
from nixx.store.sql_queries import BUFFER_COLS
from nixx.store.sqlite_queries import MEMORY_HIT_COLS, SUMMARY_HIT_COLS, one
from nixx.store.vector_index import (
    DEFAULT_ANN_THRESHOLD,
    SyncPoint,
    VectorIndex,
    decode_vectors,
    dot_rows,
    normalise_rows,
)

log = logging.getLogger(__name__)

_LOAD_CHUNK = 20_000
#: Tables with an in-memory vector index.
VECTOR_TABLES = ("summaries", "memories", "buffer_vectors")
#: A row of a vector search's hits and its cosine.
Found = list[tuple[tuple[Any, ...], float]]


@dataclass(frozen=True)
class _IndexSpec:
    """How a vector table maps onto its `VectorIndex`: `seq` grows as vectors arrive
    (the watermark), `key` is the id the index returns, `extra` the filter column."""

    seq: str
    key: str
    extra: str



_INDEX_SPECS = {
    "summaries": _IndexSpec("id", "id", "end_buffer_id"),
    "memories": _IndexSpec("id", "id", "0"),
    "buffer_vectors": _IndexSpec("seq", "buffer_id", "buffer_id"),
}


class SQLiteVectors:
    """The in-memory vector indexes of one SQLite store (see the module docstring)."""

    #: Widest HNSW candidate set tried before a filtered search falls back to an exact scan.
    ann_max_candidates = 4_096
    #: HNSW candidates fetched per result wanted (re-scored exactly, best `limit` kept).
    ann_overfetch = 2.0

    def __init__(
        self,
        path: Path,
        read: Callable[[], AbstractContextManager[apsw.Connection]],
        *,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
    ) -> None:
        self.path = path
        self._read = read
        self.ann_threshold = ann_threshold
        self._indexes: dict[str, VectorIndex] = {}
        self._index_locks = {name: threading.Lock() for name in VECTOR_TABLES}
        self._building: set[str] = set()  # tables whose index a background thread prepares
        self._warming: threading.Thread | None = None
        self._closed = False

    @property
    def indexes(self) -> dict[str, VectorIndex]:
        return self._indexes

    def close(self) -> None:
        """Save the graphs that changed enough (a cache: rebuilt if it cannot be written)."""
        for name, index in self._indexes.items():
            with self._index_locks[name], contextlib.suppress(OSError):
                index.save_sidecar(min_unsaved=1_000)
        self._closed = True

    def scrub(self) -> list[str]:
        """Drop the sidecar files (a graph may hold the bytes of deleted vectors: a
        removed key is only marked) and never save the graphs held in memory again
        (`close` would write them back). Returns the files removed."""
        for name, index in list(self._indexes.items()):
            with self._index_locks[name]:
                index.forbid_save()
        removed = []
        for table in VECTOR_TABLES:
            sidecar = self._sidecar(table)
            for path in (sidecar, sidecar.with_name(sidecar.name + ".json")):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path.name)
        return removed

    def _sidecar(self, table: str) -> Path:
        return self.path.with_name(f"{self.path.name}.{table}.hnsw")

    def refresh(self, table: str) -> None:
        """Bring a loaded in-memory index up to the table now, in the thread that wrote
        (the background queue), so the next search does not add the new vectors on its
        own time. Skipped while a search holds the index (it syncs itself) or before the
        index is loaded; a failure here is left for that search to meet."""
        index = self._indexes.get(table)
        if index is None or index.synced is None or table in self._building:
            return
        lock = self._index_locks[table]
        if not lock.acquire(blocking=False):
            return
        try:
            with self._read() as conn:
                dim = _bound_dim(conn)
                if dim is not None:
                    self._sync_index(conn, table, dim)
        except (apsw.Error, StoreError, OSError) as exc:
            log.debug("refreshing the %s index after a write failed: %s", table, exc)
        finally:
            lock.release()

    def search(self, table: str, vq: VectorQuery) -> Found:
        """(row, cosine) pairs, best first. Rows are SELECTed with the table's columns
        but the vector (for `buffer_vectors`: the buffer row's)."""
        embedding, limit = vq.embedding, vq.limit
        threshold, before_buffer_id = vq.threshold, vq.before
        if limit <= 0:
            return []
        with self._index_locks[table], self._read() as conn:
            dim = _bound_dim(conn)
            if dim is None:  # nothing stored yet
                return []
            query = as_vector(embedding, dim, what="query embedding")
            held = self._indexes.get(table)
            if table in self._building and (held is None or held.synced is None):
                # the background thread has not loaded anything yet: never wait for it
                q = normalise_rows(query)
                return self._exact_scan(conn, table, q, limit, threshold, before_buffer_id)
            index = self._sync_index(conn, table, dim)
            if not index.approximate:
                ids, scores = index.exact_search(
                    query, limit, threshold=threshold, extra_below=before_buffer_id
                )
                rows = _rows_by_id(conn, table, ids)
                return [
                    (rows[i], float(s))
                    for i, s in zip(ids.tolist(), scores, strict=True)
                    if i in rows
                ]
            return self._ann_search(conn, index, table, query, limit, threshold, before_buffer_id)

    def _ann_search(
        self,
        conn: apsw.Connection,
        index: VectorIndex,
        table: str,
        query: np.ndarray,
        limit: int,
        threshold: float | None,
        before_buffer_id: int | None,
    ) -> Found:
        """HNSW candidates re-scored exactly from the stored vectors, filtered; widen
        the candidate set while filters leave too few, then fall back to an exact scan."""
        q = normalise_rows(query)
        fetch = max(int(self.ann_overfetch * limit), 64)
        spec = _INDEX_SPECS[table]
        while True:
            ids = index.ann_candidates(q, fetch)
            # re-score from the vectors alone (no row text), fetch rows for the results only
            keys, scores, extra = _candidate_scores(conn, table, spec, ids, q, index.dim)
            exhausted = len(ids) < fetch
            lowest = float(scores.min()) if len(scores) else -2.0
            keep = np.ones(len(keys), dtype=bool)
            if threshold is not None:
                keep &= scores >= np.float32(threshold)
            if before_buffer_id is not None:
                keep &= extra < before_buffer_id
            if (
                int(keep.sum()) >= limit
                or exhausted
                or (threshold is not None and lowest < threshold)
            ):
                keys, scores = keys[keep], scores[keep]
                order = np.lexsort((keys, -scores))[:limit]
                rows = _rows_by_id(conn, table, keys[order])
                return [
                    (rows[int(k)], float(sc))
                    for k, sc in zip(keys[order], scores[order], strict=True)
                    if int(k) in rows
                ]
            if fetch >= self.ann_max_candidates:
                return self._exact_scan(conn, table, q, limit, threshold, before_buffer_id)
            fetch *= 4

    def _exact_scan(
        self,
        conn: apsw.Connection,
        table: str,
        q: np.ndarray,
        limit: int,
        threshold: float | None,
        before_buffer_id: int | None,
    ) -> Found:
        """Exact search straight from the stored vectors with the filter in SQL."""
        spec = _INDEX_SPECS[table]
        where, params = "", []
        if before_buffer_id is not None:
            where, params = f"WHERE {spec.extra} < ?", [before_buffer_id]
        best_ids = np.empty(0, np.int64)
        best_scores = np.empty(0, np.float32)
        dim = q.shape[0]
        after = 0
        while True:
            chunk = list(
                conn.execute(
                    f"SELECT {spec.key}, embedding FROM {table} {where} "
                    f"{'AND' if where else 'WHERE'} {spec.key} > ? ORDER BY {spec.key} LIMIT ?",
                    (*params, after, _LOAD_CHUNK),
                )
            )
            if not chunk:
                break
            after = chunk[-1][0]
            ids = np.fromiter((r[0] for r in chunk), np.int64, len(chunk))
            scores = dot_rows(normalise_rows(decode_vectors([r[1] for r in chunk], dim)), q)
            best_ids = np.concatenate([best_ids, ids])
            best_scores = np.concatenate([best_scores, scores])
            if len(best_scores) > limit:
                part = np.argpartition(-best_scores, limit - 1)[:limit]
                best_ids, best_scores = best_ids[part], best_scores[part]
        rows = _rows_by_id(conn, table, best_ids)
        out = [
            (rows[i], float(s))
            for i, s in zip(best_ids.tolist(), best_scores, strict=True)
            if i in rows and (threshold is None or s >= threshold)
        ]
        out.sort(key=lambda p: (-p[1], p[0][0]))
        return out[:limit]

    def _sync_index(
        self, conn: apsw.Connection, table: str, dim: int, into: VectorIndex | None = None
    ) -> VectorIndex:
        """Bring the table's in-memory index (or `into`) up to the database's state."""
        try:
            return self._sync_index_unguarded(conn, table, dim, into)
        except BaseException:
            index = into or self._indexes.get(table)
            if index is not None:  # half-loaded: start again next time, never trust it
                index.reset()
            raise

    def _sync_index_unguarded(
        self, conn: apsw.Connection, table: str, dim: int, into: VectorIndex | None = None
    ) -> VectorIndex:
        spec = _INDEX_SPECS[table]
        epoch, deletions = one(
            conn, "SELECT epoch, deletions FROM vector_state WHERE name = ?", (table,)
        )
        max_seq = int(one(conn, f"SELECT max({spec.seq}) FROM {table}")[0] or 0)
        index = into if into is not None else self._indexes.get(table)
        if index is None or index.dim != dim:
            index = VectorIndex(
                dim,
                ann_threshold=self.ann_threshold,
                sidecar=self._sidecar(table),
            )
            self._indexes[table] = index
        point = index.synced
        if point is None or point.epoch != epoch:
            index.reset()
            point = None
            if self._count_rows(conn, table) > self.ann_threshold:
                point = index.load_sidecar(epoch)
            if point is None or point.watermark > max_seq:
                index.reset()
                point = SyncPoint(epoch, deletions, 0)
        if point.deletions != deletions:
            # keys whose vector is still the one indexed (a replaced vector has a new seq)
            alive = np.fromiter(
                (
                    r[0]
                    for r in conn.execute(
                        f"SELECT {spec.key} FROM {table} WHERE {spec.seq} <= ?",
                        (point.watermark,),
                    )
                ),
                np.int64,
            )
            index.keep_only(alive)
            point = SyncPoint(epoch, deletions, point.watermark)
        if max_seq > point.watermark:
            after = point.watermark
            while after < max_seq:
                chunk = list(
                    conn.execute(
                        f"SELECT {spec.seq}, {spec.key}, embedding, {spec.extra} FROM {table} "
                        f"WHERE {spec.seq} > ? AND {spec.seq} <= ? ORDER BY {spec.seq} LIMIT ?",
                        (after, max_seq, _LOAD_CHUNK),
                    )
                )
                if not chunk:
                    break
                after = chunk[-1][0]
                index.add(
                    np.fromiter((r[1] for r in chunk), np.int64, len(chunk)),
                    decode_vectors([r[2] for r in chunk], dim),
                    np.fromiter((r[3] for r in chunk), np.int64, len(chunk)),
                )
            loaded_from_scratch = point.watermark == 0
            point = SyncPoint(epoch, deletions, max_seq)
            index.synced = point
            if loaded_from_scratch and index.approximate:
                with contextlib.suppress(OSError):  # a cache only
                    index.save_sidecar()
        index.synced = point
        return index

    @staticmethod
    def _count_rows(conn: apsw.Connection, table: str) -> int:
        return int(one(conn, f"SELECT count(*) FROM {table}")[0])

    def warm(self) -> threading.Thread | None:
        """Load or build every vector index in a background thread (the server calls
        this at start), instead of in the first search after a restart. A large table
        gets an exact in-memory index first (seconds), used until its HNSW graph is
        loaded from the sidecar or built (minutes at a million vectors); a search before
        even that scans the stored vectors. Returns the thread (tests join it)."""
        if self._warming is not None or self._closed:
            return self._warming
        self._building.update(VECTOR_TABLES)
        self._warming = threading.Thread(target=self._warm, name="nixx-vector-index", daemon=True)
        self._warming.start()
        return self._warming

    def warming(self) -> bool:
        return bool(self._building)

    def _warm(self) -> None:
        for table in VECTOR_TABLES:
            try:
                started = time.monotonic()
                count = self._warmone(table)
                if count:
                    log.info(
                        "vector index %s ready: %d vectors in %.1f s",
                        table,
                        count,
                        time.monotonic() - started,
                    )
            except Exception as exc:  # a cache: the first search builds it instead
                if not self._closed:
                    log.warning("preparing the %s vector index failed: %s", table, exc)
            finally:
                self._building.discard(table)

    def _warmone(self, table: str) -> int:
        with self._read() as conn:
            dim = _bound_dim(conn)
            if dim is None:
                return 0
            big = self._count_rows(conn, table) > self.ann_threshold
        if not big:
            with self._index_locks[table], self._read() as conn:
                return len(self._sync_index(conn, table, dim))
        exact = VectorIndex(dim, ann_threshold=2**62)  # never promoted to HNSW
        with self._read() as conn:
            self._sync_index(conn, table, dim, into=exact)
        with self._index_locks[table]:
            held = self._indexes.get(table)
            if held is None or held.synced is None:
                self._indexes[table] = exact
        ann = VectorIndex(
            dim,
            ann_threshold=self.ann_threshold,
            sidecar=self._sidecar(table),
        )
        with self._read() as conn:  # loads the sidecar, or builds the graph and saves it
            self._sync_index(conn, table, dim, into=ann)
        with self._index_locks[table]:
            held = self._indexes.get(table)
            if held is None or held is exact or held.synced is None:
                self._indexes[table] = ann
        return len(ann)

    def build(self) -> dict[str, int]:
        """Bring every table's vector index up to date now rather than on the first
        search, writing the HNSW sidecars (so a server started later, or already
        running, loads them instead of building). Returns vectors indexed per table."""
        built: dict[str, int] = {}
        for table in VECTOR_TABLES:
            with self._index_locks[table], self._read() as conn:
                dim = _bound_dim(conn)
                if dim is None:
                    continue
                built[table] = len(self._sync_index(conn, table, dim))
        self.save()
        return built

    def save(self) -> list[str]:
        """Write the HNSW sidecar files of the indexes that have one (the bench and
        `nixx reindex` call this; `close()` does it when enough changed)."""
        written = []
        for name, index in self._indexes.items():
            with self._index_locks[name]:
                if index.save_sidecar():
                    written.append(name)
        return written


def _bound_dim(conn: apsw.Connection) -> int | None:
    row = conn.execute("SELECT dim FROM embedder WHERE id = 1").fetchone()
    return int(row[0]) if row else None


#: What a vector search returns per table: (columns, FROM clause, id column). Not the
#: vectors: the caller has the scores, a vector is 1.5 KB to copy per row, and a buffer
#: row's would need a join.
_HIT_SOURCE = {
    "summaries": (SUMMARY_HIT_COLS, "summaries", "id"),
    "memories": (MEMORY_HIT_COLS, "memories", "id"),
    "buffer_vectors": (BUFFER_COLS, "buffer", "id"),
}


def _rows_by_id(conn: apsw.Connection, table: str, ids: np.ndarray) -> dict[int, tuple[Any, ...]]:
    if len(ids) == 0:
        return {}
    cols, source, id_col = _HIT_SOURCE[table]
    id_list = [int(i) for i in ids]
    rows: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(id_list), 500):
        part = id_list[start : start + 500]
        cur = conn.execute(
            f"SELECT {cols} FROM {source} WHERE {id_col} IN ({','.join('?' * len(part))})", part
        )
        rows.update((int(r[0]), tuple(r)) for r in cur)
    return rows


def _candidate_scores(
    conn: apsw.Connection,
    table: str,
    spec: _IndexSpec,
    ids: np.ndarray,
    q: np.ndarray,
    dim: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, exact cosines with unit `q`, filter column) of the candidate `ids`, from
    their stored vectors only (the rows' text is fetched for the results alone)."""
    found: list[tuple[Any, ...]] = []
    id_list = [int(i) for i in ids]
    for start in range(0, len(id_list), 500):
        part = id_list[start : start + 500]
        found += conn.execute(
            f"SELECT {spec.key}, embedding, {spec.extra} FROM {table} "
            f"WHERE {spec.key} IN ({','.join('?' * len(part))})",
            part,
        )
    keys = np.fromiter((r[0] for r in found), np.int64, len(found))
    extra = np.fromiter((r[2] for r in found), np.int64, len(found))
    if not found:
        return keys, np.empty(0, np.float32), extra
    scores = dot_rows(normalise_rows(decode_vectors([r[1] for r in found], dim)), q)
    return keys, scores, extra
