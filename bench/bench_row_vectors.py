"""Throughput of the background queue that embeds buffer rows (`nixx.memory.row_vectors`):
a SQLite store of `--rows` chat rows without vectors (bench_search.fts_corpus text:
8-60 words a row), drained by `RowVectors.drain()` with the local embedder (or the
scripted backend's /v1/embeddings over HTTP), as the server's backfill does.

    .venv/bin/python bench/bench_row_vectors.py [--rows 3000] [--embed local|openai] [--batch 32]
        [--dialogue] [--split-older]

`--dialogue`: the two-friend benchmark conversations instead (`dialogue_data`, seed 7,
2,820 rows of "Name: text", half of them two sentences or more: each row's sentences are
embedded too, `nixx.memory.pieces`). `--split-older`: the rows have their vectors already
but were never split (a store from before pieces), so the drain is the queue's second work
list alone: each row's sentences embedded, a one-sentence row marked as having none.

Prints rows/s end to end (texts, embedding, the store's writes and index) and the share
spent inside embed().
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_search import fts_corpus  # noqa: E402

from nixx.memory.row_vectors import RowVectors  # noqa: E402
from nixx.store import open_store  # noqa: E402


def dialogue_records() -> list[dict]:
    import dialogue_data

    from nixx.store.portable import format_timestamp, header_record

    rows = [r for c in dialogue_data.build(seed=7) for r in c.rows]
    return [header_record()] + [
        {"type": "buffer", "id": i, "role": r.role, "content": r.content, "origin": "tui",
         "created_at": format_timestamp(r.created_at), "meta": {}}
        for i, r in enumerate(rows, 1)
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--embed", choices=("local", "openai"), default="local")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dialogue", action="store_true", help="the two-friend conversations")
    ap.add_argument("--split-older", action="store_true", help="rows with vectors, never split")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as nixx serve runs
    records = dialogue_records() if args.dialogue else fts_corpus(args.rows)[0]
    if args.split_older:  # every row has a vector already, and no "pieces"
        model = "all-MiniLM-L6-v2" if args.embed == "local" else "fake-embed"
        flat = [384**-0.5] * 384
        records = [records[0], {"type": "embedder", "model": model, "dim": 384}] + [
            {**r, "embedding": flat} if r.get("role") != "marker" else r for r in records[1:]
        ]
    tmp = Path(tempfile.mkdtemp(prefix="nixx-rowvec-"))
    store = open_store(f"sqlite:///{tmp / 'nixx.db'}")
    store.import_records(records)
    llm = None
    if args.embed == "local":
        from nixx.embed.local import LocalEmbedder

        embedder = LocalEmbedder()
        embedder.load()
        embed = embedder.embed
    else:
        from nixx.embed.openai import OpenAIEmbedder
        from nixx.testing.fake_llm import FakeLLM

        llm = FakeLLM()
        embedder = OpenAIEmbedder(base_url=llm.base_url, model="fake-embed")  # type: ignore[assignment]
        embed = embedder.embed
    queue = RowVectors(store, embed, batch_size=args.batch, nice=0)
    start = time.perf_counter()
    done = queue.drain()
    elapsed = time.perf_counter() - start
    stats = store.buffer_vector_stats()
    if args.split_older:
        ids = [int(r["id"]) for r in records if r.get("type") == "buffer" and r["role"] != "marker"]
        split = len(store.buffer_pieces(ids))
        print(
            f"{len(ids)} rows split in {elapsed:.1f}s: {len(ids) / elapsed:.0f} rows/s, "
            f"{split} with pieces, {len(store.buffer_rows_without_pieces(10))} left; "
            f"load {os.getloadavg()}"
        )
        store.close()
        return 0
    print(
        f"{done} rows embedded in {elapsed:.1f}s: {done / elapsed:.0f} rows/s end to end, "
        f"{queue.embedded_total / queue.embed_seconds:.0f} rows/s inside embed() "
        f"({100 * queue.embed_seconds / elapsed:.0f}% of the time); batch {args.batch}, "
        f"embedder {args.embed}; stats {stats}; load {os.getloadavg()}"
    )
    store.close()
    if llm is not None:
        llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
