"""The memory-store contract: one suite every backend passes against its real engine.

A backend's test module subclasses `StoreContract` and provides two fixtures:

    store         a fresh, migrated, empty store
    second_store  another fresh, migrated, empty store (the target of import tests)

Vectors are small deterministic unit vectors; no embedding model is needed.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from nixx.errors import Conflict, EmbedderMismatch, NotFound, ValidationError
from nixx.store.base import MemoryStore
from nixx.store.forgetting import REBUILD_KEY, RESUMMARISE_KEY
from nixx.store.records import NewChunk

DIM = 16
MODEL = "test-model"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def unit(*weights: float, dim: int = DIM) -> np.ndarray:
    """A unit vector with the given leading components (the rest zero)."""
    v = np.zeros(dim, dtype=np.float32)
    v[: len(weights)] = weights
    return (v / np.linalg.norm(v)).astype(np.float32)


def random_units(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def chunks(vectors: np.ndarray, prefix: str = "chunk") -> list[NewChunk]:
    n = len(vectors)
    return [
        NewChunk(f"{prefix} {i}", vectors[i], {"chunk": i, "total_chunks": n}) for i in range(n)
    ]


def fill_buffer(store: MemoryStore, n: int) -> list[int]:
    return [store.append_buffer("user", f"message number {i}", "tui").id for i in range(n)]


class StoreContract:
    """Tests every `MemoryStore` backend must pass."""

    # ---- schema ------------------------------------------------------------------------
    def test_migrated_store_is_at_head_and_migrate_is_idempotent(self, store: MemoryStore):
        version = store.schema_version()
        assert version >= 1
        assert store.migrate() == []
        assert store.schema_version() == version

    # ---- buffer ------------------------------------------------------------------------
    def test_append_and_read_buffer_rows(self, store: MemoryStore):
        a = store.append_buffer("user", "hello there", "tui")
        b = store.append_buffer("assistant", "general kenobi", "vscode", meta={"model": "m"})
        c = store.append_buffer("user", "third", "api")
        assert b.id > a.id and c.id > b.id
        assert TIMESTAMP.match(a.created_at), a.created_at
        rows = store.get_buffer(a.id)
        assert [r.content for r in rows] == ["hello there", "general kenobi", "third"]
        assert rows[1].role == "assistant" and rows[1].origin == "vscode"
        assert rows[1].meta == {"model": "m"}
        assert rows[0] == a
        assert [r.id for r in store.get_buffer(a.id, b.id)] == [a.id, b.id]
        assert store.buffer_stats() == {"rows": 3, "max_id": c.id}

    def test_rows_by_id_far_apart_in_one_call(self, store: MemoryStore):
        ids = fill_buffer(store, 12)
        got = store.get_buffer_rows([ids[9], ids[0], ids[9], ids[4], 10**12])
        assert [r.id for r in got] == [ids[0], ids[4], ids[9]]  # id order, once, known only
        assert got[0] == store.get_buffer(ids[0], ids[0])[0]
        assert store.get_buffer_rows([]) == []
        many = store.get_buffer_rows(list(range(1, 1200)))  # more ids than one IN list holds
        assert [r.id for r in many] == ids

    def test_unicode_content_round_trips(self, store: MemoryStore):
        text = "naïve café — 日本語 🎉 'quotes' \"double\" \\ back\nnewline"
        row = store.append_buffer("user", text, "api", meta={"k": "välue ✓"})
        [back] = store.get_buffer(row.id, row.id)
        assert back.content == text and back.meta == {"k": "välue ✓"}

    @pytest.mark.parametrize(
        ("role", "origin", "param"),
        [("system", "tui", "role"), ("tool", "api", "role"), ("user", "web", "origin")],
    )
    def test_unknown_role_or_origin_is_refused(self, store: MemoryStore, role, origin, param):
        with pytest.raises(ValidationError) as err:
            store.append_buffer(role, "x", origin)
        assert err.value.param == param
        assert store.buffer_stats()["rows"] == 0

    def test_update_buffer_meta_merges(self, store: MemoryStore):
        row = store.append_buffer("assistant", "partial", "api", meta={"model": "m"})
        store.update_buffer_meta(row.id, {"incomplete": True})
        [back] = store.get_buffer(row.id, row.id)
        assert back.meta == {"model": "m", "incomplete": True}
        with pytest.raises(NotFound):
            store.update_buffer_meta(row.id + 100, {"x": 1})

    def test_append_user_once_reuses_a_retried_message(self, store: MemoryStore):
        first = store.append_user_once("hello", "api")
        assert store.append_user_once("hello", "api") == first  # unanswered: a retry
        store.append_buffer("assistant", "hel", "api", meta={"incomplete": True})
        assert store.append_user_once("hello", "api") == first  # past a partial answer
        assert store.append_user_once("hello", "tui").id != first.id  # another client
        store.append_buffer("assistant", "hi", "tui")
        again = store.append_user_once("hello", "tui")  # answered: a new message
        assert again.id > first.id
        store.append_buffer("marker", "", "api")
        assert store.append_user_once("hello", "tui").id > again.id  # a new session

    def test_append_user_once_is_atomic_across_threads(self, store: MemoryStore):
        import threading
        from concurrent.futures import ThreadPoolExecutor

        barrier = threading.Barrier(8)

        def send(_: int) -> int:
            barrier.wait()
            return store.append_user_once("same thing", "api").id

        with ThreadPoolExecutor(8) as pool:
            ids = set(pool.map(send, range(8)))
        assert len(ids) == 1
        assert store.buffer_stats()["rows"] == 1

    def test_session_starts_after_the_last_marker(self, store: MemoryStore):
        assert store.last_marker_id() == 0
        store.append_buffer("user", "old one", "tui")
        store.append_buffer("assistant", "old two", "tui")
        marker = store.append_buffer("marker", "", "tui")
        assert store.last_marker_id() == marker.id
        new = store.append_buffer("user", "new one", "tui")
        session = store.last_buffer_rows(50, after_id=store.last_marker_id())
        assert [r.id for r in session] == [new.id]
        # the newest n non-marker rows, oldest first, markers skipped
        last_two = store.last_buffer_rows(2)
        assert [r.content for r in last_two] == ["old two", "new one"]
        assert store.last_buffer_rows(0) == []

    # ---- full-text search --------------------------------------------------------------
    def test_natural_question_finds_rows_sharing_only_some_words(self, store: MemoryStore):
        store.append_buffer("user", "Let's keep the schema in a migrations folder.", "tui")
        store.append_buffer("assistant", "The cat sat on the mat.", "tui")
        store.append_buffer("assistant", "Lunch is at noon.", "tui")
        hits = store.search_buffer("what did we decide about the schema?")
        assert [h.row.content for h in hits] == ["Let's keep the schema in a migrations folder."]
        assert hits[0].score > 0

    def test_rows_matching_more_terms_rank_first(self, store: MemoryStore):
        filler = ["we talked about the weather today", "the build is green again"]
        for text in filler * 3:
            store.append_buffer("user", text, "api")
        one = store.append_buffer("user", "the deploy script needs a fix", "api")
        both = store.append_buffer("assistant", "the deploy script fails on postgres", "api")
        common = store.append_buffer("user", "the build failed on the weather widget", "api")
        hits = store.search_buffer("why does the deploy fail on postgres")
        ids = [h.row.id for h in hits]
        assert ids[0] == both.id
        assert one.id in ids
        assert common.id in ids  # "failed" matches "fail": stemming
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] > scores[-1]

    @pytest.mark.parametrize(
        "query",
        [
            'schema"',
            '"unbalanced',
            "schema*",
            "* AND schema",
            "AND OR NOT",
            "(schema",
            "schema)",
            "content: schema",
            "col:schema",
            "NEAR(schema design)",
            "schema -design",
            "^schema",
            "schema & | ! :* <->",
            "'; DROP TABLE buffer; --",
            "{schema}",
            "schema + design",
        ],
    )
    def test_query_syntax_characters_are_harmless(self, store: MemoryStore, query: str):
        row = store.append_buffer("user", "the schema design review", "api")
        hits = store.search_buffer(query)
        assert all(h.row.id == row.id for h in hits)
        if "schema" in query.lower():
            assert [h.row.id for h in hits] == [row.id]
        assert store.buffer_stats()["rows"] == 1

    def test_empty_and_stop_word_queries_return_nothing(self, store: MemoryStore):
        store.append_buffer("user", "what is this and why", "api")
        assert store.search_buffer("") == []
        assert store.search_buffer("   ") == []
        assert store.search_buffer("what is the") == []
        assert store.search_buffer("?!.,") == []

    def test_markers_are_not_searchable_and_limit_applies(self, store: MemoryStore):
        store.append_buffer("marker", "session boundary kiwi", "tui")
        for i in range(5):
            store.append_buffer("user", f"kiwi fruit number {i}", "tui")
        hits = store.search_buffer("kiwi", limit=3)
        assert len(hits) == 3
        assert all(h.row.role != "marker" for h in hits)

    def test_search_matches_word_forms_and_case(self, store: MemoryStore):
        row = store.append_buffer("user", "The Migrations are RUNNING now", "api")
        assert [h.row.id for h in store.search_buffer("migrations running")] == [row.id]
        assert [h.row.id for h in store.search_buffer("MIGRATIONS")] == [row.id]

    def test_full_text_scores_are_the_share_of_the_questions_term_weight(self, store: MemoryStore):
        # the same scale on every engine: a row with all the question's words scores near
        # 1, a row with only its rarest word most of that, a row with only a word of most
        # rows (a speaker's name in a chat between two people) next to nothing
        for i in range(20):
            store.append_buffer("user", f"Maya: just chatting about day {i}", "api")
        both = store.append_buffer("user", "Maya: my sister Ana adopted a greyhound", "api")
        rare = store.append_buffer("assistant", "Tom: a greyhound? lovely dogs", "api")
        hits = {h.row.id: h.score for h in store.search_buffer("Maya greyhound")}
        assert 0.8 <= hits[both.id] <= 1.3
        assert 0.6 <= hits[rare.id] <= 1.3
        name_only = [score for rid, score in hits.items() if rid not in (both.id, rare.id)]
        assert name_only and max(name_only) < 0.1

    def test_common_words_are_those_of_a_quarter_of_the_rows(self, store: MemoryStore):
        # three people talking: each name starts a third of the rows; "pottery" is in few
        def say(i: int) -> None:
            who = ("Caroline", "Melanie", "Jon")[i % 3]
            extra = " after pottery" if i % 10 == 0 else ""
            store.append_buffer("user", f"{who}: what a weekend, number {i}{extra}!", "api")

        question = "What did Melanie's friends make at pottery on the weekend?"
        for i in range(90):
            say(i)
        assert store.common_words(question) == []  # under 100 rows, no word is common
        for i in range(90, 120):
            say(i)
        assert store.common_words(question) == ["melanie", "weekend"]
        assert store.common_words("") == [] and store.common_words("Jon?") == ["jon"]

    def test_a_question_naming_a_person_does_not_rank_that_persons_rows_first(
        self, store: MemoryStore
    ):
        from nixx.memory import search

        # two people talking: every row says a name and "weekend"; one row answers
        for i in range(30):
            speaker = "Caroline" if i % 2 else "Melanie"
            store.append_buffer("user", f"{speaker}: what a weekend, number {i}!", "api")
        answer = store.append_buffer("user", "Caroline: your pottery bowl came out so well")
        question = "What did Melanie make at pottery on the weekend?"
        assert store.search_buffer(question, 5)[0].row.id == answer.id
        out = search.search_store(store, question, None, limit=5)
        assert out[0].id == answer.id
        assert out[0].score > 3 * max(r.score for r in out[1:])

    def test_a_second_hop_finds_the_row_joined_by_a_name_the_question_never_says(
        self, store: MemoryStore
    ):
        """Multi-hop: "where does the person who fixed the boiler work now?" finds the
        row about the boiler; the row that answers names the person, not the boiler.
        The second hop asks that row's own words (the name) again, so the answer is a
        candidate it never was before — below the row it was found from — and without
        the hop it is not found at all."""
        from dataclasses import replace

        from nixx.memory import search

        for i in range(30):  # small talk: the common words of every question
            store.append_buffer("user", f"Jakob: busy week at work again, number {i}", "api")
        fixed = store.append_buffer(
            "user", "Jakob: Linnea came round and fixed our boiler on Saturday", "api")
        store.append_buffer("assistant", "Esther: Haha nice, how was the rest of it?", "api")
        store.append_buffer("marker", "session_clear", "api")  # weeks later
        store.append_buffer("user", "Jakob: Morning! How's your week going?", "api")
        answer = store.append_buffer(
            "assistant", "Esther: I ran into Linnea, she is at the old cannery these days",
            "api")
        other = store.append_buffer("user", "Jakob: the cannery tour was cancelled", "api")
        question = "Which place employs the person who repaired the boiler?"
        hopped = search.search_store(store, question, None, limit=10,
                                     params=replace(search.DEFAULT_PARAMS, hop=0.3))
        ids = [r.id for r in hopped]
        assert ids[0] == fixed.id and answer.id in ids, ids
        found = next(r for r in hopped if r.id == answer.id)
        assert found.why.get("hop", 0) > 0 and found.score < hopped[0].score
        assert other.id not in ids[: ids.index(answer.id)]  # the name, not just "cannery"
        plain = search.search_store(store, question, None, limit=10,
                                    params=replace(search.DEFAULT_PARAMS, hop=0.0))
        assert answer.id not in [r.id for r in plain]
        assert search.DEFAULT_PARAMS.hop > 0  # shipped on

    def test_a_decisive_vector_match_beats_a_flood_of_weak_word_matches(self, store: MemoryStore):
        from nixx.memory import search

        store.bind_embedder(MODEL, DIM)
        query_vec = unit(1.0)
        flood = [
            store.append_buffer("user", f"the weekend plan number {i} was fine", "api")
            for i in range(40)
        ]
        decisive = store.append_buffer("user", "we finally adopted a rescue greyhound", "api")
        near = [(r.id, unit(0.1, 1.0, float(i % 3))) for i, r in enumerate(flood)]  # cosine < 0.1
        store.add_buffer_vectors([*near, (decisive.id, unit(0.6, 0.8))])  # cosine 0.6
        question = "what pet did we get for the weekend?"
        out = search.search_store(store, question, query_vec[None], limit=3)
        assert out[0].id == decisive.id
        # and a rare shared word beats rows that are only vaguely near
        rare = store.append_buffer("user", "the vet said the parrot is healthy", "api")
        vague = [store.append_buffer("user", f"some thought {i}", "api") for i in range(3)]
        other = unit(0.0, 0.0, 0.0, 1.0)  # no other row is near it
        store.add_buffer_vectors(  # cosine 0.1 against 0.45
            [
                (rare.id, unit(0, 0, 0, 0.1, 0.995)),
                *[(r.id, unit(0, 0, 0, 0.45, 0.89)) for r in vague],
            ]
        )
        out = search.search_store(store, "parrot at the vet", other[None], limit=3)
        assert out[0].id == rare.id

    def test_a_rows_sentence_lifts_it_above_rows_only_vaguely_near(self, store: MemoryStore):
        from nixx.memory import recall, search

        store.bind_embedder(MODEL, DIM)
        query = unit(1.0)
        # a turn of three sentences: its whole vector is diluted (cosine 0.3), one sentence
        # says what the question asks (0.9); ten other rows sit at cosine 0.5
        turn = store.append_buffer(
            "user", "Tamara: Hey! Doing well, thanks. We got back from the Dolomites. You?", "api"
        )
        others = [store.append_buffer("user", f"Deborah: thought {i}", "api") for i in range(10)]
        greeting, trip = unit(0.1, 1.0), unit(0.9, 0.436)
        store.add_buffer_vectors(
            [(turn.id, unit(0.3, 0.954)), *[(r.id, unit(0.5, 0, 0.866)) for r in others]],
            {turn.id: np.stack([greeting, trip])},
        )
        assert store.search_buffer_vectors(query, limit=1)[0].row.id != turn.id
        hits = search.row_vector_hits(store, query, 11, piece_floor=0.4)  # all 11 rows
        assert hits[0].row.id == turn.id
        # ranked by its sentence's cosine; its own stays its score
        assert hits[0].sentence == pytest.approx(0.9, abs=0.01)
        assert hits[0].score == pytest.approx(0.3, abs=0.01)
        assert all(h.sentence is None for h in hits[1:])
        out = search.search_store(store, "where were they?", query[None], limit=3)
        assert out[0].id == turn.id
        assert out[0].cosine == pytest.approx(0.3, abs=0.01)
        assert out[0].sentence_cosine == pytest.approx(0.9, abs=0.01)
        # a search's cosine floor reads the sentence; recall's row floor reads it with a
        # margin over the floor (0.9 against 0.4 + 0.1 and 0.85 + 0.1)
        assert search.search_store(store, "where?", query[None], limit=1, min_cosine=0.8)
        assert recall.above_row_floor(out[0], 0.4)
        assert not recall.above_row_floor(out[0], 0.85)
        # a sentence below the floor lifts nothing: the rows keep their own order
        hits = search.row_vector_hits(store, query, 11, piece_floor=0.95)
        assert hits[-1].row.id == turn.id and hits[-1].score == pytest.approx(0.3, abs=0.01)
        assert hits[-1].sentence is None
        # only the rows the row vectors found are lifted (the fusion's depth)
        assert turn.id not in [h.row.id for h in search.row_vector_hits(store, query, 6)]
        assert search.row_vector_hits(store, query, 11, piece_floor=None) == (
            store.search_buffer_vectors(query, limit=11)
        )

    def test_pieces_are_stored_replaced_and_forgotten_with_the_rows_vector(
        self, store: MemoryStore
    ):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 3)
        two = np.stack([unit(1, 2), unit(0, 0, 3)])
        store.add_buffer_vectors(
            [(ids[0], unit(1)), (ids[1], unit(0, 1)), (ids[2], unit(0, 0, 1))], {ids[1]: two}
        )
        found = store.buffer_pieces(ids)
        assert list(found) == [ids[1]] and found[ids[1]].shape == (2, DIM)
        assert np.allclose(found[ids[1]], two, atol=1e-3)  # float16 as stored
        assert found[ids[1]].dtype == np.float32
        with pytest.raises(ValidationError, match="pieces"):
            store.add_buffer_vectors([(ids[0], unit(1))], {ids[0]: np.ones((1, DIM + 1))})
        # a new vector without pieces drops the old pieces; forgetting the row drops both
        store.add_buffer_vectors([(ids[1], unit(0, 1))])
        assert store.buffer_pieces(ids) == {}
        store.add_buffer_vectors([(ids[2], unit(0, 0, 1))], {ids[2]: two})
        store.forget("buffer", buffer_ids=[ids[2]])
        assert store.buffer_pieces(ids) == {} and store.buffer_pieces([]) == {}

    def test_rows_never_split_are_listed_until_given_their_pieces(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 4)
        two = np.stack([unit(1, 2), unit(0, 0, 3)])
        # vectors without pieces (a store or an export from before them): not split yet
        store.add_buffer_vectors([(i, unit(1)) for i in ids[:3]])
        # the queue's write: split, one row with pieces, the other with none
        store.add_buffer_vectors([(ids[3], unit(0, 1))], {})
        assert [r.id for r in store.buffer_rows_without_pieces(10)] == ids[:3]
        assert [r.id for r in store.buffer_rows_without_pieces(1, after_id=ids[0])] == [ids[1]]
        assert store.buffer_rows_without_pieces(0) == []
        with pytest.raises(ValidationError, match="pieces"):
            store.add_buffer_pieces({ids[0]: np.ones((1, DIM + 1))})
        assert store.add_buffer_pieces({ids[0]: two, ids[1]: np.empty((0, DIM))}) == 2
        assert [r.id for r in store.buffer_rows_without_pieces(10)] == [ids[2]]
        assert list(store.buffer_pieces(ids)) == [ids[0]]
        # rows given theirs already keep them (a reindex may have written newer ones)
        assert store.add_buffer_pieces({ids[0]: two[:1], ids[3]: two}) == 0
        assert store.buffer_pieces([ids[0]])[ids[0]].shape == (2, DIM)
        # an export keeps the difference: no "pieces" (never split) against [] (none)
        records = {r["id"]: r for r in store.export_records() if r["type"] == "buffer"}
        assert "pieces" not in records[ids[2]] and records[ids[1]]["pieces"] == []
        assert len(records[ids[0]]["pieces"]) == 2

    def test_rows_saying_the_same_collapse_into_one_result(self, store: MemoryStore):
        from nixx.memory import search

        copies = [
            store.append_buffer("user", "Name three uses of a flowerpot.", "api") for _ in range(6)
        ]
        key = store.append_buffer("assistant", "The key is under the blue flowerpot.", "api")
        out = search.search_store(store, "blue flowerpot", None, limit=3)
        assert [r.id for r in out][:2] == [key.id, copies[-1].id]
        assert sorted(out[1].repeats) == sorted(r.id for r in copies[:-1])
        assert len(out) == 2

    # ---- summaries ---------------------------------------------------------------------
    def test_summary_keeps_its_buffer_range(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 4)
        s = store.add_summary(
            "we discussed numbers",
            unit(1),
            tags=["numbers"],
            entities={"concepts": ["counting"], "tools": []},
            start_buffer_id=ids[0],
            end_buffer_id=ids[2],
        )
        assert TIMESTAMP.match(s.created_at)
        assert store.last_summarised_id() == ids[2]
        assert [r.id for r in store.unsummarised()] == [ids[3]]
        [listed] = store.list_summaries()
        assert listed.id == s.id and listed.embedding is None
        assert listed.tags == ["numbers"]
        assert listed.entities == {"concepts": ["counting"], "tools": []}
        assert (listed.start_buffer_id, listed.end_buffer_id) == (ids[0], ids[2])
        covered = store.get_buffer(listed.start_buffer_id, listed.end_buffer_id)
        assert [r.id for r in covered] == ids[:3]
        assert store.count_summaries() == 1

    def test_summary_range_must_name_existing_rows(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        for start, end in [(ids[0], ids[1] + 10), (ids[1] + 5, ids[1] + 6), (ids[1], ids[0])]:
            with pytest.raises(ValidationError):
                store.add_summary(
                    "x", unit(1), tags=[], entities={}, start_buffer_id=start, end_buffer_id=end
                )
        assert store.count_summaries() == 0

    def test_summary_with_wrong_dimension_is_refused(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 1)
        with pytest.raises(EmbedderMismatch) as err:
            store.add_summary(
                "x",
                np.ones(DIM + 1, np.float32),
                tags=[],
                entities={},
                start_buffer_id=ids[0],
                end_buffer_id=ids[0],
            )
        assert "nixx reindex" in str(err.value)
        assert store.count_summaries() == 0

    def test_list_summaries_newest_first_with_paging(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 5)
        made = [
            store.add_summary(
                f"s{i}",
                unit(1, i),
                tags=[],
                entities={},
                start_buffer_id=ids[i],
                end_buffer_id=ids[i],
            )
            for i in range(5)
        ]
        assert [s.id for s in store.list_summaries()] == [s.id for s in reversed(made)]
        assert [s.content for s in store.list_summaries(limit=2, offset=1)] == ["s3", "s2"]

    def _summaries_for_search(self, store: MemoryStore) -> tuple[list[int], list[Any]]:
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 6)
        vectors = [unit(1, 0), unit(1, 0.2), unit(1, 1), unit(0, 1), unit(-1, 0.1)]
        made = [
            store.add_summary(
                f"summary {i}",
                v,
                tags=[f"t{i}"],
                entities={},
                start_buffer_id=ids[i],
                end_buffer_id=ids[i + 1],
            )
            for i, v in enumerate(vectors)
        ]
        return ids, made

    def test_summary_search_orders_by_cosine(self, store: MemoryStore):
        _, made = self._summaries_for_search(store)
        query = unit(1, 0)
        hits = store.search_summaries(query, limit=10)
        assert [h.summary.id for h in hits] == [made[i].id for i in (0, 1, 2, 3, 4)]
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert hits[1].score == pytest.approx(cosine(query, unit(1, 0.2)), abs=1e-5)
        assert hits[4].score < 0
        assert hits[0].summary.content == "summary 0" and hits[0].summary.tags == ["t0"]

    def test_summary_search_threshold_and_limit(self, store: MemoryStore):
        _, made = self._summaries_for_search(store)
        hits = store.search_summaries(unit(1, 0), limit=10, threshold=0.5)
        assert [h.summary.id for h in hits] == [made[0].id, made[1].id, made[2].id]
        assert all(h.score >= 0.5 for h in hits)
        assert len(store.search_summaries(unit(1, 0), limit=2)) == 2
        assert store.search_summaries(unit(1, 0), limit=10, threshold=0.9999) == [
            store.search_summaries(unit(1, 0), limit=1)[0]
        ]
        assert store.search_summaries(unit(0, 0, 1), limit=5, threshold=0.1) == []

    def test_summary_search_before_buffer_id(self, store: MemoryStore):
        ids, made = self._summaries_for_search(store)
        # summaries end at ids[1..5]; keep those ending before ids[3]
        hits = store.search_summaries(unit(1, 0), limit=10, before_buffer_id=ids[3])
        assert sorted(h.summary.id for h in hits) == [made[0].id, made[1].id]
        assert all(h.summary.end_buffer_id < ids[3] for h in hits)
        combined = store.search_summaries(
            unit(0, 1), limit=10, before_buffer_id=ids[4], threshold=0.5
        )
        assert [h.summary.id for h in combined] == [made[2].id]

    def test_vector_search_on_empty_store(self, store: MemoryStore):
        assert store.search_summaries(unit(1), limit=3) == []
        assert store.search_memories(unit(1), limit=3) == []

    def test_search_sees_new_rows_after_a_search(self, store: MemoryStore):
        self._summaries_for_search(store)
        before = store.search_summaries(unit(0, 0, 1), limit=1)  # builds any index
        assert before[0].score == pytest.approx(0.0, abs=1e-6)
        ids = fill_buffer(store, 1)
        new = store.add_summary(
            "new",
            unit(0, 0, 1),
            tags=[],
            entities={},
            start_buffer_id=ids[0],
            end_buffer_id=ids[0],
        )
        assert store.search_summaries(unit(0, 0, 1), limit=1)[0].summary.id == new.id

    # ---- sources & memories ------------------------------------------------------------
    def test_add_source_stores_chunks_with_provenance(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        vectors = random_units(3, seed=1)
        src = store.add_source(
            "notes.md",
            "document",
            chunks(vectors),
            summary="my notes",
            meta={"path": "/x/notes.md", "content_hash": "abc"},
        )
        assert src.chunk_count == 3 and src.type == "document" and src.summary == "my notes"
        assert TIMESTAMP.match(src.created_at)
        got = store.get_source(src.id)
        assert got.meta == {"path": "/x/notes.md", "content_hash": "abc"}
        assert got.chunk_count == 3 and got.name == "notes.md"
        mems = store.source_chunks(src.id)
        assert [m.content for m in mems] == ["chunk 0", "chunk 1", "chunk 2"]
        assert [m.metadata for m in mems] == [{"chunk": i, "total_chunks": 3} for i in range(3)]
        assert all(m.source_id == src.id for m in mems)
        assert store.count_memories() == 3

    def test_buffer_source_keeps_its_range(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 3)
        src = store.add_source(
            "chat bit", "buffer", chunks(random_units(1, 2)), start_id=ids[0], end_id=ids[1]
        )
        got = store.get_source(src.id)
        assert (got.start_id, got.end_id) == (ids[0], ids[1])
        with pytest.raises(ValidationError):
            store.add_source("bad", "buffer", [], start_id=ids[0], end_id=ids[2] + 50)

    def test_source_type_and_name_are_validated(self, store: MemoryStore):
        with pytest.raises(ValidationError):
            store.add_source("x", "email", [])
        with pytest.raises(ValidationError):
            store.add_source("", "document", [])
        assert store.list_sources() == []

    def test_add_source_is_atomic(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        good = random_units(3, seed=3)
        bad = [*chunks(good), NewChunk("wrong", np.ones(DIM - 1, np.float32), {})]
        with pytest.raises(EmbedderMismatch):
            store.add_source("half", "document", bad)
        assert store.list_sources() == []
        assert store.count_memories() == 0
        assert store.search_memories(good[0], limit=5) == []

    def test_memory_search_threshold_limit_and_source_name(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        a = store.add_source("alpha", "document", chunks(np.stack([unit(1, 0), unit(1, 1)])))
        b = store.add_source("beta", "web", chunks(np.stack([unit(0, 1), unit(-1, 0)])))
        hits = store.search_memories(unit(1, 0.1), limit=10)
        assert [h.source_name for h in hits] == ["alpha", "alpha", "beta", "beta"]
        assert hits[0].memory.source_id == a.id and hits[0].memory.content == "chunk 0"
        assert hits[0].memory.metadata == {"chunk": 0, "total_chunks": 2}
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] == pytest.approx(cosine(unit(1, 0.1), unit(1, 0)), abs=1e-5)
        top = store.search_memories(unit(0, 1), limit=1)
        assert len(top) == 1 and top[0].source_name == "beta" and top[0].memory.source_id == b.id
        assert len(store.search_memories(unit(1, 0.1), limit=10, threshold=0.5)) == 2

    def test_replace_source_swaps_chunks(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        src = store.add_source("doc", "document", chunks(np.stack([unit(1, 0)]), "old"))
        new = store.replace_source(
            src.id,
            chunks(np.stack([unit(0, 1), unit(0, 1, 1)]), "new"),
            summary="v2",
            meta={"content_hash": "v2"},
        )
        assert new.id == src.id and new.chunk_count == 2
        assert new.summary == "v2" and new.meta == {"content_hash": "v2"}
        assert [m.content for m in store.source_chunks(src.id)] == ["new 0", "new 1"]
        assert store.count_memories() == 2
        hits = store.search_memories(unit(1, 0), limit=5)
        assert all(h.memory.content.startswith("new") for h in hits)
        # summary/meta left alone when not given
        again = store.replace_source(src.id, chunks(np.stack([unit(1, 1)]), "third"))
        assert again.summary == "v2" and again.meta == {"content_hash": "v2"}
        # atomic: a bad chunk leaves the current chunks in place
        with pytest.raises(EmbedderMismatch):
            store.replace_source(src.id, [NewChunk("bad", np.ones(3, np.float32), {})])
        assert [m.content for m in store.source_chunks(src.id)] == ["third 0"]
        with pytest.raises(NotFound):
            store.replace_source(src.id + 99, [])

    def test_delete_source_cascades_to_memories(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        keep = store.add_source("keep", "document", chunks(np.stack([unit(1, 0)]), "keep"))
        gone = store.add_source("gone", "document", chunks(np.stack([unit(1, 0.1)]), "gone"))
        assert len(store.search_memories(unit(1, 0), limit=5)) == 2  # warm any index
        store.delete_source(gone.id)
        assert store.count_memories() == 1
        hits = store.search_memories(unit(1, 0), limit=5)
        assert [h.memory.source_id for h in hits] == [keep.id]
        with pytest.raises(NotFound):
            store.get_source(gone.id)
        with pytest.raises(NotFound):
            store.source_chunks(gone.id)
        with pytest.raises(NotFound):
            store.delete_source(gone.id)

    def test_list_find_and_summarise_sources(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        a = store.add_source("a", "document", chunks(random_units(2, 4)), meta={"path": "/a"})
        b = store.add_source("b", "web", [], meta={"url": "https://x", "path": "/b"})
        c = store.add_source("c", "repo", [], meta={"path": "/a", "tags": ["x"]})
        assert [s.id for s in store.list_sources()] == [c.id, b.id, a.id]
        assert [s.chunk_count for s in store.list_sources()] == [0, 0, 2]
        assert sorted(s.id for s in store.find_sources(path="/a")) == [a.id, c.id]
        assert [s.id for s in store.find_sources(path="/a", tags=["x"])] == [c.id]
        assert store.find_sources(path="/nope") == []
        assert store.find_sources(missing=None) == []
        store.set_source_summary(a.id, "about a")
        assert store.get_source(a.id).summary == "about a"
        with pytest.raises(NotFound):
            store.set_source_summary(999_999, "x")
        with pytest.raises(NotFound):
            store.get_source(999_999)

    # ---- state -------------------------------------------------------------------------
    def test_state_get_set_delete(self, store: MemoryStore):
        assert store.get_state("intent") is None
        assert store.get_state("intent", "none") == "none"
        store.set_state("intent", "build the store")
        store.set_state("switches", {"recall": False, "interval": 500, "list": [1, "a", None]})
        assert store.get_state("intent") == "build the store"
        assert store.get_state("switches") == {
            "recall": False,
            "interval": 500,
            "list": [1, "a", None],
        }
        store.set_state("intent", "ship it")
        assert store.get_state("intent") == "ship it"
        store.delete_state("intent")
        assert store.get_state("intent") is None
        store.delete_state("intent")  # deleting a missing key is fine
        store.set_state("zero", 0)
        assert store.get_state("zero", 5) == 0

    # ---- buffer row vectors ------------------------------------------------------------
    def test_rows_without_vector_are_listed_oldest_first_until_embedded(self, store: MemoryStore):
        ids = fill_buffer(store, 4)
        store.append_buffer("marker", "", "tui")
        after = store.append_buffer("assistant", "after the marker", "api").id
        assert store.buffer_vector_stats() == {"embedded": 0, "pending": 5}
        assert [r.id for r in store.buffer_rows_without_vector(10)] == [*ids, after]
        assert [r.id for r in store.buffer_rows_without_vector(2)] == ids[:2]
        assert [r.id for r in store.buffer_rows_without_vector(10, after_id=ids[2])] == [
            ids[3],
            after,
        ]
        vectors = random_units(5, seed=21)
        written = store.add_buffer_vectors([(ids[0], vectors[0]), (ids[2], vectors[2])])
        assert written == 2
        assert [r.id for r in store.buffer_rows_without_vector(10)] == [ids[1], ids[3], after]
        assert store.buffer_vector_stats() == {"embedded": 2, "pending": 3}
        assert store.buffer_rows_without_vector(0) == []

    def test_has_episodic_vectors_once_a_row_vector_or_a_summary_is_stored(
        self, store: MemoryStore
    ):
        ids = fill_buffer(store, 2)
        store.add_source("doc", "document", chunks(random_units(1, 30)))
        assert not store.has_episodic_vectors()  # memories are not episodic
        store.add_buffer_vectors([(ids[0], unit(1, 0))])
        assert store.has_episodic_vectors()

    def test_has_episodic_vectors_with_a_summary(self, store: MemoryStore):
        ids = fill_buffer(store, 2)
        assert not store.has_episodic_vectors()
        store.add_summary(
            "s", unit(1, 0), tags=[], entities={}, start_buffer_id=ids[0], end_buffer_id=ids[1]
        )
        assert store.has_episodic_vectors()

    def test_buffer_vector_search_orders_by_cosine_and_filters_by_id(self, store: MemoryStore):
        ids = fill_buffer(store, 3)
        store.add_buffer_vectors([(ids[0], unit(1, 0)), (ids[1], unit(1, 1)), (ids[2], unit(0, 1))])
        hits = store.search_buffer_vectors(unit(1, 0.1), limit=5)
        assert [h.row.id for h in hits] == [ids[0], ids[1], ids[2]]
        assert hits[0].row.content == "message number 0" and hits[0].row.origin == "tui"
        assert hits[0].score == pytest.approx(cosine(unit(1, 0.1), unit(1, 0)), abs=1e-5)
        assert [h.row.id for h in store.search_buffer_vectors(unit(1, 0), limit=1)] == [ids[0]]
        before = store.search_buffer_vectors(unit(0, 1), limit=5, before_id=ids[2])
        assert [h.row.id for h in before] == [ids[1], ids[0]]
        assert store.search_buffer_vectors(unit(1, 0), limit=0) == []

    def test_buffer_vector_search_follows_new_and_replaced_vectors(self, store: MemoryStore):
        ids = fill_buffer(store, 3)
        store.add_buffer_vectors([(ids[0], unit(1, 0))])
        assert [h.row.id for h in store.search_buffer_vectors(unit(0, 1), limit=3)] == [ids[0]]
        # embedded out of id order (new rows first, the backfill later) and replaced
        store.add_buffer_vectors([(ids[2], unit(0, 1))])
        store.add_buffer_vectors([(ids[1], unit(1, 1)), (ids[0], unit(-1, 0))])
        hits = store.search_buffer_vectors(unit(0, 1), limit=3)
        assert [h.row.id for h in hits] == [ids[2], ids[1], ids[0]]
        assert hits[2].score == pytest.approx(0.0, abs=1e-5)
        assert store.buffer_vector_stats() == {"embedded": 3, "pending": 0}

    def test_buffer_vectors_skip_markers_and_missing_rows_and_check_dimension(
        self, store: MemoryStore
    ):
        assert store.search_buffer_vectors(unit(1, 0), limit=3) == []  # nothing stored yet
        [row] = fill_buffer(store, 1)
        marker = store.append_buffer("marker", "", "tui").id
        written = store.add_buffer_vectors(
            [(row, unit(1, 0)), (marker, unit(1, 0)), (row + 1000, unit(1, 0))]
        )
        assert written == 1
        assert [h.row.id for h in store.search_buffer_vectors(unit(1, 0), limit=5)] == [row]
        info = store.embedding_info()
        assert info is not None and info.dim == DIM  # vectors before any binding: unnamed
        with pytest.raises(EmbedderMismatch):
            store.add_buffer_vectors([(row, np.ones(DIM + 1, np.float32))])
        with pytest.raises(ValidationError):
            store.add_buffer_vectors([(row, np.full(DIM, np.nan, np.float32))])
        assert store.buffer_vector_stats() == {"embedded": 1, "pending": 0}

    def test_rebinding_with_only_buffer_vectors_drops_them(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        store.add_buffer_vectors([(ids[0], unit(1, 0))])
        store.bind_embedder("bigger-model", 32)  # buffer vectors are derived: no mismatch
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == ("bigger-model", 32)
        assert store.buffer_vector_stats() == {"embedded": 0, "pending": 2}
        store.add_buffer_vectors([(ids[1], unit(1, 0, dim=32))])
        [hit] = store.search_buffer_vectors(unit(1, 0, dim=32), limit=3)
        assert hit.row.id == ids[1]

    def test_reindex_re_embeds_buffer_rows_with_their_text(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 3)
        store.append_buffer("marker", "", "tui")
        store.add_buffer_vectors([(ids[0], unit(1, 0))])
        assert store.search_buffer_vectors(unit(1, 0), limit=1)  # warm any index
        batches: list[list[int]] = []

        def buffer_text(rows):  # each row's vector text, then its pieces' (the first row: one)
            batches.append([r.id for r in rows])
            return [
                [f"text {r.content.split()[-1]}"] + (["text 5"] if r.id == ids[0] else [])
                for r in rows
            ]

        def embed(texts):  # "text i" → e(i)
            out = np.zeros((len(texts), 8), np.float32)
            for row, text in enumerate(texts):
                out[row, int(text.split()[-1])] = 1.0
            return out

        written = store.reindex(embed, "new-model", 8, batch_size=2, buffer_text=buffer_text)
        assert written == 3
        assert batches == [ids[:2], ids[2:]]
        e = np.eye(8, dtype=np.float32)
        for i in range(3):
            top = store.search_buffer_vectors(e[i], limit=1)[0]
            assert top.row.id == ids[i] and top.score == pytest.approx(1.0)
        assert store.buffer_vector_stats() == {"embedded": 3, "pending": 0}
        pieces = store.buffer_pieces(ids)
        assert list(pieces) == [ids[0]] and pieces[ids[0]].tolist() == [e[5].tolist()]
        # without buffer_text the row vectors are dropped, for the queue to make again
        assert store.reindex(embed, "new-model", 8) == 0
        assert store.buffer_vector_stats() == {"embedded": 0, "pending": 3}
        assert store.search_buffer_vectors(e[0], limit=3) == []

    def test_reindex_failure_keeps_buffer_vectors(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        store.add_buffer_vectors([(ids[0], unit(1, 0)), (ids[1], unit(0, 1))])

        def failing(texts):
            raise RuntimeError("embedding backend died")

        with pytest.raises(RuntimeError):
            store.reindex(failing, "new-model", 4, buffer_text=lambda rows: [["x"]] * len(rows))
        assert store.buffer_vector_stats() == {"embedded": 2, "pending": 0}
        assert store.search_buffer_vectors(unit(0, 1), limit=1)[0].row.id == ids[1]

    # ---- moving to another embedder in the background ---------------------------------
    def test_switch_stages_apart_then_replaces_every_vector_at_once(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 4)
        store.append_buffer("marker", "", "tui")
        store.add_buffer_vectors([(i, unit(1, k)) for k, i in enumerate(ids)])
        summary = store.add_summary("summary number 7", unit(1), tags=[], entities={},
                                    start_buffer_id=ids[2], end_buffer_id=ids[3])
        assert store.begin_switch(MODEL, DIM) is False  # bound to it already: nothing to do
        assert store.begin_switch("next-model", 8) is True
        assert store.switch_target() is not None and store.switch_target().dim == 8
        pending = store.switch_pending()
        assert [(p.kind, p.id) for p in pending] == [("buffer", i) for i in ids] + [
            ("summaries", summary.id)]
        e = np.eye(8, dtype=np.float32)
        # stage the first two rows (one with pieces), then the rest arrives
        store.stage_vectors("next-model", pending[:2], [e[0], e[1]], {ids[0]: e[5:6]})
        with pytest.raises(Conflict):
            store.stage_vectors("other-model", pending[2:3], [e[2]])
        with pytest.raises(EmbedderMismatch):  # the next model's dimension, not the live one's
            store.stage_vectors("next-model", pending[2:3], [unit(1)])
        assert store.switch_progress() == (2, 5)
        # meanwhile the live vectors are still the old model's, and are what is searched
        assert store.embedding_info().model == MODEL
        assert store.search_buffer_vectors(unit(1, 0), limit=1)[0].row.id == ids[0]
        # a row forgotten meanwhile takes its staged vector with it (no copy is left)
        with store._engine.read() as tx:
            assert [i for i, _, _ in tx.staged("buffer")] == [ids[0], ids[1]]
        store.forget("buffer", buffer_ids=[ids[1]])
        with store._engine.read() as tx:
            assert [i for i, _, _ in tx.staged("buffer")] == [ids[0]]
        assert ("buffer", ids[1]) not in {(p.kind, p.id) for p in store.switch_pending()}
        # a row written after the last batch is embedded at the switch, inside it
        late = store.append_buffer("user", "message number 6", "tui").id
        staged_now = store.switch_pending()
        assert late in [p.id for p in staged_now]

        def embed(texts):  # "... number i" -> e(i)
            out = np.zeros((len(texts), 8), np.float32)
            for row, text in enumerate(texts):
                out[row, int(text.split()[-1]) % 8] = 1.0
            return out

        # stage what is pending except the late row, as the background job would
        rest = [p for p in staged_now if p.id != late or p.kind != "buffer"]
        store.stage_vectors("next-model", rest, embed([p.text for p in rest]))
        written = store.finish_switch(
            "next-model", embed, lambda rows: [[r.content] for r in rows]
        )
        info = store.embedding_info()
        assert (info.model, info.dim) == ("next-model", 8)
        assert store.switch_target() is None and store.switch_pending() == []
        live = [i for i in ids if i != ids[1]] + [late]
        assert written == len(live) + 1  # the rows and the summary
        assert store.search_summaries(e[7], limit=1)[0].summary.id == summary.id
        assert store.buffer_vector_stats() == {"embedded": len(live), "pending": 0}
        # every live vector is the next model's: found by the next model's vectors
        assert store.search_buffer_vectors(e[0], limit=1)[0].row.id == ids[0]
        assert store.search_buffer_vectors(e[6], limit=1)[0].row.id == late
        assert store.buffer_pieces([ids[0]])[ids[0]].tolist() == [e[5].tolist()]
        with pytest.raises(EmbedderMismatch):  # an old-model vector is refused now
            store.add_buffer_vectors([(late, unit(1))])

    def test_switch_abandoned_or_retargeted_drops_what_was_staged(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        store.add_buffer_vectors([(ids[0], unit(1)), (ids[1], unit(0, 1))])
        store.begin_switch("next-model", 8)
        pending = store.switch_pending()
        store.stage_vectors("next-model", pending, list(np.eye(8, dtype=np.float32)[:2]))
        assert store.switch_progress() == (2, 2)
        store.begin_switch("third-model", 4)  # another target: start again
        assert store.switch_progress() == (0, 2)
        store.abandon_switch()
        assert store.switch_target() is None
        with pytest.raises(Conflict):
            store.finish_switch("third-model", lambda t: np.zeros((len(t), 4)), lambda r: [])
        assert store.embedding_info().model == MODEL
        assert store.search_buffer_vectors(unit(0, 1), limit=1)[0].row.id == ids[1]

    # ---- embedder identity -------------------------------------------------------------
    def test_embedder_is_recorded_and_a_different_one_refused(self, store: MemoryStore):
        assert store.embedding_info() is None
        store.bind_embedder(MODEL, DIM)
        store.bind_embedder(MODEL, DIM)  # same again: fine
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == (MODEL, DIM)
        store.add_source("s", "document", chunks(random_units(1, 5)))
        for model, dim in [("other-model", DIM), (MODEL, DIM * 2)]:
            with pytest.raises(EmbedderMismatch) as err:
                store.bind_embedder(model, dim)
            assert "nixx reindex" in str(err.value)
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == (MODEL, DIM)

    def test_an_embedder_mismatch_says_the_same_on_every_engine(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        store.add_source("s", "document", chunks(random_units(1, 5)))
        with pytest.raises(EmbedderMismatch) as err:
            store.bind_embedder("other-model", DIM * 2)
        assert str(err.value) == (
            f"this memory store's vectors were made with {MODEL} ({DIM} dimensions) but the "
            f"configured embedder is other-model ({DIM * 2} dimensions). Run `nixx reindex` to "
            "re-embed every summary and memory with the configured embedder, or configure the "
            "original one (NIXX_EMBED_PROVIDER / NIXX_EMBED_MODEL)."
        )

    def test_rebinding_an_empty_store_is_allowed(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        store.bind_embedder("bigger-model", 32)
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == ("bigger-model", 32)

    def test_reindex_re_embeds_everything_and_records_the_model(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        store.add_summary(
            "apples",
            unit(1, 0),
            tags=[],
            entities={},
            start_buffer_id=ids[0],
            end_buffer_id=ids[1],
        )
        src = store.add_source("doc", "document", chunks(random_units(3, 6)))
        assert store.search_memories(unit(1, 0), limit=5)  # warm any index

        def embed(texts):  # 8-d: "apples" → e0, chunk i → e(i+1)
            out = np.zeros((len(texts), 8), np.float32)
            for row, text in enumerate(texts):
                out[row, 0 if text == "apples" else int(text.split()[-1]) + 1] = 1.0
            return out

        seen: list[tuple[int, int]] = []
        written = store.reindex(
            embed, "new-model", 8, batch_size=2, progress=lambda d, t: seen.append((d, t))
        )
        assert written == 4
        assert seen[0] == (0, 4) and seen[-1] == (4, 4)
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == ("new-model", 8)
        e = np.eye(8, dtype=np.float32)
        [hit] = store.search_summaries(e[0], limit=1)
        assert hit.summary.content == "apples" and hit.score == pytest.approx(1.0, abs=1e-5)
        for i in range(3):
            top = store.search_memories(e[i + 1], limit=1)[0]
            assert top.memory.content == f"chunk {i}" and top.score == pytest.approx(1.0)
        assert [m.embedding.tolist() for m in store.source_chunks(src.id)] == [
            e[i + 1].tolist() for i in range(3)
        ]
        with pytest.raises(EmbedderMismatch):
            store.search_memories(np.ones(DIM, np.float32), limit=1)

    def test_reindex_is_all_or_nothing(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        vectors = random_units(5, seed=7)
        src = store.add_source("doc", "document", chunks(vectors))
        calls = 0

        def failing(texts):
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RuntimeError("embedding backend died")
            return np.ones((len(texts), 4), np.float32) / 2

        with pytest.raises(RuntimeError):
            store.reindex(failing, "new-model", 4, batch_size=2)
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == (MODEL, DIM)
        stored = np.stack([m.embedding for m in store.source_chunks(src.id)])
        np.testing.assert_array_equal(stored, vectors)
        assert store.search_memories(vectors[3], limit=1)[0].memory.content == "chunk 3"

    def test_reindex_embeds_rows_written_while_it_embeds(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        store.add_source("doc", "document", chunks(random_units(2, 8)))
        late = []

        def embed(texts):  # the embedding runs outside the write: a source arrives meanwhile
            if not late:
                late.append(store.add_source("late", "document", chunks(random_units(1, 9))))
            return np.ones((len(texts), 4), np.float32) / 2

        assert store.reindex(embed, "new-model", 4) == 3
        [chunk] = store.source_chunks(late[0].id)
        assert chunk.embedding is not None and chunk.embedding.shape == (4,)
        assert len(store.search_memories(np.ones(4, np.float32) / 2, limit=5)) == 3

    def test_reindex_refuses_vectors_of_the_wrong_shape(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        store.add_source("doc", "document", chunks(random_units(2, 8)))
        with pytest.raises(EmbedderMismatch):
            store.reindex(lambda texts: np.ones((len(texts), 5), np.float32), "m", 4)
        info = store.embedding_info()
        assert info is not None and info.model == MODEL

    # ---- export / import ---------------------------------------------------------------
    def _populate(self, store: MemoryStore) -> None:
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 3)
        store.append_buffer("marker", "", "tui")
        store.append_buffer("assistant", 'naïve ✓ "quoted"', "vscode", meta={"incomplete": True})
        store.add_buffer_vectors(
            [(ids[0], random_units(1, 12)[0]), (ids[2], unit(0, 1))], {ids[0]: random_units(2, 14)}
        )
        store.add_summary(
            "sum",
            random_units(1, 9)[0],
            tags=["a", "b"],
            entities={"people": ["ann"]},
            start_buffer_id=ids[0],
            end_buffer_id=ids[2],
        )
        gone = store.add_source("gone", "document", chunks(random_units(1, 10)))
        store.add_source(
            "chat",
            "buffer",
            chunks(random_units(2, 11)),
            summary="s",
            start_id=ids[0],
            end_id=ids[1],
            meta={"tags": ["x"], "n": 1.5},
        )
        store.delete_source(gone.id)  # ids keep their gaps
        store.set_state("intent", "export things")
        store.set_state("switches", {"recall": True})

    def test_export_import_round_trip_is_identical(
        self, store: MemoryStore, second_store: MemoryStore
    ):
        self._populate(store)
        records = list(store.export_records())
        assert records[0] == {"type": "header", "format": "nixx-export", "version": 1}
        order = ["header", "embedder", "state", "buffer", "summary", "source", "memory", "forget"]
        kinds = [r["type"] for r in records]
        assert kinds == sorted(kinds, key=order.index)
        for kind in ("buffer", "summary", "source", "memory"):
            ids = [r["id"] for r in records if r["type"] == kind]
            assert ids == sorted(ids)
        summary = next(r for r in records if r["type"] == "summary")
        assert TIMESTAMP.match(summary["created_at"])
        assert np.array_equal(np.asarray(summary["embedding"], np.float32), random_units(1, 9)[0])
        buffer = [r for r in records if r["type"] == "buffer"]
        assert [("embedding" in r) for r in buffer] == [True, False, True, False, False]
        assert [len(r.get("pieces", [])) for r in buffer] == [2, 0, 0, 0, 0]
        assert np.array_equal(
            np.asarray(buffer[0]["embedding"], np.float32), random_units(1, 12)[0]
        )
        counts = second_store.import_records(iter(records))
        assert counts["buffer"] == 5 and counts["summary"] == 1
        assert counts["source"] == 1 and counts["memory"] == 2 and counts["state"] == 2
        assert list(second_store.export_records()) == records
        # the imported store works: search, sessions, new ids continue after the old ones
        info = second_store.embedding_info()
        assert info is not None and (info.model, info.dim) == (MODEL, DIM)
        assert second_store.search_memories(random_units(2, 11)[1], limit=1)[0].memory.content == (
            "chunk 1"
        )
        assert second_store.search_buffer("naïve quoted")[0].row.meta == {"incomplete": True}
        assert second_store.search_buffer_vectors(unit(0, 1), limit=1)[0].row.id == buffer[2]["id"]
        assert second_store.buffer_vector_stats() == {"embedded": 2, "pending": 2}
        pieces = second_store.buffer_pieces([buffer[0]["id"]])[buffer[0]["id"]]
        assert np.allclose(pieces, random_units(2, 14), atol=2e-3)
        new = second_store.append_buffer("user", "after import", "api")
        assert new.id > max(r["id"] for r in records if r["type"] == "buffer")
        new_src = second_store.add_source("later", "document", [])
        assert new_src.id > max(r["id"] for r in records if r["type"] == "source")

    def test_import_into_a_non_empty_store_is_refused(
        self, store: MemoryStore, second_store: MemoryStore
    ):
        self._populate(store)
        records = list(store.export_records())
        second_store.append_buffer("user", "already here", "api")
        with pytest.raises(Conflict):
            second_store.import_records(records)
        assert second_store.buffer_stats()["rows"] == 1

    def test_import_refuses_a_foreign_file_and_stores_nothing(self, second_store: MemoryStore):
        with pytest.raises(ValidationError):
            second_store.import_records([{"type": "header", "format": "other", "version": 1}])
        records = [
            {"type": "header", "format": "nixx-export", "version": 1},
            {
                "type": "buffer",
                "id": 1,
                "role": "user",
                "content": "ok",
                "origin": "api",
                "created_at": "2026-01-01T00:00:00.000000Z",
                "meta": {},
            },
            {
                "type": "buffer",
                "id": 2,
                "role": "wizard",
                "content": "bad",
                "origin": "api",
                "created_at": "2026-01-01T00:00:00.000000Z",
                "meta": {},
            },
        ]
        with pytest.raises(ValidationError):
            second_store.import_records(records)
        assert second_store.buffer_stats()["rows"] == 0

    # ---- forgetting and editing --------------------------------------------------------
    def _summary_over(self, store: MemoryStore, start: int, end: int, text: str, seed: int):
        return store.add_summary(
            text,
            random_units(1, seed)[0],
            tags=["t"],
            entities={},
            start_buffer_id=start,
            end_buffer_id=end,
        )

    def test_forget_buffer_row_takes_its_full_text_entry_and_covering_summary(
        self, store: MemoryStore
    ):
        store.bind_embedder(MODEL, DIM)
        a = store.append_buffer("user", "my password is zebra4711", "tui").id
        b = store.append_buffer("assistant", "noted the zebra", "tui").id
        c = store.append_buffer("user", "unrelated question about giraffes", "tui").id
        d = store.append_buffer("assistant", "giraffes are tall", "tui").id
        covering = self._summary_over(store, a, b, "password zebra4711 talk", 1)
        other = self._summary_over(store, c, d, "giraffes", 2)
        result = store.forget("buffer", buffer_ids=[a])
        assert result.buffer_ids == [a]
        assert result.summary_ids == [covering.id]
        assert result.resummarise == [(a, b)]
        assert [r.id for r in store.get_buffer(1)] == [b, c, d]
        assert store.search_buffer("zebra4711") == []
        assert [h.row.id for h in store.search_buffer("zebra")] == [b]
        assert [s.id for s in store.list_summaries()] == [other.id]
        hits = store.search_summaries(random_units(1, 1)[0], limit=5)
        assert [h.summary.id for h in hits] == [other.id]
        assert store.get_state(RESUMMARISE_KEY) == [[a, b]]
        [entry] = store.forget_log()
        assert entry.id == result.log_id and entry.kind == "buffer"
        assert entry.ids["buffer"] == [a] and entry.ids["summaries"] == [covering.id]
        assert entry.counts["buffer"] == 1 and entry.counts["summaries"] == 1
        assert TIMESTAMP.match(entry.at)
        assert "zebra" not in repr(entry)

    def test_forget_a_buffer_range(self, store: MemoryStore):
        ids = fill_buffer(store, 6)
        result = store.forget("buffer", buffer_ids=ids[1:4])
        assert result.buffer_ids == ids[1:4]
        assert [r.id for r in store.get_buffer(1)] == [ids[0], ids[4], ids[5]]
        assert store.buffer_stats()["rows"] == 3
        # ids never come back
        assert store.append_buffer("user", "new", "api").id > ids[-1]

    def test_forget_unknown_ids_deletes_nothing(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        src = store.add_source("doc", "document", chunks(random_units(2, 3)))
        for kwargs, what in (
            ({"buffer_ids": [ids[0], 999]}, "buffer row 999"),
            ({"summary_ids": [5]}, "summary 5"),
            ({"source_ids": [src.id + 10]}, f"source {src.id + 10}"),
            ({"memory_ids": [12345]}, "memory 12345"),
        ):
            with pytest.raises(NotFound) as err:
                store.forget("buffer", **kwargs)
            assert what in err.value.message
        assert store.buffer_stats()["rows"] == 2 and store.count_memories() == 2
        assert store.forget_log() == []
        with pytest.raises(ValidationError):
            store.forget("everything", buffer_ids=[ids[0]])

    def test_forget_row_of_a_buffer_source_clears_and_queues_its_chunks(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 4)
        kept = store.add_source(
            "chat",
            "buffer",
            chunks(random_units(2, 4)),
            summary="s",
            start_id=ids[0],
            end_id=ids[2],
        )
        only = store.add_source(
            "one", "buffer", chunks(random_units(1, 5)), start_id=ids[3], end_id=ids[3]
        )
        doc = store.add_source("doc", "document", chunks(random_units(1, 6)))
        result = store.forget("buffer", buffer_ids=[ids[0], ids[3]])
        assert result.rebuild_source_ids == [kept.id]
        assert result.source_ids == [only.id]
        assert result.memories_removed == 3
        src = store.get_source(kept.id)
        assert (src.start_id, src.end_id, src.summary, src.chunk_count) == (ids[1], ids[2], None, 0)
        with pytest.raises(NotFound):
            store.get_source(only.id)
        assert store.get_source(doc.id).chunk_count == 1
        assert store.get_state(REBUILD_KEY) == [kept.id]
        [entry] = store.forget_log()
        assert entry.ids["rebuilt_sources"] == [kept.id] and entry.counts["memories_removed"] == 3

    def test_forget_source_summary_and_memory(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 2)
        summ = self._summary_over(store, ids[0], ids[1], "sum", 7)
        doc = store.add_source("doc", "document", chunks(random_units(3, 8)))
        other = store.add_source("other", "document", chunks(random_units(2, 9), "keep"))
        result = store.forget("source", source_ids=[doc.id])
        assert result.source_ids == [doc.id] and result.memories_removed == 3
        assert store.count_memories() == 2
        assert all(
            h.memory.source_id == other.id
            for h in store.search_memories(random_units(3, 8)[0], limit=5)
        )
        [first, _] = store.source_chunks(other.id)
        result = store.forget("memory", memory_ids=[first.id])
        assert result.memory_ids == [first.id] and result.memories_removed == 1
        assert [m.id for m in store.source_chunks(other.id)] != [first.id]
        assert store.count_memories() == 1
        result = store.forget("summary", summary_ids=[summ.id])
        assert result.summary_ids == [summ.id] and result.resummarise == []
        assert store.count_summaries() == 0 and store.get_state(RESUMMARISE_KEY) is None
        assert store.buffer_stats()["rows"] == 2  # a summary goes alone
        assert [e.kind for e in store.forget_log()] == ["summary", "memory", "source"]
        assert [e.kind for e in store.forget_log(limit=1)] == ["summary"]

    def test_update_summary_corrects_content_tags_and_entities(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        ids = fill_buffer(store, 3)
        s = self._summary_over(store, ids[0], ids[2], "Ann likes tea", 10)
        other = self._summary_over(store, ids[0], ids[1], "something else", 11)
        assert store.search_summaries(random_units(1, 10)[0], limit=1)[0].summary.id == s.id
        fixed = store.update_summary(
            s.id, content="Ann likes coffee", embedding=unit(0, 0, 1), tags=["drinks"]
        )
        assert fixed.content == "Ann likes coffee" and fixed.tags == ["drinks"]
        assert (fixed.start_buffer_id, fixed.end_buffer_id) == (ids[0], ids[2])
        assert store.get_summary(s.id) == fixed
        [hit, *_] = store.search_summaries(unit(0, 0, 1), limit=2)
        assert hit.summary.id == s.id and hit.summary.content == "Ann likes coffee"
        assert hit.score == pytest.approx(1.0, abs=1e-5)
        back = store.update_summary(s.id, entities={"people": ["Ann"]})
        assert back.entities == {"people": ["Ann"]} and back.tags == ["drinks"]
        assert store.get_summary(other.id).content == "something else"
        with pytest.raises(NotFound):
            store.update_summary(999, tags=["x"])
        with pytest.raises(NotFound):
            store.get_summary(999)
        with pytest.raises(ValidationError):
            store.update_summary(s.id, content="no vector")
        with pytest.raises(ValidationError):
            store.update_summary(s.id, content="   ", embedding=unit(1))
        assert [e.kind for e in store.forget_log()] == ["summary_edit", "summary_edit"]

    def test_find_text_finds_a_buffer_row_by_its_meta(self, store: MemoryStore):
        """An assistant row keeps its tool calls' arguments and the agent's name in
        `meta`: a forget query must find the row there too (issue 26)."""
        store.append_buffer("user", "look it up")
        row = store.append_buffer(
            "assistant",
            "done",
            meta={
                "tools": [{"name": "read_file", "arguments": {"path": "Quokka-9931.txt"}}],
                "agent": "team/coder",
            },
        )
        rows, _, _ = store.find_text(["quokka-9931"], 10)
        assert [r.id for r in rows] == [row.id]
        rows, _, _ = store.find_text(["team/coder", "done"], 10)
        assert [r.id for r in rows] == [row.id]

    def test_find_text_needs_every_term(self, store: MemoryStore):
        store.bind_embedder(MODEL, DIM)
        a = store.append_buffer("user", "The Secret code is Blue-42", "tui")
        store.append_buffer("user", "blue sky only", "tui")
        store.append_buffer("marker", "secret blue-42", "tui")
        s = self._summary_over(store, a.id, a.id, "user shared a secret BLUE-42 code", 12)
        src = store.add_source(
            "n", "document", [NewChunk("note: secret blue-42 inside", unit(1), {})]
        )
        rows, summaries, memories = store.find_text(["secret", "blue-42"], 10)
        assert [r.id for r in rows] == [a.id]
        assert [x.id for x in summaries] == [s.id]
        assert [m.source_id for m in memories] == [src.id]
        assert store.find_text(["nothing-like-this"], 10) == ([], [], [])
        rows, _, _ = store.find_text(["blue"], 1)
        assert [r.id for r in rows] == [a.id]

    def test_update_state_is_a_read_modify_write(self, store: MemoryStore):
        assert store.update_state("q", lambda cur: (cur or []) + [1]) == [1]
        assert store.update_state("q", lambda cur: cur + [2]) == [1, 2]
        assert store.get_state("q") == [1, 2]
        assert store.update_state("q", lambda cur: None) is None
        assert store.get_state("q") is None

    def test_export_after_forgetting_holds_no_text_and_round_trips_the_log(
        self, store: MemoryStore, second_store: MemoryStore
    ):
        store.bind_embedder(MODEL, DIM)
        a = store.append_buffer("user", "remember quokka991 please", "tui").id
        b = store.append_buffer("assistant", "ok", "tui").id
        self._summary_over(store, a, b, "user said quokka991", 13)
        store.add_source(
            "chat",
            "buffer",
            [NewChunk("USER: quokka991", unit(1), {})],
            summary="quokka991",
            start_id=a,
            end_id=b,
        )
        store.forget("buffer", buffer_ids=[a])
        records = list(store.export_records())
        assert "quokka991" not in repr(records)
        [log] = [r for r in records if r["type"] == "forget"]
        assert log["kind"] == "buffer" and log["ids"]["buffer"] == [a]
        second_store.import_records(iter(records))
        assert list(second_store.export_records()) == records
        assert second_store.forget_log()[0].ids["buffer"] == [a]
        later = second_store.forget("buffer", buffer_ids=[b])
        assert later.log_id > log["id"]
