"""SQLite store search benchmark: vector search latency and recall at 10k / 100k / 1M
stored 384-d vectors, insert throughput, and full-text query latency.

    .venv/bin/python bench/bench_search.py                 # 10k, 100k, 1M (several minutes)
    .venv/bin/python bench/bench_search.py --sizes 10000 100000 --fts-rows 100000

Data: random unit vectors are a poor test of approximate search (every point is about
equally far from every other), so vectors come from a clustered low-dimensional latent
space (a gaussian mixture in 48-d) pushed through a fixed random non-linear map to 384-d
plus noise, like sentence embeddings. Queries are fresh draws from the same mixture.

Prints, per size: insert throughput, first search (index build or sidecar load), p50/p95
of `search_memories(limit=10)`, recall@10 against exact brute force, and the exact
in-memory method at the same size for comparison (ratio measured in the same run). The
machine is shared, so absolute figures are noisy; ratios are the robust part.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from nixx.store.records import NewChunk
from nixx.store.sqlite import SQLiteStore

DIM = 384
LATENT = 48
CLUSTERS = 500
QUERIES = 200


class Clustered:
    """A reproducible stream of embedding-like vectors."""

    def __init__(self, seed: int = 0, noise: float = 0.35, dim: int = DIM) -> None:
        rng = np.random.default_rng(seed)
        self.noise = noise
        self.dim = dim
        self.centres = rng.standard_normal((CLUSTERS, LATENT)).astype(np.float32)
        self.proj = (rng.standard_normal((LATENT, dim)) / np.sqrt(LATENT)).astype(np.float32)
        self.rng = np.random.default_rng(seed + 1)

    def draw(self, n: int) -> np.ndarray:
        rng = self.rng
        z = self.centres[rng.integers(0, CLUSTERS, n)]
        z = z + self.noise * rng.standard_normal((n, LATENT)).astype(np.float32)
        x = np.tanh(z @ self.proj) + 0.05 * rng.standard_normal((n, self.dim)).astype(np.float32)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def exact_top10(data: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    """Ground truth by brute force in chunks; ids are row index + 1."""
    best_s = np.full((len(queries), 10), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 10), dtype=np.int64)
    for start in range(0, len(data), 100_000):
        s = queries @ data[start : start + 100_000].T
        idx = np.argpartition(-s, 9, axis=1)[:, :10]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, idx, 1)], axis=1)
        cand_i = np.concatenate([best_i, idx + start + 1], axis=1)
        keep = np.argsort(-cand_s, axis=1)[:, :10]
        best_s = np.take_along_axis(cand_s, keep, 1)
        best_i = np.take_along_axis(cand_i, keep, 1)
    return [set(row.tolist()) for row in best_i]


def time_searches(store: SQLiteStore, queries: np.ndarray) -> tuple[float, list[float], list]:
    t = time.perf_counter()
    first = store.search_memories(queries[0], limit=10)
    first_ms = (time.perf_counter() - t) * 1000
    lat, results = [], [first]
    for q in queries[1:]:
        t = time.perf_counter()
        results.append(store.search_memories(q, limit=10))
        lat.append((time.perf_counter() - t) * 1000)
    return first_ms, lat, results


def recall(results: list, truth: list[set[int]]) -> float:
    got = [
        len({h.memory.id for h in hits} & t) / 10 for hits, t in zip(results, truth, strict=True)
    ]
    return statistics.fmean(got)


def bench_vectors(size: int, root: Path, ann_threshold: int, noise: float) -> None:
    gen = Clustered(seed=size, noise=noise)
    path = root / f"vec{size}.db"
    store = SQLiteStore(path, ann_threshold=ann_threshold)
    store.migrate()
    store.bind_embedder("bench", DIM)
    data = np.empty((size, DIM), dtype=np.float32)
    batch = 20_000
    t0 = time.perf_counter()
    for start in range(0, size, batch):
        vecs = gen.draw(min(batch, size - start))
        data[start : start + len(vecs)] = vecs
        store.add_source(
            f"s{start}",
            "document",
            [NewChunk(f"chunk {start + i}", v, {"chunk": i}) for i, v in enumerate(vecs)],
        )
    insert_s = time.perf_counter() - t0
    queries = gen.draw(QUERIES)
    truth = exact_top10(data, queries)
    mb = path.stat().st_size / 1e6
    print(f"\n== {size:,} vectors ({mb:,.0f} MB file, latent noise {noise})")
    print(f"insert (add_source, {batch:,} chunks per transaction): {size / insert_s:,.0f} chunks/s")

    first_ms, lat, results = time_searches(store, queries)
    approx = store._indexes["memories"].approximate
    method = "HNSW (usearch i8) + exact re-score" if approx else "exact (numpy dot)"
    print(f"[{method}] first search (builds the index): {first_ms / 1000:,.1f} s")
    p50, p95 = pct(lat, 50), pct(lat, 95)
    print(f"[{method}] p50 {p50:.2f} ms  p95 {p95:.2f} ms  recall@10 {recall(results, truth):.3f}")
    store.close()  # writes the sidecar when approximate

    if approx:
        reopened = SQLiteStore(path, ann_threshold=ann_threshold)
        t = time.perf_counter()
        reopened.search_memories(queries[0], limit=10)
        print(
            f"[{method}] first search in a new process-like store (sidecar load): "
            f"{time.perf_counter() - t:,.2f} s"
        )
        # filtered search: a threshold that only a few rows pass
        lat_f = []
        for q in queries[1:51]:
            t = time.perf_counter()
            reopened.search_memories(q, limit=10, threshold=0.9)
            lat_f.append((time.perf_counter() - t) * 1000)
        print(f"[{method}] with threshold 0.9: p50 {pct(lat_f, 50):.2f} ms")
        reopened.close()
        if size <= 200_000:  # exact at the same size, for the ratio
            exact = SQLiteStore(path, ann_threshold=10**9)
            first_ms, lat_e, res_e = time_searches(exact, queries)
            e50, e95 = pct(lat_e, 50), pct(lat_e, 95)
            print(
                f"[exact (numpy dot)] p50 {e50:.2f} ms  p95 {e95:.2f} ms  "
                f"recall@10 {recall(res_e, truth):.3f}  (load {first_ms / 1000:.1f} s)"
            )
            print(f"ratio exact/HNSW p50: {e50 / p50:.1f}x")
            exact.close()
    path.unlink()
    for extra in path.parent.glob(path.name + "*"):
        extra.unlink()


WORDS = """
schema migration database index query vector embedding summary buffer memory source server
client stream token model prompt recall intent session marker chunk ingest document repo web
file path test bench latency throughput cache sidecar thread process lock write read commit
rollback transaction journal checkpoint error message user assistant tool call result config
setting port host key deploy build release version
""".split()  # noqa: SIM905 - a word list reads better as text


def fts_corpus(rows: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The full-text benchmark's data, shared by the SQLite and PostgreSQL benches: `rows`
    buffer records of synthetic chat text with a Zipf word distribution whose most frequent
    words are English stop words (as in real text), then content words; 200 "typical"
    questions of 3 content words drawn by frequency, and 200 of the 3 most frequent content
    words. Deterministic (seed 7). Returns (export records with header, typical, common)."""
    from nixx.store.fts_query import STOP_WORDS

    rng = np.random.default_rng(7)
    content = WORDS + [f"w{i}" for i in range(30_000)]
    rng.shuffle(content)
    vocab = sorted(STOP_WORDS) + content
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.07  # Zipf-like
    weights /= weights.sum()
    lengths = rng.integers(8, 60, rows)
    tokens = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    records: list[dict[str, Any]] = [{"type": "header", "format": "nixx-export", "version": 1}]
    records += [
        {
            "type": "buffer",
            "id": i + 1,
            "role": "user" if i % 2 == 0 else "assistant",
            "content": " ".join(vocab[w] for w in tokens[bounds[i] : bounds[i + 1]]),
            "origin": "api",
            "created_at": "2026-01-01T00:00:00.000000Z",
            "meta": {},
        }
        for i in range(rows)
    ]
    content_w = weights[len(STOP_WORDS) :] / weights[len(STOP_WORDS) :].sum()

    def questions(pick: Any) -> list[str]:
        return [f"what did we decide about the {' '.join(pick())}?" for _ in range(200)]

    typical = questions(lambda: [content[i] for i in rng.choice(len(content), 3, p=content_w)])
    common = questions(lambda: content[:3])  # the three most frequent content words
    return records, typical, common


def bench_fts(rows: int, root: Path) -> None:
    records, typical, common = fts_corpus(rows)  # generated first: time the store
    path = root / "fts.db"
    store = SQLiteStore(path)
    store.migrate()
    t = time.perf_counter()
    store.import_records(records)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    n_single = 300
    for i in range(n_single):
        store.append_buffer("user", f"single row {i} about the schema migration", "api")
    single = n_single / (time.perf_counter() - t)
    print(f"\n== full-text search over {rows:,} buffer rows")
    print(f"bulk load (import_records, one transaction): {rows / load_s:,.0f} rows/s")
    print(f"append_buffer (one transaction each, synchronous=FULL): {single:,.0f} rows/s")
    for label, qs in (("typical question", typical), ("most frequent words", common)):
        lat, sizes = [], []
        for q in qs:
            t = time.perf_counter()
            hits = store.search_buffer(q, limit=10)
            lat.append((time.perf_counter() - t) * 1000)
            sizes.append(len(hits))
        matched = (
            store._conn()
            .execute(
                "SELECT count(*) FROM buffer_fts WHERE buffer_fts MATCH ?",
                (" OR ".join(f'"{w}"' for w in qs[0].rstrip("?").split()[-3:]),),
            )
            .fetchone()[0]
        )
        print(
            f"search_buffer, {label} (3 terms OR-ed, bm25, limit 10): p50 {pct(lat, 50):.2f} ms  "
            f"p95 {pct(lat, 95):.2f} ms  (first query matches {matched:,} rows)"
        )
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--fts-rows", type=int, default=100_000)
    parser.add_argument(
        "--ann-threshold",
        type=int,
        default=None,
        help="override the exact→HNSW switch (default: the store's)",
    )
    parser.add_argument(
        "--noise", type=float, default=0.35, help="spread within clusters (higher = harder)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to put the databases")
    args = parser.parse_args()
    from nixx.store.vector_index import DEFAULT_ANN_THRESHOLD

    threshold = args.ann_threshold or DEFAULT_ANN_THRESHOLD
    root = Path(tempfile.mkdtemp(prefix="nixx-bench-", dir=args.dir))
    print(
        f"python {sys.version.split()[0]}, numpy {np.__version__}, "
        f"exact→HNSW threshold {threshold:,} vectors; databases in {root}"
    )
    try:
        if args.fts_rows:
            bench_fts(args.fts_rows, root)
        for size in args.sizes:
            bench_vectors(size, root, threshold, args.noise)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
