"""A buffer row's sentences, each with a vector of its own: its pieces.

A row's vector is made from the whole row (`nixx.memory.row_text`). A turn that mixes a
greeting, a fact and a question back ("Hey Deborah! Doing well, thanks. We got back from
hiking in the Dolomites. How about you?") carries the fact in one sentence of several,
and the row's vector dilutes it; a question about the fact is nearer the sentence than
the row. So a row of two or more sentences also stores one vector per sentence
(`split`: three words or more each, the row's "Name: " label kept), written with the
row's vector by the background queue (`nixx.memory.row_vectors`) and `nixx reindex`.

The row-vector ranker then ranks a row by its best piece's cosine when that is higher
and the piece itself reaches the model's recall floor (`lift`): a generic sentence of a
long answer ("it may be a stray worth mentioning to a local shelter") does not speak for
its row below the floor. The row keeps its own cosine as its score and carries the
sentence's beside it (`BufferHit.sentence`): the fusion weighs the higher of the two,
while recall lets a row into a turn on its sentence only at a margin over the row floor
(`nixx.memory.recall.SENTENCE_MARGIN`: at the floor itself the sentences doubled the
unrelated questions that inject a row; docs/performance.md). Only the rows the row
vectors found are lifted (the depth the fusion takes, 50), so the search reads the
pieces of those rows, never scans them all: on both benchmark sets lifting the best 50
keeps what lifting every row gains (and asking the index for 100 cost 1.6 ms a search at
100k rows). Measured on both benchmark sets
(`bench/bench_pieces.py`; docs/performance.md, "A vector per sentence of a long row").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from nixx.store.records import BufferHit

# a sentence ends at . ! or ? before a space, or at a dash between spaces
_SPLIT = re.compile(r"(?<=[.!?])\s+|\s+[—–-]\s+")
# a speaker's label at the start of a row in a chat between people ("Deborah: ...")
_LABEL = re.compile(r"^[A-Z][\w'’-]{0,30}:\s")
MIN_WORDS = 3  # a shorter piece joins the next one ("Hey Deborah!" is no sentence of its own)
MAX_PIECES = 8  # a long row's first pieces only (a pasted document is not a turn)


def split(content: str) -> list[str]:
    """The pieces of a row: its sentences of `MIN_WORDS` words or more (a shorter one
    joins the next, a short tail the last), each with the row's "Name: " label; [] for a
    row of one sentence."""
    m = _LABEL.match(content)
    label, body = (m.group(0), content[m.end() :]) if m else ("", content)
    out: list[str] = []
    pending = ""
    for part in _SPLIT.split(body):
        pending = f"{pending} {part.strip()}".strip()
        if len(pending.split()) >= MIN_WORDS:
            out.append(pending)
            pending = ""
    if pending and out:
        out[-1] = f"{out[-1]} {pending}"
    if len(out) < 2:
        return []
    return [label + piece for piece in out[:MAX_PIECES]]


def lift(
    hits: Sequence[BufferHit],
    pieces: Mapping[int, np.ndarray],
    query: np.ndarray,
    *,
    floor: float,
    limit: int,
) -> list[BufferHit]:
    """`hits` (a row-vector search, cosines as scores) ordered again with each row ranked
    by its best piece's cosine when that is higher and at least `floor` (kept as the
    hit's `sentence`, its `score` unchanged); the best `limit`, best first (ties by id)."""
    if not pieces:
        return list(hits[:limit])
    owners = [i for i, h in enumerate(hits) if h.row.id in pieces]
    if not owners:
        return list(hits[:limit])
    matrices = [pieces[hits[i].row.id] for i in owners]
    stacked = np.concatenate(matrices)
    q = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(stacked, axis=1) * (float(np.linalg.norm(q)) or 1.0)
    cosines = (stacked @ q) / np.where(norms > 0, norms, 1.0)
    # each owner's best piece: the maximum over its slice of `cosines`
    starts = np.cumsum([0] + [len(m) for m in matrices[:-1]])
    best = np.maximum.reduceat(cosines, starts)
    out = list(hits)
    for i, b in zip(owners, best.tolist(), strict=True):
        if b >= floor and b > hits[i].score:
            out[i] = BufferHit(row=hits[i].row, score=hits[i].score, sentence=b)
    out.sort(key=lambda h: (-h.rank_score, h.row.id))
    return out[:limit]
