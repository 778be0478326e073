"""What lifting a row by its best sentence costs the row-vector ranker, in process.

    .venv/bin/python bench/bench_http_search.py --db /tmp/s100k.db --seed-only
    .venv/bin/python bench/bench_lift.py --db /tmp/s100k.db [--queries 200] [--rounds 3]

On a store seeded by bench_http_search.py (100k rows, every third with two sentence
vectors), `search.row_vector_hits` for the same real query vectors (the local embedder,
bench_search.fts_corpus's questions) with no lift (`piece_floor` None) and with the
shipped one (0.40), the two alternated query by query. Prints p50/p90 of each and the
difference (docs/performance.md, "A vector per sentence of a long row").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as nixx serve runs

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_http_search import corpus  # noqa: E402

from nixx.embed.local import LocalEmbedder  # noqa: E402
from nixx.memory import search  # noqa: E402
from nixx.store import open_store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, required=True, help="a store bench_http_search.py seeded")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    store = open_store(f"sqlite:///{args.db}")
    try:
        vectors = LocalEmbedder().embed(corpus(100_000, False)[1][: args.queries])
        for q in vectors[:20]:  # warm the index and the page cache
            search.row_vector_hits(store, q, 50)
        times: dict[float | None, list[float]] = {None: [], 0.4: []}
        for _ in range(args.rounds):
            for i, q in enumerate(vectors):
                for floor in (None, 0.4) if i % 2 else (0.4, None):
                    start = time.perf_counter()
                    search.row_vector_hits(store, q, 50, piece_floor=floor)
                    times[floor].append(time.perf_counter() - start)
    finally:
        store.close()
    p50 = {k: float(np.percentile(v, 50)) * 1000 for k, v in times.items()}
    for floor, values in times.items():
        name = "no lift" if floor is None else f"lift from {floor}"
        print(f"{name:14} p50 {p50[floor]:.3f} ms  p90 {np.percentile(values, 90) * 1000:.3f} ms")
    print(f"the lift adds {p50[0.4] - p50[None]:.3f} ms at p50; load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
