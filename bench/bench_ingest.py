"""Ingest throughput on a generated corpus of Markdown files, local embedder, SQLite store.

    .venv/bin/python bench/bench_ingest.py [--files 1000] [--seed 7]

Generates --files Markdown notes (headings, paragraphs, lists, a fenced code block in some)
in a temp folder, then ingests the folder three times into a fresh SQLite store:

1. cold: read + chunk + embed + store (prints chunks/s and MB/s, and where the time went);
2. unchanged: the content hash matches, nothing is read twice into the store (no-op);
3. one file changed: every chunk is re-chunked but only the changed file's chunks are
   embedded again; the rest re-use their stored vectors.

Ratios (unchanged/cold, one-changed/cold) are measured in the same run. The machine is
shared with other work, so absolute figures are noisy; the ratios are the stable part.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

_WORDS_TEXT = (
    "memory vector index query server recall summary python function class module test "
    "error commit branch merge deploy config token model latency cache request response "
    "thread worker socket stream chunk batch buffer sqlite postgres decided meeting review "
    "design issue fix bug release version garden harbour tide owl kiln bread tea ferry "
    "budget invoice travel passport lecture chapter theorem proof dataset experiment"
)
WORDS = _WORDS_TEXT.split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 20))]
    return " ".join(words).capitalize() + "."


def note(i: int, rng: random.Random) -> str:
    parts = [f"# Note {i}: {rng.choice(WORDS)} and {rng.choice(WORDS)}\n"]
    for s in range(rng.randint(2, 4)):
        parts.append(f"## Section {s}\n")
        for _ in range(rng.randint(1, 3)):
            parts.append(" ".join(sentence(rng) for _ in range(rng.randint(2, 5))) + "\n")
        if rng.random() < 0.3:
            parts.append("\n".join(f"- {sentence(rng)}" for _ in range(3)) + "\n")
        if rng.random() < 0.2:
            parts.append("```python\ndef f(x):\n    return x * 2\n```\n")
    return "\n".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    from nixx.config import load_settings
    from nixx.embed import make_embedder
    from nixx.ingest.pipeline import Ingestor, Progress
    from nixx.store import open_store

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        corpus.mkdir()
        size = 0
        for i in range(args.files):
            text = note(i, rng)
            size += len(text.encode())
            (corpus / f"note{i:04d}.md").write_text(text)
        settings = load_settings(home=root / "home", db_url=f"sqlite:///{root / 'bench.db'}")
        store = open_store(settings.database_url)
        embedder = make_embedder(settings)
        embedder.embed(["warm up the model"])  # load weights outside the timings

        marks: dict[str, float] = {}

        def progress(event: Progress) -> None:
            if event.stage == "embed" and "embed_start" not in marks:
                marks["embed_start"] = time.perf_counter()
            if event.stage == "store":
                marks["store_start"] = time.perf_counter()

        ingestor = Ingestor(store, embedder, settings, progress=progress)
        t0 = time.perf_counter()
        cold = ingestor.ingest_path(corpus)
        t1 = time.perf_counter()
        cold_s = t1 - t0
        read_s = marks["embed_start"] - t0
        embed_s = marks["store_start"] - marks["embed_start"]
        store_s = t1 - marks["store_start"]

        t0 = time.perf_counter()
        same = ingestor.ingest_path(corpus)
        same_s = time.perf_counter() - t0
        assert same.status == "unchanged"

        victim = corpus / "note0000.md"
        victim.write_text(victim.read_text() + "\nOne more paragraph about the harbour.\n")
        t0 = time.perf_counter()
        changed = ingestor.ingest_path(corpus)
        changed_s = time.perf_counter() - t0
        store.close()

    mb = size / 1e6
    print(f"corpus: {args.files} Markdown files, {mb:.2f} MB, {cold.chunks} chunks")
    print(
        f"cold ingest: {cold_s:.1f}s = {cold.chunks / cold_s:.1f} chunks/s, {mb / cold_s:.3f} MB/s"
    )
    print(
        f"  read+chunk {read_s:.2f}s ({read_s / cold_s:.1%}), embed {embed_s:.1f}s "
        f"({embed_s / cold_s:.1%}), store {store_s:.2f}s ({store_s / cold_s:.1%})"
    )
    print(f"  read+chunk alone: {mb / read_s:.2f} MB/s")
    print(f"unchanged re-ingest: {same_s:.2f}s (ratio to cold {same_s / cold_s:.3f})")
    print(
        f"one file changed: {changed_s:.2f}s, {changed.embedded} embedded, {changed.reused} "
        f"re-used (ratio to cold {changed_s / cold_s:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
