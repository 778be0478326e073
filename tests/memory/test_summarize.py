"""The summariser's tolerant parse, tag merge and window selection."""

from __future__ import annotations

import pytest

from nixx.memory.summarize import merge_tags, parse_summary, select_window, transcript
from nixx.store.records import BufferRow


def row(i: int, content: str, role: str = "user") -> BufferRow:
    return BufferRow(id=i, role=role, content=content, origin="api", created_at="")


@pytest.mark.parametrize(
    "text",
    [
        '{"summary": "S.", "entities": {"tools": ["git"]}, "tags": ["a"]}',
        '```json\n{"summary": "S.", "entities": {"tools": ["git"]}, "tags": ["a"]}\n```',
        'Here you go:\n{"summary": "S.", "entities": {"tools": ["git",]}, "tags": ["A",],}\nThanks!',
        '```\n{"summary": "S.", "entities": {"tool": "git"}, "tags": "a"}\n```',
    ],
)
def test_tolerant_parse(text: str) -> None:
    draft = parse_summary(text)
    assert draft is not None
    assert (draft.summary, draft.entities, draft.tags) == ("S.", {"tools": ["git"]}, ["a"])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no json here",
        "[1, 2]",
        '{"summary": ""}',
        '{"summary": 3}',
        '{"entities": {}}',
        "{broken",
    ],
)
def test_unusable_answers(text: str) -> None:
    assert parse_summary(text) is None


def test_entities_normalised() -> None:
    draft = parse_summary(
        '{"summary": "x", "entities": {"Topics": ["rag"], "concepts": ["rag", "hnsw"], '
        '"people": [], "places": ["Oslo"], "urls": [" https://a.b "]}, "tags": ["X", "x", "y"]}'
    )
    assert draft is not None
    assert draft.entities == {"concepts": ["rag", "hnsw"], "urls": ["https://a.b"]}
    assert draft.tags == ["x", "y"]


def test_merge_tags_keeps_user_tags_as_typed() -> None:
    assert merge_tags(["PostgreSQL", "RAG"], ["postgresql", "search", "rag"]) == [
        "PostgreSQL",
        "RAG",
        "search",
    ]


def test_select_window() -> None:
    rows = [row(1, "a b c"), row(2, "marker", "marker"), row(3, "d e"), row(4, "f g h i")]
    assert [r.id for r in select_window(rows, min_words=4, max_chars=1000)] == [1, 3]
    assert [r.id for r in select_window(rows, min_words=None, max_chars=1000)] == [1, 3, 4]
    assert [r.id for r in select_window(rows, min_words=None, max_chars=12)] == [1]
    assert [r.id for r in select_window([row(1, "x" * 100)], min_words=None, max_chars=5)] == [1]


def test_transcript_lines() -> None:
    rows = [row(1, "hi"), row(2, "session_clear", "marker"), row(3, "hello", "assistant")]
    assert transcript(rows) == "USER: hi\nASSISTANT: hello"
