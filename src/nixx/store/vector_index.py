"""In-memory cosine search over one table's vectors.

The database holds the vectors (the source of truth); this index is a cache of them
that the store keeps current: rows are appended by id (ids only grow), deletions are
applied by keeping the ids still alive, and a change of `epoch` (reindex, import)
rebuilds it. Two methods, picked by size:

- **exact**: a contiguous float32 matrix of L2-normalised rows; one matrix-vector
  product and a partial sort per query. Used up to `ann_threshold` rows.
- **approximate**: a `usearch` HNSW graph (int8-quantised, cosine) that returns
  candidates; the store re-scores them exactly from the stored float32 vectors. It is
  saved as a sidecar file next to the database with the watermark it covers, so a new
  process loads it instead of rebuilding; it is never the source of truth.

See docs/storage.md for the measurements behind the threshold and parameters.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_ANN_THRESHOLD = 50_000
HNSW_CONNECTIVITY = 16
HNSW_EXPANSION_ADD = 64
HNSW_EXPANSION_SEARCH = 256
HNSW_DTYPE = "i8"
# usearch inserts on one thread. With `threads=0` (one per core) a build was 1.8x faster
# on this machine's 2 cores but left points that no search reaches, not even one for the
# point's own vector (a memory vector recall never returns): in 15% of builds of 600
# clustered vectors, none on one thread. bench/bench_hnsw_threads.py measures both.
HNSW_ADD_THREADS = 1
SIDECAR_VERSION = 2  # 2: graphs built on one thread (version 1 ones may have lost points)

log = logging.getLogger(__name__)


def usearch_index() -> Any:
    """usearch's `Index` class, imported on first use.

    onnxruntime (1.23 and later, the local embedder's engine) kills the process with
    SIGSEGV when it is imported after usearch's extension module, which carries its own
    C++ runtime; imported before it, both work. So when onnxruntime is installed it is
    imported first, here, the one place nixx imports usearch (a test checks both orders
    in fresh interpreters: tests/embed/test_local.py)."""
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


def normalise_rows(mat: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), float32."""
    mat = np.asarray(mat, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = mat / norms
    return unit


def dot_rows(mat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """`mat @ vec`, single-threaded. A matrix-vector product is memory-bound, and
    OpenBLAS's threaded sgemv spins waiting for a second core: on a busy machine it was
    measured 10-25x slower than numpy's own SIMD loop (bench/bench_search.py, 10k rows:
    24 ms vs 1 ms at load 6 on 2 cores)."""
    product: np.ndarray = np.einsum("ij,j->i", mat, vec)
    return product


def decode_vectors(blobs: list[bytes], dim: int) -> np.ndarray:
    """float32 little-endian BLOBs → an (n, dim) float32 matrix."""
    if not blobs:
        return np.empty((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)


@dataclass
class SyncPoint:
    """What the index covers: rows with id <= watermark as of (epoch, deletions)."""

    epoch: int
    deletions: int
    watermark: int


class VectorIndex:
    """Cosine index of (id, vector[, extra]) rows. Not thread-safe: the store holds a
    lock around sync + search."""

    def __init__(
        self, dim: int, *, ann_threshold: int = DEFAULT_ANN_THRESHOLD, sidecar: Path | None = None
    ) -> None:
        self.dim = dim
        self.ann_threshold = ann_threshold
        self.sidecar = sidecar
        self.synced: SyncPoint | None = None
        self._n = 0
        self._ids = np.empty(0, dtype=np.int64)
        self._extra = np.empty(0, dtype=np.int64)
        self._mat = np.empty((0, dim), dtype=np.float32)
        self._ann: Any = None  # usearch.index.Index once approximate
        self._unsaved = 0
        self._no_save = False  # after a forget: this graph may hold deleted vectors

    # ---- state -----------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    @property
    def approximate(self) -> bool:
        return self._ann is not None

    def reset(self) -> None:
        self._no_save = False  # what is held next is built afresh
        self.synced = None
        self._n = 0
        self._ids = np.empty(0, dtype=np.int64)
        self._extra = np.empty(0, dtype=np.int64)
        self._mat = np.empty((0, self.dim), dtype=np.float32)
        self._ann = None
        self._unsaved = 0

    # ---- changes ---------------------------------------------------------------------
    def add(self, ids: np.ndarray, vectors: np.ndarray, extra: np.ndarray | None = None) -> None:
        """Append rows (ids ascending, above every id already held)."""
        count = len(ids)
        if count == 0:
            return
        ids = np.asarray(ids, dtype=np.int64)
        extra_arr = (
            np.zeros(count, dtype=np.int64) if extra is None else np.asarray(extra, np.int64)
        )
        if self._ann is not None:
            vecs = np.ascontiguousarray(vectors, dtype=np.float32)
            self._ann.add(ids, vecs, threads=HNSW_ADD_THREADS)
            self._n += count
            self._unsaved += count
            return
        need = self._n + count
        if need > self.ann_threshold:
            self._promote(ids, vectors)
            return
        if need > len(self._ids):
            capacity = max(need, 2 * len(self._ids), 1024)
            self._ids = _grow(self._ids, capacity)
            self._extra = _grow(self._extra, capacity)
            mat = np.empty((capacity, self.dim), dtype=np.float32)
            mat[: self._n] = self._mat[: self._n]
            self._mat = mat
        self._ids[self._n : need] = ids
        self._extra[self._n : need] = extra_arr
        self._mat[self._n : need] = normalise_rows(vectors)
        self._n = need

    def keep_only(self, alive: np.ndarray) -> None:
        """Drop every held id not in `alive` (after deletions in the database)."""
        alive = np.asarray(alive, dtype=np.int64)
        if self._ann is not None:
            keys = np.asarray(self._ann.keys, dtype=np.int64)
            gone = keys[~np.isin(keys, alive)]
            if len(gone):
                self._ann.remove(gone)
                self._n -= len(gone)
                self._unsaved += len(gone)
            return
        keep = np.isin(self._ids[: self._n], alive)
        kept = int(keep.sum())
        if kept == self._n:
            return
        self._ids[:kept] = self._ids[: self._n][keep]
        self._extra[:kept] = self._extra[: self._n][keep]
        self._mat[:kept] = self._mat[: self._n][keep]
        self._n = kept

    def _promote(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Switch to the HNSW graph, moving the rows held so far into it."""
        Index = usearch_index()
        ann = Index(
            ndim=self.dim,
            metric="cos",
            dtype=HNSW_DTYPE,
            connectivity=HNSW_CONNECTIVITY,
            expansion_add=HNSW_EXPANSION_ADD,
            expansion_search=HNSW_EXPANSION_SEARCH,
        )
        if self._n:
            ann.add(self._ids[: self._n].copy(), self._mat[: self._n], threads=HNSW_ADD_THREADS)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        ann.add(ids, vecs, threads=HNSW_ADD_THREADS)
        held = self._n + len(ids)
        self.reset()
        self._ann = ann
        self._n = held
        self._unsaved = held

    # ---- queries ---------------------------------------------------------------------
    def exact_search(
        self,
        query: np.ndarray,
        k: int,
        *,
        threshold: float | None = None,
        extra_below: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top `k` (ids, cosine scores), best first, over rows passing the filters.
        Only valid while not `approximate`."""
        if self._n == 0 or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        scores = dot_rows(self._mat[: self._n], normalise_rows(query))
        ids = self._ids[: self._n]
        if extra_below is not None or threshold is not None:
            keep = np.ones(self._n, dtype=bool)
            if extra_below is not None:
                keep &= self._extra[: self._n] < extra_below
            if threshold is not None:
                keep &= scores >= np.float32(threshold)
            scores, ids = scores[keep], ids[keep]
        if len(scores) > k:
            part = np.argpartition(-scores, k - 1)[:k]
            scores, ids = scores[part], ids[part]
        order = np.lexsort((ids, -scores))  # best first; ties by id
        return ids[order], scores[order]

    def ann_candidates(self, query: np.ndarray, k: int) -> np.ndarray:
        """Up to `k` candidate ids from the HNSW graph (approximate order)."""
        if self._n == 0 or k <= 0:
            return np.empty(0, np.int64)
        matches = self._ann.search(np.ascontiguousarray(query, dtype=np.float32), min(k, self._n))
        return np.asarray(matches.keys, dtype=np.int64)

    # ---- sidecar ---------------------------------------------------------------------
    def forbid_save(self) -> None:
        """Never write this graph to the sidecar (a forget deleted vectors it may still
        hold: usearch only marks a removed key). A graph built afresh can be saved."""
        self._no_save = True

    def save_sidecar(self, *, min_unsaved: int = 1) -> bool:
        """Persist the HNSW graph and what it covers (atomic replace). Returns whether
        it wrote (never after `forbid_save`)."""
        if self._ann is None or self.sidecar is None or self.synced is None or self._no_save:
            return False
        if self._unsaved < min_unsaved:
            return False
        tmp = self.sidecar.with_name(self.sidecar.name + f".{os.getpid()}.tmp")
        self._ann.save(str(tmp))
        os.replace(tmp, self.sidecar)
        meta = {
            "version": SIDECAR_VERSION,
            "dim": self.dim,
            "dtype": HNSW_DTYPE,
            "count": self._n,
            "epoch": self.synced.epoch,
            "deletions": self.synced.deletions,
            "watermark": self.synced.watermark,
        }
        meta_path = self._meta_path()
        tmp_meta = meta_path.with_name(meta_path.name + f".{os.getpid()}.tmp")
        tmp_meta.write_text(json.dumps(meta))
        os.replace(tmp_meta, meta_path)
        self._unsaved = 0
        return True

    def load_sidecar(self, epoch: int) -> SyncPoint | None:
        """Load a saved graph made for `epoch`; returns what it covers, or None when
        there is no usable sidecar (missing, stale, corrupt). An existing sidecar that
        is not used is logged with the reason: the graph is built again, which at a
        million vectors is many minutes of background work."""
        if self.sidecar is None or not self.sidecar.exists():
            return None
        try:
            meta = json.loads(self._meta_path().read_text())
            why = _stale(meta, self.dim, epoch)
            if why is None:
                ann = usearch_index().restore(str(self.sidecar), view=False)
                if ann is None or ann.ndim != self.dim or len(ann) != meta["count"]:
                    why = "its graph does not match its description"
        except (OSError, ValueError, KeyError, RuntimeError, AttributeError) as exc:
            why = f"unreadable ({exc})"
        if why is not None:
            log.info(
                "not using the saved vector graph %s: %s; building it again",
                self.sidecar.name,
                why,
            )
            return None
        ann.expansion_search = HNSW_EXPANSION_SEARCH  # a property with a setter
        self.reset()
        self._ann = ann
        self._n = len(ann)
        point = SyncPoint(int(meta["epoch"]), int(meta["deletions"]), int(meta["watermark"]))
        self.synced = point
        return point

    def _meta_path(self) -> Path:
        assert self.sidecar is not None
        return self.sidecar.with_name(self.sidecar.name + ".json")


def _stale(meta: dict[str, Any], dim: int, epoch: int) -> str | None:
    """Why a sidecar described by `meta` cannot serve an index of `dim` at `epoch`."""
    if meta.get("version") != SIDECAR_VERSION:
        return f"written by another nixx (version {meta.get('version')}, now {SIDECAR_VERSION})"
    if meta.get("dim") != dim or meta.get("dtype") != HNSW_DTYPE:
        return f"made for {meta.get('dim')}-d {meta.get('dtype')} vectors, not {dim}-d {HNSW_DTYPE}"
    if meta.get("epoch") != epoch:
        return "made before the vectors were last replaced (reindex or import)"
    return None


def _grow(arr: np.ndarray, capacity: int) -> np.ndarray:
    out = np.empty(capacity, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out
