"""Turn a user's question into full-text search terms.

Users search with questions ("what did we decide about the schema?"), not phrases.
FTS5 and `plainto_tsquery` AND every term, so a question matches almost nothing; we
instead keep the meaningful words, drop stop words and OR them, and let BM25
(`bm25()` in SQLite, the same formula in SQL in PostgreSQL) rank rows that share more and
rarer terms first.

Every term is a run of letters/digits, so no FTS5 or tsquery syntax (`"`, `*`, `AND`,
`NEAR`, `(`, `:`, `-`, `^`) can reach the engine from user input; in FTS5 each term
is additionally double-quoted, which makes a bare `AND`/`OR`/`NOT` an ordinary word.
"""

from __future__ import annotations

import re

# Short English list: question words, auxiliaries, pronouns, articles, prepositions.
# Kept small on purpose: content words ("schema", "bug", "test") must never be dropped.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t d ll m re ve don didn doesn isn wasn weren hasn haven
    hadn won wouldn shouldn couldn let us also get got tell told say said
    """.split()  # noqa: SIM905 - a word list reads better as text
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(query: str, *, max_terms: int = 32) -> list[str]:
    """The distinct, lower-cased content words of `query`, in order of appearance.

    Stop words and single letters are dropped (single digits are kept). An empty or
    stop-word-only query gives [].
    """
    seen: dict[str, None] = {}
    for match in _WORD.finditer(query.lower()):
        word = match.group(0)
        if word in STOP_WORDS or (len(word) == 1 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
        if len(seen) >= max_terms:
            break
    return list(seen)


def fts5_match(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms of `query`, or None when
    the query has no searchable term."""
    return fts5_match_terms(query_terms(query))


def fts5_match_terms(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted `terms` (None for none)."""
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def tsquery_text(query: str) -> str | None:
    """The same OR of terms for PostgreSQL's `to_tsquery` (terms are letters/digits
    only, so they need no escaping), or None when the query has no searchable term."""
    terms = query_terms(query)
    if not terms:
        return None
    return " | ".join(terms)
