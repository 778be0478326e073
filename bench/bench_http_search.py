"""`POST /v1/episodic/search` over HTTP against a real `nixx serve`, at 100,000 buffer
rows (each with its row vector) and 10,000 summaries, including the query embedding.

    .venv/bin/python bench/bench_http_search.py [--queries 300] [--rows 100000]
        [--summaries 10000] [--embed local|openai] [--limit 10] [--empty]

The store is seeded as bench/bench_turn.py seeds it (same generator), its HNSW sidecars
written, then the server starts as a subprocess; after a warm-up each query is a fresh
sentence from the same vocabulary (so the full-text side finds matches). A GET
/health, interleaved, gives the HTTP floor of the same client and server. `--empty`
runs against an empty store instead (nothing to compare the query with).
Prints p50/p95/p99 and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_turn import free_port, seed, sentence  # noqa: E402

from nixx.testing.fake_llm import FakeLLM  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--summaries", type=int, default=10_000)
    ap.add_argument("--embed", choices=("local", "openai"), default="local")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--empty", action="store_true")
    ap.add_argument("--blas-threads", type=int, default=None)
    ap.add_argument("--db", type=Path, default=None, help="reuse a store seeded before")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="nixx-bench-search-"))
    model = "fake-embed" if args.embed == "openai" else "all-MiniLM-L6-v2"
    db = args.db or tmp / "nixx.db"
    if args.db is None and not args.empty:
        t0 = time.perf_counter()
        seed(db, args.rows, args.summaries, 384, model)
        print(f"seeded in {time.perf_counter() - t0:.0f}s: {db}")
    llm = FakeLLM()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NIXX_", "NXC_"))}
    env.update(
        NIXX_HOME=str(tmp),
        NIXX_DB_URL=f"sqlite:///{db}",
        NIXX_CHAT_BASE_URL=llm.base_url,
        NIXX_EMBED_PROVIDER=args.embed,
        NIXX_EMBED_BASE_URL=llm.base_url,
        NIXX_EMBED_MODEL=model if args.embed == "openai" else "",
        NIXX_WORKSPACE=str(tmp),
        NIXX_LOG_LEVEL="warning",
    )
    if args.blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("nixx")), "serve", "--port", str(port)], env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        client = httpx.Client(timeout=120)
        deadline = time.monotonic() + 120
        while True:
            try:
                if client.get(base + "/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("nixx serve did not start")
            time.sleep(0.1)
        rng = random.Random(3)

        def search() -> float:
            q = sentence(rng, 8)
            start = time.perf_counter()
            r = client.post(base + "/v1/episodic/search", json={"query": q, "limit": args.limit})
            r.raise_for_status()
            return time.perf_counter() - start

        def health() -> float:
            start = time.perf_counter()
            client.get(base + "/health").raise_for_status()
            return time.perf_counter() - start

        for _ in range(20):
            search()
        times = {"search": [], "health": []}
        for _ in range(args.queries):
            times["search"].append(search())
            times["health"].append(health())
        status = client.get(base + "/v1/episodic/status").json()
        print(
            f"\n{args.queries} searches, embedder {args.embed}, store: {status['buffer_rows']} "
            f"rows ({status['buffer_vectors']['embedded']} with vectors), "
            f"{status['summaries']} summaries; load {os.getloadavg()}"
        )
        print(f"{'':26}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
        for name, values in times.items():
            ms = np.array(values) * 1000
            label = "POST /v1/episodic/search" if name == "search" else "GET /health (floor)"
            print(
                f"{label:26}{np.percentile(ms, 50):9.2f}{np.percentile(ms, 95):9.2f}"
                f"{np.percentile(ms, 99):9.2f}"
            )
        print(f"server pid {server.pid}")
    finally:
        server.terminate()
        server.wait(30)
        llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
