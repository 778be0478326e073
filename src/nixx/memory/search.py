"""One fused search over episodic memory: buffer rows and summaries in one list.

Three rankers answer a question:

- full text over the buffer (`store.search_buffer`: content words OR-ed, BM25),
- vectors over the buffer rows (`store.search_buffer_vectors`; a row's vector is made
  from the row alone, `nixx.memory.row_text`; the question is embedded without the words
  a quarter of the rows contain, such as the speakers' names: `vector_text`),
- vectors over the summaries (`store.search_summaries`).

`fuse` combines them by the strength of their evidence, not by their ranks: a row's
full-text score is the share of the question's term weight it carries (BM25 over the sum
of the question's IDFs, the same scale in both stores: `nixx.store.term_stats`), squared
as evidence (one shared word of several is weak evidence: `FusionParams.words_power`), its
cosine is read on the embedding model's scale of evidence (`nixx.embed.cosine_scale`: 0
where unrelated text reaches, 1 where a match is decisive), and the two are mixed
(`FusionParams`: 0.5 words, 0.5 vector). Rank fusion let two weak ranks outscore one
decisive match — a row sharing one common word with the question ranked by both rankers
beat the only row near it in meaning — and held out, on real conversation, it lost to
full text alone. Then a row borrows part of the evidence of the rows next to it (the
answer to a question is often the row after the one that shares its words; the rows next
to the best ones are candidates even when no ranker found them), and, when the question
names a period ("in March", "the week after the party"), rows from that period are
favoured. Rows saying the same (ten copies of a question) collapse into the best of them,
which lists the others' ids. Every parameter was chosen on both labelled benchmark sets
(`bench/bench_recall.py`, figures in docs/performance.md); none is specific to one.

Each result carries its evidence — the row's cosine, its full-text share, and `why`, the
parts its score is made of — and recall's floor is applied to the same score
(`nixx.memory.recall`): what search ranks first is what a turn recalls.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

import numpy as np

from nixx.memory import pieces
from nixx.store.base import MemoryStore
from nixx.store.fts_query import fts5_match, query_terms
from nixx.store.records import BufferHit, BufferRow, MemoryHit, Summary, SummaryHit


@dataclass(frozen=True)
class FusionParams:
    """How the rankers' evidence is weighed (the module docstring)."""

    w_words: float = 0.5  # weight of word evidence: the share of the question's term weight
    w_vec: float = 0.5  # weight of vector evidence: the cosine on the model's scale
    w_summary: float = 1.0  # a summary's vector evidence, relative to a row's
    cos_lo: float = 0.15  # the cosine that is no evidence (unrelated text reaches it)...
    cos_hi: float = 0.65  # ...and the one that is decisive (calibrated per model: nixx.embed)
    neighbour: float = 0.3  # share of a neighbour's evidence a row borrows
    period_boost: float = 0.5  # relative boost of rows inside a period the question names
    depth: int = 50  # candidates taken from each ranker
    # a second hop (pseudo-relevance feedback): the words of the best `hop_from` rows that
    # the question does not say are asked again by full text, and the rows found borrow
    # this share of that row's evidence times their own word share (0: no second hop)
    hop: float = 0.3
    hop_from: int = 2
    neighbours_of: int = 10  # the best this many rows lend evidence to rows no ranker found
    # a row's sentence (`nixx.memory.pieces`) lifts its cosine from this cosine up: the
    # model's recall floor (`params_for`; None: no lift)
    piece_floor: float | None = 0.40
    # the word evidence is the full-text share raised to this power: a row carrying half
    # the question's term weight is a quarter of a full match's evidence, so one shared
    # word of several no longer lifts a row past the one nearest in meaning (1: linear)
    words_power: float = 2.0

    def vector_evidence(self, cosine: float | None) -> float:
        """A cosine on the 0..1 scale of evidence (0 at `cos_lo`, 1 at `cos_hi`)."""
        if cosine is None:
            return 0.0
        return min(1.0, max(0.0, (cosine - self.cos_lo) / (self.cos_hi - self.cos_lo)))


# chosen on both benchmark sets (bench/bench_recall.py: the assistant set and the
# two-person dialogue set; docs/performance.md); the cosine scale is all-MiniLM-L6-v2's and
# is replaced per model by `params_for`
DEFAULT_PARAMS = FusionParams()


def params_for(model: str, base: FusionParams = DEFAULT_PARAMS) -> FusionParams:
    """`base` with the cosine scale and the weights calibrated for embedding `model`
    (`nixx.embed`)."""
    from dataclasses import replace

    from nixx.embed import cosine_scale, default_row_floor, fusion_weights

    lo, hi = cosine_scale(model)
    w_words, w_vec = fusion_weights(model)
    return replace(base, cos_lo=lo, cos_hi=hi, piece_floor=default_row_floor(model),
                   w_words=w_words, w_vec=w_vec)


@dataclass
class Result:
    """One fused result: a buffer row (with its neighbours as context) or a summary."""

    kind: str  # "buffer" | "summary"
    score: float  # the fused score (relative: compare within one answer only)
    created_at: str
    row: BufferRow | None = None
    summary: Summary | None = None
    context: list[BufferRow] = field(default_factory=list)
    cosine: float | None = None  # the row's or summary's vector similarity to the query
    # a row's best sentence's cosine, when higher than the row's and at the model's floor
    # (`nixx.memory.pieces`): the vector evidence is the higher of the two
    sentence_cosine: float | None = None
    # the row's full-text score: the share of the question's term weight it carries (BM25;
    # None: no shared term)
    bm25: float | None = None
    ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank in each ranker
    # where the score came from: "words", "vector", "neighbour" (evidence borrowed from
    # the row next to it), "period" (inside a period the question names)
    why: dict[str, float] = field(default_factory=dict)
    repeats: list[int] = field(default_factory=list)  # ids of rows saying the same, collapsed

    @property
    def id(self) -> int:
        if self.row is not None:
            return self.row.id
        assert self.summary is not None
        return self.summary.id


# ---- periods named in a question --------------------------------------------------------
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTH_RE = re.compile(
    r"\b(?:in|during|last|this|of)\s+("
    + "|".join(sorted(_MONTHS, key=len, reverse=True))
    + r")\b(?:\s+(\d{4}))?",
    re.IGNORECASE,
)
_YEAR_RE = re.compile(r"\bin\s+(\d{4})\b")
_RELATIVE_RE = re.compile(
    r"\b(?:the\s+)?(day|week|month|weekend)\s+(after|before)\b(.*)$", re.IGNORECASE
)


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime  # exclusive

    def contains(self, iso: str) -> bool:
        try:
            moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        except ValueError:
            return False
        return self.start <= moment < self.end


def month_period(question: str, now: datetime | None = None) -> Period | None:
    """The month (and year) a question names ("in March", "in May 2025"), else None.
    A month without a year is the latest such month not after `now`."""
    match = _MONTH_RE.search(question)
    if match:
        month = _MONTHS[match.group(1).lower()]
        now = now or datetime.now(UTC)
        if match.group(2):
            year = int(match.group(2))
        else:
            year = now.year if month <= now.month else now.year - 1
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
        return Period(start, end)
    match = _YEAR_RE.search(question)
    if match:
        year = int(match.group(1))
        return Period(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
    return None


def relative_anchor(question: str) -> tuple[str, str, str] | None:
    """("week", "after", "the party") for "what did we do the week after the party?"."""
    match = _RELATIVE_RE.search(question)
    if not match:
        return None
    anchor = match.group(3).strip(" ?.!")
    if not anchor:
        return None
    return match.group(1).lower(), match.group(2).lower(), anchor


_SPANS = {"day": 2, "weekend": 4, "week": 10, "month": 35}


def relative_period(unit: str, direction: str, anchor_at: str) -> Period | None:
    try:
        at = datetime.fromisoformat(anchor_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    span = timedelta(days=_SPANS[unit])
    if direction == "after":
        return Period(at + timedelta(hours=12), at + span)
    return Period(at - span, at - timedelta(hours=12))


# ---- fusion -----------------------------------------------------------------------------
def same_text(content: str) -> str:
    """What two rows saying the same share: case folded, whitespace collapsed, the
    punctuation around words dropped ("Name three uses of a flowerpot." six times)."""
    return " ".join(w.strip(_PUNCT) for w in content.casefold().split()).strip()


_PUNCT = ".,;:!?\"'()[]{}<>*_`~-"


@dataclass
class _Candidates:
    """The rows a question's rankers found (and their neighbours), with their evidence."""

    params: FusionParams
    rows: dict[int, BufferRow] = field(default_factory=dict)
    ranks: dict[int, dict[str, int]] = field(default_factory=dict)
    cosine: dict[int, float] = field(default_factory=dict)
    sentence: dict[int, float] = field(default_factory=dict)  # a lifting sentence's cosine
    bm25: dict[int, float] = field(default_factory=dict)
    why: dict[int, dict[str, float]] = field(default_factory=dict)
    base: dict[int, float] = field(default_factory=dict)  # own evidence, before lending
    # evidence from a second hop, and the evidence of the row it came from (its ceiling)
    hopped: dict[int, tuple[float, float]] = field(default_factory=dict)

    def gather(self, name: str, hits: Sequence[BufferHit]) -> None:
        """A ranker's first `depth` hits: "fts" scores are BM25 shares, "vec" cosines."""
        scores = self.cosine if name == "vec" else self.bm25
        for rank, hit in enumerate(hits[: self.params.depth], 1):
            self.rows.setdefault(hit.row.id, hit.row)
            self.ranks.setdefault(hit.row.id, {}).setdefault(name, rank)
            scores.setdefault(hit.row.id, hit.score)
            if hit.sentence is not None:
                self.sentence.setdefault(hit.row.id, hit.sentence)

    def weigh(self) -> None:
        """Each row's own evidence: its words and its vector, on one 0..1 scale each."""
        p = self.params
        for rid in self.rows:
            parts = self.why[rid] = {}
            if rid in self.bm25:
                parts["words"] = p.w_words * min(1.0, self.bm25[rid]) ** p.words_power
            if rid in self.cosine:
                parts["vector"] = p.w_vec * p.vector_evidence(self.nearness(rid))
            self.base[rid] = sum(parts.values())

    def add_neighbours(self, rows_near: Callable[[list[int]], Sequence[BufferRow]]) -> None:
        """The rows next to the best ones become candidates (with no evidence of their own)."""
        best = sorted(self.base, key=lambda rid: (-self.base[rid], -rid))
        wanted = {n for rid in best[: self.params.neighbours_of] for n in (rid - 1, rid + 1)}
        missing = sorted(n for n in wanted - self.rows.keys() if n > 0)
        for row in rows_near(missing) if missing else ():
            if row.role != "marker":
                self.rows[row.id], self.ranks[row.id], self.why[row.id] = row, {}, {}
                self.base[row.id] = 0.0

    def add_hop(self, hop: Callable[[BufferRow], Sequence[BufferHit]]) -> None:
        """The second hop: the rows `hop` finds from each of the best rows (by that row's
        words the question does not say) become candidates, with a share of its
        evidence (`FusionParams.hop`) times their full-text share."""
        p = self.params
        best = sorted((rid for rid in self.base if self.base[rid] > 0),
                      key=lambda rid: (-self.base[rid], -rid))[: p.hop_from]
        for source in best:
            for hit in hop(self.rows[source])[: p.depth]:
                rid = hit.row.id
                if rid == source:
                    continue
                if rid not in self.rows:
                    self.rows[rid], self.ranks[rid], self.why[rid] = hit.row, {}, {}
                    self.base[rid] = 0.0
                lent = p.hop * self.base[source] * min(1.0, hit.score)
                if lent > self.hopped.get(rid, (0.0, 0.0))[0]:
                    self.hopped[rid] = (lent, self.base[source])

    def scores(self, periods: Sequence[Period]) -> dict[int, float]:
        """Own evidence, plus a share of the better neighbour's and of a second hop's,
        times the period boost."""
        p, score = self.params, dict(self.base)
        for rid in self.rows if p.neighbour else ():
            # a marker ends a session and is never a candidate: nothing is lent across it
            near = max((self.base.get(n, 0.0) for n in (rid - 1, rid + 1)), default=0.0)
            if near:
                self.why[rid]["neighbour"] = p.neighbour * near
                score[rid] += p.neighbour * near
        for rid, (lent, ceiling) in self.hopped.items():
            # a row a hop found never passes the row it was found from: what the question
            # matched first stays first
            raised = min(score[rid] + lent, ceiling)
            if raised > score[rid]:
                self.why[rid]["hop"] = raised - score[rid]
                score[rid] = raised
        for rid, row in self.rows.items() if periods and p.period_boost else ():
            if any(period.contains(row.created_at) for period in periods):
                self.why[rid]["period"] = score[rid] * p.period_boost
                score[rid] *= 1.0 + p.period_boost
        return score

    def result(self, rid: int, score: float) -> Result:
        row = self.rows[rid]
        return Result(
            kind="buffer",
            score=score,
            created_at=row.created_at,
            row=row,
            cosine=self.cosine.get(rid),
            sentence_cosine=self.sentence.get(rid),
            bm25=self.bm25.get(rid),
            ranks=self.ranks[rid],
            why=self.why[rid],
        )

    def too_far(self, rid: int, min_cosine: float | None) -> bool:
        """A row sharing no word, lent nothing and nearer than `min_cosine` is not shown."""
        if min_cosine is None or rid in self.bm25 or "neighbour" in self.why[rid] \
                or "hop" in self.why[rid]:
            return False
        return self.nearness(rid) < min_cosine

    def nearness(self, rid: int) -> float:
        """A row's vector evidence: its cosine, or its lifting sentence's if higher."""
        return max(self.cosine.get(rid, 0.0), self.sentence.get(rid, 0.0))


def _summary_result(hit: SummaryHit, rank: int, score: float) -> Result:
    return Result(
        kind="summary",
        score=score,
        created_at=hit.summary.created_at,
        summary=hit.summary,
        cosine=hit.score,
        ranks={"summary": rank},
        why={"vector": score},
    )


def fuse(
    fts: Sequence[BufferHit],
    vec: Sequence[BufferHit],
    summaries: Sequence[SummaryHit] = (),
    *,
    params: FusionParams = DEFAULT_PARAMS,
    periods: Sequence[Period] = (),
    limit: int | None = None,
    min_cosine: float | None = None,
    rows_near: Callable[[list[int]], Sequence[BufferRow]] | None = None,
    hop: Callable[[BufferRow], Sequence[BufferHit]] | None = None,
) -> list[Result]:
    """The fused list, best first (see the module docstring): its first `limit` (None:
    all); with `min_cosine`, a row that shares no word with the query (no BM25 score),
    and a summary, must have at least that cosine. `rows_near` reads buffer rows by id:
    with it, the rows next to the best ones are candidates too (an answer after the
    question that shares the words)."""
    pool = _Candidates(params)
    pool.gather("fts", fts)
    pool.gather("vec", vec)
    pool.weigh()
    if rows_near is not None and params.neighbour and params.neighbours_of:
        pool.add_neighbours(rows_near)
    if hop is not None and params.hop and params.hop_from:
        pool.add_hop(hop)
    # ordered on (score, kind, id) first; a Result is made for what is kept only
    order = [(-sc, "buffer", -rid, 0) for rid, sc in pool.scores(periods).items()]
    picked = summaries[: params.depth]
    summary_weight = params.w_summary * params.w_vec
    order += [
        (-summary_weight * params.vector_evidence(h.score), "summary", -h.summary.id, rank)
        for rank, h in enumerate(picked, 1)
    ]
    order.sort()
    results: list[Result] = []
    seen: dict[str, Result] = {}  # what a row says -> the result that says it first
    for neg_score, kind, neg_id, rank in order:
        if limit is not None and len(results) >= limit:
            break
        if kind == "summary":
            if min_cosine is None or picked[rank - 1].score >= min_cosine:
                results.append(_summary_result(picked[rank - 1], rank, -neg_score))
        elif not pool.too_far(-neg_id, min_cosine):
            key = same_text(pool.rows[-neg_id].content)
            if key in seen:
                seen[key].repeats.append(-neg_id)
            else:
                seen[key] = pool.result(-neg_id, -neg_score)
                results.append(seen[key])
    return results


# ---- against a store ---------------------------------------------------------------------
def vector_text(text: str, common: Sequence[str]) -> str:
    """`text` without the `common` words (`MemoryStore.common_words`: in a quarter of the
    rows or more), and their possessive "'s": what the vector ranker is asked. In a
    conversation between two people every row starts with a speaker's name, and a short
    row ("Deborah: How's work?") is near any question naming that person by the name
    alone; asked without it, the rows near the question's subject come first
    (docs/memory.md). Unchanged when nothing else would be left."""
    if not common:
        return text
    names = "|".join(re.escape(w) for w in sorted(common, key=len, reverse=True))
    pattern = re.compile(rf"(?<![^\W_])(?:{names})(?:['’]s)?(?![^\W_])", re.IGNORECASE)
    stripped = " ".join(pattern.sub(" ", text).split())
    return stripped if query_terms(stripped) else text


def texts_to_embed(query: str, common: Sequence[str] = ()) -> list[str]:
    """The texts a search embeds: the query, and the anchor of a relative period
    ("the week after <anchor>") when it names one, each without the `common` words
    (`vector_text`)."""
    rel = relative_anchor(query)
    return [vector_text(t, common) for t in [query] + ([rel[2]] if rel else [])]


def row_vector_hits(
    store: MemoryStore,
    vector: np.ndarray,
    depth: int,
    before_id: int | None = None,
    piece_floor: float | None = DEFAULT_PARAMS.piece_floor,
) -> list[BufferHit]:
    """The `depth` rows nearest `vector` by their row vectors, each lifted by its best
    sentence (`nixx.memory.pieces.lift`) and ordered again."""
    hits = store.search_buffer_vectors(vector, limit=depth, before_id=before_id)
    if piece_floor is None or not hits:
        return hits
    found = store.buffer_pieces([h.row.id for h in hits])
    return pieces.lift(hits, found, vector, floor=piece_floor, limit=depth)


def text_side(
    store: MemoryStore, query: str, depth: int
) -> tuple[list[BufferHit], list[BufferHit]]:
    fts = store.search_buffer(query, depth)
    rel = relative_anchor(query)
    anchor = store.search_buffer(rel[2], depth) if rel else []
    return fts, anchor


def vector_side(
    store: MemoryStore,
    vectors: np.ndarray | None,
    depth: int,
    before_id: int | None,
    piece_floor: float | None = DEFAULT_PARAMS.piece_floor,
) -> tuple[list[BufferHit], list[SummaryHit], list[BufferHit]]:
    if vectors is None or len(vectors) == 0:
        return [], [], []
    vec = row_vector_hits(store, vectors[0], depth, before_id, piece_floor)
    summaries = store.search_summaries(
        vectors[0], limit=depth, threshold=None, before_buffer_id=before_id
    )
    anchor = (
        row_vector_hits(store, vectors[1], depth, before_id, piece_floor)
        if len(vectors) > 1
        else []
    )
    return vec, summaries, anchor


S = TypeVar("S")


@dataclass
class Rankers(Generic[S]):
    """What the three rankers answered for one question (`run_rankers`)."""

    query: str
    # what the vector ranker was asked: the query without the store's common words
    # (`vector_text`); None when nothing was embedded
    vector_query: str | None = None
    fts: list[BufferHit] = field(default_factory=list)
    anchor_fts: list[BufferHit] = field(default_factory=list)
    # the embedding of `vector_query` (None: full text only): rows and summaries are
    # searched by it
    vector: np.ndarray | None = None
    vec: list[BufferHit] = field(default_factory=list)  # the rows nearest `vector`
    anchor_vec: list[BufferHit] = field(default_factory=list)
    summaries: S | None = None  # what the caller's summary search returned

    def combine(self, summaries: Sequence[SummaryHit], **options: Any) -> list[Result]:
        """The fused list of these answers with `summaries` (the caller's pick of its
        summary search); `options` are `combine`'s keywords."""
        return combine(
            self.query,
            self.fts,
            self.vec,
            summaries,
            self.anchor_fts,
            self.anchor_vec,
            **options,
        )


def run_rankers(
    store: MemoryStore,
    query: str,
    embed: Callable[[list[str]], np.ndarray | None],
    summaries: Callable[[np.ndarray], S],
    *,
    pool: Executor,
    depth: int = DEFAULT_PARAMS.depth,
    before_id: int | None = None,
    piece_floor: float | None = DEFAULT_PARAMS.piece_floor,
) -> Rankers[S]:
    """The rankers of a question, each on its own thread where it can overlap: full text
    on `pool` while this thread embeds the question (`embed`: None when the embedder is
    down, then full text only) and searches the buffer-row vectors; the summary search
    (the caller's: a search shows the best few, recall filters by a threshold) on `pool`
    beside it. Nothing is embedded when no vector is stored. Blocking; run it in a
    worker thread. SQLite, the embedder and the HNSW index release the GIL, so on two
    cores this takes about max(full text, embedding + the longer vector search)."""
    text = pool.submit(text_side, store, query, depth)
    out: Rankers[S] = Rankers(query)
    try:
        texts = texts_to_embed(query, store.common_words(query))
        vectors = embed(texts) if store.has_episodic_vectors() else None
        if vectors is not None and len(vectors):
            out.vector, out.vector_query = vectors[0], texts[0]
            summary_side = pool.submit(summaries, out.vector)
            out.vec = row_vector_hits(store, vectors[0], depth, before_id, piece_floor)
            if len(texts) > 1:
                out.anchor_vec = row_vector_hits(store, vectors[1], depth, before_id, piece_floor)
            out.summaries = summary_side.result()
    finally:
        out.fts, out.anchor_fts = text.result()
    return out


def search_store(
    store: MemoryStore,
    query: str,
    vectors: np.ndarray | None,
    *,
    limit: int,
    before_id: int | None = None,
    exclude_ids: Sequence[int] = (),
    params: FusionParams = DEFAULT_PARAMS,
    now: datetime | None = None,
    context: int = 1,
    min_cosine: float | None = None,
) -> list[Result]:
    """The fused search, in one worker thread: `vectors` are the embeddings of
    `texts_to_embed(query, store.common_words(query))` (None: full text only;
    `run_rankers` does all this). Rows with id >= `before_id` (and summaries ending there
    or later), the rows in `exclude_ids` and rows that repeat the query exactly are left
    out. Each buffer result gets up to `context` rows either side of it (same session) as
    `context`."""
    fts, anchor_fts = text_side(store, query, params.depth)
    vec, summaries, anchor_vec = vector_side(
        store, vectors, params.depth, before_id, params.piece_floor
    )
    return combine(
        query,
        fts,
        vec,
        summaries,
        anchor_fts,
        anchor_vec,
        store=store,
        limit=limit,
        before_id=before_id,
        exclude_ids=exclude_ids,
        params=params,
        now=now,
        context=context,
        min_cosine=min_cosine,
    )


def combine(
    query: str,
    fts: Sequence[BufferHit],
    vec: Sequence[BufferHit],
    summaries: Sequence[SummaryHit],
    anchor_fts: Sequence[BufferHit] = (),
    anchor_vec: Sequence[BufferHit] = (),
    *,
    store: MemoryStore | None = None,
    limit: int,
    before_id: int | None = None,
    exclude_ids: Sequence[int] = (),
    params: FusionParams = DEFAULT_PARAMS,
    now: datetime | None = None,
    context: int = 1,
    min_cosine: float | None = None,
) -> list[Result]:
    """`search_store` once the rankers have answered (the server runs the full-text and
    the vector side in two worker threads, then this). With `min_cosine`, a result that
    shares no word with the query must have at least that cosine (what a search shows:
    without it every question "finds" the nearest rows, however far)."""
    excluded = set(exclude_ids)
    repeat = " ".join(query.split()).casefold()
    head = repeat.split(" ", 1)[0]

    def is_repeat(content: str) -> bool:
        # the first word decides for almost every row, without splitting all of it
        # (casefolding never makes or removes whitespace)
        first = content.split(None, 1)
        if not first or first[0].casefold() != head:
            return not first and not repeat
        return " ".join(content.split()).casefold() == repeat

    def kept(row: BufferRow) -> bool:
        if row.id in excluded or (before_id is not None and row.id >= before_id):
            return False
        return not is_repeat(row.content)

    def keep(hit: BufferHit) -> bool:
        return kept(hit.row)

    def rows_near(ids: list[int]) -> list[BufferRow]:
        assert store is not None
        return [row for row in store.get_buffer_rows(ids) if kept(row)]

    fts = [h for h in fts if keep(h)]
    vec = [h for h in vec if keep(h)]
    if before_id is not None:
        summaries = [h for h in summaries if h.summary.end_buffer_id < before_id]
    periods: list[Period] = []
    month = month_period(query, now)
    if month:
        periods.append(month)
    rel = relative_anchor(query)
    if rel and (anchor_fts or anchor_vec):
        anchors = fuse(
            [h for h in anchor_fts if keep(h)], [h for h in anchor_vec if keep(h)], params=params
        )
        if anchors:
            period = relative_period(rel[0], rel[1], anchors[0].created_at)
            if period:
                periods.append(period)
    asked = set(query_terms(query))

    def hop(row: BufferRow) -> list[BufferHit]:
        assert store is not None
        said = [t for t in query_terms(row.content) if t not in asked]
        common = set(store.common_words(" ".join(said))) if said else set()
        said = [t for t in said if t not in common]
        return [h for h in store.search_buffer(" ".join(said), params.depth) if keep(h)] \
            if said else []

    results = fuse(
        fts,
        vec,
        summaries,
        params=params,
        periods=periods,
        limit=max(0, limit),
        min_cosine=min_cosine,
        rows_near=rows_near if store is not None else None,
        hop=hop if store is not None else None,
    )
    if store is not None and context > 0:
        attach_context(store, results, context)
    return results


def attach_context(store: MemoryStore, results: Sequence[Result], n: int = 1) -> None:
    """Fill each buffer result's `context`: up to `n` rows either side, same session.
    One query for every result's neighbours."""
    ids = [r.row.id for r in results if r.row is not None]
    if not ids or n <= 0:
        return
    wanted = {i for rid in ids for i in range(max(1, rid - n), rid + n + 1)}
    by_id = {row.id: row for row in store.get_buffer_rows(sorted(wanted))}
    for result in results:
        if result.row is None:
            continue
        rid = result.row.id
        before = [by_id[i] for i in range(max(1, rid - n), rid) if i in by_id]
        after = [by_id[i] for i in range(rid + 1, rid + n + 1) if i in by_id]
        # a marker ends a session: nothing across it is context
        while before and any(r.role == "marker" for r in before):
            before = before[[r.role for r in before].index("marker") + 1 :]
        if any(r.role == "marker" for r in after):
            after = after[: [r.role for r in after].index("marker")]
        result.context = before + after


# ---- semantic memory (sources) ------------------------------------------------------------
# How many nearest chunks the source search re-ranks by their words.
SOURCE_CANDIDATES = 100
# The rank constant of the source re-ranking: the chunks are the nearest by vectors already,
# and the words only reorder them, so ranks (not the buffer's scores) are enough here.
SOURCE_RANK_K = 60.0


def lexical_order(query: str, texts: Sequence[str]) -> list[int]:
    """Indexes of `texts` that share a content word with `query`, best first: BM25 over
    these texts alone, with the buffer's tokenizer (porter stemming, diacritics folded),
    in an in-memory FTS5 table (milliseconds for a hundred chunks)."""
    import apsw

    match = fts5_match(query)
    if match is None or not texts:
        return []
    db = apsw.Connection(":memory:")
    try:
        db.execute(
            "CREATE VIRTUAL TABLE t USING fts5(content, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        with db:
            db.executemany("INSERT INTO t (rowid, content) VALUES (?, ?)", list(enumerate(texts)))
        rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid", (match,))
        return [int(r[0]) for r in rows]
    finally:
        db.close()


def fuse_memories(query: str, hits: Sequence[MemoryHit], *, limit: int) -> list[MemoryHit]:
    """Source search: the nearest chunks by vectors (`hits`, best first) re-ranked by
    reciprocal-rank fusion with their full-text rank among themselves, so a chunk that
    says the question's words ("the read cursor") beats one that is only near in meaning.
    Scores stay the cosines; only the order changes."""
    lexical = {
        i: rank for rank, i in enumerate(lexical_order(query, [h.memory.content for h in hits]), 1)
    }
    k = SOURCE_RANK_K
    fused = {
        i: 1.0 / (k + i + 1) + (1.0 / (k + lexical[i]) if i in lexical else 0.0)
        for i in range(len(hits))
    }
    order = sorted(fused, key=lambda i: (-fused[i], i))
    return [hits[i] for i in order[: max(0, limit)]]


__all__ = [
    "DEFAULT_PARAMS",
    "SOURCE_CANDIDATES",
    "fuse_memories",
    "params_for",
    "same_text",
    "lexical_order",
    "FusionParams",
    "Period",
    "Rankers",
    "Result",
    "attach_context",
    "combine",
    "fuse",
    "search_store",
    "text_side",
    "texts_to_embed",
    "vector_text",
    "vector_side",
    "month_period",
    "relative_anchor",
    "relative_period",
    "run_rankers",
]
