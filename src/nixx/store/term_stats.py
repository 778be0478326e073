"""Which of a question's words full text can rank by, and how much each weighs (SQLite).

FTS5's bm25() weighs a term by its inverse document frequency,
``log((N - n + 0.5) / (n + 0.5))``, and uses 1e-6 instead when that is not positive:
a word that half the rows or more contain cannot change the order of the results. It
still costs: FTS5 scores every row that matches any term before it sorts (about a
microsecond and a half per matching row here), so a message made of such words ("stream
recall memory buffer cache" on a store where every row says them) took half a second
for nothing (bench/bench_turn.py --questions vocab, docs/performance.md). And it carries
no evidence: in a conversation between two people each speaker's name is in half the
rows, and a question naming one of them would match every row that person said.

So a store of a thousand rows or more leaves those words out of the MATCH expression, and
every store tells the search the question's whole term weight — the sum of its words' IDFs — so a
row's BM25 score can be read as the share of the question's evidence it carries
(`nixx.memory.search`: score fusion needs an absolute scale, not a rank). Document
frequencies come from an `fts5vocab` table (which counts a term's rows by reading its
posting list: ~20x cheaper than ranking them, but not free), kept per process for each
word and re-read once the store has grown by a tenth since.
"""

from __future__ import annotations

import math
import threading

import apsw

from nixx.store.fts_query import query_terms

#: A cached document frequency is re-read when the store grew by this share since.
REFRESH_GROWTH = 0.10
_MAX_CACHED = 50_000
_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])  # buffer_fts's tokenize


class TermStats:
    """Document frequencies of the buffer's full-text terms (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._df: dict[str, tuple[int, int]] = {}  # stem -> (rows containing it, N then)

    def rankable_terms(self, conn: apsw.Connection, query: str) -> list[str]:
        """The content words of `query` (`fts_query.query_terms`) that can change bm25's
        order: those in fewer than half the buffer's rows. [] when none can."""
        return self.weigh(conn, query)[0]

    def weigh(self, conn: apsw.Connection, query: str) -> tuple[list[str], float]:
        """(the words of `query` to match, the sum of their IDFs as bm25() computes them).
        A store of `MIN_ROWS` rows or more leaves out the words in half its rows or more
        (there they only cost); a smaller one matches them, weighed at bm25()'s floor, so
        a row sharing only such a word comes after every row sharing a word of weight."""
        terms = query_terms(query)
        total = _row_count(conn) if terms else 0
        if not terms or total <= 0:
            return [], 0.0
        tokenizer = conn.fts5_tokenizer(*_TOKENIZER)
        weighed: list[tuple[str, float]] = []
        for term in terms:
            tokens = tokenizer(term.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)
            stems = [t[2] for t in tokens if isinstance(t, tuple) and len(t) >= 3]
            weighed.append((term, sum(idf(self._frequency(conn, s, total), total) for s in stems)))
        kept = weighed if total < MIN_ROWS else [(t, w) for t, w in weighed if w > IDF_FLOOR]
        return [t for t, _ in kept], sum(w for _, w in kept)

    def common(self, conn: apsw.Connection, query: str) -> list[str]:
        """The words of `query` whose every stem is in `COMMON_SHARE` of the rows or more,
        in a store of `COMMON_MIN_ROWS` rows or more (`MemoryStore.common_words`)."""
        terms = query_terms(query)
        total = _row_count(conn) if terms else 0
        if total < COMMON_MIN_ROWS:
            return []
        tokenizer = conn.fts5_tokenizer(*_TOKENIZER)
        out = []
        for term in terms:
            tokens = tokenizer(term.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)
            stems = [t[2] for t in tokens if isinstance(t, tuple) and len(t) >= 3]
            if stems and all(
                self._frequency(conn, s, total) >= COMMON_SHARE * total for s in stems
            ):
                out.append(term)
        return out

    def forget(self) -> None:
        """Drop every cached frequency (after rows were deleted)."""
        with self._lock:
            self._df.clear()

    def _frequency(self, conn: apsw.Connection, stem: str, total: int) -> int:
        with self._lock:
            cached = self._df.get(stem)
        if cached is not None and total <= cached[1] * (1 + REFRESH_GROWTH):
            return cached[0]
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.buffer_fts_terms "
            "USING fts5vocab(main, buffer_fts, 'row')"
        )
        row = conn.execute("SELECT doc FROM temp.buffer_fts_terms WHERE term = ?", (stem,))
        found = row.fetchone()
        df = int(found[0]) if found else 0
        with self._lock:
            if len(self._df) >= _MAX_CACHED:
                self._df.clear()
            self._df[stem] = (df, total)
        return df


#: Below this many rows every word is matched (words in half the rows weigh nothing).
MIN_ROWS = 1_000
#: A word in this share of the rows or more is common (`TermStats.common`): bm25 weighs it
#: down by its IDF (to nothing from half the rows on), the vector ranker cannot, so the
#: question is embedded without it. A quarter: each speaker's name in a chat of two, three
#: or four people (bench/bench_recall.py; a tenth and a sixth took topic words too).
COMMON_SHARE = 0.25
#: Below this many rows no word is common: in a handful of rows, a quarter of them sharing
#: a word says nothing about the word.
COMMON_MIN_ROWS = 100
#: What bm25() uses for a word in half the rows or more.
IDF_FLOOR = 1e-6


def idf(df: int, total: int) -> float:
    """bm25()'s inverse document frequency of a word in `df` of `total` rows (a word in
    no row counts as in one)."""
    df = max(1, df)
    total = max(total, df)  # counts read at different moments
    return max(IDF_FLOOR, math.log((total - df + 0.5) / (df + 0.5)))


def _row_count(conn: apsw.Connection) -> int:
    """The number of rows FTS5 has indexed, from its averages record (the first varint of
    `buffer_fts_data` row 1, where bm25() reads N): no scan."""
    found = conn.execute("SELECT block FROM buffer_fts_data WHERE id = 1").fetchone()
    if not found or not found[0]:
        return 0
    value = 0
    for i, byte in enumerate(bytes(found[0])[:9]):  # SQLite's varint: big-endian, 7 bits a
        if i == 8:  # byte with a continuation bit, the ninth byte whole
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value
