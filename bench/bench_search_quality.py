"""Search quality on a labelled conversation: does a natural question find its answer?

    .venv/bin/python bench/bench_search_quality.py [--model minilm|mpnet]

Data: bench/search_quality_data.py (40 buffer rows on 13 topics, 20 questions each
labelled with the rows that answer it). A question counts as answered at k when one of
its answer rows is among the first k results. Prints recall@1/3/5/10 and MRR for:

- `store`   : `SQLiteStore.search_buffer` as shipped (terms OR-ed, stop words dropped,
              BM25, porter stemming on unicode61 with diacritics folded)
- `and`     : naive FTS5 matching: every word of the question must occur (the FTS5 /
              plainto_tsquery default), BM25 order
- `and-nostop`: the same with stop words dropped first
- `or-nostem` : OR + BM25 on a unicode61 index without porter stemming
- `vector`  : cosine search over the rows embedded by the local embedder
              (all-MiniLM-L6-v2), when its model wheel is installed
- `hybrid`  : reciprocal-rank fusion (k=60) of `store` and `vector`
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).parent))

from search_quality_data import QUESTIONS, ROWS  # noqa: E402

from nixx.store.fts_query import fts5_match, query_terms  # noqa: E402
from nixx.store.records import NewChunk  # noqa: E402
from nixx.store.sqlite import SQLiteStore  # noqa: E402

KS = (1, 3, 5, 10)
Search = Callable[[str], list[int]]  # question -> row ids, best first


def evaluate(search: Search) -> dict[str, float]:
    hits = {k: 0 for k in KS}
    rr = 0.0
    for question, answers in QUESTIONS:
        ranked = search(question)
        for k in KS:
            if set(ranked[:k]) & set(answers):
                hits[k] += 1
        rank = next((i for i, rid in enumerate(ranked) if rid in answers), None)
        rr += 0 if rank is None else 1 / (rank + 1)
    out = {f"R@{k}": hits[k] / len(QUESTIONS) for k in KS}
    out["MRR"] = rr / len(QUESTIONS)
    return out


def raw_fts(conn: apsw.Connection, table: str, match: str | None) -> list[int]:
    if not match:
        return []
    return [
        r[0]
        for r in conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT 10",
            (match,),
        )
    ]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="nixx-quality-") as root:
        return run(Path(root))


def run(root: Path) -> int:
    store = SQLiteStore(root / "q.db")
    store.migrate()
    ids = [store.append_buffer(role, text, "tui").id for role, text in ROWS]
    assert ids == list(range(1, len(ROWS) + 1))

    conn = store._conn()  # bench-only: alternative indexes over the same rows
    conn.execute(
        "CREATE VIRTUAL TABLE plain_fts USING fts5(content, content='buffer', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2');"
        "INSERT INTO plain_fts(plain_fts) VALUES ('rebuild');"
    )

    def words(q: str) -> list[str]:
        return [w for w in query_terms(q.replace("'", " ")) if w] or []

    def and_all(q: str) -> str | None:
        import re

        raw = [w for w in re.findall(r"[^\W_]+", q.lower())]
        return " ".join(f'"{w}"' for w in raw) or None

    methods: dict[str, Search] = {
        "store (OR + BM25, porter)": lambda q: [h.row.id for h in store.search_buffer(q, 10)],
        "and (all words, FTS5 default)": lambda q: raw_fts(conn, "buffer_fts", and_all(q)),
        "and-nostop (content words ANDed)": lambda q: raw_fts(
            conn, "buffer_fts", " ".join(f'"{w}"' for w in words(q)) or None
        ),
        "or-nostem (OR + BM25, no porter)": lambda q: raw_fts(conn, "plain_fts", fts5_match(q)),
    }

    try:
        from nixx.embed.local import LocalEmbedder

        model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "minilm"
        embedder = LocalEmbedder(model=model)  # minilm | mpnet
        vectors = embedder.embed([text for _, text in ROWS])
        store.bind_embedder(embedder.model, embedder.dim)
        store.add_source(
            "rows",
            "buffer",
            [
                NewChunk(text, v, {"row": i + 1})
                for i, ((_, text), v) in enumerate(zip(ROWS, vectors, strict=True))
            ],
        )

        def vector(q: str) -> list[int]:
            hits = store.search_memories(embedder.embed_one(q), limit=10)
            return [h.memory.metadata["row"] for h in hits]

        def hybrid(q: str) -> list[int]:
            scores: dict[int, float] = {}
            for ranked in (methods["store (OR + BM25, porter)"](q), vector(q)):
                for rank, rid in enumerate(ranked):
                    scores[rid] = scores.get(rid, 0.0) + 1 / (60 + rank + 1)
            return sorted(scores, key=lambda r: -scores[r])

        methods[f"vector ({embedder.model}, cosine)"] = vector
        methods["hybrid (RRF of store + vector)"] = hybrid
    except Exception as exc:  # noqa: BLE001 - the vector rows are optional here
        print(f"(vector search skipped: {exc})")

    print(
        f"{len(ROWS)} buffer rows, {len(QUESTIONS)} questions; answered@k = an answer row in the top k"
    )
    header = f"{'method':<44}" + "".join(f"{m:>8}" for m in [*[f"R@{k}" for k in KS], "MRR"])
    print(header)
    print("-" * len(header))
    for name, search in methods.items():
        r = evaluate(search)
        print(f"{name:<44}" + "".join(f"{r[m]:>8.2f}" for m in [*[f"R@{k}" for k in KS], "MRR"]))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
