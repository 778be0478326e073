"""The question → full-text terms builder shared by both backends."""

from __future__ import annotations

import apsw
import pytest

from nixx.store.fts_query import fts5_match, query_terms, tsquery_text


def test_content_words_are_kept_in_order_without_duplicates():
    assert query_terms("What did we decide about the Schema, and the schema's tests?") == [
        "decide",
        "schema",
        "tests",
    ]


def test_stop_words_single_letters_and_punctuation_are_dropped():
    assert query_terms("what is it?") == []
    assert query_terms("a b c ... !!! ***") == []
    assert query_terms("version 2 of x") == ["version", "2"]


def test_syntax_never_survives():
    terms = query_terms("NEAR(\"a\" b) AND c* OR d:e -f ^g {h} (i) 'j' k_l")
    assert all(t.isalnum() for t in terms)
    assert "near" in terms and "and" not in terms  # AND/OR/NOT are stop words or plain words


def test_unicode_words_are_terms():
    assert query_terms("Zürich café 日本語") == ["zürich", "café", "日本語"]


def test_fts5_expression_is_quoted_or():
    assert fts5_match("deploy fails on postgres") == '"deploy" OR "fails" OR "postgres"'
    assert fts5_match("the of and") is None
    assert tsquery_text("deploy fails") == "deploy | fails"
    assert tsquery_text("") is None


def test_term_count_is_capped():
    assert len(query_terms(" ".join(f"word{i}" for i in range(100)))) == 32


@pytest.mark.parametrize(
    "query", ['"', '""', "*", "AND", "NOT x", "x OR", "(", ")", ":", "^", "-", "NEAR(", "\x00"]
)
def test_every_expression_is_valid_fts5(query: str):
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content); INSERT INTO t VALUES ('x near')")
    match = fts5_match(query)
    if match is not None:
        list(conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)))
