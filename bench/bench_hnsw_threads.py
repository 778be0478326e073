"""HNSW insertion on one thread against one thread per core: build time and lost points.

    .venv/bin/python bench/bench_hnsw_threads.py                    # 50k x 384, 3 rounds
    .venv/bin/python bench/bench_hnsw_threads.py --n 600 --dim 32 --rounds 200

Builds the usearch graph nixx builds (same parameters as `nixx.store.vector_index`)
from the same vectors with `threads=1` and `threads=0` (one per core), interleaved
round by round, and prints per build:
- build time;
- lost points: stored vectors that a search for exactly that vector does not return
  in its top 10 (a point no query can be expected to reach: a memory that vector
  recall never returns; the graph's int8 codes make exact duplicates rare enough
  that ties do not count here);
- recall@10 of the graph's own top 10 for fresh queries against brute force.
Vectors come from bench_search's clustered generator (embedding-like), or with
`--random` from isotropic unit vectors.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench_search import Clustered

from nixx.store import vector_index as vi


def build(vectors: np.ndarray, threads: int) -> tuple[object, float]:
    ann = vi.usearch_index()(
        ndim=vectors.shape[1],
        metric="cos",
        dtype=vi.HNSW_DTYPE,
        connectivity=vi.HNSW_CONNECTIVITY,
        expansion_add=vi.HNSW_EXPANSION_ADD,
        expansion_search=vi.HNSW_EXPANSION_SEARCH,
    )
    started = time.perf_counter()
    ann.add(np.arange(len(vectors), dtype=np.int64), vectors, threads=threads)
    return ann, time.perf_counter() - started


def lost_points(ann: object, vectors: np.ndarray, sample: np.ndarray) -> int:
    found = np.asarray(ann.search(vectors[sample], 10, threads=1).keys)  # type: ignore[attr-defined]
    return int((~(found == sample[:, None]).any(axis=1)).sum())


def recall_at_10(ann: object, vectors: np.ndarray, queries: np.ndarray) -> float:
    got = np.asarray(ann.search(queries, 10, threads=1).keys)  # type: ignore[attr-defined]
    truth = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    return float(np.mean([len(set(g) & set(t)) / 10 for g, t in zip(got, truth, strict=True)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=5_000, help="points checked for being lost")
    ap.add_argument("--random", action="store_true", help="isotropic unit vectors")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    if args.random:
        vectors = rng.standard_normal((args.n + 200, args.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    else:
        if args.dim != 384:
            ap.error("the clustered generator is 384-d; use --random for another --dim")
        vectors = Clustered(seed=3).draw(args.n + 200)
    vectors, queries = vectors[: args.n], vectors[args.n :]
    sample = rng.choice(args.n, min(args.sample, args.n), replace=False)
    runs: dict[int, list[tuple[float, int, float]]] = {1: [], 0: []}
    for r in range(args.rounds):
        for threads in (1, 0) if r % 2 == 0 else (0, 1):
            ann, seconds = build(vectors, threads)
            lost = lost_points(ann, vectors, sample)
            rec = recall_at_10(ann, vectors, queries)
            runs[threads].append((seconds, lost, rec))
            if args.rounds <= 10:
                print(
                    f"round {r} threads={threads}: build {seconds:.2f} s, "
                    f"lost {lost}/{len(sample)}, recall@10 {rec:.4f}"
                )
    for threads, rows in runs.items():
        builds_with_loss = sum(1 for _, lost, _ in rows if lost)
        print(
            f"threads={threads} ({'one per core' if threads == 0 else 'one'}): "
            f"build median {statistics.median(s for s, _, _ in rows):.2f} s "
            f"(min {min(s for s, _, _ in rows):.2f}, max {max(s for s, _, _ in rows):.2f}); "
            f"lost points {sum(lost for _, lost, _ in rows)} in {len(rows) * len(sample)} "
            f"checked, builds losing any {builds_with_loss}/{len(rows)}; "
            f"recall@10 mean {statistics.mean(rec for _, _, rec in rows):.4f}"
        )
    one = statistics.median(s for s, _, _ in runs[1])
    per_core = statistics.median(s for s, _, _ in runs[0])
    print(f"build time ratio, one thread / one per core: {one / per_core:.2f}")


if __name__ == "__main__":
    main()
