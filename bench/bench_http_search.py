"""`POST /v1/episodic/search` over HTTP against a real `nixx serve`, at 100,000 buffer
rows (each with its row vector) and 10,000 summaries, including the query embedding.

    .venv/bin/python bench/bench_http_search.py [--queries 300] [--rows 100000]
        [--summaries 10000] [--embed local|openai] [--limit 10] [--empty] [--speakers]

The buffer rows are the full-text benchmark's corpus (`bench_search.fts_corpus`: Zipf
chat text, the same data as the SQLite and PostgreSQL full-text figures), each with a
clustered 384-d row vector (`bench_search.Clustered`); the summaries are bench_turn's. The
HNSW sidecars are written before the server starts (as `nixx reindex` would), so the
server loads them. The queries are fts_corpus's "typical" questions (3 content words),
so the full-text side has real matches. `--speakers` makes it a chat between two named
people: every row starts with its speaker's name ("Deborah: ...", "Marcus: ...") and every
question names one ("what did Deborah say about the ...?"), so the name is a word of half
the rows and the search takes its other path (the name left out of the text embedded,
`search.vector_text`; session 10's code embedded the whole question too). A GET /health, interleaved, gives the HTTP
floor of the same client and server. `--empty`
runs against an empty store instead (nothing to compare the query with).
Prints p50/p95/p99, the server's CPU time per search (steadier than wall time on a busy
machine) and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_search import Clustered, fts_corpus  # noqa: E402
from bench_turn import cpu_seconds, rss_mb, sentence, start_server, wait_healthy  # noqa: E402

from nixx.store import open_store  # noqa: E402
from nixx.testing.fake_llm import FakeLLM  # noqa: E402

SPEAKERS = ("Deborah", "Marcus")


def corpus(rows: int, speakers: bool) -> tuple[list[dict], list[str]]:
    """fts_corpus's records and typical questions, with the speakers' names when asked."""
    records, typical, _ = fts_corpus(rows)
    if not speakers:
        return records, typical
    for i, rec in enumerate(records[1:]):
        rec["content"] = f"{SPEAKERS[i % 2]}: {rec['content']}"
    asked = [
        q.replace("what did we decide about", f"what did {SPEAKERS[i % 2]} say about")
        for i, q in enumerate(typical)
    ]
    return records, asked


def seed(
    db: Path, rows: int, summaries: int, model: str, speakers: bool = False, pieces: bool = True,
    dim: int = 384,
) -> list[str]:
    """The store described above; returns the questions. With `pieces`, every third row
    also has two sentence vectors (`nixx.memory.pieces`; the two-person benchmark sets
    hold 0.6-0.8 pieces a row), drawn like the row vectors."""
    records, typical = corpus(rows, speakers)
    vectors = Clustered(seed=1, dim=dim).draw(rows)
    extra = Clustered(seed=2, dim=dim).draw(2 * len(range(0, rows, 3))) if pieces else None
    rng = random.Random(7)

    def all_records():
        yield records[0]
        yield {"type": "embedder", "model": model, "dim": dim}
        yield {"type": "state", "key": "episodic.interval", "value": 10**9}
        for i, (rec, vec) in enumerate(zip(records[1:], vectors, strict=True)):
            out = {**rec, "embedding": vec.tolist()}
            out["pieces"] = []  # split, none (the server has no sentences to embed)...
            if extra is not None and i % 3 == 0:  # ...or two sentences
                out["pieces"] = extra[2 * (i // 3) : 2 * (i // 3) + 2].tolist()
            yield out
        span = max(1, rows // max(1, summaries))
        for j in range(summaries):
            text = sentence(rng, 30)
            yield {
                "type": "summary",
                "id": j + 1,
                "content": text,
                "embedding": FakeLLM.embedding_of(text, dim).tolist(),
                "tags": [],
                "entities": {},
                "start_buffer_id": j * span + 1,
                "end_buffer_id": min(rows, (j + 1) * span),
                "created_at": "2026-01-01T00:00:00.000000Z",
            }

    store = open_store(f"sqlite:///{db}")
    try:
        store.import_records(all_records())
        store.build_vector_indexes()  # type: ignore[attr-defined]
    finally:
        store.close()
    return typical


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--summaries", type=int, default=10_000)
    ap.add_argument("--embed", choices=("local", "openai"), default="local")
    ap.add_argument("--model", choices=("minilm", "mpnet"), default="minilm",
                    help="the local model (mpnet: 768-d vectors seeded; a store of its own)")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--empty", action="store_true")
    ap.add_argument("--blas-threads", type=int, default=None)
    ap.add_argument("--engine", choices=("auto", "onnx", "numpy"), default="auto",
                    help="NIXX_EMBED_ENGINE of the server (the local embedder's engine)")
    ap.add_argument("--db", type=Path, default=None, help="a store seeded before (seeded here when missing)")
    ap.add_argument("--seed-only", action="store_true", help="seed the store and stop")
    ap.add_argument(
        "--speakers",
        action="store_true",
        help="rows and questions carry two speakers' names (seed a store of its own)",
    )
    ap.add_argument(
        "--no-pieces", action="store_true",
        help="seed no sentence vectors (a store as before them; seed a store of its own)",
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="nixx-bench-search-"))
    from nixx.embed.models import local_model

    local = local_model(args.model)
    model = "fake-embed" if args.embed == "openai" else local.name
    dim = 384 if args.embed == "openai" else local.dim
    db = args.db or tmp / "nixx.db"
    reuse = args.db is not None and args.db.exists()
    questions = corpus(args.rows, args.speakers)[1] if reuse else []
    if not reuse and not args.empty:
        t0 = time.perf_counter()
        questions = seed(db, args.rows, args.summaries, model, args.speakers, not args.no_pieces,
                         dim)
        print(f"seeded in {time.perf_counter() - t0:.0f}s: {db}")
    if args.seed_only:
        return 0
    if args.empty:
        questions = fts_corpus(1000)[1]
    llm = FakeLLM()
    server, base = start_server(
        tmp,
        db,
        llm,
        embed=args.embed,
        model=model,
        engine=args.engine,
        blas_threads=None if args.blas_threads is None else str(args.blas_threads),
    )
    try:
        client = httpx.Client(timeout=120)
        wait_healthy(client, base, server)
        while client.get(base + "/v1/episodic/status").json()["buffer_vectors"]["index_warming"]:
            time.sleep(0.5)  # the vector indexes load in the background after a start
        rng = random.Random(3)

        def search() -> float:
            q = rng.choice(questions)
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
        cpu0 = cpu_seconds(server.pid)
        for _ in range(args.queries):
            times["search"].append(search())
        cpu_search = (cpu_seconds(server.pid) - cpu0) / args.queries
        for _ in range(args.queries):
            times["search"].append(search())
            times["health"].append(health())
        status = client.get(base + "/v1/episodic/status").json()
        print(
            f"\n{args.queries} searches, embedder {args.embed} ({args.engine}), store: {status['buffer_rows']} "
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
        print(f"server CPU per search (all threads): {cpu_search * 1000:.1f} ms")
        print(f"server pid {server.pid}, {rss_mb(server.pid)}")
    finally:
        server.terminate()
        server.wait(30)
        llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
