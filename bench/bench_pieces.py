"""A vector per sentence of a long row: the experiment that chose `nixx.memory.pieces`.

    .venv/bin/python bench/bench_pieces.py [--label|--no-label] [--share 1.0] [--min-chars 0]

A row's vector is made from the whole row (`nixx.memory.row_text`). In a turn that mixes a
greeting, a fact and a question back, the fact is one sentence of three and its vector is
diluted; a question about the fact matches the sentence better than the row. This bench
splits each row of two or more sentences (three words or more each; `--min-chars`: only
rows at least that long) into pieces, embeds each piece (with the row's "Name: " label
unless `--no-label`), and lets a row's cosine be its best piece's when that is higher
(`--share`: only that share of the step up). Both the vectors alone and the fused search
(`search.combine`, the shipped fusion, exact cosines over the set's rows) are run with
and without pieces, on every set and seed of `bench_recall.py`, from its embedding cache.
The split is the shipped one (`--no-label`, `--min-chars` vary it); its own lift
(`--share`, `--min-piece`, `--rescore`) compares variants; what ships (`nixx.memory.pieces`: the floor, the best 50) is measured by
`bench_recall.py` through the store. Figures and the decision: docs/performance.md ("A
vector per sentence of a long row").
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_recall as br  # noqa: E402

from nixx.embed import default_row_floor  # noqa: E402
from nixx.memory import row_text, search  # noqa: E402
from nixx.memory.pieces import split  # noqa: E402
from nixx.memory.service import SEARCH_FLOOR_SHARE  # noqa: E402
from nixx.store.records import BufferHit  # noqa: E402

LABEL = re.compile(r"^([A-Z][\w'’-]{0,30}):\s")
DEPTH = 50


def pieces(content: str, *, label: bool, min_chars: int) -> list[str]:
    """The row's sentences as the queue splits them (`nixx.memory.pieces.split`), with or
    without the row's "Name: " label; [] for a row of one sentence or shorter than
    `min_chars`."""
    if len(content) < min_chars:
        return []
    out = split(content)
    m = LABEL.match(content)
    return out if label or not m else [p[m.end() :] for p in out]


class WithPieces:
    """One loaded conversation's rows' cosines, with or without their pieces."""

    def __init__(self, ld: br.Loaded, embedder: br.CachedEmbedder, args: argparse.Namespace):
        self.ld, self.share, self.min_piece = ld, args.share, args.min_piece
        self.rescore = args.rescore
        owner: list[int] = []
        texts: list[str] = []
        for r in ld.rows:
            if r.role != "marker":
                for p in pieces(r.content, label=args.label, min_chars=args.min_chars):
                    owner.append(r.id)
                    texts.append(p)
        self.owner = np.array(owner, dtype=np.int64)
        self.matrix = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), np.float32)

    def hits(self, qvec: np.ndarray, use_pieces: bool) -> list[BufferHit]:
        base = dict(zip(self.ld.ids.tolist(), (self.ld.matrix @ qvec).tolist(), strict=True))
        best = dict(base)
        if self.rescore:
            best = dict(sorted(base.items(), key=lambda kv: (-kv[1], kv[0]))[: self.rescore])
        if use_pieces and len(self.owner):
            for rid, cos in zip(self.owner.tolist(), (self.matrix @ qvec).tolist(), strict=True):
                if rid in best and cos >= self.min_piece:
                    best[rid] = max(best[rid], base[rid] + self.share * (cos - base[rid]))
        top = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:DEPTH]
        return [BufferHit(row=self.ld.by_id[rid], score=cos) for rid, cos in top]


class Ranker:
    """The vectors alone, or the fused search, with or without the pieces."""

    def __init__(
        self, extra: dict[int, WithPieces], embedder: br.CachedEmbedder, *, fuse: bool, use: bool
    ) -> None:
        self.extra, self.embedder, self.fuse, self.use = extra, embedder, fuse, use
        self.params = search.params_for(embedder.model)
        self.min_cosine = SEARCH_FLOOR_SHARE * default_row_floor(embedder.model)

    def __call__(self, ld: br.Loaded, i: int) -> list[int]:
        rows = self.extra[id(ld)]
        if not self.fuse:
            return [h.row.id for h in rows.hits(ld.qvecs[i], self.use)]
        q = ld.conv.questions[i].text
        more = search.texts_to_embed(q, ld.common[i])[1:]
        qv = [ld.qvecs[i]] + (list(self.embedder.embed_queries(more)) if more else [])
        hits = [rows.hits(v, self.use) for v in qv]
        fts, anchor_fts = search.text_side(ld.store, q, DEPTH)
        out = search.combine(
            q, fts, hits[0], [], anchor_fts, hits[1] if len(hits) > 1 else [],
            store=ld.store, limit=DEPTH, params=self.params, now=ld.now, context=0,
            min_cosine=self.min_cosine,
        )
        return [r.id for r in out if r.kind == "buffer"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--share", type=float, default=1.0)
    ap.add_argument("--min-chars", type=int, default=0)
    ap.add_argument("--rescore", type=int, default=0,
                    help="pieces re-score only the row vectors' best N (0: every row)")
    ap.add_argument("--min-piece", type=float, default=-1.0,
                    help="a piece lifts its row only from this cosine up")
    args = ap.parse_args(argv)
    embedder = br.CachedEmbedder()
    for name, (module, seeds) in br.SETS.items():
        br.CATEGORIES = module.CATEGORIES
        for seed in seeds:
            convs = module.build(seed=seed)
            with tempfile.TemporaryDirectory(prefix="nixx-pieces-") as root:
                stores = [br.load_store(c, Path(root) / f"{c.name}.db") for c in convs]
                loaded = [
                    br.Loaded(c, s, embedder, row_text.embedding_text)
                    for c, s in zip(convs, stores, strict=True)
                ]
                extra = {id(ld): WithPieces(ld, embedder, args) for ld in loaded}

                n_pieces = sum(len(w.owner) for w in extra.values())
                n_rows = sum(len(ld.ids) for ld in loaded)
                print(f"\n## {name}, seed {seed}: {n_pieces} pieces for {n_rows} rows")
                for label, method in [
                    ("vectors", Ranker(extra, embedder, fuse=False, use=False)),
                    ("vectors + pieces", Ranker(extra, embedder, fuse=False, use=True)),
                    ("fused (shipped)", Ranker(extra, embedder, fuse=True, use=False)),
                    ("fused + pieces", Ranker(extra, embedder, fuse=True, use=True)),
                ]:
                    t = br.evaluate(loaded, method)
                    ks = " ".join(f"R@{k} {t.mean(None, k):.3f}" for k in br.KS)
                    cats = " ".join(f"{c} {t.mean(c, 10):.3f}" for c in module.CATEGORIES)
                    print(f"  {label:18s} {ks} | R@10 {cats}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
