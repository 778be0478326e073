"""The fused search's parts: rank fusion, neighbour borrowing, periods named in a
question, the recall selection (floor, budget, excerpts) - over real SQLite stores."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from nixx.memory import search
from nixx.memory.recall import build_system_prompt, select
from nixx.store.records import BufferHit, BufferRow
from nixx.store.sqlite import SQLiteStore
from nixx.testing.fake_llm import FakeLLM

NOW = datetime(2025, 6, 15, tzinfo=UTC)


def row(
    i: int, text: str | None = None, at: str = "2025-06-01T10:00:00Z", role: str = "user"
) -> BufferRow:
    return BufferRow(i, role, text or f"the text of row {i}", "api", at)


def hits(ids: list[int], scores: list[float] | None = None) -> list[BufferHit]:
    scores = scores or [1.0 - 0.01 * n for n in range(len(ids))]
    return [BufferHit(row(i), s) for i, s in zip(ids, scores, strict=True)]


def test_agreeing_rankers_win_and_weights_count() -> None:
    out = search.fuse(hits([1, 2, 3]), hits([3, 4, 1]))
    assert {r.id for r in out[:2]} == {1, 3}  # in both lists, they beat 2 and 4
    one = next(r for r in out if r.id == 1)
    assert one.ranks == {"fts": 1, "vec": 3} and one.bm25 is not None and one.cosine is not None
    assert set(one.why) >= {"words", "vector"}
    # row 1 carries all the words and a middling cosine, row 2 half the words and a high one
    fts, vec = hits([1, 2], [1.0, 0.5]), hits([2, 1], [0.55, 0.35])
    assert search.fuse(fts, vec)[0].id == 1
    vec_heavy = search.FusionParams(w_words=0.2, w_vec=0.8)
    assert search.fuse(fts, vec, params=vec_heavy)[0].id == 2


def test_scores_not_ranks_decide() -> None:
    # a decisive vector match (cosine 0.6, the rest below 0.16) among 30 rows that each
    # share one common word of the question: the decisive one is first, though full
    # text ranks it nowhere and the weak rows hold both rankers' first places
    weak = list(range(1, 31))
    fts = hits(weak, [0.15] * 30)
    vec = hits([*weak[:10], 99], [0.16 - 0.001 * n for n in range(10)] + [0.6])
    assert search.fuse(fts, vec)[0].id == 99
    # and a row carrying the question's rare word beats rows only vaguely near it (below
    # MiniLM's recall floor of 0.40)
    fts = hits([50], [0.7])
    vec = hits([60, 61, 62, 50], [0.32, 0.31, 0.30, 0.2])
    assert search.fuse(fts, vec)[0].id == 50


def test_one_shared_word_of_several_does_not_pass_the_row_nearest_in_meaning() -> None:
    # row 7 carries 0.3 of the question's term weight (one word of several) and a fair
    # cosine; row 8 shares no word and is nearer in meaning. Counted linearly, the word
    # lifted row 7 first; the word evidence is the share squared (`words_power`), so a
    # partial match counts for less than its share and row 8 comes first — while a row
    # carrying all the words still wins (`test_agreeing_rankers_win_and_weights_count`)
    fts, vec = hits([7], [0.3]), hits([8, 7], [0.45, 0.35])
    assert search.fuse(fts, vec)[0].id == 8
    linear = search.FusionParams(words_power=1.0)
    assert search.fuse(fts, vec, params=linear)[0].id == 7


def test_the_limit_and_the_cosine_floor_cut_the_fused_list_in_order() -> None:
    from nixx.store.records import Summary, SummaryHit

    fts = hits([1, 2, 3])
    vec = hits([4, 1, 5, 6], [0.9, 0.8, 0.1, 0.05])
    summaries = [
        SummaryHit(Summary(i, f"s{i}", [], {}, 1, 2, "2025-06-01T10:00:00Z"), sc)
        for i, sc in ((1, 0.7), (2, 0.02))
    ]
    full = search.fuse(fts, vec, summaries)
    assert [(r.kind, r.id) for r in search.fuse(fts, vec, summaries, limit=4)] == [
        (r.kind, r.id) for r in full[:4]
    ]
    floored = search.fuse(fts, vec, summaries, min_cosine=0.5)
    kept = [
        (r.kind, r.id)
        for r in full
        if r.bm25 is not None or (r.cosine or 0.0) >= 0.5 or "neighbour" in r.why
    ]
    assert [(r.kind, r.id) for r in floored] == kept
    # row 6 shares no word, sits below the floor and next to no row with evidence, and
    # summary 2 is below the floor; row 5 is the neighbour of row 4 (cosine 0.9)
    assert {("buffer", 6), ("summary", 2)}.isdisjoint(kept) and ("buffer", 5) in kept
    assert ("buffer", 2) in kept and ("summary", 1) in kept  # full text keeps row 2


def test_a_row_borrows_from_its_neighbour() -> None:
    plain = search.FusionParams()
    borrow = search.FusionParams(neighbour=0.5)
    # 11 and 20 are tied on their own; 11 sits next to the strong row 10
    fts, vec = hits([10, 20, 11]), hits([10, 11, 20])
    assert [r.id for r in search.fuse(fts, vec, params=plain)][:1] == [10]
    scores = {r.id: r.score for r in search.fuse(fts, vec, params=borrow)}
    assert scores[11] > scores[20]


def test_periods_named_in_a_question() -> None:
    may = search.month_period("what did we cook in May?", NOW)
    assert may and (may.start, may.end) == (
        datetime(2025, 5, 1, tzinfo=UTC),
        datetime(2025, 6, 1, tzinfo=UTC),
    )
    # a month after "now" without a year is last year's
    dec = search.month_period("which film did we watch in December", NOW)
    assert dec and dec.start.year == 2024
    assert search.month_period("which restaurant in March 2023?", NOW).start.year == 2023  # type: ignore[union-attr]
    assert search.month_period("may I ask a question", NOW) is None
    assert search.relative_anchor("which film did we see the week after Mila's party?") == (
        "week",
        "after",
        "Mila's party",
    )
    after = search.relative_period("week", "after", "2025-06-01T10:00:00Z")
    assert (
        after
        and after.contains("2025-06-05T10:00:00Z")
        and not after.contains("2025-06-01T11:00:00Z")
    )
    boosted = search.fuse(
        [
            BufferHit(row(1, at="2025-04-02T00:00:00Z"), 2.0),
            BufferHit(row(2, at="2025-05-02T00:00:00Z"), 1.0),
        ],
        [],
        params=search.FusionParams(period_boost=1.0),
        periods=[may],
    )
    assert [r.id for r in boosted] == [2, 1]


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "s.db")
    s.migrate()
    s.bind_embedder("fake-embed", 384)
    return s


def add(store: SQLiteStore, role: str, text: str) -> BufferRow:
    r = store.append_buffer(role, text)
    store.add_buffer_vectors([(r.id, FakeLLM.embedding_of(text))])
    return r


def test_search_store_excludes_history_repeats_and_gives_context(store: SQLiteStore) -> None:
    add(store, "assistant", "did you book the dentist appointment?")  # 1
    add(store, "user", "yes, tuesday at four")  # 2
    store.append_buffer("marker", "session_clear")  # 3
    add(store, "user", "when is the dentist appointment")  # 4: repeats the query
    add(store, "user", "the dentist appointment moved to friday")  # 5: in the history
    q = "when is the dentist appointment"
    vec = np.stack([FakeLLM.embedding_of(q)])
    out = search.search_store(store, q, vec, limit=10, before_id=5)
    ids = [r.id for r in out]
    assert 1 in ids and 4 not in ids and 5 not in ids
    first = next(r for r in out if r.id == 1)
    assert [c.id for c in first.context] == [2]
    # the marker ends a session: row 4 has no context before it
    out = search.search_store(store, "dentist friday", None, limit=10)
    row5 = next(r for r in out if r.id == 5)
    assert [c.id for c in row5.context] == [4]
    row4 = next(r for r in out if r.id == 4)
    assert [c.id for c in row4.context] == [5]


def test_a_repeat_is_the_query_up_to_case_and_whitespace_only(store: SQLiteStore) -> None:
    q = "Where is the STRASSE  key?"
    texts = {
        "  where is\tthe\nstraße key?  ": True,  # case folded (ß is ss), whitespace collapsed
        "WHERE IS THE STRASSE KEY?": True,
        "where is the strasse key? found it": False,  # more words
        "where is the strasse": False,  # fewer
        "wherever is the strasse key?": False,  # the first word differs only by a suffix
        "the strasse key, where is it?": False,
    }
    rows = {add(store, "user", t).id: t for t in texts}
    vec = np.stack([FakeLLM.embedding_of(q)])
    found = {r.id for r in search.search_store(store, q, vec, limit=20)}
    assert {rows[i] for i in rows if i not in found} == {t for t, rep in texts.items() if rep}


def test_select_floor_budget_and_short_answers(store: SQLiteStore) -> None:
    add(store, "assistant", "did you book the dentist appointment?")  # 1
    add(store, "user", "yes, tuesday at four")  # 2
    add(store, "user", "the weather was lovely")  # 3
    q = "did I book the dentist appointment"
    vec = np.stack([FakeLLM.embedding_of(q)])
    results = search.search_store(store, q, vec, limit=20)
    items = select(
        results, row_floor=0.3, summary_threshold=0.3, budget_tokens=600, max_summaries=3
    )
    assert [i.buffer_ids for i in items] == [[1, 2]]  # the question with its short answer
    assert items[0].text.endswith(
        "assistant: did you book the dentist appointment?\n  user: yes, tuesday at four"
    )
    # over a floor above every cosine only the row saying the question's words is recalled
    high = select(
        results, row_floor=0.99, summary_threshold=0.3, budget_tokens=600, max_summaries=3
    )
    assert [i.buffer_ids for i in high] == [[1, 2]] and high[0].why["words"] > 0
    # a tiny budget fits nothing
    assert (
        select(results, row_floor=0.3, summary_threshold=0.3, budget_tokens=5, max_summaries=3)
        == []
    )
    prompt = build_system_prompt("base", None, items)
    assert prompt.startswith("base\n\n## Recalled Memories\n") and items[0].text in prompt
    assert build_system_prompt("base", None, []) == "base"


def test_the_benchmark_is_deterministic_and_labelled(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    try:
        import bench_recall
        import recall_data
    finally:
        sys.path.pop(0)
    convs = recall_data.build(seed=12)
    again = recall_data.build(seed=12)
    assert [[r.content for r in c.rows] for c in convs] == [
        [r.content for r in c.rows] for c in again
    ]
    assert len(convs) >= 5 and all(sum(r.role != "marker" for r in c.rows) >= 300 for c in convs)
    questions = [q for c in convs for q in c.questions]
    assert len(questions) >= 200
    assert {q.category for q in questions} == set(recall_data.CATEGORIES)
    for c in convs:
        for q in c.questions:
            assert q.evidence and all(c.rows[i].role != "marker" for i in q.evidence)
        sessions = {r.created_at.date() for r in c.rows if r.role == "marker"}
        assert len(sessions) >= 5
    assert all(len(q.evidence) >= 2 for q in questions if q.category == "multi-hop")
    # the harness loads a conversation into a real store with the sessions' dates
    store = bench_recall.load_store(convs[0], tmp_path / "c.db")
    rows = store.get_buffer(1)
    assert len(rows) == len(convs[0].rows)
    assert rows[0].created_at.startswith(convs[0].rows[0].created_at.strftime("%Y-%m-%dT%H:%M"))
    single = next(q for q in convs[0].questions if q.category == "single")
    found = [h.row.id for h in store.search_buffer(single.text, 20)]
    assert set(bench_recall.evidence_ids(single)) & set(found)


def test_source_search_reranks_the_nearest_chunks_by_their_words() -> None:
    from nixx.store.records import Memory, MemoryHit

    def hit(i: int, text: str, score: float) -> MemoryHit:
        return MemoryHit(Memory(i, 1, text, {}, "2025-01-01T00:00:00Z"), "docs", score)

    hits = [
        hit(1, "operations travel through the git remote", 0.41),
        hit(2, "each workspace has an origin prefix", 0.40),
        hit(3, "the read cursor is a max register per reader and channel", 0.33),
    ]
    out = search.fuse_memories("how do replicas agree on the read cursor?", hits, limit=2)
    assert [h.memory.id for h in out] == [3, 1]  # words "read cursor" lift the third
    assert out[0].score == 0.33  # scores stay the cosines
    assert search.lexical_order("the a of", ["anything"]) == []
    assert [h.memory.id for h in search.fuse_memories("zzz", hits, limit=5)] == [1, 2, 3]
